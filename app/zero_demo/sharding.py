"""Flat buffers and shards: how a unit's parameters become one padded vector cut into N_d pieces.

Every unit (see ``model``) is flattened into one vector: its parameters back to back, in the order
of ``named_parameters()``, followed by zeros up to a multiple of the number of shards. Rank ``r``
owns elements ``[r*s, (r+1)*s)`` of it, ``s = padded / shards``. This is what DeepSpeed and FSDP1
do (FSDP1's ``FlatParameter`` is padded the same way), and it is why a sharded run holds
``Ψ_padded`` elements rather than Ψ: at most ``shards - 1`` zeros per unit.

A rank's *shard* of the whole model is its piece of every unit, concatenated: the fp32 master
weights, both Adam moments, ZeRO-2's gradient shard and ZeRO-3's parameter shard all use that
layout, so one elementwise optimizer step covers all units at once.

Stage 0 (DDP) uses the same code with one shard: no padding, and "the shard" is the whole model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class UnitLayout:
    """Where one unit's parameters lie in its flat buffer and in a rank's shard."""

    names: tuple[str, ...]
    shapes: tuple[torch.Size, ...]
    numel: int  # Ψ of this unit
    padded: int  # numel rounded up to a multiple of the number of shards
    shard: int  # padded / shards: elements of this unit each rank owns
    shard_offset: int  # where this unit's piece starts in a rank's concatenated shard
    flat_offset: int  # where this unit's flat buffer starts in the model-wide flat buffer

    @property
    def padding(self) -> int:
        return self.padded - self.numel

    def param_views(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """The unit's parameters as views into its (full, unsharded) flat buffer.

        ``split`` is one autograd op with one backward: the gradients of all the views are
        written into a single flat gradient of ``padded`` elements (zeros where the padding is).
        """
        sizes = [s.numel() for s in self.shapes]
        pieces = flat.split([*sizes, self.padding] if self.padding else sizes)
        return {
            name: piece.view(shape)
            for name, shape, piece in zip(self.names, self.shapes, pieces, strict=False)
        }

    def shard_range(self, rank: int) -> slice:
        """Rank ``rank``'s piece of the unit's flat buffer."""
        return slice(rank * self.shard, (rank + 1) * self.shard)

    def in_shard(self) -> slice:
        """This unit's piece inside a rank's concatenated shard."""
        return slice(self.shard_offset, self.shard_offset + self.shard)

    def in_flat(self) -> slice:
        """This unit's flat buffer inside the model-wide flat buffer."""
        return slice(self.flat_offset, self.flat_offset + self.padded)


@dataclass(frozen=True)
class FlatLayout:
    """All units of a model, flattened and cut into ``shards`` equal pieces."""

    units: tuple[UnitLayout, ...]
    shards: int

    @classmethod
    def of(cls, units: nn.ModuleList, shards: int) -> FlatLayout:
        layouts = []
        shard_offset = flat_offset = 0
        for unit in units:
            named = list(unit.named_parameters())
            numel = sum(p.numel() for _, p in named)
            padded = -(-numel // shards) * shards
            layouts.append(
                UnitLayout(
                    names=tuple(n for n, _ in named),
                    shapes=tuple(p.shape for _, p in named),
                    numel=numel,
                    padded=padded,
                    shard=padded // shards,
                    shard_offset=shard_offset,
                    flat_offset=flat_offset,
                )
            )
            shard_offset += padded // shards
            flat_offset += padded
        return cls(units=tuple(layouts), shards=shards)

    @property
    def psi(self) -> int:
        """Ψ: the number of parameters of the model."""
        return sum(u.numel for u in self.units)

    @property
    def padded_psi(self) -> int:
        """Ψ_padded: elements of all flat buffers, padding included."""
        return sum(u.padded for u in self.units)

    @property
    def shard_numel(self) -> int:
        """Elements of a rank's concatenated shard: Ψ_padded / shards."""
        return self.padded_psi // self.shards

    def flatten(self, unit: nn.Module, index: int) -> torch.Tensor:
        """The unit's parameters as one padded fp32 vector (on the unit's device)."""
        layout = self.units[index]
        params = [p.detach().reshape(-1).float() for _, p in unit.named_parameters()]
        flat = torch.cat(params)
        return torch.nn.functional.pad(flat, (0, layout.padding))

    def shard_of(self, units: nn.ModuleList, rank: int) -> torch.Tensor:
        """Rank ``rank``'s concatenated fp32 shard of the model's parameters."""
        return torch.cat(
            [
                self.flatten(unit, i)[u.shard_range(rank)]
                for i, (unit, u) in enumerate(zip(units, self.units, strict=True))
            ]
        )
