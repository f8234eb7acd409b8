"""Where a step's time and peak memory go: a clock with named spans, and peaks per phase.

Time (``Clock``): the engine wraps what it does in spans, ``comm.all_gather``, ``adam``,
``copies`` (host-device), ``disk`` (paging the optimizer states); spans nest, and time goes to the
innermost one. ``compute`` is the rest of the step: forward and backward arithmetic and the Python
around it. A collective's span is the time the training thread waits for it: with overlap on, the
part that runs behind backward is hidden and only the exposed rest is counted, which is what a
step pays. On a GPU, kernels run asynchronously, so the clock synchronizes the device at every
span boundary when ``sync`` is set (the measured step, not the timed ones).

Memory (``PhaseMemory``): the peak of each phase of one step, forward, backward (with the gradient
reduction) and optimizer (the step and the parameters' all-gather):

- on a GPU, ``torch.cuda.max_memory_allocated`` with the peak reset at each phase's start;
- on the CPU, *tracked storage bytes*: the profiler's record of every allocation and free of
  torch's CPU allocator during the step, added to the bytes live at the step's start (measured by
  walking the storages, see ``audit``). Peak RSS cannot be cut by phase, and it sees glibc's
  caching rather than tensors.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import defaultdict

import torch

PHASES = ("forward", "backward", "optimizer")
EXCLUDED = ("audit",)  # clock spans that are checks, not training
_MARK = "zero_demo.phase."


class Clock:
    """Exclusive time per span name within one step (see the module docstring)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.sync = False
        self.totals: dict[str, float] = defaultdict(float)
        self._stack: list[tuple[str, float]] = []
        self._start = 0.0

    def _now(self) -> float:
        if self.sync and self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        return time.perf_counter()

    def begin(self, sync: bool = False) -> None:
        self.sync = sync
        self.totals = defaultdict(float)
        self._stack = []
        self._start = self._now()

    def end(self) -> dict[str, float]:
        """Seconds per span of the step, and ``compute`` for the rest; ``total`` the step.

        Spans in ``EXCLUDED`` (the storage audit) are not part of training: they are taken out
        of the total and reported apart."""
        total = self._now() - self._start
        spans = dict(self.totals)
        excluded = {name: spans.pop(name) for name in EXCLUDED if name in spans}
        total -= sum(excluded.values())
        spans["compute"] = max(total - sum(spans.values()), 0.0)
        spans["total"] = total
        return {**spans, **{f"excluded.{k}": v for k, v in excluded.items()}}

    @contextlib.contextmanager
    def span(self, name: str):
        now = self._now()
        if self._stack:  # the enclosing span stops counting while this one runs
            outer, since = self._stack[-1]
            self.totals[outer] += now - since
        self._stack.append((name, now))
        try:
            yield
        finally:
            now = self._now()
            _, since = self._stack.pop()
            self.totals[name] += now - since
            if self._stack:
                outer, _ = self._stack[-1]
                self._stack[-1] = (outer, now)


@contextlib.contextmanager
def _quiet_stderr():
    """Kineto prints a line to the process's stderr when it starts and stops; keep the report clean."""
    try:
        saved = os.dup(2)
    except OSError:
        yield
        return
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class PhaseMemory:
    """Peaks of the phases of one measured step (see the module docstring)."""

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.kind = "cuda_max_memory_allocated" if device.type == "cuda" else "tracked_cpu_bytes"
        self.active = False
        self.peaks: dict[str, int] = {}
        self._profiler = None
        self._start_bytes = 0
        self._baseline = 0

    @contextlib.contextmanager
    def step(self, active: bool, start_bytes: int, baseline: int = 0):
        """Measure the step run inside; ``start_bytes``: live tracked bytes at its start (CPU),
        ``baseline``: allocated bytes before the engine existed (GPU)."""
        self.active = active
        self._start_bytes, self._baseline = start_bytes, baseline
        if not active:
            yield
            return
        if self.device.type == "cpu":
            from torch.profiler import ProfilerActivity, profile

            self._profiler = profile(activities=[ProfilerActivity.CPU], profile_memory=True)
            with _quiet_stderr():
                self._profiler.__enter__()
        try:
            yield
        finally:
            if self._profiler is not None:
                with _quiet_stderr():
                    self._profiler.__exit__(None, None, None)
                self.peaks = self._cpu_peaks(self._profiler)
                self._profiler = None
            self.active = False

    @contextlib.contextmanager
    def phase(self, name: str):
        if not self.active:
            yield
            return
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            yield
            torch.cuda.synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device) - self._baseline
            self.peaks[name] = max(peak, self.peaks.get(name, 0), 0)  # the highest micro-batch's
            return
        with torch.profiler.record_function(_MARK + name):
            yield

    def _cpu_peaks(self, prof) -> dict[str, int]:
        windows: dict[str, list[tuple[int, int]]] = {}  # a phase runs once per micro-batch
        allocations: list[tuple[int, int, int]] = []  # (time, size, allocator total after)

        def walk(node) -> None:
            fields = node.extra_fields
            if type(fields).__name__ == "_ExtraFields_Allocation":
                if fields.device.type == "cpu":
                    allocations.append(
                        (node.start_time_ns, fields.alloc_size, fields.total_allocated)
                    )
            elif node.name.startswith(_MARK):
                name = node.name.removeprefix(_MARK)
                windows.setdefault(name, []).append((node.start_time_ns, node.end_time_ns))
            for child in node.children:
                walk(child)

        for root in prof.profiler.kineto_results.experimental_event_tree():
            walk(root)
        allocations.sort()
        # The allocator's running total, relative to the step's start (frees of blocks allocated
        # before the profiler started carry no size and are not seen: the figure errs high).
        origin = allocations[0][2] - allocations[0][1] if allocations else 0
        levels = [(t, total - origin) for t, _, total in allocations]
        peaks = {}
        for name, spans in windows.items():
            rise = 0
            for start, end in spans:
                before = [lvl for t, lvl in levels if t < start]
                inside = [lvl for t, lvl in levels if start <= t <= end]
                rise = max(rise, before[-1] if before else 0, *inside)
            peaks[name] = self._start_bytes + rise
        return peaks
