"""What a rank holds: an exact inventory of model-state bytes, and the process's peak memory.

The inventory does not estimate anything: each engine lists the tensors it keeps (parameters,
gradients, optimizer states), and this module adds up the bytes of their storages, each storage
once, by term (params, grads, optimizer) and by tier (the training device, CPU RAM for offload,
or files on disk). It is taken at the moment all three terms exist: after the gradients are
reduced and before the optimizer step.

Peak memory is what the system says: ``torch.cuda.max_memory_allocated`` on a GPU, and the
process's peak resident set size (``VmHWM``, reset per stage through ``/proc/self/clear_refs``)
on a CPU. It includes activations, buffers, and on the CPU the Python interpreter and torch.
"""

from __future__ import annotations

import os
import resource
import sys
from collections import defaultdict
from dataclasses import dataclass

import torch

TERMS = ("params", "grads", "optimizer")
TIERS = ("device", "cpu", "disk")  # device = resident; cpu and disk = offloaded


@dataclass(frozen=True)
class Held:
    """One tensor (or one file) of model state a rank keeps."""

    term: str  # params | grads | optimizer
    tier: str  # device | cpu | disk
    what: str  # e.g. "bf16 flat parameters", "fp32 master weights (shard)"
    dtype: str
    nbytes: int
    storage: tuple[str, int] | None = None  # (device, storage pointer): counts a storage once

    @classmethod
    def of(cls, term: str, tier: str, what: str, tensor: torch.Tensor) -> Held:
        storage = tensor.untyped_storage()
        return cls(
            term=term,
            tier=tier,
            what=what,
            dtype=str(tensor.dtype).removeprefix("torch."),
            nbytes=storage.nbytes(),
            storage=(str(tensor.device), storage.data_ptr()),
        )


def take(held: list[Held]) -> dict:
    """Bytes by term and tier, each storage counted once; plus the itemised list."""
    seen: set[tuple[str, int]] = set()
    by_term: dict[str, int] = dict.fromkeys(TERMS, 0)
    by_tier: dict[str, int] = defaultdict(int)
    items = []
    for h in held:
        if h.storage is not None:
            if h.storage in seen or h.nbytes == 0:
                continue
            seen.add(h.storage)
        by_term[h.term] += h.nbytes
        by_tier[h.tier] += h.nbytes
        items.append(
            {"term": h.term, "tier": h.tier, "what": h.what, "dtype": h.dtype, "bytes": h.nbytes}
        )
    resident = by_tier.get("device", 0)
    total = sum(by_term.values())
    return {
        **by_term,
        "resident": resident,
        "offloaded": total - resident,
        "offloaded_cpu": by_tier.get("cpu", 0),
        "offloaded_disk": by_tier.get("disk", 0),
        "total": total,
        "items": items,
    }


class PeakMemory:
    """Peak memory of this process while one engine trains.

    Created before the engine is built, it notes the memory in use then (the *baseline*: Python,
    torch, gloo or the CUDA context, and nothing of the engine). ``reset_peak`` is called once the
    engine is built, so the peak is the training's, not the set-up's (which briefly holds an fp32
    copy of the whole model). ``above_baseline`` = model states + activations + buffers.
    """

    def __init__(self, device: torch.device) -> None:
        self.device = device
        self.kind = "cuda_max_memory_allocated" if device.type == "cuda" else "peak_rss"
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            self.baseline = torch.cuda.memory_allocated(device)
        else:
            self.baseline = _current_rss()

    def reset_peak(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            _reset_peak_rss()

    def read(self) -> dict:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device)
        else:
            peak = _peak_rss()
        return {"kind": self.kind, "peak": peak, "above_baseline": max(peak - self.baseline, 0)}


def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak_rss() -> None:
    # Writing 5 to clear_refs resets VmHWM to the current RSS (Linux 4.0+).
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass  # elsewhere the peak is the process's lifetime peak


def _current_rss() -> int:
    kib = _status_kib("VmRSS")
    return kib * 1024 if kib is not None else _peak_rss()


def _peak_rss() -> int:
    kib = _status_kib("VmHWM")
    if kib is not None:
        return kib * 1024
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


def rss_is_per_stage() -> bool:
    """Whether the CPU peak can be reset per stage (Linux) or is the lifetime peak."""
    return os.path.exists("/proc/self/clear_refs")
