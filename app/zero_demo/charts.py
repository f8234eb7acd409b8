"""The demo's results as an SVG chart, from the JSON document alone: no torch, no matplotlib.

``results_svg(doc)`` takes what ``--json`` prints (or what ``--record`` saved) and returns SVG
text with up to three panels, each one skipped when the document lacks its figures (older
recordings have only the first):

1. model-state memory per rank for each run, stacked by term (parameters, gradients, optimizer
   states; the offloaded part paler), with a black tick at the card's formula;
2. the peak of each phase of a step (forward, backward, optimizer step) and the collective
   buffers;
3. where a step's time goes (compute, each kind of collective, Adam, copies, disk), stacked.

Only the standard library: the web page can import this module (``app.zero_demo`` itself imports
no torch) and embed the text as it is. Every label is escaped; numbers that are missing or not
numbers are drawn as zero.
"""

from __future__ import annotations

from html import escape

TERM_COLORS = {"params": "#4C72B0", "grads": "#DD8452", "optimizer": "#55A868"}
PHASE_COLORS = {
    "forward": "#4C72B0",
    "backward": "#C44E52",
    "optimizer": "#55A868",
    "comm_buffers": "#8172B3",
}
PHASE_LABELS = {
    "forward": "forward",
    "backward": "backward",
    "optimizer": "optimizer step",
    "comm_buffers": "collective buffers",
}
SPAN_COLORS = {
    "compute": "#4C72B0",
    "comm.all_reduce": "#C44E52",
    "comm.reduce_scatter": "#DD8452",
    "comm.all_gather": "#CCB974",
    "comm.control": "#BBBBBB",
    "adam": "#55A868",
    "copies": "#8172B3",
    "disk": "#937860",
}
SPAN_LABELS = {
    "compute": "compute",
    "comm.all_reduce": "all-reduce",
    "comm.reduce_scatter": "reduce-scatter",
    "comm.all_gather": "all-gather",
    "comm.control": "control collectives",
    "adam": "Adam",
    "copies": "host-device copies",
    "disk": "disk paging",
}

_PANEL_H = 230
_PLOT_H = 150
_LEFT = 70
_BAR_W = 26
_GROUP_GAP = 18


