"""``python -m app.zero_demo``: train with each ZeRO stage and set the figures beside the card.

Arguments are validated before anything starts: a bad one ends with argparse's usage line, a
message naming the argument, and exit status 2 (no traceback).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shlex
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

from .config import (
    BACKENDS,
    DEFAULT_SUB_GROUP_SIZE,
    DTYPES,
    MODEL_PRESETS,
    OFFLOADS,
    STAGES,
    DemoConfig,
    ModelConfig,
    OptimConfig,
)

DEFAULT_CHART = "demo-output/zero-memory.png"
CHART_SUFFIXES = (".png", ".svg")
MAX_SEED = 2**32 - 1  # the data generator seeds with seed * 1_000_003 + step: must fit 64 bits

EXAMPLES = """\
examples:
  python -m app.zero_demo --world-size 4                  # 4 ranks: NCCL on 4 GPUs, else gloo on the CPU
  python -m app.zero_demo --world-size 1 --offload none,cpu   # one GPU: offload's effect
  python -m app.zero_demo --world-size 3 --dtype fp32     # uneven shards; exact parity with AdamW
  python -m app.zero_demo --offload disk /tmp/zero-states # optimizer states paged to files
  torchrun --nproc-per-node 4 -m app.zero_demo            # ranks started by torchrun
