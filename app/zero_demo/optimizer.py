"""Mixed-precision AdamW over one rank's flat shard, on the device, in CPU RAM, or paged to disk.

The optimizer keeps, for each element of the rank's shard, the fp32 master weight, the first
moment m and the second moment v: 4 + 4 + 4 = 12 bytes, the card's 12Ψ/N_d (12Ψ under DDP, where
the shard is the whole model). The low-precision parameters the model computes with are *outputs*
of the step: the updated master weights, rounded to bf16/fp16, are written back after every step.

Where the states live is the *tier*:

- ``device``: next to the model, the step runs there (no offload);
- ``cpu``: CPU RAM; the step runs on the CPU: ZeRO-Offload. Only 2-byte values cross the bus:
  the bf16/fp16 gradients come over as they are and are widened to fp32 on the CPU, and the new
  parameters are rounded on the CPU before they go back. On a GPU the copies go through small
  *pinned staging buffers* (one sub-group each way); the states themselves are not pinned: pinning
  them would buy nothing (the CPU reads them, not the GPU) and the pinned allocator rounds every
  block up to a power of two;
- ``disk``: files in a folder, paged in one *sub-group* at a time (``sub_group_size`` elements of
  each state, 12 bytes per element), updated and written back, so the optimizer step never holds
  more than one sub-group of states in memory: the idea of ZeRO-Infinity (which pages to NVMe).

The step goes sub-group by sub-group (DeepSpeed's ``sub_group_size``) and, inside one, piece by
piece of the gradient (one layer at a time): fp32 temporaries stay one piece's size.

The update is PyTorch's AdamW (``torch.optim.AdamW(foreach=False)``) operation for operation, so
in fp32 the demo matches the single-process reference to rounding; ``fused=True`` runs PyTorch's
fused AdamW kernel (``torch._fused_adamw_``, what ``AdamW(fused=True)`` calls, on the CPU too) on
each piece instead.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import torch

from .config import OptimConfig
from .inventory import Held
from .phases import Clock

STATES = ("master", "exp_avg", "exp_avg_sq")
_WHAT = {
    "master": "fp32 master weights",
    "exp_avg": "fp32 Adam first moment m",
    "exp_avg_sq": "fp32 Adam second moment v",
}
_STATE_BYTES = 4 * len(STATES)  # fp32, three states


class ShardedAdamW:
    def __init__(
        self,
        master: torch.Tensor,
        *,
        tier: str,
        device: torch.device,
        hyper: OptimConfig,
        folder: Path | None = None,
        tag: str = "optimizer",
        sub_group_size: int | None = None,
        fused: bool = False,
        clock: Clock | None = None,
    ) -> None:
        self.tier = tier
        self.hyper = hyper
        self.numel = master.numel()
        self.step_count = 0
        self.fused = fused
        self.clock = clock
        self.sub_group_size = min(sub_group_size or self.numel, max(self.numel, 1))
        # The most bytes of states the step held in memory at once when paging from disk.
        self.peak_paged_bytes = 0
        # Where the step runs: the device, or the CPU when the states are offloaded.
        self.home = device if tier == "device" else torch.device("cpu")
        self.device = device
        self._staging: dict[str, torch.Tensor] = {}
        master = master.detach().to(self.home, torch.float32, copy=True)
        self.states: dict[str, torch.Tensor] = {
            "master": master,
            "exp_avg": torch.zeros_like(master),
            "exp_avg_sq": torch.zeros_like(master),
        }
        self.files: dict[str, Path] = {}
        if tier == "disk":
            assert folder is not None
            folder.mkdir(parents=True, exist_ok=True)
            self.files = {name: folder / f"{tag}-{name}.bin" for name in STATES}
            for n in STATES:
                self.states[n].numpy().tofile(self.files[n])
            self.states = {}

    def held(self, suffix: str) -> list[Held]:
        """The inventory entries of the three states (files, when paged out)."""
        if self.tier == "disk":
            return [
                Held(
                    "optimizer",
                    "disk",
                    f"{_WHAT[n]}{suffix}",
                    "float32",
                    self.files[n].stat().st_size,
                )
                for n in STATES
            ]
        return [
            Held.of("optimizer", self.tier, f"{_WHAT[n]}{suffix}", self.states[n]) for n in STATES
        ]

    def staging(self) -> list[torch.Tensor]:
        """The pinned staging buffers (named buffers for the audit)."""
        return list(self._staging.values())

    def _span(self, name: str):
        return self.clock.span(name) if self.clock is not None else contextlib.nullcontext()

    def sub_groups(self) -> list[tuple[int, int]]:
        size = self.sub_group_size
        return [(a, min(a + size, self.numel)) for a in range(0, self.numel, size)]

    @torch.no_grad()
    def step(
        self, grads: list[tuple[slice, torch.Tensor]], out: torch.Tensor, inv_scale: float = 1.0
    ) -> None:
        """One AdamW step over the shard, then ``out`` <- the new master weights in ``out.dtype``.

        ``grads`` are (where in the shard, gradient) pieces covering the shard, in any dtype and on
        any device. ``inv_scale`` undoes fp16 loss scaling.
        """
        if out.is_cuda:
            torch.cuda.synchronize(out.device)  # asynchronous copies into pinned gradients are done
        h = self.hyper
        self.step_count += 1
        for a, b in self.sub_groups():
            states = self._page_in(a, b)
            for where, grad in grads:
                lo, hi = max(where.start, a), min(where.stop, b)
                if lo >= hi:
                    continue
                g = self._gradient_home(grad[lo - where.start : hi - where.start], inv_scale)
                p, m, v = (states[n][lo - a : hi - a] for n in STATES)
                with self._span("adam"):
                    if self.fused:
                        torch._fused_adamw_(
                            [p], [g], [m], [v], [],
                            [torch.tensor(float(self.step_count), device=self.home)],
                            lr=h.lr, beta1=h.beta1, beta2=h.beta2, weight_decay=h.weight_decay,
                            eps=h.eps, amsgrad=False, maximize=False,
                        )  # fmt: skip
                    else:
                        self._adamw(p, m, v, g)
                    low = p.to(out.dtype)  # rounded here: 2 bytes per element travel back
                self._copy_out(out[lo:hi], low)
                del g, p, m, v, low  # before the next piece's temporaries exist
            self._page_out(a, b, states)
            del states  # before the next sub-group is paged in: one sub-group at a time
        if out.is_cuda:
            torch.cuda.synchronize(out.device)  # the staging buffer is free again

    def _adamw(self, p: torch.Tensor, m: torch.Tensor, v: torch.Tensor, g: torch.Tensor) -> None:
        h = self.hyper
        bias_correction1 = 1 - h.beta1**self.step_count
        bias_correction2_sqrt = math.sqrt(1 - h.beta2**self.step_count)
        step_size = h.lr / bias_correction1
        p.mul_(1 - h.lr * h.weight_decay)
        m.lerp_(g, 1 - h.beta1)
        v.mul_(h.beta2).addcmul_(g, g, value=1 - h.beta2)
        denom = v.sqrt().div_(bias_correction2_sqrt).add_(h.eps)
        p.addcdiv_(m, denom, value=-step_size)

    def _stage(self, name: str, like: torch.Tensor) -> torch.Tensor:
        """A pinned buffer of ``like``'s dtype and up to one piece's size, reused across steps."""
        buf = self._staging.get(name)
        size = min(self.sub_group_size, self.numel)
        if buf is None or buf.dtype != like.dtype:
            buf = torch.empty(size, dtype=like.dtype, pin_memory=True)
            self._staging[name] = buf
        return buf[: like.numel()]

    def _gradient_home(self, grad: torch.Tensor, inv_scale: float) -> torch.Tensor:
        """The gradient piece as fp32 where the step runs; across the bus in its own 2 bytes."""
        if grad.device != self.home:
            with self._span("copies"):
                staged = self._stage("d2h", grad)
                staged.copy_(grad)
            grad = staged
        g = grad.to(torch.float32, copy=True)
        if inv_scale != 1.0:
            g.mul_(inv_scale)
        return g

    def _copy_out(self, out: torch.Tensor, low: torch.Tensor) -> None:
        if out.device == low.device:
            out.copy_(low)
            return
        with self._span("copies"):
            staged = self._stage("h2d", low)
            staged.copy_(low)
            out.copy_(staged, non_blocking=True)
            torch.cuda.synchronize(out.device)  # the staging buffer is reused by the next piece

    def master(self) -> torch.Tensor:
        """A copy of the fp32 master weights (for checks; read from the files when on disk)."""
        if self.tier == "disk":
            return self._read("master", 0, self.numel)
        return self.states["master"].clone()

    def remove_files(self) -> None:
        for path in self.files.values():
            path.unlink(missing_ok=True)
        if self.files:
            with contextlib.suppress(OSError):  # the rank's folder, if nothing else is in it
                next(iter(self.files.values())).parent.rmdir()

    # -- disk paging, one sub-group at a time ---------------------------------------------------
    def _read(self, name: str, a: int, b: int) -> torch.Tensor:
        buf = torch.empty(b - a, dtype=torch.float32)
        with open(self.files[name], "rb") as f:
            f.seek(4 * a)
            if f.readinto(buf.numpy()) != 4 * (b - a):
                raise OSError(f"{self.files[name]}: short read")
        return buf

    def _page_in(self, a: int, b: int) -> dict[str, torch.Tensor]:
        if self.tier != "disk":
            return {n: self.states[n][a:b] for n in STATES}
        with self._span("disk"):
            states = {n: self._read(n, a, b) for n in STATES}
        self.peak_paged_bytes = max(self.peak_paged_bytes, _STATE_BYTES * (b - a))
        return states

    def _page_out(self, a: int, b: int, states: dict[str, torch.Tensor]) -> None:
        if self.tier != "disk":
            return
        with self._span("disk"):
            for n in STATES:
                with open(self.files[n], "r+b") as f:
                    f.seek(4 * a)
                    f.write(states[n].numpy().data)
