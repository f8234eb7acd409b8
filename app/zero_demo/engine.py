"""The four ZeRO stages, each a small engine over flat buffers and three collectives.

All stages train the same units (see ``model``) with the same mixed-precision AdamW (see
``optimizer``). They differ in what each rank keeps, and so in which collective runs where.
With Ψ parameters, N_d ranks, and 2-byte parameters and gradients (bf16/fp16):

===== ============================ ============================ ================================
stage keeps per rank                 collectives per step          card formula (bytes per rank)
===== ============================ ============================ ================================
0 DDP full params, grads, optimizer  all-reduce grads (2Ψ)         16Ψ
1     full params and grads;         reduce-scatter grads (Ψ),     2Ψ + 2Ψ + 12Ψ/N_d
      optimizer shard                all-gather params (Ψ)
2     full params; grad and          reduce-scatter each layer's   2Ψ + (2Ψ + 12Ψ)/N_d
      optimizer shards               grads during backward (Ψ),
                                     all-gather params (Ψ)
3     param, grad and optimizer      all-gather each layer before  16Ψ/N_d
      shards                         forward (Ψ) and backward (Ψ),
                                     reduce-scatter grads (Ψ)
===== ============================ ============================ ================================

One training step, whatever the stage: forward unit by unit, backward, gradients reduced (each
rank ends with the *averaged* gradient of the part it updates), the inventory taken, the
optimizer step on the rank's shard, and the updated low-precision parameters put where the next
forward needs them.

The model's modules are kept on the ``meta`` device, without weights: each unit is called with
``torch.func.functional_call`` and views into the engine's own flat buffers. That is how FSDP
works too, and it leaves no hidden copy of the parameters anywhere.
"""

from __future__ import annotations

import contextlib
import weakref
from abc import ABC, abstractmethod
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import torch
import torch.distributed as dist
from torch.func import functional_call

from .audit import StorageAudit
from .comm import CountingComm, Pending, all_gather_tensor
from .config import STAGE_NAMES, DemoConfig
from .inventory import Held, take
from .model import TinyGPT, loss_fn, materialized_units
from .optimizer import ShardedAdamW
from .phases import Clock, PhaseMemory
from .sharding import FlatLayout

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
OFFLOAD_TIER = {"none": "device", "cpu": "cpu", "disk": "disk"}


class DynamicLossScaler:
    """fp16's dynamic loss scaling: multiply the loss so small gradients do not flush to zero;
    halve the scale and skip the step when a gradient overflows; double it after a run of good
    steps. bf16 has fp32's exponent range and needs none of this."""

    def __init__(self, init: float = 2.0**12, growth_interval: int = 100) -> None:
        self.scale = init
        self.growth_interval = growth_interval
        self.good_steps = 0
        self.skipped = 0

    def update(self, overflow: bool) -> None:
        if overflow:
            self.scale /= 2
            self.good_steps = 0
            self.skipped += 1
        else:
            self.good_steps += 1
            if self.good_steps % self.growth_interval == 0:
                self.scale *= 2


@dataclass
class StepResult:
    loss: float  # the global batch's mean loss (before this step's update)
    skipped: bool  # fp16 overflow: no update this step


