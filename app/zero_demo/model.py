"""The model the demo trains, and the data it trains on.

A small GPT-like language model cut into *units*: the embedding, each transformer block, and the
head. A unit is what ZeRO-3 gathers at once (FSDP calls it a wrapped module): its parameters are
one flat buffer, all-gathered before the unit runs and released after. Stages 0-2 use the same
units as gradient buckets.

The model has no buffers and no tied weights, so its parameters are exactly the model states Ψ
counts. Every engine, the single-process reference and PyTorch's engines build it the same way
from the same seed, so they all start from identical weights.
"""

from __future__ import annotations

from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig


class Embedding(nn.Module):
    """Token and position embeddings, summed."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        # Given an (empty) weight, nn.Embedding skips its own normal_ init: on the meta device
        # that init imports torch._dynamo (about a second per process). build_model initialises.
        self.tokens = nn.Embedding(
            cfg.vocab, cfg.hidden, _weight=torch.empty(cfg.vocab, cfg.hidden)
        )
        self.positions = nn.Embedding(
            cfg.seq_len, cfg.hidden, _weight=torch.empty(cfg.seq_len, cfg.hidden)
        )

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.tokens(tokens) + self.positions(positions)


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention and a 4x MLP, each with a residual."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.heads = cfg.heads
        self.ln1 = nn.LayerNorm(cfg.hidden)
        self.qkv = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.proj = nn.Linear(cfg.hidden, cfg.hidden)
        self.ln2 = nn.LayerNorm(cfg.hidden)
        self.fc1 = nn.Linear(cfg.hidden, 4 * cfg.hidden)
        self.fc2 = nn.Linear(4 * cfg.hidden, cfg.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, h = x.shape
        d = h // self.heads
        q, k, v = self.qkv(self.ln1(x)).split(h, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d).transpose(1, 2) for z in (q, k, v))
        scores = (q @ k.transpose(-2, -1)) * d**-0.5
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        attention = scores.masked_fill(future, float("-inf")).softmax(dim=-1)
        y = (attention @ v).transpose(1, 2).reshape(b, t, h)
        x = x + self.proj(y)
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Head(nn.Module):
    """Final layer norm and the output projection to the vocabulary (not tied to the embedding)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(cfg.hidden)
        self.out = nn.Linear(cfg.hidden, cfg.vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.ln(x))


class TinyGPT(nn.Module):
    """The units in order; ``forward`` maps token ids to logits."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.units = nn.ModuleList(
            [Embedding(cfg), *(Block(cfg) for _ in range(cfg.layers)), Head(cfg)]
        )

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = tokens
        for unit in self.units:
            x = unit(x)
        return x


def build_model(cfg: ModelConfig, seed: int, materialize: bool = True) -> TinyGPT:
    """The model, initialised from ``seed`` alone (GPT-2 style init), in fp32 on the CPU; with
    ``materialize=False`` on the meta device, without weights: ``materialized_units`` gives its
    units one at a time with the same values (how the engines build it, see ``engine``)."""
    with torch.device("meta"):
        model = TinyGPT(cfg)
    if materialize:
        _materialize(model)
        _initialize(model, torch.Generator().manual_seed(seed))
    return model


def materialized_units(model: TinyGPT, seed: int) -> Iterator[tuple[int, nn.Module]]:
    """The units with their weights, one at a time (index, unit).

    A model on the meta device is materialised unit by unit, with exactly the values
    ``build_model`` gives (one generator, the same order of parameters), and each unit goes back
    to the meta device once the caller is done with it: never more than one unit's fp32 weights
    exist at once, which is what lets a rank keep only its shard of a model it could not hold
    whole (DeepSpeed's ``zero.Init``, FSDP's meta-device init). A materialised model's units come
    as they are.
    """
    if not any(p.is_meta for p in model.parameters()):
        yield from enumerate(model.units)
        return
    generator = torch.Generator().manual_seed(seed)
    for i, unit in enumerate(model.units):
        _materialize(unit)
        _initialize(unit, generator)
        yield i, unit
        unit.to("meta")  # its weights are freed


def _initialize(module: nn.Module, generator: torch.Generator) -> None:
    for name, p in module.named_parameters():
        with torch.no_grad():
            if name.endswith("bias"):
                p.zero_()
            elif p.dim() == 1:  # layer-norm scale
                p.fill_(1.0)
            else:
                p.normal_(0.0, 0.02, generator=generator)


def _materialize(module: nn.Module) -> None:
    """Give every meta parameter an (uninitialised) CPU tensor of its shape, in place.

    What ``Module.to_empty`` does, without its route through ``torch._refs.empty_like``, whose first
    call imports torch's symbolic-shapes machinery (about a second per process)."""
    for sub in module.modules():
        for name, p in list(sub.named_parameters(recurse=False)):
            empty = torch.empty(p.shape, dtype=p.dtype)
            sub.register_parameter(name, nn.Parameter(empty, requires_grad=p.requires_grad))


def loss_fn(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean next-token cross-entropy, computed in fp32 whatever the training dtype."""
    return F.cross_entropy(logits.float().flatten(0, 1), targets.flatten())


def global_batch(
    cfg: ModelConfig, seed: int, step: int, size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch of ``step``: ``size`` sequences, the same on every rank and engine.

    Each sequence counts up modulo the vocabulary, by 1 or by 2 from a random start: there is
    something to learn, and the loss falls visibly within a few steps.
    """
    generator = torch.Generator().manual_seed(seed * 1_000_003 + step)
    start = torch.randint(0, cfg.vocab, (size, 1), generator=generator)
    stride = torch.randint(1, 3, (size, 1), generator=generator)
    seq = (start + stride * torch.arange(cfg.seq_len + 1)) % cfg.vocab
    return seq[:, :-1], seq[:, 1:]


def rank_batch(
    cfg: ModelConfig, seed: int, step: int, micro_batch: int, rank: int, world_size: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """This rank's slice of the global batch: rows ``rank*micro_batch`` to ``(rank+1)*micro_batch``."""
    tokens, targets = global_batch(cfg, seed, step, micro_batch * world_size)
    rows = slice(rank * micro_batch, (rank + 1) * micro_batch)
    return tokens[rows], targets[rows]
