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

# The chart is drawn narrow, bars across, so that a phone shows it near its own size (360 units
# wide at about 1:1 on a 390 px screen: the smallest text, 11 units, stays about 11 px tall) and a
# desktop scales it up; labels sit on their own line above each bar, so they never overlap.
WIDTH = 360
_MARGIN = 8
_PLOT_W = WIDTH - 2 * _MARGIN
_TEXT = 11  # labels, ticks, legend
_HEADING = 12  # a panel's title
_CHAR_W = 0.6  # average advance of a sans-serif character, in ems (for wrapping)
_BAR_H = 14
_THIN_BAR_H = 8  # one bar per phase
_ROW_GAP = 8


def _num(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    return float(value) if value == value and abs(value) != float("inf") else 0.0


def _label(r: dict) -> str:
    name = str(r.get("name") or f"stage {r.get('stage', '?')}")
    offload = r.get("offload")
    return name if offload in (None, "none") else f"{name} ({offload})"


def _nice_max(value: float) -> float:
    """A round axis maximum at or above ``value``, whose quarters (the ticks) are round too."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** len(str(int(value))) / 10 if value >= 1 else 1.0
    for step in (1, 1.2, 1.6, 2, 2.4, 3, 4, 6, 8, 10):
        if value <= step * magnitude:
            return step * magnitude
    return 10 * magnitude


def _wrap(text: str, size: float, width: float = _PLOT_W) -> list[str]:
    """``text`` in lines that fit ``width`` at font ``size`` (by the average character width)."""
    most = max(8, int(width / (size * _CHAR_W)))
    lines: list[str] = []
    for word in text.split():
        if lines and len(lines[-1]) + 1 + len(word) <= most:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return lines or [""]


def _text(x: float, y: float, text: str, size: float = _TEXT, extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}"{extra}>{escape(text)}</text>'


class _Panel:
    """One panel: a title, a legend, an axis across the top, then one row of bars per run."""

    def __init__(self, top: float, title: str, unit: str, maximum: float) -> None:
        self.unit, self.maximum = unit, _nice_max(maximum)
        self.parts: list[str] = []
        y = top
        for line in _wrap(title, _HEADING):
            y += _HEADING + 4
            self.parts.append(_text(_MARGIN, y, line, _HEADING, ' font-weight="bold"'))
        self.y = y + 6  # where the next element starts
        self.rows_top = 0.0

    def legend(self, items: list[tuple[str, str]]) -> None:
        x, y = float(_MARGIN), self.y + _TEXT
        for label, color in items:
            width = 14 + len(label) * _TEXT * _CHAR_W + 12
            if x > _MARGIN and x + width > WIDTH - _MARGIN:
                x, y = float(_MARGIN), y + _TEXT + 6
            self.parts.append(
                f'<rect x="{x:.1f}" y="{y - 9:.1f}" width="10" height="10" fill="{color}"/>'
                + _text(x + 14, y, label)
            )
            x += width
        self.y = y + 8

    def axis(self) -> None:
        """Tick values across the top (the unit after the last) and grid lines down the rows."""
        self.y += _TEXT + 2
        for i in range(5):
            value = self.maximum * i / 4
            x = self.x(value)
            text = f"{value:g}" + (f" {self.unit}" if i == 4 else "")
            anchor = "start" if i == 0 else "end" if i == 4 else "middle"
            self.parts.append(_text(x, self.y, text, extra=f' text-anchor="{anchor}"'))
        self.y += 6
        self.rows_top = self.y

    def x(self, value: float) -> float:
        return _MARGIN + _PLOT_W * min(max(value, 0.0), self.maximum) / self.maximum

    def row(self, label: str, note: str, bars: int = 1) -> list[float]:
        """A run's row: its label (and a note at the right) on a line, then the tops of its
        ``bars`` bars."""
        self.y += _TEXT + 2
        self.parts.append(_text(_MARGIN, self.y, label))
        if note:
            self.parts.append(_text(WIDTH - _MARGIN, self.y, note, extra=' text-anchor="end"'))
        self.y += 4
        height = _BAR_H if bars == 1 else _THIN_BAR_H
        tops = [self.y + i * (height + 1) for i in range(bars)]
        self.y = tops[-1] + height + _ROW_GAP
        return tops

    def rect(self, top: float, low: float, high: float, color: str, title: str,
             pale: bool = False, height: float = _BAR_H) -> None:  # fmt: skip
        x0, x1 = self.x(low), self.x(high)
        opacity = ' fill-opacity="0.45"' if pale else ""
        self.parts.append(
            f'<rect x="{x0:.1f}" y="{top:.1f}" width="{max(x1 - x0, 0):.1f}" height="{height}" '
            f'fill="{color}"{opacity}><title>{escape(title)}</title></rect>'
        )

    def tick(self, top: float, value: float, title: str) -> None:
        x = self.x(value)
        self.parts.append(
            f'<line x1="{x:.1f}" y1="{top - 3:.1f}" x2="{x:.1f}" y2="{top + _BAR_H + 3:.1f}" '
            f'stroke="black" stroke-width="2"><title>{escape(title)}</title></line>'
        )

    def finish(self) -> float:
        """Draw the grid under the rows; the y where the next panel may start."""
        grid = "".join(
            f'<line x1="{self.x(self.maximum * i / 4):.1f}" y1="{self.rows_top:.1f}" '
            f'x2="{self.x(self.maximum * i / 4):.1f}" y2="{self.y:.1f}" stroke="#e5e5e5"/>'
            for i in range(5)
        )
        self.parts.insert(0, grid)
        return self.y + 14


def _memory_panel(results: list[dict], top: float) -> _Panel:
    totals = [
        max(
            sum(_num((r.get("bytes_per_rank") or {}).get(t)) for t in TERM_COLORS),
            _num(r.get("formula_bytes_per_rank")),
        )
        for r in results
    ]
    panel = _Panel(top, "Model-state memory per rank, by term (black: the card's formula)", "MB",
                   max(totals, default=0) / 1e6)  # fmt: skip
    panel.legend([(t, c) for t, c in TERM_COLORS.items()] + [("offloaded: paler", "#bbbbbb")])
    panel.axis()
    for r in results:
        held = r.get("bytes_per_rank") or {}
        items = r.get("inventory_items") or []
        offloaded = {
            i.get("term") for i in items if isinstance(i, dict) and i.get("tier") != "device"
        }
        total = sum(_num(held.get(term)) for term in TERM_COLORS) / 1e6
        (bar,) = panel.row(_label(r), f"{total:,.2f} MB")
        bottom = 0.0
        for term, color in TERM_COLORS.items():
            mb = _num(held.get(term)) / 1e6
            where = "offloaded" if term in offloaded else "on the device"
            panel.rect(bar, bottom, bottom + mb, color, f"{_label(r)}: {term} {mb:,.2f} MB ({where})",
                       pale=term in offloaded)  # fmt: skip
            bottom += mb
        formula = _num(r.get("formula_bytes_per_rank")) / 1e6
        panel.tick(
            bar, formula, f"{_label(r)}: card formula {r.get('formula', '')} = {formula:,.2f} MB"
        )
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
    panel = _Panel(top, f"Peak memory per rank by phase of a step ({what})", "MB", peak / 1e6)
    panel.legend([(PHASE_LABELS[p], PHASE_COLORS[p]) for p in phases])
    panel.axis()
    for r in results:
        peaks = r.get("phase_peak_bytes") or {}
        highest = max((_num(peaks.get(p)) for p in phases), default=0) / 1e6
        tops = panel.row(_label(r), f"peak {highest:,.2f} MB", bars=len(phases))
        for bar, p in zip(tops, phases, strict=True):
            mb = _num(peaks.get(p)) / 1e6
            panel.rect(bar, 0, mb, PHASE_COLORS[p], f"{_label(r)}: {PHASE_LABELS[p]} {mb:,.2f} MB",
                       height=_THIN_BAR_H)  # fmt: skip
    return panel


def _time_panel(results: list[dict], top: float) -> _Panel:
    spans = [s for s in SPAN_COLORS if any(s in (r.get("time_breakdown_s") or {}) for r in results)]
    totals = [
        sum(_num((r.get("time_breakdown_s") or {}).get(s)) for s in spans) * 1e3 for r in results
    ]
    panel = _Panel(top, "Time per step, by span", "ms", max(totals, default=0))
    panel.legend([(SPAN_LABELS[s], SPAN_COLORS[s]) for s in spans])
    panel.axis()
    for r, total in zip(results, totals, strict=True):
        t = r.get("time_breakdown_s") or {}
        (bar,) = panel.row(_label(r), f"{total:,.1f} ms")
        bottom = 0.0
        for s in spans:
            ms = _num(t.get(s)) * 1e3
            panel.rect(
                bar,
                bottom,
                bottom + ms,
                SPAN_COLORS[s],
                f"{_label(r)}: {SPAN_LABELS[s]} {ms:,.1f} ms",
            )
            bottom += ms
    return panel


def results_svg(doc: dict) -> str:
    """The chart of a results document (``--json`` output or a ``--record`` file) as SVG text,
    :data:`WIDTH` units wide, its panels one under another."""
    results = (
        [r for r in (doc.get("results") or []) if isinstance(r, dict)]
        if isinstance(doc, dict)
        else []
    )
    title = "ZeRO demo"
    if isinstance(doc, dict) and doc.get("psi"):
        title += (
            f": Ψ = {_num(doc.get('psi')):,.0f}, N_d = {doc.get('world_size', '?')}, "
            f"{doc.get('dtype', '')}, {doc.get('device', '')}"
        )
    heading = []
    top = 0.0
    for line in _wrap(title, 13):
        top += 13 + 5
        heading.append(_text(_MARGIN, top, line, 13, ' font-weight="bold"'))
    top += 8
    panels: list[_Panel] = []
    builders = [_memory_panel]
    if any(r.get("phase_peak_bytes") for r in results):
        builders.append(_phase_panel)
    if any(r.get("time_breakdown_s") for r in results):
        builders.append(_time_panel)
    if results:
        for build in builders:
            panel = build(results, top)
            top = panel.finish()
            panels.append(panel)
    body = "".join(part for p in panels for part in p.parts)
    if not results:
        body = _text(_MARGIN, top + 16, "No results recorded.", 12)
        top += 30
    height = top + 4
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height:.0f}" '
        f'viewBox="0 0 {WIDTH} {height:.0f}" font-family="sans-serif" role="img">'
        f"<title>{escape(title)}</title>"
        f'<rect width="{WIDTH}" height="{height:.0f}" fill="#fff"/>'
        f"{''.join(heading)}{body}</svg>\n"
    )