"""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m app.zero_demo",
        description="Train a small transformer with ZeRO stages 0-3 (and offload) on N ranks; print the "
        "bytes each rank holds and the elements each collective moves, beside the card's formulas.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run = p.add_argument_group("what to run")
    run.add_argument(
        "--world-size",
        type=int,
        default=None,
        metavar="N",
        help="number of ranks N_d (default: one per GPU, or 4 on a machine without GPUs; "
        "under torchrun, its WORLD_SIZE)",
    )
    run.add_argument(
        "--stages",
        default="0,1,2,3",
        metavar="LIST",
        help="ZeRO stages, comma-separated (default 0,1,2,3)",
    )
    run.add_argument(
        "--offload",
        nargs="+",
        default=["none"],
        metavar=("KIND", "DIR"),
        help="none, cpu or disk, or a comma-separated list (each runs every stage); "
        "disk takes a folder: --offload disk DIR",
    )
    run.add_argument("--offload-dir", metavar="DIR", help="folder for --offload disk")
    run.add_argument(
        "--sub-group-size",
        type=int,
        default=DEFAULT_SUB_GROUP_SIZE,
        metavar="N",
        help="elements per optimizer sub-group: the step goes one sub-group at a time, and "
        f"--offload disk pages one in at a time, 12 bytes per element (default {DEFAULT_SUB_GROUP_SIZE:,})",
    )
    run.add_argument(
        "--fused-adam",
        action="store_true",
        help="run torch's fused AdamW kernel (what AdamW(fused=True) calls, on the CPU too)",
    )
    run.add_argument(
        "--overlap",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="overlap communication with computation: DDP all-reduces each bucket, ZeRO-1 and "
        "ZeRO-2 reduce-scatter it, as soon as backward fills it; ZeRO-3 prefetches the next "
        "layer's all-gather (default: yes; --no-overlap runs every collective when it is reached)",
    )
    run.add_argument(
        "--checkpoint-activations",
        action="store_true",
        help="activation checkpointing: each transformer block keeps only its input and runs its "
        "forward again in backward (ZeRO-3 gathers its parameters once more for that)",
    )
    run.add_argument(
        "--bucket-size",
        type=int,
        default=0,
        metavar="N",
        help="gradient bucket of DDP and ZeRO-2, in elements: consecutive layers are reduced in "
        "one collective once they hold at least N (default 0: one layer per bucket)",
    )
    run.add_argument(
        "--grad-accum",
        default="1",
        metavar="K",
        help="micro-batches per optimizer step (gradient accumulation), or a comma-separated "
        "list: each K runs every stage (default 1)",
    )
    run.add_argument(
        "--audit",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="after every step, walk the rank's live storages and stop on bytes the inventory "
        "does not explain (default: yes; its time is left out of the step time)",
    )
    run.add_argument(
        "--dtype",
        choices=DTYPES,
        default="bf16",
        help="bf16 (default) or fp16 (dynamic loss scaling) mixed precision, or fp32 (exact parity)",
    )
    run.add_argument("--steps", type=int, default=5, help="training steps per stage (default 5)")
    run.add_argument(
        "--backend",
        choices=BACKENDS,
        default="auto",
        help="auto (default): NCCL with one GPU per rank if there are enough GPUs, else gloo on the CPU",
    )
    run.add_argument(
        "--seed",
        type=int,
        default=0,
        help=f"data and initialisation seed, 0 to {MAX_SEED} (default 0)",
    )
    run.add_argument(
        "--threads", type=int, metavar="N", help="torch threads per rank (default: cores / ranks)"
    )

    model = p.add_argument_group("model and data")
    model.add_argument(
        "--model-size",
        choices=MODEL_PRESETS,
        default="small",
        help="tiny, small (default) or base; the options below override it",
    )
    model.add_argument("--layers", type=int)
    model.add_argument("--hidden", type=int)
    model.add_argument("--heads", type=int)
    model.add_argument("--vocab", type=int)
    model.add_argument("--seq-len", type=int)
    model.add_argument(
        "--micro-batch", type=int, default=2, help="sequences per rank per step (default 2)"
    )
    model.add_argument("--lr", type=float, default=OptimConfig.lr)

    out = p.add_argument_group("output")
    out.add_argument(
        "--json", action="store_true", help="print the results as JSON instead of the table"
    )
    out.add_argument(
        "--chart",
        default=DEFAULT_CHART,
        metavar="PATH",
        help=f"memory chart, .png or .svg (default {DEFAULT_CHART})",
    )
    out.add_argument(
        "--no-chart", dest="chart", action="store_const", const=None, help="write no chart"
    )
    out.add_argument(
        "--record",
        metavar="PATH",
        help="also save the JSON, with the command and the time, for the card page, and its SVG chart "
        "beside it (same name, .svg)",
    )
    out.add_argument(
        "--compare",
        "--compare-fsdp",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also train with PyTorch's FSDP2 and ZeroRedundancyOptimizer (default: yes)",
    )
    out.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="progress bar on stderr",
    )
    out.add_argument("--card", default=DemoConfig.card_path, metavar="PATH", help=argparse.SUPPRESS)
    return p


def _writable_folder(path: str) -> str | None:
    """Make ``path`` a folder and write a probe file in it: None if that works, else why not."""
    try:
        Path(path).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path):
            pass
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def _can_create(path: str) -> str | None:
    """None if the file ``path`` could be written (its folder exists or can be made); else why not."""
    target = Path(path).absolute()
    if target.is_dir():
        return "it is a folder"
    if target.exists() and not os.access(target, os.W_OK):
        return "it is not writable"
    folder = target.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        return f"{str(folder)!r} is not a folder"
    if not os.access(folder, os.W_OK):
        return f"{str(folder)!r} is not writable"
    return None


def _positive(parser: argparse.ArgumentParser, name: str, value: int | float | None) -> None:
    if value is not None and value < 1:
        parser.error(f"argument --{name}: must be at least 1, got {value}")


def _stages(parser: argparse.ArgumentParser, text: str) -> tuple[int, ...]:
    stages = []
    for item in text.split(","):
        item = item.strip()
        if item not in {str(s) for s in STAGES}:
            parser.error(f"argument --stages: unknown stage {item!r} (choose from 0, 1, 2, 3)")
        if int(item) not in stages:
            stages.append(int(item))
    return tuple(stages)


def _offloads(
    parser: argparse.ArgumentParser, values: list[str], folder: str | None
) -> tuple[tuple[str, ...], str | None]:
    if len(values) > 2:
        parser.error("argument --offload: expected KIND or disk DIR")
    kinds = []
    for kind in values[0].split(","):
        kind = kind.strip()
        if kind not in OFFLOADS:
            parser.error(f"argument --offload: unknown kind {kind!r} (choose from none, cpu, disk)")
        if kind not in kinds:
            kinds.append(kind)
    if len(values) == 2:
        if "disk" not in kinds:
            parser.error("argument --offload: a folder goes with disk only (--offload disk DIR)")
        folder = values[1]
    if "disk" in kinds:
        if not folder:
            parser.error("argument --offload: disk needs a folder: --offload disk DIR")
        problem = _writable_folder(folder)
        if problem:
            parser.error(f"argument --offload: cannot write offload files in {folder!r}: {problem}")
    return tuple(kinds), folder


def _resolve_ranks(
    parser: argparse.ArgumentParser, requested: str, world_size: int | None
) -> tuple[int, str, str]:
    """(world size, backend, device). NCCL needs one GPU per rank on this machine; gloo runs on
    the CPU. Without ``--world-size``: one rank per GPU when there are GPUs, else 4 on the CPU."""
    import torch
    import torch.distributed as dist

    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    nccl = dist.is_available() and dist.is_nccl_available()
    if world_size is None:
        world_size = gpus if gpus and nccl and requested != "gloo" else 4
    backend, device = _backend(parser, requested, world_size, gpus, nccl)
    return world_size, backend, device


def _backend(
    parser: argparse.ArgumentParser, requested: str, world_size: int, gpus: int, nccl: bool
) -> tuple[str, str]:
    local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", world_size))
    if requested == "gloo":
        return "gloo", "cpu"
    if requested == "nccl":
        if not (gpus and nccl):
            parser.error(
                "argument --backend: nccl needs CUDA GPUs and a torch built with NCCL; found none"
            )
        if gpus < local_ranks:
            parser.error(
                f"argument --backend: nccl needs one GPU per rank (it refuses two ranks on one GPU): "
                f"{local_ranks} ranks, {gpus} GPU(s)"
            )
        return "nccl", "cuda"
    if gpus and nccl and gpus >= local_ranks:
        return "nccl", "cuda"
    if gpus and int(os.environ.get("RANK", 0)) == 0:
        print(
            f"note: {local_ranks} ranks need {local_ranks} GPUs, found {gpus}: running on the CPU with gloo "
            f"(--world-size {gpus} runs on the GPU{'s' if gpus > 1 else ''})",
            file=sys.stderr,
        )
    return "gloo", "cpu"


def parse_config(argv: list[str] | None = None) -> tuple[argparse.Namespace, DemoConfig]:
    """The validated configuration; ``parser.error`` (exit 2) on anything wrong."""
    parser = build_parser()
    args = parser.parse_args(argv)
    torchrun_size = os.environ.get("WORLD_SIZE") if "RANK" in os.environ else None
    world_size = args.world_size
    if torchrun_size is not None:
        if world_size is not None and world_size != int(torchrun_size):
            parser.error(
                f"argument --world-size: {world_size} does not match torchrun's WORLD_SIZE {torchrun_size}"
            )
        world_size = int(torchrun_size)
    for name in (
        "world_size",
        "steps",
        "micro_batch",
        "threads",
        "layers",
        "hidden",
        "heads",
        "vocab",
        "seq_len",
        "sub_group_size",
    ):
        _positive(
            parser,
            name.replace("_", "-"),
            world_size if name == "world_size" else getattr(args, name),
        )
    if args.bucket_size < 0:
        parser.error(f"argument --bucket-size: must be 0 or more, got {args.bucket_size}")
    if not (args.lr > 0 and math.isfinite(args.lr)):
        parser.error(f"argument --lr: must be positive and finite, got {args.lr}")
    if not 0 <= args.seed <= MAX_SEED:
        parser.error(f"argument --seed: must be between 0 and {MAX_SEED}, got {args.seed}")
    stages = _stages(parser, args.stages)
    grad_accums = []
    for item in args.grad_accum.split(","):
        if not item.strip().isdigit() or int(item) < 1:
            parser.error(
                f"argument --grad-accum: {item.strip()!r} is not a whole number of at least 1"
            )
        if int(item) not in grad_accums:
            grad_accums.append(int(item))
    offloads, offload_dir = _offloads(parser, args.offload, args.offload_dir)
    preset = MODEL_PRESETS[args.model_size]
    overrides = {
        k: getattr(args, k)
        for k in ("layers", "hidden", "heads", "vocab", "seq_len")
        if getattr(args, k)
    }
    try:
        model = ModelConfig(**{**preset.__dict__, **overrides})
    except ValueError as exc:
        parser.error(f"model: {exc}")
    if args.chart and Path(args.chart).suffix.lower() not in CHART_SUFFIXES:
        parser.error(f"argument --chart: {args.chart!r} must end in .png or .svg")
    for name, path in (("chart", args.chart), ("record", args.record)):
        if path:
            problem = _can_create(path)
            if problem:
                parser.error(f"argument --{name}: cannot write {path!r}: {problem}")
    if not Path(args.card).is_file():
        parser.error(f"the card {args.card!r} is missing: the demo reads its formulas from it")
    world_size, backend, device = _resolve_ranks(parser, args.backend, world_size)
    cfg = DemoConfig(
        world_size=world_size,
        stages=stages,
        offloads=offloads,
        offload_dir=offload_dir,
        dtype=args.dtype,
        steps=args.steps,
        micro_batch=args.micro_batch,
        model=model,
        optim=OptimConfig(lr=args.lr),
        backend=backend,
        device=device,
        seed=args.seed,
        threads=args.threads,
        sub_group_size=args.sub_group_size,
        fused_adam=args.fused_adam,
        audit=args.audit,
        overlap=args.overlap,
        bucket_size=args.bucket_size,
        checkpoint_activations=args.checkpoint_activations,
        grad_accums=tuple(grad_accums),
        compare=args.compare,
        progress=args.progress,
        card_path=args.card,
    )
    return args, cfg


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args, cfg = parse_config(argv)
    from .card import CardFormulaError, CardFormulas

    try:
        card = CardFormulas(cfg.card_path)
    except CardFormulaError as exc:
        build_parser().error(f"cannot read the card's formulas: {exc}")

    from torch.multiprocessing import ProcessExitedException, ProcessRaisedException

    from .report import build_document, render_text, write_chart
    from .runner import launch

    try:
        raw = launch(cfg)
    except (ProcessRaisedException, ProcessExitedException) as exc:  # a rank raised, or died
        print(f"python -m app.zero_demo: error: a rank failed:\n{exc}", file=sys.stderr)
        return 1
    if raw is None:  # torchrun: ranks other than 0 report nothing
        return 0
    doc = build_document(raw, cfg, card)
    chart = str(write_chart(doc, args.chart)) if args.chart else None
    if args.record:
        record = {
            **doc,
            "command": shlex.join(["python", "-m", "app.zero_demo", *argv]),
            "recorded_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        Path(args.record).parent.mkdir(parents=True, exist_ok=True)
        Path(args.record).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        # The chart beside it, for the web page to embed (``charts.results_svg`` of the record).
        from .charts import results_svg

        Path(args.record).with_suffix(".svg").write_text(results_svg(record), encoding="utf-8")
    print(json.dumps(doc, indent=2) if args.json else render_text(doc, chart))
    return 0
