"""Mixed-precision AdamW over one rank's flat shard, on the device, in CPU RAM, or paged to disk.

The optimizer keeps, for each element of the rank's shard, the fp32 master weight, the first
moment m and the second moment v: 4 + 4 + 4 = 12 bytes, the card's 12Ψ/N_d (12Ψ under DDP, where
the shard is the whole model). The low-precision parameters the model computes with are *outputs*
of the step: the updated master weights, rounded to bf16/fp16, are written back after every step.

Where the states live is the *tier*:

- ``device``: next to the model, the step runs there (no offload);
- ``cpu``: CPU RAM, pinned when the device is a GPU so copies can run asynchronously; the step
  runs on the CPU and only the low-precision result (2 bytes per element) goes back to the
  device: ZeRO-Offload;
- ``disk``: files in a folder, read before each step and written back after it, so between steps
  the states take no memory at all: the idea of ZeRO-Infinity (which pages to NVMe).

The update is PyTorch's AdamW (``torch.optim.AdamW(foreach=False)``) operation for operation, so
in fp32 the demo matches the single-process reference to rounding.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import numpy as np
import torch

from .config import OptimConfig
from .inventory import Held

STATES = ("master", "exp_avg", "exp_avg_sq")
_WHAT = {
    "master": "fp32 master weights",
    "exp_avg": "fp32 Adam first moment m",
    "exp_avg_sq": "fp32 Adam second moment v",
}


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
    ) -> None:
        self.tier = tier
        self.hyper = hyper
        self.numel = master.numel()
        self.step_count = 0
        # Where the step runs: the device, or the CPU when the states are offloaded.
        self.home = device if tier == "device" else torch.device("cpu")
        pin = tier == "cpu" and device.type == "cuda"
        master = master.detach().to(self.home, torch.float32, copy=True)
        self.states: dict[str, torch.Tensor] = {
            "master": master,
            "exp_avg": torch.zeros_like(master),
            "exp_avg_sq": torch.zeros_like(master),
        }
        if pin:
            self.states = {k: v.pin_memory() for k, v in self.states.items()}
        self.files: dict[str, Path] = {}
        if tier == "disk":
            assert folder is not None
            folder.mkdir(parents=True, exist_ok=True)
            self.files = {name: folder / f"{tag}-{name}.bin" for name in STATES}
            self._page_out()

    def held(self, suffix: str) -> list[Held]:
        """The inventory entries of the three states (files, when paged out)."""
        if self.tier == "disk" and not self.states:
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

    @torch.no_grad()
    def step(
        self, grads: list[tuple[slice, torch.Tensor]], out: torch.Tensor, inv_scale: float = 1.0
    ) -> None:
        """One AdamW step over the shard, then ``out`` <- the new master weights in ``out.dtype``.

        ``grads`` are (where in the shard, gradient) pieces covering the shard, in any dtype and on
        any device: each is converted to fp32 on the optimizer's side (for offload, that is the
        copy of the low-precision gradient to the CPU). Going piece by piece (one layer at a time)
        keeps the fp32 temporaries to one layer's size. ``inv_scale`` undoes fp16 loss scaling.
        """
        if out.is_cuda:
            torch.cuda.synchronize(out.device)  # asynchronous copies into pinned gradients are done
        self._page_in()
        h = self.hyper
        self.step_count += 1
        bias_correction1 = 1 - h.beta1**self.step_count
        bias_correction2 = 1 - h.beta2**self.step_count
        step_size = h.lr / bias_correction1
        bias_correction2_sqrt = math.sqrt(bias_correction2)
        master, exp_avg, exp_avg_sq = (self.states[n] for n in STATES)
        for where, grad in grads:
            g = grad.to(self.home, torch.float32, copy=True)
            if inv_scale != 1.0:
                g.mul_(inv_scale)
            p, m, v = master[where], exp_avg[where], exp_avg_sq[where]
            p.mul_(1 - h.lr * h.weight_decay)
            m.lerp_(g, 1 - h.beta1)
            v.mul_(h.beta2).addcmul_(g, g, value=1 - h.beta2)
            denom = v.sqrt().div_(bias_correction2_sqrt).add_(h.eps)
            p.addcdiv_(m, denom, value=-step_size)
            # Round on the optimizer's side: only 2 bytes per element travel back to the device.
            out[where].copy_(p.to(out.dtype))
        self._page_out()

    def master(self) -> torch.Tensor:
        """A copy of the fp32 master weights (for checks; pages in and out when on disk)."""
        self._page_in()
        copy = self.states["master"].clone()
        self._page_out()
        return copy

    def remove_files(self) -> None:
        for path in self.files.values():
            path.unlink(missing_ok=True)
        if self.files:
            with contextlib.suppress(OSError):  # the rank's folder, if nothing else is in it
                next(iter(self.files.values())).parent.rmdir()

    def _page_in(self) -> None:
        if self.tier == "disk":
            self.states = {
                n: torch.from_numpy(np.fromfile(self.files[n], dtype=np.float32)) for n in STATES
            }

    def _page_out(self) -> None:
        if self.tier == "disk":
            for n in STATES:
                self.states[n].numpy().tofile(self.files[n])
            self.states = {}
