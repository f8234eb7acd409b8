"""ZeRO in one file: one training step of stages 0-3, written out synchronously.

Read it top to bottom beside the card ``cards/zero-memory-offload.yaml``. It trains the demo's
model with the demo's mixed precision and AdamW, and leaves out everything else: no offload, no
gradient buckets, no communication overlapped with compute, no autograd hooks. ``engine`` is the
full version; ``tests/test_zero_demo_minimal.py`` checks that both compute the same numbers.

With bf16 training, every rank holds per parameter:

- 2 bytes of working weights, the bf16 copy that forward and backward compute with;
- 2 bytes of gradient, in bf16 as backward produces it;
- 12 bytes of optimizer state: the fp32 master weight and Adam's two fp32 moments.

That is 16Ψ bytes for Ψ parameters, on each of the N_d data-parallel ranks. ZeRO removes the
redundancy one term at a time: stage 1 shards the 12Ψ over the ranks, stage 2 the gradients too,
stage 3 the working weights too. Stage 0 is plain data parallelism (DDP), for comparison.

The model is cut into *units*: the embedding, each transformer block, the head. A unit's
parameters are one flat vector, padded with zeros to a multiple of N_d and cut into N_d equal
pieces; rank r owns piece r. ZeRO-3 gathers one unit at a time, which is why each unit is padded
and cut on its own. (fp16, which needs loss scaling, is left to ``engine``.)

    python -m app.zero_demo.minimal --world-size 4 --stage 2
"""

from __future__ import annotations

import argparse
import math
import os
import tempfile

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.func import functional_call

# torch's all-gather and reduce-scatter of one flat tensor, under this torch version's names.
from .comm import all_gather_tensor, reduce_scatter_tensor
from .config import MODEL_PRESETS, STAGE_NAMES, STAGE_SHARDS, STAGES, OptimConfig
from .model import TinyGPT, build_model, loss_fn, rank_batch

DTYPES = {"bf16": torch.bfloat16, "fp32": torch.float32}
MICRO_BATCH = 2  # sequences per rank per step, as in the demo