class Engine(ABC):
    """What every stage shares: the layout, the optimizer, the training step."""

    stage: int

    def __init__(
        self,
        model: TinyGPT,
        *,
        cfg: DemoConfig,
        comm: CountingComm,
        device: torch.device,
        offload: str = "none",
        offload_dir: str | None = None,
    ) -> None:
        self.cfg = cfg
        self.comm = comm
        self.device = device
        self.offload = offload
        self.rank = comm.rank
        self.world_size = comm.world_size
        self.dtype = DTYPES[cfg.dtype]
        # DDP shards nothing: one shard, no padding, and the "shard" is the whole model.
        self.layout = FlatLayout.of(model.units, 1 if self.stage == 0 else self.world_size)
        self.shard_rank = 0 if self.stage == 0 else self.rank
        folder = Path(offload_dir) / f"rank{self.rank}" if offload == "disk" else None
        # Time per span of a step (collectives, Adam, copies); the collectives report to it too.
        self.clock = Clock(device)
        comm.clock = self.clock
        # The stage's buffers, then the model unit by unit into them and into the fp32 master
        # shard (from the meta device: one unit's fp32 weights at a time, see materialized_units).
        self._allocate()
        master = self._materialize(model)
        self.optimizer = ShardedAdamW(
            master,
            tier=OFFLOAD_TIER[offload],
            device=device,
            hyper=cfg.optim,
            folder=folder,
            tag=f"stage{self.stage}",
            sub_group_size=cfg.sub_group_size,
            fused=cfg.fused_adam,
            clock=self.clock,
        )
        # Gradient accumulation: which micro-batch of the step runs (hooks read it).
        self._micro, self._last_micro, self._micro_batches = 0, True, 1
        # Asynchronous collectives of this backward, with what to do once each lands.
        self._pending: list[tuple[Pending, object, torch.Tensor]] = []
        # Communication buffers alive right now (weak references) and the most bytes at once.
        self._buffers: list[weakref.ref] = []
        self.peak_comm_buffer_bytes = 0
        # Gradient buckets (DDP, ZeRO-2): units in the order backward finishes them.
        self.buckets = bucket_plan([u.padded for u in self.layout.units], cfg.bucket_size)
        self._bucket_of = {u: b for b, units in enumerate(self.buckets) for u in units}
        self._filling: dict[int, torch.Tensor] = {}  # ZeRO-2: bucket inputs being filled
        self._recomputing = False  # a checkpointed block runs its forward again (in backward)
        self._build(model)
        self.units = model.units.to("meta")  # the code of the units, without their weights
        self.scaler = DynamicLossScaler() if cfg.dtype == "fp16" else None
        self.inventory: dict | None = None
        # Set by the runner: the storage audit (see ``audit``) and the per-phase memory meter.
        self.audit: StorageAudit | None = None
        self.phases: PhaseMemory | None = None
        self.last_audit: dict | None = None

    # -- what each stage defines -------------------------------------------------------------
    @abstractmethod
    def _allocate(self) -> None:
        """Create the (empty) low-precision parameter buffer the stage keeps."""

    @abstractmethod
    def _fill(self, i: int, flat: torch.Tensor) -> None:
        """Copy unit ``i``'s fp32 flat parameters (padded) into what the stage keeps of them."""

    @abstractmethod
    def _build(self, model: TinyGPT) -> None:
        """The rest of the stage's state (leaves, gradient buffers, hooks), parameters filled."""

    def _materialize(self, model: TinyGPT) -> torch.Tensor:
        """Fill the stage's buffers unit by unit; the rank's fp32 master shard."""
        master = torch.empty(self.layout.shard_numel, dtype=torch.float32)
        for i, unit in materialized_units(model, self.cfg.seed):
            u = self.layout.units[i]
            flat = self.layout.flatten(unit, i)
            master[u.in_shard()].copy_(flat[u.shard_range(self.shard_rank)])
            self._fill(i, flat)
            del flat
        return master

    @abstractmethod
    def _full_params(self, u: int) -> torch.Tensor:
        """Unit ``u``'s full flat parameters, ready for its forward."""

    def _reduce_gradients(self) -> None:  # noqa: B027 (a no-op unless a stage needs it)
        """After backward: average the gradients over ranks (stages 2 and 3 did it during backward)."""

    @abstractmethod
    def _grad_pieces(self) -> list[tuple[slice, torch.Tensor]]:
        """The averaged gradients of this rank's shard, as (place in the shard, tensor) pieces."""

    @abstractmethod
    def _step(self, inv_scale: float) -> None:
        """Optimizer step on the shard, then the new parameters where the next forward wants them."""

    def _release_gradients(self) -> None:  # noqa: B027 (a no-op unless a stage needs it)
        """Free what the step no longer needs."""

    @abstractmethod
    def held(self) -> list[Held]:
        """Every tensor of model state this rank keeps right now."""

    # -- shared ------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return STAGE_NAMES[self.stage]

    def _unit_forward(self, u: int, x: torch.Tensor) -> torch.Tensor:
        """Run unit ``u``; with activation checkpointing, a transformer block keeps only its
        input and runs again in backward (see ``_CheckpointUnit``)."""
        block = 0 < u < len(self.units) - 1
        if self.cfg.checkpoint_activations and block and torch.is_grad_enabled():
            return _CheckpointUnit.apply(x, self, u)
        return self._unit_compute(u, x)

    def _unit_compute(self, u: int, x: torch.Tensor) -> torch.Tensor:
        params = self.layout.units[u].param_views(self._full_params(u))
        return functional_call(self.units[u], params, (x,))

    def _track_buffer(self, t: torch.Tensor) -> None:
        """Note a communication buffer (freed with its last reference, or its storage resized
        to 0) for the peak of collective buffers alive at once."""
        self._buffers = [ref for ref in self._buffers if _alive_bytes(ref)]
        self._buffers.append(weakref.ref(t))
        alive = sum(_alive_bytes(ref) for ref in self._buffers)
        self.peak_comm_buffer_bytes = max(self.peak_comm_buffer_bytes, alive)

    def _phase(self, name: str):
        return self.phases.phase(name) if self.phases is not None else contextlib.nullcontext()

    def named_buffers(self) -> dict[str, torch.Tensor]:
        """Tensors the engine keeps that are not model states (pinned staging buffers)."""
        return {f"staging buffer {i}": t for i, t in enumerate(self.optimizer.staging())}

    def _audit(self, moment: str, step_buffers: dict[str, torch.Tensor | None]) -> None:
        if self.audit is not None:
            named = {**step_buffers, **self.named_buffers()}
            with self.clock.span("audit"):  # a check, not training: out of the step time
                self.last_audit = self.audit.check(f"{self.name}: {moment}", self.held(), named)
                if self.world_size > 1:  # the ranks leave the audit together: its time stays in it
                    dist.barrier()

    def train_step(self, tokens: torch.Tensor, targets: torch.Tensor) -> StepResult:
        """One optimizer step on one micro-batch."""
        return self.accumulation_step([(tokens, targets)])

    def accumulation_step(
        self, micro_batches: list[tuple[torch.Tensor, torch.Tensor]]
    ) -> StepResult:
        """One optimizer step over K micro-batches, gradients accumulated (averaged) over them.

        DDP and ZeRO-1 reduce once, after the last micro-batch (DDP's ``no_sync`` before it);
        ZeRO-2 reduce-scatters every micro-batch's gradients into its shard (it keeps no full
        gradient to accumulate in), ZeRO-3 also gathers every layer twice per micro-batch.
        """
        scale = self.scaler.scale if self.scaler else 1.0
        factor = scale / len(micro_batches)  # the mean over the micro-batches, then fp16's scale
        losses = []
        for k, (tokens, targets) in enumerate(micro_batches):
            self._micro, self._last_micro = k, k == len(micro_batches) - 1
            self._micro_batches = len(micro_batches)
            with self._phase("forward"):
                tokens, targets = tokens.to(self.device), targets.to(self.device)
                x = tokens
                for u in range(len(self.units)):
                    x = self._unit_forward(u, x)
                loss = loss_fn(x, targets)
            with self._phase("backward"):
                (loss * factor if factor != 1.0 else loss).backward()
                self._finish_backward()
                if self._last_micro:
                    self._reduce_gradients()
                if self.device.type == "cuda" and self.offload != "none":
                    torch.cuda.synchronize(self.device)  # asynchronous copies to pinned RAM landed
            losses.append(loss.detach())
        loss = torch.stack(losses).mean() if len(losses) > 1 else losses[0]
        # All three terms exist now: full or sharded parameters, gradients, optimizer states.
        self.inventory = take(self.held())
        step_buffers = {"tokens": tokens, "targets": targets, "logits": x, "loss": loss}
        for k, ((tokens_k, targets_k), loss_k) in enumerate(
            zip(micro_batches, losses, strict=True)
        ):
            step_buffers |= {
                f"tokens {k}": tokens_k,
                f"targets {k}": targets_k,
                f"loss {k}": loss_k,
            }
        self._audit("after backward", step_buffers)
        with self._phase("optimizer"):
            skipped = self.scaler is not None and self._overflow()
            if self.scaler is not None:
                self.scaler.update(skipped)
            if not skipped:
                self._step(1.0 / scale)
            self._release_gradients()
        mean = loss.detach().clone()
        self.comm.all_reduce(mean, control=True)
        self._audit("after the optimizer step", {**step_buffers, "mean loss": mean})
        return StepResult(loss=mean.item() / self.world_size, skipped=skipped)

    def _finish_backward(self) -> None:
        """Wait for the collectives started during backward, and file their results."""
        pending, self._pending = self._pending, []
        for work, done, _keep_alive in pending:
            work.wait()
            if done is not None:
                done()

    def _overflow(self) -> bool:
        """Whether any rank's gradient is inf/nan (fp16 only): one flag, all-reduced with MAX."""
        bad = any(not torch.isfinite(g).all() for _, g in self._grad_pieces())
        flag = torch.tensor([float(bad)], device=self.device)
        self.comm.all_reduce(flag, dist.ReduceOp.MAX, control=True)
        return bool(flag.item())

    def full_parameters(self) -> torch.Tensor:
        """The whole model's fp32 master weights, gathered on every rank (checks only, not counted)."""
        master = self.optimizer.master().to(self.device)
        full = torch.empty(master.numel() * self.layout.shards, device=self.device)
        if self.layout.shards > 1:
            all_gather_tensor(full, master)  # a check, not training: not counted
        else:
            full.copy_(master)
        # Rank-major [rank][unit piece] -> unit-major flat buffers, then padding dropped.
        by_rank = full.view(self.layout.shards, -1)
        units = [by_rank[:, u.in_shard()].reshape(-1)[: u.numel] for u in self.layout.units]
        return torch.cat(units).cpu()

    def close(self) -> None:
        self.optimizer.remove_files()
        if self.audit is not None:
            self.audit.close()


