"""Step time and peak memory of each ZeRO stage of the demo against PyTorch's FSDP2, from one run.

    python bench/zero_demo.py                      # 2 ranks, the "small" model, bf16, 8 steps
    python bench/zero_demo.py --world-size 4 --model-size base --steps 10

Every stage and FSDP2 (``fully_shard`` per layer and at the root: ZeRO-3) train the same model on
the same batches in the same processes, one after the other, so the ratios come from one run on
one machine state. The command line is the demo's (same options, same validation); the
single-process reference is skipped, PyTorch's ZeroRedundancyOptimizer (ZeRO-1) is reported too.

Step time: the median over the steps after the first, the slowest rank's. Peak memory: the most
memory the rank used while training above what it used before building the model (GPU: torch's
max allocated; CPU: peak RSS), the largest rank's. Ratios are stage / FSDP2: below 1 is better.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.zero_demo.cli import parse_config  # noqa: E402
from app.zero_demo.config import STAGE_NAMES  # noqa: E402
from app.zero_demo.report import median_step_time  # noqa: E402
from app.zero_demo.runner import launch  # noqa: E402

DEFAULTS = ["--world-size", "2", "--steps", "8", "--no-chart"]


def main(argv: list[str]) -> int:
    _, cfg = parse_config([*DEFAULTS, *argv])
    cfg = dataclasses.replace(cfg, reference=False, compare=True)
    raw = launch(cfg)
    if raw is None:  # torchrun, rank > 0
        return 0
    fsdp = raw["comparisons"]["fsdp2"]
    fsdp_time, fsdp_peak = (
        median_step_time(fsdp["step_times"]),
        fsdp["peak_memory"]["above_baseline"],
    )
    psi = raw["runs"][0]["psi"]
    print(
        f"ZeRO demo vs PyTorch FSDP2: Ψ = {psi:,}, N_d = {raw['world_size']}, {cfg.dtype}, "
        f"{raw['backend']} on {raw['device']}, {cfg.steps} steps, torch {raw['torch']}"
    )
    header = f"{'engine':<32}{'step ms':>10}{'× FSDP2':>10}{'peak MB':>11}{'× FSDP2':>10}"
    print(header)
    print("-" * len(header))

    def row(name: str, times: list[float], peak: int) -> None:
        step = median_step_time(times)
        print(
            f"{name:<32}{step * 1e3:>10.1f}{step / fsdp_time:>10.2f}{peak / 1e6:>11.2f}{peak / fsdp_peak:>10.2f}"
        )

    for run in raw["runs"]:
        label = STAGE_NAMES[run["stage"]] + (
            "" if run["offload"] == "none" else f" offload {run['offload']}"
        )
        row(label, run["step_times"], run["peak_memory"]["above_baseline"])
    row(f"FSDP2 ({fsdp['dtype']})", fsdp["step_times"], fsdp_peak)
    zero1 = raw["comparisons"]["zero_redundancy_optimizer"]
    row(
        f"PyTorch ZeRO-1 ({zero1['dtype']})",
        zero1["step_times"],
        zero1["peak_memory"]["above_baseline"],
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