class MinimalZeRO:
    """This rank's part of ``model`` under ZeRO stage ``stage``; ``train_step`` trains one step.

    Everything is kept per unit, in lists indexed by unit: ``params`` (working weights: the whole
    padded vector, or under ZeRO-3 this rank's piece), ``grads`` (filled by backward), and the
    optimizer's ``master``, ``exp_avg`` and ``exp_avg_sq`` (fp32, this rank's piece).
    """

    def __init__(self, model: TinyGPT, stage: int, dtype: torch.dtype = torch.bfloat16) -> None:
        self.stage, self.dtype, self.hyper = stage, dtype, OptimConfig()
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()
        # DDP shards nothing: one piece, the whole unit, and no padding.
        self.shards = 1 if stage == 0 else self.world_size
        self.mine = 0 if stage == 0 else self.rank  # which piece is this rank's
        self.units = model.units
        self.psi = sum(p.numel() for p in model.parameters())  # Ψ, before any padding
        self.names = [[n for n, _ in unit.named_parameters()] for unit in self.units]
        self.shapes = [[p.shape for p in unit.parameters()] for unit in self.units]
        self.params, self.master = [], []
        for unit in self.units:
            flat = torch.cat([p.detach().reshape(-1) for p in unit.parameters()])
            flat = F.pad(flat, (0, -flat.numel() % self.shards))  # zeros up to a multiple
            self.master.append(self.piece(flat).clone())
            kept = self.piece(flat) if stage == 3 else flat
            self.params.append(kept.to(dtype, copy=True))
        self.exp_avg = [torch.zeros_like(p) for p in self.master]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.master]
        self.grads: list[torch.Tensor | None] = [None] * len(self.units)
        self.step_count = 0
        self.held: dict[str, int] = {}
        # The modules keep their code, not their weights: those live in the buffers above.
        model.to("meta")

    def piece(self, flat: torch.Tensor) -> torch.Tensor:
        """This rank's piece of a unit's padded vector (a view)."""
        size = flat.numel() // self.shards
        return flat[self.mine * size : (self.mine + 1) * size]

    def full_params(self, u: int) -> torch.Tensor:
        """Unit ``u``'s whole working weights (padded): kept, or under ZeRO-3 gathered from
        every rank's piece into a new buffer that is freed once the caller drops it."""
        if self.stage < 3:
            return self.params[u]
        full = torch.empty(self.params[u].numel() * self.world_size, dtype=self.dtype)
        all_gather_tensor(full, self.params[u])  # Ψ_unit elements, every time a unit runs
        return full

    def run_unit(self, u: int, flat: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        """Unit ``u`` applied to ``x``, computing with the parameters in its padded ``flat``."""
        sizes = [s.numel() for s in self.shapes[u]]
        pieces = flat[: sum(sizes)].split(sizes)
        views = zip(self.names[u], pieces, self.shapes[u], strict=True)
        params = {name: piece.view(shape) for name, piece, shape in views}
        return functional_call(self.units[u], params, (x,))

    def train_step(self, tokens: torch.Tensor, targets: torch.Tensor) -> float:
        """One optimizer step on this rank's micro-batch; the global batch's mean loss (before
        the step). ``held`` is then the model-state bytes held after backward."""
        n = len(self.units)
        # Forward, unit by unit, without an autograd graph: a graph keeps what backward needs,
        # the parameters included (a linear layer saves its weight), and ZeRO-3 must free them.
        # Only each unit's input is kept; backward runs the unit again (activation checkpointing).
        inputs, x = [], tokens
        with torch.no_grad():
            for u in range(n):
                inputs.append(x)
                x = self.run_unit(u, self.full_params(u), x)  # ZeRO-3: gathered, then freed
            loss = loss_fn(x, targets)
        # Backward, from the last unit to the first. A unit's gradient is complete as soon as its
        # own backward ends, so it is reduced right then: no hooks needed.
        grad_x = None
        for u in reversed(range(n)):
            full = self.full_params(u).detach().requires_grad_()  # ZeRO-3 gathers again
            x = inputs[u].requires_grad_() if u > 0 else inputs[u]  # token ids have no gradient
            out = self.run_unit(u, full, x)
            if u == n - 1:
                loss_fn(out, targets).backward()
            else:
                out.backward(grad_x)
            grad_x = x.grad
            self.reduce_gradient(u, full.grad)
            del full, out  # the unit's full gradient, and under ZeRO-3 its weights, go now
        # All three terms exist now: this is the moment the card counts.
        self.held = {
            "params": _nbytes(self.params),
            "grads": _nbytes(self.grads),
            "optimizer": _nbytes(self.master + self.exp_avg + self.exp_avg_sq),
        }
        self.optimizer_step()
        dist.all_reduce(loss)  # for the printout only: the mean over ranks is the batch's loss
        return loss.item() / self.world_size

    def reduce_gradient(self, u: int, grad: torch.Tensor) -> None:
        """Average unit ``u``'s gradient over the ranks and keep what this stage keeps of it."""
        grad.div_(self.world_size)  # each rank divides, the collective sums: the mean
        if self.stage == 0:
            # DDP: every rank updates everything, so it needs the whole average: an all-reduce
            # (2Ψ elements over the step, a reduce-scatter and an all-gather in one).
            dist.all_reduce(grad)
            self.grads[u] = grad
        elif self.stage == 1:
            # ZeRO-1: this rank updates its piece only, so only that piece of the average is
            # needed: a reduce-scatter (Ψ). The full gradient buffer is still kept (2Ψ bytes).
            mine = torch.empty(grad.numel() // self.world_size, dtype=self.dtype)
            reduce_scatter_tensor(mine, grad)
            self.piece(grad).copy_(mine)
            self.grads[u] = grad
        else:
            # ZeRO-2 and 3: the same reduce-scatter, but only the piece is kept; the full
            # gradient is dropped before backward reaches the next unit (2Ψ/N_d bytes).
            self.grads[u] = torch.empty(grad.numel() // self.world_size, dtype=self.dtype)
            reduce_scatter_tensor(self.grads[u], grad)

    @torch.no_grad()
    def optimizer_step(self) -> None:
        """AdamW on this rank's pieces (``torch.optim.AdamW``'s maths, operation for operation),
        then the new working weights go where the next forward reads them."""
        h = self.hyper
        self.step_count += 1
        bias_correction1 = 1 - h.beta1**self.step_count
        bias_correction2_sqrt = math.sqrt(1 - h.beta2**self.step_count)
        for u, grad in enumerate(self.grads):
            assert grad is not None
            g = (self.piece(grad) if self.stage < 2 else grad).float()
            p, m, v = self.master[u], self.exp_avg[u], self.exp_avg_sq[u]
            p.mul_(1 - h.lr * h.weight_decay)
            m.lerp_(g, 1 - h.beta1)
            v.mul_(h.beta2).addcmul_(g, g, value=1 - h.beta2)
            denom = v.sqrt().div_(bias_correction2_sqrt).add_(h.eps)
            p.addcdiv_(m, denom, value=-h.lr / bias_correction1)
            new = p.to(self.dtype)  # the working weights: the master rounded (to bf16)
            if self.stage in (1, 2):
                # Every rank computes with all weights but updated only its piece: all-gather (Ψ).
                all_gather_tensor(self.params[u], new)
            else:
                # DDP: the piece is the whole unit. ZeRO-3: the piece is all a rank keeps; the
                # next forward gathers it.
                self.params[u].copy_(new)
        self.grads = [None] * len(self.units)


def _nbytes(tensors: list) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


# -- the command line: N spawned processes, gloo on the CPU --------------------------------------


def _whole(low: int, high: int | None = None):
    def parse(text: str) -> int:
        value = int(text)
        if value < low or (high is not None and value > high):
            bound = f"at least {low}" if high is None else f"between {low} and {high}"
            raise argparse.ArgumentTypeError(f"must be {bound}, got {value}")
        return value

    parse.__name__ = "int"  # argparse's message for a non-number: "invalid int value"
    return parse


def demo(args: argparse.Namespace) -> None:
    """Train each stage asked for, as one rank of the process group; rank 0 prints the bytes
    every rank holds and the loss per step."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    cfg = MODEL_PRESETS[args.model_size]
    for stage in STAGES if args.stage is None else (args.stage,):
        zero = MinimalZeRO(build_model(cfg, args.seed), stage, DTYPES[args.dtype])
        losses = [
            zero.train_step(*rank_batch(cfg, args.seed, step, MICRO_BATCH, rank, world_size))
            for step in range(args.steps)
        ]
        held: list = [None] * world_size
        dist.all_gather_object(held, zero.held)
        if rank == 0:
            psi, element = zero.psi, zero.params[0].element_size()
            ddp = (2 * element + 12) * psi  # 16Ψ in bf16
            print(f"{STAGE_NAMES[stage]} on {world_size} ranks: {STAGE_SHARDS[stage]} sharded")
            print(f"  rank {'params':>12} {'grads':>12} {'optimizer':>12} {'total':>12}  bytes")
            for r, h in enumerate(held):
                cells = [h["params"], h["grads"], h["optimizer"], sum(h.values())]
                print(f"  {r:4} " + " ".join(f"{c:12,}" for c in cells))
            share = sum(held[0].values()) / ddp
            print(f"  DDP holds {ddp:,} bytes per rank for Ψ = {psi:,}: this is {share:.0%} of it")
            print("  loss per step: " + " ".join(f"{loss:.4f}" for loss in losses), flush=True)


def _rank(rank: int, args: argparse.Namespace, store_path: str) -> None:
    torch.set_num_threads(max(1, (os.cpu_count() or 1) // args.world_size))  # ranks share cores
    store = dist.FileStore(store_path, args.world_size)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=args.world_size)
    demo(args)
    dist.barrier()  # leave together: a rank that exits early can abort a peer's gloo thread
    dist.destroy_process_group()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command's arguments; a bad one ends with argparse's usage, a message, exit status 2."""
    parser = argparse.ArgumentParser(
        prog="python -m app.zero_demo.minimal",
        description="Train the demo's model with one ZeRO stage (or all four) on N CPU processes, "
        "and print the model-state bytes each rank holds and the loss.",
    )
    parser.add_argument("--world-size", type=_whole(1), default=4, metavar="N")
    parser.add_argument("--stage", type=int, choices=STAGES, help="default: 0, 1, 2 and 3")
    parser.add_argument("--steps", type=_whole(1), default=3)
    parser.add_argument("--dtype", choices=DTYPES, default="bf16")
    parser.add_argument("--model-size", choices=("tiny", "small", "base"), default="small")
    parser.add_argument("--seed", type=_whole(0, 2**32 - 1), default=0)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="zero-minimal-") as tmp:
        torch.multiprocessing.start_processes(
            _rank, args=(args, os.path.join(tmp, "store")), nprocs=args.world_size,
            start_method="spawn",
        )  # fmt: skip
    return 0


if __name__ == "__main__":  # spawned ranks import this module again: they must not run it
    raise SystemExit(main())