class _CheckpointUnit(torch.autograd.Function):
    """Activation checkpointing of one block: forward runs it without building a graph and keeps
    only its input; backward runs the block's forward again, with a graph, and backpropagates
    through it (what ``torch.utils.checkpoint`` does, reentrant style).

    Under ZeRO-3 the recomputation is a forward like any other: the block's parameters are
    all-gathered for it (Ψ_block more per step) and released after it, then gathered once more
    for the block's backward, as without checkpointing. No prefetch is started while recomputing.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, engine: Engine, u: int) -> torch.Tensor:  # type: ignore[override]
        ctx.engine, ctx.u = engine, u
        ctx.save_for_backward(x)
        return engine._unit_compute(u, x)  # autograd records nothing inside forward

    @staticmethod
    def backward(ctx, grad_out: torch.Tensor) -> tuple[torch.Tensor | None, None, None]:  # type: ignore[override]
        (x,) = ctx.saved_tensors
        engine, u = ctx.engine, ctx.u
        x = x.detach().requires_grad_(x.requires_grad)
        engine._recomputing = True
        try:
            with torch.enable_grad():
                out = engine._unit_compute(u, x)
        finally:
            engine._recomputing = False
        torch.autograd.backward(out, grad_out)
        return (x.grad if x.requires_grad else None), None, None


def bucket_plan(unit_sizes: list[int], bucket_size: int) -> list[tuple[int, ...]]:
    """Units grouped into gradient buckets, in the order backward finishes them (the last unit
    first): consecutive units until a bucket holds at least ``bucket_size`` elements (DDP's
    ``bucket_cap_mb``, DeepSpeed's ``reduce_bucket_size``, counted in elements); 0: one unit each.
    A bucket is reduced once its last unit, the lowest-numbered, has its gradient."""
    buckets, current, size = [], [], 0
    for u in reversed(range(len(unit_sizes))):
        current.append(u)
        size += unit_sizes[u]
        if size >= max(bucket_size, 1):
            buckets.append(tuple(current))
            current, size = [], 0
    if current:
        buckets.append(tuple(current))
    return buckets


def _alive_bytes(ref: weakref.ref) -> int:
    t = ref()
    return 0 if t is None else t.untyped_storage().nbytes()


def _release(t: torch.Tensor) -> None:
    """Free a gathered buffer's memory now, whoever still refers to the tensor object (FSDP does
    the same). Relying on the last reference going away sometimes left two layers gathered at
    once in the measured peaks (some reference outlived the layer; which one was not tracked down)."""
    t.untyped_storage().resize_(0)


class _ReplicatedParams(Engine):
    """Stages 0-2 keep the full low-precision parameters, one flat buffer for the whole model.

    Each unit's slice of it is an autograd leaf, so backward leaves one flat gradient per unit in
    ``leaf.grad``: the gradient *bucket* the collectives work on.
    """

    def _allocate(self) -> None:
        self.flat_params = torch.empty(self.layout.padded_psi, dtype=self.dtype, device=self.device)

    def _fill(self, i: int, flat: torch.Tensor) -> None:
        self.flat_params[self.layout.units[i].in_flat()].copy_(flat)

    def _build(self, model: TinyGPT) -> None:
        self.leaves = [self.flat_params[u.in_flat()].requires_grad_() for u in self.layout.units]
        # DDP and ZeRO-1 accumulate K micro-batches in the full gradient: in bf16/fp16 that sum
        # is kept in fp32 between micro-batches and rounded once, on the last one (registered
        # first: it runs before the stage's own hooks read the gradient). ZeRO-2/3 sum into
        # their gradient shard.
        self._grad_acc: dict[int, torch.Tensor] = {}
        if self.stage in (0, 1) and self.dtype != torch.float32:
            for u, leaf in enumerate(self.leaves):
                leaf.register_post_accumulate_grad_hook(partial(self._accumulate_fp32, u))

    def _accumulate_fp32(self, u: int, leaf: torch.Tensor) -> None:
        if self._micro_batches == 1:
            return
        acc = self._grad_acc.get(u)
        if acc is None:
            self._grad_acc[u] = acc = torch.zeros(leaf.grad.shape, device=leaf.grad.device)
        acc.add_(leaf.grad)
        if self._last_micro:
            leaf.grad.copy_(acc)  # one rounding of the fp32 sum
            del self._grad_acc[u]
        else:
            leaf.grad = None  # the next micro-batch's gradient starts afresh

    def _full_params(self, u: int) -> torch.Tensor:
        return self.leaves[u]

    def _held_params(self) -> list[Held]:
        what = f"{self.cfg.dtype} parameters (full)"
        return [Held.of("params", "device", what, self.flat_params)]

    def _held_full_grads(self) -> list[Held]:
        what = f"{self.cfg.dtype} gradients (full)"
        accumulating = "fp32 gradient sum of the micro-batches so far (full)"
        return [
            *(
                Held.of("grads", "device", what, leaf.grad)
                for leaf in self.leaves
                if leaf.grad is not None
            ),
            *(Held.of("grads", "device", accumulating, t) for t in self._grad_acc.values()),
        ]

    @torch.no_grad()
    def _step_and_all_gather(self, inv_scale: float) -> None:
        """Stages 1, 2: update the own shard, then all-gather every unit's flat parameters."""
        updated = torch.empty(self.layout.shard_numel, dtype=self.dtype, device=self.device)
        self._track_buffer(updated)
        self.optimizer.step(self._grad_pieces(), updated, inv_scale)
        for u in self.layout.units:
            self.comm.all_gather(self.flat_params[u.in_flat()], updated[u.in_shard()])

    def _release_gradients(self) -> None:
        for leaf in self.leaves:
            leaf.grad = None