def _num(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if value == value and abs(value) != float("inf") else 0.0


def _label(r: dict) -> str:
    name = str(r.get("name") or f"stage {r.get('stage', '?')}")
    offload = r.get("offload")
    return name if offload in (None, "none") else f"{name} ({offload})"


def _nice_max(value: float) -> float:
    """A round axis maximum at or above ``value``."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** len(str(int(value))) / 10 if value >= 1 else 1.0
    for step in (1, 2, 2.5, 5, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10 * magnitude


class _Panel:
    def __init__(
        self, top: float, title: str, unit: str, maximum: float, groups: int, per_group: int
    ):
        self.top, self.unit, self.maximum = top, unit, _nice_max(maximum)
        self.group_w = per_group * _BAR_W + _GROUP_GAP
        self.width = _LEFT + groups * self.group_w + 20
        self.parts = [
            f'<text x="{_LEFT}" y="{top + 16}" font-size="13" font-weight="bold">{escape(title)}</text>'
        ]
        base = self.y(0)
        for i in range(5):
            v = self.maximum * i / 4
            y = self.y(v)
            self.parts.append(
                f'<line x1="{_LEFT}" y1="{y:.1f}" x2="{self.width - 10}" y2="{y:.1f}" stroke="#e5e5e5"/>'
                f'<text x="{_LEFT - 6}" y="{y + 4:.1f}" font-size="10" text-anchor="end">{v:g}</text>'
            )
        self.parts.append(
            f'<text x="14" y="{top + 30 + _PLOT_H / 2:.1f}" font-size="10" '
            f'transform="rotate(-90 14 {top + 30 + _PLOT_H / 2:.1f})" text-anchor="middle">{escape(unit)}</text>'
            f'<line x1="{_LEFT}" y1="{base:.1f}" x2="{self.width - 10}" y2="{base:.1f}" stroke="#333"/>'
        )

    def y(self, value: float) -> float:
        return self.top + 30 + _PLOT_H * (1 - min(value, self.maximum) / self.maximum)

    def x(self, group: int, bar: int = 0) -> float:
        return _LEFT + _GROUP_GAP / 2 + group * self.group_w + bar * _BAR_W

    def rect(
        self, x: float, low: float, high: float, color: str, title: str, pale: bool = False
    ) -> None:
        y0, y1 = self.y(high), self.y(low)
        opacity = ' fill-opacity="0.45"' if pale else ""
        self.parts.append(
            f'<rect x="{x:.1f}" y="{y0:.1f}" width="{_BAR_W - 4}" height="{max(y1 - y0, 0):.1f}" '
            f'fill="{color}"{opacity}><title>{escape(title)}</title></rect>'
        )

    def tick(self, group: int, bars: int, value: float, title: str) -> None:
        y = self.y(value)
        x0, x1 = self.x(group) - 3, self.x(group, bars) - 1
        self.parts.append(
            f'<line x1="{x0:.1f}" y1="{y:.1f}" x2="{x1:.1f}" y2="{y:.1f}" stroke="black" stroke-width="2">'
            f"<title>{escape(title)}</title></line>"
        )

    def group_label(self, group: int, bars: int, text: str) -> None:
        x = (self.x(group) + self.x(group, bars)) / 2 - 2
        y = self.top + 30 + _PLOT_H + 14
        self.parts.append(
            f'<text x="{x:.1f}" y="{y:.1f}" font-size="10" text-anchor="middle">{escape(text)}</text>'
        )

    def legend(self, items: list[tuple[str, str]], x: float) -> None:
        for i, (label, color) in enumerate(items):
            y = self.top + 34 + 14 * i
            self.parts.append(
                f'<rect x="{x:.1f}" y="{y - 9}" width="10" height="10" fill="{color}"/>'
                f'<text x="{x + 14:.1f}" y="{y}" font-size="10">{escape(label)}</text>'
            )


def _memory_panel(results: list[dict], top: float) -> _Panel:
    totals = [
        max(
            sum(_num((r.get("bytes_per_rank") or {}).get(t)) for t in TERM_COLORS),
            _num(r.get("formula_bytes_per_rank")),
        )
        for r in results
    ]
    panel = _Panel(top, "Model-state memory per rank, by term (black: the card's formula)", "MB",
                   max(totals, default=0) / 1e6, len(results), 1)  # fmt: skip
    for g, r in enumerate(results):
        held = r.get("bytes_per_rank") or {}
        items = r.get("inventory_items") or []
        offloaded = {
            i.get("term") for i in items if isinstance(i, dict) and i.get("tier") != "device"
        }
        bottom = 0.0
        for term, color in TERM_COLORS.items():
            mb = _num(held.get(term)) / 1e6
            where = "offloaded" if term in offloaded else "on the device"
            panel.rect(panel.x(g), bottom, bottom + mb, color, f"{_label(r)}: {term} {mb:,.2f} MB ({where})",
                       pale=term in offloaded)  # fmt: skip
            bottom += mb
        formula = _num(r.get("formula_bytes_per_rank")) / 1e6
        panel.tick(
            g, 1, formula, f"{_label(r)}: card formula {r.get('formula', '')} = {formula:,.2f} MB"
        )
        panel.group_label(g, 1, _label(r))
    panel.legend([(t, c) for t, c in TERM_COLORS.items()], panel.width)
    return panel


def _phase_panel(results: list[dict], top: float) -> _Panel:
    phases = [
        p for p in PHASE_COLORS if any(p in (r.get("phase_peak_bytes") or {}) for r in results)
    ]
    peak = max(
        (_num((r.get("phase_peak_bytes") or {}).get(p)) for r in results for p in phases), default=0
    )
    kind = results[0].get("phase_peak_kind")
    what = "GPU max allocated" if kind == "cuda_max_memory_allocated" else "tracked CPU bytes"
    panel = _Panel(top, f"Peak memory per rank by phase of a step ({what})", "MB", peak / 1e6,
                   len(results), len(phases))  # fmt: skip
    for g, r in enumerate(results):
        peaks = r.get("phase_peak_bytes") or {}
        for b, p in enumerate(phases):
            mb = _num(peaks.get(p)) / 1e6
            panel.rect(
                panel.x(g, b),
                0,
                mb,
                PHASE_COLORS[p],
                f"{_label(r)}: {PHASE_LABELS[p]} {mb:,.2f} MB",
            )
        panel.group_label(g, len(phases), _label(r))
    panel.legend([(PHASE_LABELS[p], PHASE_COLORS[p]) for p in phases], panel.width)
    return panel


def _time_panel(results: list[dict], top: float) -> _Panel:
    spans = [s for s in SPAN_COLORS if any(s in (r.get("time_breakdown_s") or {}) for r in results)]
    totals = [
        sum(_num((r.get("time_breakdown_s") or {}).get(s)) for s in spans) * 1e3 for r in results
    ]
    panel = _Panel(top, "Time per step, by span", "ms", max(totals, default=0), len(results), 1)
    for g, r in enumerate(results):
        t = r.get("time_breakdown_s") or {}
        bottom = 0.0
        for s in spans:
            ms = _num(t.get(s)) * 1e3
            panel.rect(
                panel.x(g),
                bottom,
                bottom + ms,
                SPAN_COLORS[s],
                f"{_label(r)}: {SPAN_LABELS[s]} {ms:,.1f} ms",
            )
            bottom += ms
        panel.group_label(g, 1, _label(r))
    panel.legend([(SPAN_LABELS[s], SPAN_COLORS[s]) for s in spans], panel.width)
    return panel


def results_svg(doc: dict) -> str:
    """The chart of a results document (``--json`` output or a ``--record`` file) as SVG text."""
    results = (
        [r for r in (doc.get("results") or []) if isinstance(r, dict)]
        if isinstance(doc, dict)
        else []
    )
    panels: list[_Panel] = []
    top = 40.0
    builders = [_memory_panel]
    if any(r.get("phase_peak_bytes") for r in results):
        builders.append(_phase_panel)
    if any(r.get("time_breakdown_s") for r in results):
        builders.append(_time_panel)
    if results:
        for build in builders:
            panels.append(build(results, top))
            top += _PANEL_H
    width = max((p.width for p in panels), default=400) + 150
    height = top + 10
    title = "ZeRO demo"
    if isinstance(doc, dict) and doc.get("psi"):
        title += (
            f": Ψ = {_num(doc.get('psi')):,.0f}, N_d = {escape(str(doc.get('world_size', '?')))}, "
            f"{escape(str(doc.get('dtype', '')))}, {escape(str(doc.get('device', '')))}"
        )
    body = "".join(part for p in panels for part in p.parts)
    if not results:
        body = '<text x="20" y="60" font-size="12">No results recorded.</text>'
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}" '
        f'viewBox="0 0 {width:.0f} {height:.0f}" font-family="sans-serif" role="img">'
        f"<title>{escape(title)}</title>"
        f'<text x="{_LEFT}" y="22" font-size="14" font-weight="bold">{escape(title)}</text>'
        f"{body}</svg>\n"
    )
