"""The inventory, audited: every live storage of the rank must be explained by what ``held()`` lists.

The inventory (``inventory.take``) adds up what each engine *says* it keeps. A stage that secretly
kept another copy of the parameters would still report the card's numbers. So after each step
the rank walks what is really alive and compares:

- on the CPU, every tensor the garbage collector knows about (``gc.get_objects()``), reduced to
  its untyped storage, each storage counted once;
- on a GPU, ``torch.cuda.memory_allocated`` (the allocator's live blocks).

From that it takes away what was alive before the engine was built (the *baseline*: the
single-process reference's weights, the interpreter's own tensors), the storages ``held()`` lists,
and the *named buffers* of the step (the batch, the logits, the loss). Whatever is left is
unexplained, and the audit raises :class:`InventoryMismatch`, naming the largest leftovers.

The walk is fast because it only walks what is new: once the baseline is taken, every object alive
is moved out of the collector's sight (``gc.freeze()``: the permanent generation, which
``gc.get_objects()`` does not list), so each later walk sees only the objects made since, not the
few hundred thousand of the interpreter, torch and the test harness. ``close`` puts them back
(``gc.unfreeze()``). The freeze is process-wide: one audit at a time. A tensor object that already
existed at the baseline and is later given a new storage (``set_``) would be missed; nothing in
the demo does that.

What it cannot see: on the CPU, tensors that have no Python object (autograd's saved tensors, a
C++ cache). After backward the graph is freed, so nothing of the step should remain there; a
hidden copy kept anywhere in Python (an attribute, a closure, a list) is found. On a GPU the
allocator rounds every block up (to 512 bytes, and a large block can keep up to 1 MiB of an
unsplit segment), so up to 1 MiB per explained storage is tolerated there; a hidden copy of the
parameters of any model worth running on a GPU is far larger.
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass

import torch

from .inventory import Held

_GPU_SLACK_PER_STORAGE = 1 << 20


class InventoryMismatch(RuntimeError):
    """Live memory of the rank that the engine's inventory does not explain."""


@dataclass(frozen=True)
class _Storage:
    nbytes: int
    dtype: str
    shape: tuple[int, ...]


def _key(t: torch.Tensor) -> tuple[str, int]:
    return (str(t.device), t.untyped_storage().data_ptr())


def live_cpu_storages() -> dict[tuple[str, int], _Storage]:
    """Every storage of a CPU tensor that has a Python object, each once (largest view's shape)."""
    found: dict[tuple[str, int], _Storage] = {}
    for obj in gc.get_objects():
        # type(), not isinstance: a few module objects warn when their __class__ is read
        if not issubclass(type(obj), torch.Tensor) or obj.device.type != "cpu":
            continue
        try:
            storage = obj.untyped_storage()
        except (RuntimeError, NotImplementedError):  # tensors without storage (e.g. sparse)
            continue
        nbytes = storage.nbytes()
        if nbytes == 0:
            continue
        key = ("cpu", storage.data_ptr())
        if key not in found:
            found[key] = _Storage(nbytes, str(obj.dtype).removeprefix("torch."), tuple(obj.shape))
    return found


class StorageAudit:
    """Created before an engine is built; ``check`` after each step compares the live memory
    with the engine's ``held()`` list and the step's named buffers."""

    def __init__(
        self, device: torch.device, patience_s: float = 2.0, keep_frozen: bool = False
    ) -> None:
        self.device = device
        self.checks = 0
        self.max_unexplained = 0
        self.patience_s = patience_s
        self.retries = 0  # checks that had to wait for memory to be let go
        if device.type == "cuda":
            torch.cuda.synchronize(device)
            self._baseline_bytes = torch.cuda.memory_allocated(device)
            self._baseline: set = set()
        else:
            self._baseline = set(live_cpu_storages())
            self._baseline_bytes = 0
            # What is alive now is the baseline: out of the later walks (see the module docstring).
            gc.freeze()
        # keep_frozen: the caller unfreezes (the runner freezes once per rank, see runner.run_rank).
        self._frozen = device.type != "cuda" and not keep_frozen

    def close(self) -> None:
        """Give the baseline's objects back to the collector (idempotent)."""
        if self._frozen:
            gc.unfreeze()
            self._frozen = False

    @property
    def baseline_bytes(self) -> int:
        """GPU: bytes allocated before the engine was built (0 on the CPU)."""
        return self._baseline_bytes

    def engine_bytes(self) -> int:
        """Live bytes the rank holds above the baseline (what the engine and the step keep)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            return max(torch.cuda.memory_allocated(self.device) - self._baseline_bytes, 0)
        live = live_cpu_storages()
        return sum(s.nbytes for k, s in live.items() if k not in self._baseline)

    def check(self, moment: str, held: list[Held], named: dict[str, torch.Tensor | None]) -> dict:
        """Raise :class:`InventoryMismatch` if live memory holds bytes nobody explains."""
        self.checks += 1
        result = self._check(moment, held, named, final=False)
        # Something unexplained: garbage in a cycle (collect it), or a tensor a collective used
        # that gloo's worker thread has not let go of yet (it drops its references a moment after
        # ``wait`` returns, on its own thread). Collect and look again, waiting a little longer
        # each time; what is still there after ``patience_s`` is kept by someone: an error.
        # (A single collect-and-retry raced with the worker thread on a loaded machine.)
        waited, pause = 0.0, 0.001
        while result is None:
            gc.collect()
            final = waited >= self.patience_s
            result = self._check(moment, held, named, final=final)
            if result is None:
                time.sleep(pause)
                waited += pause
                pause = min(2 * pause, 0.25)
        self.retries += waited > 0
        return result

    def _check(
        self, moment: str, held: list[Held], named: dict[str, torch.Tensor | None], final: bool
    ) -> dict | None:
        device = str(self.device) if self.device.type == "cuda" else "cpu"
        explained = {h.storage: h.nbytes for h in held if h.storage is not None}
        buffers = {
            _key(t): (name, t.untyped_storage().nbytes())
            for name, t in named.items()
            if t is not None and t.device.type != "meta"
        }
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            live = torch.cuda.memory_allocated(self.device) - self._baseline_bytes
            on_device = {k: n for k, n in explained.items() if k[0] == device}
            on_device.update({k: n for k, (_, n) in buffers.items() if k[0] == device})
            accounted = sum(-(-n // 512) * 512 for n in on_device.values())
            unexplained = live - accounted
            tolerance = _GPU_SLACK_PER_STORAGE * (len(on_device) + 1)
            leftovers: list[tuple[int, str]] = []
        else:
            storages = live_cpu_storages()
            rest = {
                k: s
                for k, s in storages.items()
                if k not in self._baseline and k not in explained and k not in buffers
            }
            unexplained = sum(s.nbytes for s in rest.values())
            tolerance = 0
            leftovers = sorted(
                ((s.nbytes, f"{s.dtype}{list(s.shape)}") for s in rest.values()), reverse=True
            )
            live = sum(s.nbytes for k, s in storages.items() if k not in self._baseline)
        if unexplained > tolerance and not final:
            return None
        self.max_unexplained = max(self.max_unexplained, unexplained)
        if unexplained > tolerance:
            shown = ", ".join(f"{what} ({n:,} bytes)" for n, what in leftovers[:3])
            raise InventoryMismatch(
                f"{moment}: {unexplained:,} bytes of live memory are not in the engine's inventory "
                f"nor among the step's buffers ({', '.join(sorted(n for n, _ in buffers.values()))})"
                + (f"; largest: {shown}" if shown else "")
            )
        return {"live": live, "unexplained": unexplained}