class _ShardedGradients(Engine):
    """Stages 2 and 3 keep only their gradient shard: 2Ψ/N_d bytes, on the device or, offloaded,
    in CPU RAM (pinned when the device is a GPU). Each unit's full gradient is reduce-scattered
    into its piece of the shard as soon as backward has finished it, then dropped."""

    def _new_grad_shard(self) -> torch.Tensor:
        if self.offload == "none":
            return torch.zeros(self.layout.shard_numel, dtype=self.dtype, device=self.device)
        pin = self.device.type == "cuda"
        return torch.zeros(self.layout.shard_numel, dtype=self.dtype, pin_memory=pin)

    def _store_grad_shard(self, u: int, full_grad: torch.Tensor) -> None:
        """Average a unit's full gradient over ranks, keeping this rank's piece (one reduce-scatter)."""
        self._store_grad_range(u, u, full_grad)

    def _store_grad_range(self, first: int, last: int, full_grad: torch.Tensor) -> None:
        """Reduce-scatter the gradients of units ``first..last`` (one bucket) into the shard.

        ``full_grad`` is rank-major: rank r's pieces of the units, side by side, then rank r+1's
        (a single unit's flat gradient already is). The rank's pieces of consecutive units are
        consecutive in its shard, so the output is one slice of it. The first micro-batch writes
        the slice, later ones add to it. With overlap on, the reduce-scatter is started and
        backward goes on; ``_finish_backward`` waits for it.
        """
        full_grad.div_(self.world_size)
        start = self.layout.units[first].shard_offset
        stop = self.layout.units[last].in_shard().stop
        piece = self.grad_shard[start:stop]
        first = self._micro == 0
        if first and piece.device == full_grad.device:
            out, done = piece, None
        else:  # offloaded, or accumulating: reduce into a buffer on the device, then file it
            out = torch.empty(piece.numel(), dtype=self.dtype, device=self.device)
            self._track_buffer(out)

            def done() -> None:
                if piece.device != out.device:
                    with self.clock.span("copies"):
                        arrived = out.to(piece.device, non_blocking=first)
                else:
                    arrived = out
                if first:
                    piece.copy_(arrived)
                else:
                    piece.add_(arrived)

        if self.cfg.overlap:
            # One bucket in flight at a time: the previous one must land before this one goes,
            # or every full gradient would stay alive until the end of backward (ZeRO-1's memory).
            self._finish_backward()
            work = self.comm.reduce_scatter(out, full_grad, async_op=True)
            self._pending.append((work, done, full_grad))  # full_grad lives until it is sent
        else:
            self.comm.reduce_scatter(out, full_grad)
            if done is not None:
                done()

    def _grad_pieces(self) -> list[tuple[slice, torch.Tensor]]:
        return [(u.in_shard(), self.grad_shard[u.in_shard()]) for u in self.layout.units]

    def _held_grad_shard(self) -> Held:
        tier = "device" if self.offload == "none" else "cpu"
        return Held.of("grads", tier, f"{self.cfg.dtype} gradients (shard)", self.grad_shard)


