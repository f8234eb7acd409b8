"""Step time and peak memory of each ZeRO stage of the demo, with and without overlap, against
PyTorch's FSDP2, from one invocation; and the optimizer step with torch's fused AdamW kernel
against the op-by-op update (``--fused-adam`` of the demo), stage by stage.

    python bench/zero_demo.py                      # 2 ranks, the "small" model, bf16, 8 steps
    python bench/zero_demo.py --world-size 4 --model-size base --steps 10

Every stage (once with overlap on, once with it off) and FSDP2 (``fully_shard`` per layer and at
the root: ZeRO-3) train the same model on the same batches in the same processes, one after the
other, so the ratios come from one run on one machine state. The options are the demo's (same
validation), except those that shape the demo's output (``--json``, ``--chart``, ``--no-chart``,
``--record``), which the bench refuses, and ``--overlap`` and ``--fused-adam``, which it sets
itself. The storage
audit and the per-phase profiler are off (they observe, and cost time); the single-process
reference is skipped; PyTorch's ZeroRedundancyOptimizer (ZeRO-1) is reported too.

Step time: the median over the steps after the first, the slowest rank's. Peak memory: the most
memory the rank used while training above what it used before building the model (GPU: torch's
max allocated; CPU: peak RSS), the largest rank's. Ratios are stage / FSDP2: below 1 is better.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from app.zero_demo.cli import build_parser, parse_config  # noqa: E402
from app.zero_demo.config import STAGE_NAMES  # noqa: E402
from app.zero_demo.report import median_step_time  # noqa: E402

PROG = "python bench/zero_demo.py"
DEFAULTS = ["--world-size", "2", "--steps", "8"]
REFUSED = (
    "--json",
    "--chart",
    "--no-chart",
    "--record",
    "--overlap",
    "--no-overlap",
    "--fused-adam",
)
TARGET = 1.2  # every stage within 1.2x FSDP2's step time with overlap on


def usage() -> str:
    demo = (
        build_parser().format_help().split("\n", 1)[1]
    )  # the demo's options, without its usage line
    return (
        f"usage: {PROG} [demo options]\n\n" + __doc__.strip() + "\n\n"
        f"Defaults here: {' '.join(DEFAULTS)}. Refused: {', '.join(REFUSED)}.\n\n"
        "The demo's options:\n" + demo
    )


def adam_time(run: dict) -> float:
    """Median seconds of the optimizer update per step (the clock's 'adam' span), steps after the
    first (the slowest rank's breakdown of each step)."""
    spans = [b.get("adam", 0.0) for b in run["time_breakdowns"]]
    return median_step_time(spans)


def refuse(argv: list[str]) -> str | None:
    """The first option the bench does not take, or None."""
    for arg in argv:
        name = arg.split("=", 1)[0]
        if name in REFUSED:
            return name
    return None


def main(argv: list[str]) -> int:
    if any(a in ("-h", "--help") for a in argv):
        print(usage())
        return 0
    refused = refuse(argv)
    if refused:
        print(
            f"usage: {PROG} [demo options]\n{PROG}: error: argument {refused}: not taken by the bench "
            "(it prints its own table; see --help)",
            file=sys.stderr,
        )
        return 2
    from app.zero_demo.runner import launch

    _, cfg = parse_config([*DEFAULTS, "--no-chart", *argv])
    cfg = dataclasses.replace(
        cfg, reference=False, compare=True, audit=False, phase_memory=False, grad_accums=(1,)
    )
    cfg = dataclasses.replace(cfg, fused_adam=False)
    raw_on = launch(dataclasses.replace(cfg, overlap=True))
    raw_off = launch(dataclasses.replace(cfg, overlap=False, compare=False))
    raw_fused = launch(dataclasses.replace(cfg, overlap=True, compare=False, fused_adam=True))
    if raw_on is None:  # torchrun, rank > 0
        return 0
    fsdp = raw_on["comparisons"]["fsdp2"]
    fsdp_time = median_step_time(fsdp["step_times"])
    fsdp_peak = fsdp["peak_memory"]["above_baseline"]
    psi = raw_on["runs"][0]["psi"]
    print(
        f"ZeRO demo vs PyTorch FSDP2: Ψ = {psi:,}, N_d = {raw_on['world_size']}, {cfg.dtype}, "
        f"{raw_on['backend']} on {raw_on['device']}, {cfg.steps} steps, torch {raw_on['torch']}"
    )
    header = (
        f"{'engine':<30}{'overlap':>8}{'step ms':>10}{'× FSDP2':>9}{'peak MB':>10}{'× FSDP2':>9}"
    )
    print(header)
    print("-" * len(header))

    def row(name: str, overlap: str, times: list[float], peak: int) -> float:
        step = median_step_time(times)
        print(
            f"{name:<30}{overlap:>8}{step * 1e3:>10.1f}{step / fsdp_time:>9.2f}"
            f"{peak / 1e6:>10.2f}{peak / max(fsdp_peak, 1):>9.2f}"
        )
        return step / fsdp_time

    worst = 0.0
    for on, off in zip(raw_on["runs"], raw_off["runs"], strict=True):
        label = STAGE_NAMES[on["stage"]] + (
            "" if on["offload"] == "none" else f" offload {on['offload']}"
        )
        ratio = row(label, "on", on["step_times"], on["peak_memory"]["above_baseline"])
        if on["offload"] == "none":
            worst = max(worst, ratio)
        row(label, "off", off["step_times"], off["peak_memory"]["above_baseline"])
    row(f"FSDP2 ({fsdp['dtype']})", "-", fsdp["step_times"], fsdp_peak)
    zero1 = raw_on["comparisons"]["zero_redundancy_optimizer"]
    row(
        f"PyTorch ZeRO-1 ({zero1['dtype']})",
        "-",
        zero1["step_times"],
        zero1["peak_memory"]["above_baseline"],
    )
    print()
    print(
        "Optimizer step (the 'adam' span of each step: the update of the rank's shard), median ms:"
    )
    header = f"{'engine':<30}{'unfused':>10}{'fused':>10}{'fused/unfused':>15}"
    print(header)
    print("-" * len(header))
    for unfused, fused in zip(raw_on["runs"], raw_fused["runs"], strict=True):
        label = STAGE_NAMES[unfused["stage"]] + (
            "" if unfused["offload"] == "none" else f" offload {unfused['offload']}"
        )
        a, b = adam_time(unfused), adam_time(fused)
        print(f"{label:<30}{a * 1e3:>10.2f}{b * 1e3:>10.2f}{b / max(a, 1e-12):>15.2f}")
    print()
    verdict = "within" if worst <= TARGET else "NOT within"
    print(
        f"Slowest stage with overlap on (no offload): {worst:.2f}× FSDP2's step time, "
        f"{verdict} the {TARGET}× target."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
