"""What the card pages show besides the card itself: the reference demo and its recorded results.

Results live in ``cards/demo-results/<card id>.json`` (written by the demo). The file is optional
and read leniently: a missing or malformed file, or missing fields, never break the card page.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.domain.cards import Card
from app.domain.messages import Message

log = logging.getLogger(__name__)

DEMO_RESULTS_DIR = "demo-results"


@dataclass(frozen=True)
class DemoCommand:
    label: Message  # where it runs, shown in the page's language
    command: str

    @property
    def where(self) -> str:
        """The label in English (the API's ``where``)."""
        return self.label.en


DEMO_COMMANDS = (
    DemoCommand(Message("CPU, 4 processes (gloo)"), "python -m app.zero_demo --world-size 4"),
    DemoCommand(
        Message("GPU, 8 ranks (torchrun, nccl)"), "torchrun --nproc-per-node 8 -m app.zero_demo"
    ),
    DemoCommand(
        Message("GPU, one process per device (nccl)"), "python -m app.zero_demo --backend nccl"
    ),
)


@dataclass(frozen=True)
class DemoRow:
    stage: str
    offload: str
    params: float | None
    grads: float | None
    optimizer: float | None
    resident: float | None
    offloaded: float | None
    total: float | None
    formula_bytes: float | None
    comm_elements: float | None
    final_loss: float | None
    reference_final_loss: float | None
    max_loss_gap: float | None  # largest |loss - reference loss| over the steps


@dataclass(frozen=True)
class DemoResults:
    psi: float | None
    world_size: int | None
    dtype: str | None
    backend: str | None
    device: str | None
    command: str | None
    recorded_at: str | None
    rows: tuple[DemoRow, ...]
    raw: dict[str, Any]


def demo_results_path(cards_dir: Path, card_id: str) -> Path:
    return cards_dir / DEMO_RESULTS_DIR / f"{card_id}.json"


def demo_chart(*, cards_dir: Path, card: Card) -> bytes | None:
    """The chart the demo drew beside its recorded results (SVG), or None."""
    path = cards_dir / DEMO_RESULTS_DIR / f"{card.id}.svg"
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if data.lstrip().startswith((b"<svg", b"<?xml")) else None


_SVG_SIZE = re.compile(rb'<svg\b[^>]*?\swidth="(\d+)"[^>]*?\sheight="(\d+)"')


def chart_size(chart: bytes) -> tuple[int, int] | None:
    """The width and height the chart declares (its ``<svg>`` attributes), for the page's
    ``<img>`` to keep its place before it loads; None when it declares none."""
    match = _SVG_SIZE.search(chart[:2000])
    return (int(match.group(1)), int(match.group(2))) if match else None


def load_demo_results(*, cards_dir: Path, card: Card) -> DemoResults | None:
    """The recorded demo results for ``card``, or None when there are none (or unreadable)."""
    path = demo_results_path(cards_dir, card.id)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("ignoring demo results %s: %s", path, exc)
        return None
    if not isinstance(raw, dict):
        log.warning("ignoring demo results %s: not a JSON object", path)
        return None
    results = raw.get("results")
    rows = (
        tuple(_row(item) for item in results if isinstance(item, dict))
        if isinstance(results, list)
        else ()
    )
    world_size = _number(raw.get("world_size"))
    return DemoResults(
        psi=_number(raw.get("psi")),
        world_size=int(world_size) if world_size is not None else None,
        dtype=_string(raw.get("dtype")),
        backend=_string(raw.get("backend")),
        device=_string(raw.get("device")),
        command=_string(raw.get("command")),
        recorded_at=_string(raw.get("recorded_at")),
        rows=rows,
        raw=raw,
    )


def _row(item: dict[str, Any]) -> DemoRow:
    sizes = item.get("bytes_per_rank")
    sizes = sizes if isinstance(sizes, dict) else {}
    losses = _numbers(item.get("losses"))
    reference = _numbers(item.get("reference_losses"))
    gap = None
    if losses and reference:
        gap = max(abs(a - b) for a, b in zip(losses, reference, strict=False))
    offload = item.get("offload")
    return DemoRow(
        stage=str(item.get("stage", "?")),
        offload="—"
        if offload in (None, False, "", "none")
        else str(offload if offload is not True else "yes"),
        params=_number(sizes.get("params")),
        grads=_number(sizes.get("grads")),
        optimizer=_number(sizes.get("optimizer")),
        resident=_number(sizes.get("resident")),
        offloaded=_number(sizes.get("offloaded")),
        total=_number(sizes.get("total")),
        formula_bytes=_number(item.get("formula_bytes_per_rank")),
        comm_elements=_number(item.get("comm_elements_per_rank_per_step")),
        final_loss=losses[-1] if losses else None,
        reference_final_loss=reference[-1] if reference else None,
        max_loss_gap=gap,
    )


def _number(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _numbers(value: object) -> list[float]:
    if not isinstance(value, list):
        return []
    numbers = [_number(v) for v in value]
    return [n for n in numbers if n is not None]


def _string(value: object) -> str | None:
    return None if value is None else str(value)