class Stage0DDP(_ReplicatedParams):
    """DDP: every rank keeps everything; gradients are all-reduced (2Ψ elements per step).

    After backward, each unit's flat gradient (a bucket, as DDP's are) is averaged over ranks with
    one all-reduce. Every rank then runs the same AdamW step on the whole model, so the 12Ψ bytes
    of optimizer state exist N_d times: the redundancy ZeRO removes.
    """

    stage = 0

    def _build(self, model: TinyGPT) -> None:
        super()._build(model)
        # DDP's overlap: all-reduce each bucket as soon as backward has filled it.
        self._hooks = (
            [
                leaf.register_post_accumulate_grad_hook(partial(self._bucket_ready, u))
                for u, leaf in enumerate(self.leaves)
            ]
            if self.cfg.overlap
            else []
        )

    def _bucket_ready(self, u: int, leaf: torch.Tensor) -> None:
        if not self._last_micro:  # no_sync: accumulate locally, reduce after the last micro-batch
            return
        units = self.buckets[self._bucket_of[u]]
        if u == units[-1]:  # the bucket's last unit: all its gradients are there
            self._all_reduce_bucket(units, overlap=True)

    def _all_reduce_bucket(self, units: tuple[int, ...], overlap: bool) -> None:
        """One all-reduce for the bucket: a unit's own gradient, or the units' gradients copied
        side by side into one buffer (and back once it is reduced)."""
        grads = [self.leaves[u].grad for u in reversed(units)]  # in unit order
        if len(grads) == 1:
            bucket, done = grads[0], None
        else:
            bucket = torch.cat(grads)
            self._track_buffer(bucket)

            def done() -> None:
                for g, reduced in zip(grads, bucket.split([g.numel() for g in grads]), strict=True):
                    g.copy_(reduced)

        bucket.div_(self.world_size)
        if overlap:
            self._pending.append((self.comm.start_all_reduce(bucket), done, bucket))
        else:
            self.comm.all_reduce(bucket)
            if done is not None:
                done()

    def _reduce_gradients(self) -> None:  # noqa: B027 (a no-op unless a stage needs it)
        if self.cfg.overlap:
            return  # started during backward, waited for in _finish_backward
        for units in self.buckets:
            self._all_reduce_bucket(units, overlap=False)

    def close(self) -> None:
        for hook in self._hooks:
            hook.remove()
        super().close()

    def _grad_pieces(self) -> list[tuple[slice, torch.Tensor]]:
        return [
            (u.in_shard(), leaf.grad)
            for u, leaf in zip(self.layout.units, self.leaves, strict=True)
        ]

    def _step(self, inv_scale: float) -> None:
        # One shard = the whole model: the step writes the new parameters in place.
        self.optimizer.step(self._grad_pieces(), self.flat_params, inv_scale)

    def held(self) -> list[Held]:
        return [*self._held_params(), *self._held_full_grads(), *self.optimizer.held(" (full)")]


