"""The collectives the engines use, each call counted from its arguments.

Why count arguments and not the wire: gloo has no native reduce-scatter (it runs an all-reduce and
keeps a slice), and NCCL's algorithms (ring, tree) move different byte counts. The card reasons
about the *logical* volume, so each call is counted the way the ZeRO paper counts it, as elements
per rank:

- ``all_reduce`` of n elements counts 2n: a reduce-scatter followed by an all-gather, which is
  what a ring all-reduce does (DDP's 2Ψ per step);
- ``reduce_scatter`` of an n-element input counts n (each rank receives the reduced n/N_d);
- ``all_gather`` into an n-element output counts n.

A ring sends (N_d - 1)/N_d of that from each rank; the textbook (and the card) drops the factor,
the report shows both. Collectives that only carry control values (the loss for the progress bar,
fp16's overflow flag) are counted apart, so the totals are the model-state traffic alone.
"""

from __future__ import annotations

import contextlib
from collections import defaultdict
from dataclasses import dataclass
from fractions import Fraction

import torch
import torch.distributed as dist

# torch 2.13 renamed the single-tensor collectives; the old names still work, with a warning.
# These are the raw, uncounted calls (the engines use ``CountingComm``).
reduce_scatter_tensor = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
all_gather_tensor = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

COLLECTIVES = ("all_reduce", "reduce_scatter", "all_gather")
_VOLUME_FACTOR = {"all_reduce": 2, "reduce_scatter": 1, "all_gather": 1}


@dataclass(frozen=True)
class Call:
    op: str  # all_reduce | reduce_scatter | all_gather
    numel: int  # the full (unsharded) buffer of the call
    element_size: int
    control: bool = False

    @property
    def elements(self) -> int:
        """Logical elements per rank, the card's way (see the module docstring)."""
        return _VOLUME_FACTOR[self.op] * self.numel


class Pending:
    """An asynchronous collective in flight; ``wait`` blocks in the clock's span of its kind."""

    def __init__(self, comm: CountingComm, op: str, work) -> None:
        self.comm, self.op, self.work = comm, op, work

    def wait(self) -> None:
        with self.comm._span(self.op):
            self.work.wait()


class CountingComm:
    """A thin layer over ``torch.distributed``: the same calls, each one recorded."""

    def __init__(self, group: dist.ProcessGroup | None = None) -> None:
        self.group = group
        self.world_size = dist.get_world_size(group)
        self.rank = dist.get_rank(group)
        self.calls: list[Call] = []
        self.clock = None  # the engine's ``phases.Clock``: each call is a span named comm.<op>

    def _span(self, op: str, control: bool = False):
        if self.clock is None:
            return contextlib.nullcontext()
        return self.clock.span("comm.control" if control else f"comm.{op}")

    def all_reduce(
        self, tensor: torch.Tensor, op: dist.ReduceOp = dist.ReduceOp.SUM, *, control: bool = False
    ) -> None:
        self.calls.append(Call("all_reduce", tensor.numel(), tensor.element_size(), control))
        with self._span("all_reduce", control):
            dist.all_reduce(tensor, op=op, group=self.group)

    def start_all_reduce(self, tensor: torch.Tensor) -> Pending:
        """``all_reduce`` (sum), started and not waited for: it runs while backward goes on."""
        self.calls.append(Call("all_reduce", tensor.numel(), tensor.element_size()))
        with self._span("all_reduce"):
            work = dist.all_reduce(tensor, group=self.group, async_op=True)
        return Pending(self, "all_reduce", work)

    def reduce_scatter(
        self, output: torch.Tensor, input: torch.Tensor, *, async_op: bool = False
    ) -> Pending | None:
        """Sum ``input`` over ranks; this rank keeps piece ``rank`` of the sum in ``output``."""
        assert input.numel() == output.numel() * self.world_size, (input.shape, output.shape)
        self.calls.append(Call("reduce_scatter", input.numel(), input.element_size()))
        with self._span("reduce_scatter"):
            work = reduce_scatter_tensor(output, input, group=self.group, async_op=async_op)
        return Pending(self, "reduce_scatter", work) if async_op else None

    def all_gather(
        self, output: torch.Tensor, input: torch.Tensor, *, async_op: bool = False
    ) -> Pending | None:
        """Concatenate every rank's ``input`` into ``output``, in rank order."""
        assert output.numel() == input.numel() * self.world_size, (output.shape, input.shape)
        self.calls.append(Call("all_gather", output.numel(), output.element_size()))
        with self._span("all_gather"):
            work = all_gather_tensor(output, input, group=self.group, async_op=async_op)
        return Pending(self, "all_gather", work) if async_op else None

    def take(self) -> list[Call]:
        """The calls since the last ``take`` (one training step's)."""
        calls, self.calls = self.calls, []
        return calls


def summarize(calls: list[Call], world_size: int) -> dict:
    """Per-collective and total elements and bytes of one step, model-state traffic only.

    ``ring_elements`` is the total times (N_d - 1)/N_d: what each rank actually sends in a ring.
    """
    by_op: dict[str, dict[str, int]] = defaultdict(lambda: {"calls": 0, "elements": 0, "bytes": 0})
    control = 0
    for call in calls:
        if call.control:
            control += 1
            continue
        entry = by_op[call.op]
        entry["calls"] += 1
        entry["elements"] += call.elements
        entry["bytes"] += call.elements * call.element_size
    elements = sum(e["elements"] for e in by_op.values())
    ring = Fraction(elements * (world_size - 1), world_size)
    return {
        "by_collective": {op: dict(by_op[op]) for op in COLLECTIVES if op in by_op},
        "elements": elements,
        "bytes": sum(e["bytes"] for e in by_op.values()),
        "ring_elements": float(ring),
        "control_calls": control,
    }