class Stage1(_ReplicatedParams):
    """ZeRO-1 (P_os): optimizer states sharded.

    After backward, each unit's full gradient is *reduce-scattered* (Ψ): rank r receives the
    averaged gradient of its own piece only, which is all its optimizer shard needs. The piece is
    written back into the rank's slice of the full gradient buffer; the buffer itself stays whole
    (2Ψ bytes), which is what ZeRO-2 will remove. After the step on the shard, the updated
    parameters are *all-gathered* (Ψ): 2Ψ per step, the same as DDP. With overlap on, each
    layer's reduce-scatter starts as soon as backward has finished its gradient (on the last
    micro-batch of a step), like DDP's buckets.
    """

    stage = 1

    def _build(self, model: TinyGPT) -> None:
        super()._build(model)
        # Overlap: reduce-scatter each layer's gradient as soon as backward has finished it
        # (after the last micro-batch: accumulation is local until then, as DDP's no_sync).
        self._hooks = (
            [
                leaf.register_post_accumulate_grad_hook(partial(self._layer_ready, u))
                for u, leaf in enumerate(self.leaves)
            ]
            if self.cfg.overlap
            else []
        )

    def _layer_ready(self, u: int, leaf: torch.Tensor) -> None:
        if self._last_micro:
            self._reduce_layer(u, overlap=True)

    def _reduce_layer(self, u: int, overlap: bool) -> None:
        """Average layer ``u``'s gradient over ranks into this rank's slice of it (the full
        buffer stays: ZeRO-1 keeps 2Ψ of gradients)."""
        layout, grad = self.layout.units[u], self.leaves[u].grad
        grad.div_(self.world_size)
        mine = torch.empty(layout.shard, dtype=self.dtype, device=self.device)
        self._track_buffer(mine)

        def done() -> None:
            grad[layout.shard_range(self.rank)].copy_(mine)

        if overlap:
            work = self.comm.reduce_scatter(mine, grad, async_op=True)
            self._pending.append((work, done, mine))
        else:
            self.comm.reduce_scatter(mine, grad)
            done()

    def _reduce_gradients(self) -> None:  # noqa: B027 (a no-op unless a stage needs it)
        if self.cfg.overlap:
            return  # started during backward, waited for in _finish_backward
        for u in range(len(self.leaves)):
            self._reduce_layer(u, overlap=False)

    def close(self) -> None:
        for hook in self._hooks:
            hook.remove()
        super().close()

    def _grad_pieces(self) -> list[tuple[slice, torch.Tensor]]:
        return [
            (u.in_shard(), leaf.grad[u.shard_range(self.rank)])
            for u, leaf in zip(self.layout.units, self.leaves, strict=True)
        ]

    def _step(self, inv_scale: float) -> None:
        self._step_and_all_gather(inv_scale)

    def held(self) -> list[Held]:
        return [*self._held_params(), *self._held_full_grads(), *self.optimizer.held(" (shard)")]


class Stage2(_ShardedGradients, _ReplicatedParams):
    """ZeRO-2 (P_os+g): gradients sharded as well.

    Each unit's gradient is reduce-scattered *during* backward, as soon as autograd has finished
    it (a post-accumulate-grad hook on the unit's leaf), into the rank's gradient shard; the full
    gradient is freed on the spot. So at most one unit's full gradient (one bucket) exists at a
    time, and the rank keeps 2Ψ/N_d bytes of gradients instead of 2Ψ. Same volume as ZeRO-1.
    With ``--bucket-size``, consecutive units are copied into one bucket (rank-major) and
    reduce-scattered together once it is full: one bucket filling and, with overlap, one in
    flight, each at least the bucket size.
    """

    stage = 2

    def _build(self, model: TinyGPT) -> None:
        super()._build(model)
        self.grad_shard = self._new_grad_shard()
        self._hooks = [
            leaf.register_post_accumulate_grad_hook(partial(self._reduce_unit, u))
            for u, leaf in enumerate(self.leaves)
        ]

    def _reduce_unit(self, u: int, leaf: torch.Tensor) -> None:
        units = self.buckets[self._bucket_of[u]]
        if len(units) == 1:
            self._store_grad_shard(u, leaf.grad)
            leaf.grad = None  # the bucket is freed as soon as it is reduced
            return
        # A bucket of several units: the unit's gradient is copied into the bucket's input,
        # rank-major (see _store_grad_range), and freed; the last unit in sends the bucket.
        first, layout = units[-1], self.layout.units
        width = sum(layout[v].shard for v in units)
        bucket = self._filling.get(units[0])
        if bucket is None:
            bucket = torch.empty(width * self.world_size, dtype=self.dtype, device=self.device)
            self._track_buffer(bucket)
            self._filling[units[0]] = bucket
        at = layout[u].shard_offset - layout[first].shard_offset
        bucket.view(self.world_size, width)[:, at : at + layout[u].shard].copy_(
            leaf.grad.view(self.world_size, layout[u].shard)
        )
        leaf.grad = None
        if u == first:
            del self._filling[units[0]]
            self._store_grad_range(first, units[0], bucket)

    def _step(self, inv_scale: float) -> None:
        self._step_and_all_gather(inv_scale)

    def held(self) -> list[Held]:
        return [*self._held_params(), self._held_grad_shard(), *self.optimizer.held(" (shard)")]

    def close(self) -> None:
        for hook in self._hooks:
            hook.remove()
        super().close()


@dataclass(frozen=True)
class _ParamRef:
    """What autograd keeps instead of a gathered parameter: where to find it again."""

    unit: int
    offset: int
    size: torch.Size
    stride: tuple[int, ...]


class _GatherUnit(torch.autograd.Function):
    """Forward: all-gather a unit's flat parameters. Backward: reduce-scatter its flat gradient.

    The unit's full gradient (the gradient of the gathered buffer) arrives here once autograd has
    finished the whole unit; it is reduce-scattered into the gradient shard and freed, and the
    parameters gathered again for this unit's backward are released.
    """

    @staticmethod
    def forward(ctx, shard: torch.Tensor, engine: Stage3, u: int) -> torch.Tensor:  # type: ignore[override]
        ctx.engine, ctx.u = engine, u
        full = engine._all_gather_unit(u, shard)
        engine._prefetch(u + 1)  # the next unit's gather runs while this one computes
        return full

    @staticmethod
    def backward(ctx, full_grad: torch.Tensor) -> tuple[None, None, None]:  # type: ignore[override]
        engine, u = ctx.engine, ctx.u
        engine._store_grad_shard(u, full_grad.contiguous())
        regathered = engine._regathered.pop(u, None)  # released after this unit's backward
        if regathered is not None:
            _release(regathered)
        return None, None, None  # the shard's gradient lives in grad_shard, not in .grad


class Stage3(_ShardedGradients):
    """ZeRO-3 (P_os+g+p): parameters sharded as well. Each rank keeps 16Ψ/N_d bytes.

    Forward: before each unit runs, its flat parameters are all-gathered from the shards (Ψ in
    all); after it ran, they are released. Autograd would normally keep the parameters an op
    needs for backward (a linear layer keeps its weight); a saved-tensor hook replaces each such
    parameter by a note of where it was (``_ParamRef``).

    Backward: a hook on the unit's output fires before the unit's backward and all-gathers the
    unit again (Ψ more: the parameters were released); the notes are resolved against that
    buffer. When the unit's gradient is complete, ``_GatherUnit.backward`` reduce-scatters it (Ψ)
    and the buffer is released. 3Ψ per step: 1.5x DDP.

    At any time at most a unit or two are gathered; ``peak_gathered_*`` records how many and how
    many bytes, the "buffers" that come on top of 16Ψ/N_d.
    """

    stage = 3

    def _allocate(self) -> None:
        self.param_shard = torch.empty(
            self.layout.shard_numel, dtype=self.dtype, device=self.device
        )

    def _fill(self, i: int, flat: torch.Tensor) -> None:
        u = self.layout.units[i]
        self.param_shard[u.in_shard()].copy_(flat[u.shard_range(self.rank)])

    def _build(self, model: TinyGPT) -> None:
        self.param_shard.requires_grad_()
        self.grad_shard = self._new_grad_shard()
        self._regathered: dict[int, torch.Tensor] = {}
        # Overlap: the next unit's all-gather, started while this unit computes.
        self._prefetched: dict[int, tuple[torch.Tensor, Pending]] = {}
        self._alive: list[weakref.ref] = []
        self.peak_gathered_units = 0
        self.peak_gathered_bytes = 0

    def _all_gather_unit(self, u: int, shard: torch.Tensor) -> torch.Tensor:
        """Unit ``u``'s full flat parameters: the prefetched buffer, or gathered now."""
        prefetched = self._prefetched.pop(u, None)
        if prefetched is not None:
            full, work = prefetched
            work.wait()
            return full
        layout = self.layout.units[u]
        full = torch.empty(layout.padded, dtype=self.dtype, device=self.device)
        self._track(full)
        self.comm.all_gather(full, shard.detach())
        return full

    def _prefetch(self, u: int) -> None:
        """Start unit ``u``'s all-gather now (overlap on), for when it is needed next."""
        if not self.cfg.overlap or not 0 <= u < len(self.layout.units) or u in self._prefetched:
            return
        if self._recomputing:  # a recomputation in backward: the next unit forward is not next
            return
        layout = self.layout.units[u]
        full = torch.empty(layout.padded, dtype=self.dtype, device=self.device)
        self._track(full)
        shard = self.param_shard[layout.in_shard()].detach()
        self._prefetched[u] = (full, self.comm.all_gather(full, shard, async_op=True))

    def _track(self, full: torch.Tensor) -> None:
        self._track_buffer(full)
        self._alive = [ref for ref in self._alive if _alive_bytes(ref)]
        self._alive.append(weakref.ref(full))
        self.peak_gathered_units = max(self.peak_gathered_units, len(self._alive))
        alive = sum(_alive_bytes(ref) for ref in self._alive)
        self.peak_gathered_bytes = max(self.peak_gathered_bytes, alive)

    def _full_params(self, u: int) -> torch.Tensor:
        return _GatherUnit.apply(self.param_shard[self.layout.units[u].in_shard()], self, u)

    def _unit_compute(self, u: int, x: torch.Tensor) -> torch.Tensor:
        full = self._full_params(u)
        gathered = (full.device, full.untyped_storage().data_ptr())

        def pack(t: torch.Tensor) -> torch.Tensor | _ParamRef:
            if (t.device, t.untyped_storage().data_ptr()) == gathered:
                return _ParamRef(u, t.storage_offset(), t.shape, t.stride())
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, self._unpack):
            out = functional_call(self.units[u], self.layout.units[u].param_views(full), (x,))
        _release(full)  # autograd keeps notes, not the buffer: it is freed here
        if out.requires_grad:  # not in a checkpointed block's first forward (no graph there)
            out.register_hook(partial(self._before_unit_backward, u))
        return out

    def _before_unit_backward(self, u: int, grad: torch.Tensor) -> None:
        shard = self.param_shard[self.layout.units[u].in_shard()]
        self._regathered[u] = self._all_gather_unit(u, shard)
        self._prefetch(u - 1)  # backward goes from the last unit to the first

    def _unpack(self, saved: torch.Tensor | _ParamRef) -> torch.Tensor:
        if isinstance(saved, _ParamRef):
            full = self._regathered[saved.unit]
            return full.as_strided(saved.size, saved.stride, saved.offset)
        return saved

    def _step(self, inv_scale: float) -> None:
        # No all-gather after the step: the next forward gathers each unit when it needs it.
        self.optimizer.step(self._grad_pieces(), self.param_shard.detach(), inv_scale)

    def held(self) -> list[Held]:
        what = f"{self.cfg.dtype} parameters (shard)"
        params = Held.of("params", "device", what, self.param_shard)
        return [params, self._held_grad_shard(), *self.optimizer.held(" (shard)")]


ENGINES: dict[int, type[Engine]] = {0: Stage0DDP, 1: Stage1, 2: Stage2, 3: Stage3}
