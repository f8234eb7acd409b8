"""Item analysis of a card from its learners' first attempts: distractor analysis by misconception.

Plain Python (no database, no web): :func:`analyse` takes attempt rows (:class:`AttemptRow`) and
returns a :class:`CardAnalytics`; :func:`pitfall_bars_svg` and :func:`facility_discrimination_svg`
draw its two charts as SVG text (no script; every label escaped; colours as attributes, not
``style``, so the pages' CSP allows them; text in ``currentColor`` so dark mode reads).

Definitions (classical test theory as Moodle computes it, adapted to a practice service):

* **First attempts.** Rows are first answers to a generated question (``Attempt.first_answer``:
  a second try at the same variant after its feedback is not counted), in chronological order.
  Scope ``"first_answers"`` (the default) counts every such answer, so a learner who met a
  template in five variants counts five times; scope ``"earliest"`` keeps only each learner's
  earliest answer to each template (Moodle's "first attempt": unaffected by reviews, which bring
  back what a learner got wrong).
* **Facility** = share right among those attempts (Moodle's mean score / max score for one-mark
  items).
* **Discrimination** = Pearson's r between a learner's *item score* and *rest score*, over the
  learners who have both (Moodle's corrected item-rest correlation, reported as r in [-1, 1];
  Moodle shows 100·r). A practice service has no fixed test: learners answer different subsets,
  so "the rest of the test" is defined as

  - for a **template**: item score = the learner's facility on that template (0 or 1 in scope
    ``"earliest"``); rest score = the learner's facility on all their counted attempts at the
    card's OTHER templates (pooled: right / answered), and a learner counts only when that rest
    holds at least ``Thresholds.min_rest_attempts`` attempts;
  - for an **exam point**: the same with the point's templates as the item and the card's other
    exam points as the rest;
  - for a **parameter value** of a template (e.g. ``n_d = 64``): item score = the learner's
    facility on that template's variants with that value; rest = the template's rest (the card's
    other templates).

  The item never enters its own rest (that is what "corrected" means). r is ``None`` with fewer
  than ``Thresholds.min_learners`` such learners, or when either score does not vary.
* **Selection rate** of a pitfall = times picked / times shown, over the variants where it was one
  of the choices (attempts store the choices shown; a template has more pitfalls than wrong
  choices, so each variant shows a subset). ``share_of_wrong`` = picked / wrong answers.
* **Median time** = the median of ``duration_ms`` over the attempts that have one.

Flags (thresholds in :class:`Thresholds`):

* ``unpicked_pitfall``: a template's pitfall shown at least ``min_showings`` times, never picked
  (not raised for a template where nobody was ever wrong: ``everyone_right`` says it);
* ``negative_discrimination``: a template whose discrimination is below zero with confidence:
  its 95 % confidence interval (Fisher's z: ``tanh(atanh(r) ± 1.96 / sqrt(n - 3))`` over the
  ``n`` learners of the correlation, :func:`discrimination_interval`) lies wholly below zero (a
  discrimination exists only with ``min_learners`` learners that have a rest score; on 19
  learners r = -0.3 is noise, its interval -0.67 to +0.18);
* ``everyone_right``: a template with at least ``min_attempts`` attempts by at least
  ``min_learners`` learners, all right.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from html import escape
from operator import mul
from statistics import median
from typing import Literal, NamedTuple, Protocol

Scope = Literal["first_answers", "earliest"]
SCOPES: tuple[Scope, ...] = ("first_answers", "earliest")
FlagKind = Literal["unpicked_pitfall", "negative_discrimination", "everyone_right"]


class AttemptRow(NamedTuple):
    """One first answer, with what analytics needs (the choices shown as their pitfall ids)."""

    learner_id: str
    point: str
    template_id: str
    template_version: int
    correct: bool
    pitfall_id: str | None  # the pitfall picked; None when right
    duration_ms: int | None
    # Exact parameter values as strings, as (name, value) pairs: hashable, so that rows of the
    # same variant's values share one key (give equal pairs the same order).
    params: tuple[tuple[str, str], ...]
    shown: tuple[str, ...]  # the pitfall ids of the wrong choices shown


class TemplateOutline(NamedTuple):
    """A template as the card now has it: analytics lists it (and its pitfalls) even unanswered."""

    template_id: str
    point: str
    version: int
    pitfall_ids: tuple[str, ...]
    param_names: tuple[str, ...] = ()


@dataclass(frozen=True)
class Thresholds:
    min_rest_attempts: int = 3  # attempts at the rest of the card for a learner's rest score
    min_learners: int = 5  # learners for a discrimination, and for "everyone right"
    min_showings: int = 20  # showings before "nobody picks this pitfall" is a flag
    min_attempts: int = 10  # attempts before "everyone gets this right" is a flag


DEFAULT_THRESHOLDS = Thresholds()


@dataclass(frozen=True)
class Stats:
    attempts: int
    learners: int
    right: int
    facility: float | None
    discrimination: float | None
    discrimination_learners: int  # learners with an item and a rest score
    median_ms: float | None
    timed: int  # attempts with a duration
    # The discrimination's 95 % confidence interval (:func:`discrimination_interval`).
    discrimination_low: float | None = None
    discrimination_high: float | None = None


@dataclass(frozen=True)
class PitfallStats:
    pitfall_id: str
    shown: int
    picked: int
    rate: float | None  # picked / shown
    share_of_wrong: float | None  # picked / wrong answers (of the group)


@dataclass(frozen=True)
class ParamValueStats:
    name: str
    value: str
    stats: Stats
    pitfalls: tuple[PitfallStats, ...]


@dataclass(frozen=True)
class TemplateAnalytics:
    template_id: str
    point: str
    stats: Stats
    pitfalls: tuple[PitfallStats, ...]
    params: tuple[ParamValueStats, ...]  # by name, then value (numerically when numbers)
    versions: tuple[int, ...]  # template versions counted
    flags: tuple[FlagKind, ...] = ()


@dataclass(frozen=True)
class PointAnalytics:
    point: str
    stats: Stats
    template_ids: tuple[str, ...]


@dataclass(frozen=True)
class MisconceptionStats:
    """A pitfall id over the whole card (the same misconception may appear in several templates)."""

    pitfall_id: str
    shown: int
    picked: int
    rate: float | None
    template_ids: tuple[str, ...]


@dataclass(frozen=True)
class Flag:
    kind: FlagKind
    template_id: str
    pitfall_id: str | None = None
    value: float | None = None  # the discrimination, the facility, or the showings


@dataclass(frozen=True)
class CardAnalytics:
    card_id: str
    scope: Scope
    stats: Stats
    points: tuple[PointAnalytics, ...]
    templates: tuple[TemplateAnalytics, ...]
    misconceptions: tuple[MisconceptionStats, ...]
    flags: tuple[Flag, ...]
    thresholds: Thresholds
    excluded_versions: int = 0  # rows left out because their template version was not asked for

    def template(self, template_id: str) -> TemplateAnalytics | None:
        for template in self.templates:
            if template.template_id == template_id:
                return template
        return None


# --- statistics -------------------------------------------------------------------------------


def pearson(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Pearson's r; None with fewer than two pairs or a score that does not vary."""
    n = len(xs)
    if n != len(ys) or n < 2:
        return None
    mx = math.fsum(xs) / n
    my = math.fsum(ys) / n
    dx = [x - mx for x in xs]
    dy = [y - my for y in ys]
    sxx = math.fsum(map(mul, dx, dx))
    syy = math.fsum(map(mul, dy, dy))
    if sxx <= 1e-15 or syy <= 1e-15:
        return None
    return max(-1.0, min(1.0, math.fsum(map(mul, dx, dy)) / math.sqrt(sxx * syy)))


# The normal quantile of a two-sided 95 % confidence interval.
CONFIDENCE_Z = 1.959963984540054


def discrimination_interval(r: float | None, n: int) -> tuple[float, float] | None:
    """The 95 % confidence interval of a correlation ``r`` over ``n`` learners, by Fisher's z
    transformation (``atanh(r)`` is about normal with standard error ``1 / sqrt(n - 3)``); None
    without a correlation or with fewer than 4 learners."""
    if r is None or n < 4:
        return None
    z = math.atanh(max(-0.999999, min(0.999999, r)))
    half = CONFIDENCE_Z / math.sqrt(n - 3)
    return math.tanh(z - half), math.tanh(z + half)


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def _value_key(value: str) -> tuple[int, float, str]:
    try:
        return (0, float(Fraction(value)), value)
    except (ValueError, ZeroDivisionError):
        return (1, 0.0, value)


_ONE = 1 << 32  # one attempt, in a packed count (attempts << 32 | right)
_RIGHT = _ONE + 1  # one attempt, right
_RIGHT_MASK = _ONE - 1


class _Group:
    """Counts of a group of attempts: right, learners, durations, pitfalls shown and picked."""

    __slots__ = ("n", "right", "learners", "durations", "shown", "picked")

    def __init__(self) -> None:
        self.n = 0
        self.right = 0
        self.learners: set[str] = set()
        self.durations: list[int] = []
        self.shown: dict[str, int] = {}
        self.picked: dict[str, int] = {}

    def add(
        self, count: int, correct: bool, pitfall_id: str | None, shown: tuple[str, ...]
    ) -> None:
        """``count`` attempts that all showed ``shown`` and were answered alike."""
        self.n += count
        seen = self.shown
        for shown_id in shown:
            seen[shown_id] = seen.get(shown_id, 0) + count
        if correct:
            self.right += count
        elif pitfall_id is not None:
            self.picked[pitfall_id] = self.picked.get(pitfall_id, 0) + count
            if pitfall_id not in shown:  # inconsistent data: keep the rate at most 1
                seen[pitfall_id] = seen.get(pitfall_id, 0) + count

    def merge(self, other: _Group) -> None:
        self.n += other.n
        self.right += other.right
        self.learners |= other.learners
        self.durations.extend(other.durations)
        for pitfall_id, count in other.shown.items():
            self.shown[pitfall_id] = self.shown.get(pitfall_id, 0) + count
        for pitfall_id, count in other.picked.items():
            self.picked[pitfall_id] = self.picked.get(pitfall_id, 0) + count

    def stats(self, correlation: tuple[float | None, int] = (None, 0)) -> Stats:
        interval = discrimination_interval(*correlation)
        return Stats(
            attempts=self.n,
            learners=len(self.learners),
            right=self.right,
            facility=_ratio(self.right, self.n),
            discrimination=correlation[0],
            discrimination_learners=correlation[1],
            median_ms=float(median(self.durations)) if self.durations else None,
            timed=len(self.durations),
            discrimination_low=interval[0] if interval else None,
            discrimination_high=interval[1] if interval else None,
        )

    def pitfalls(self, order: Sequence[str]) -> tuple[PitfallStats, ...]:
        ids = list(order) + sorted((set(self.shown) | set(self.picked)) - set(order))
        wrong = self.n - self.right
        return tuple(
            PitfallStats(
                pitfall_id=pitfall_id,
                shown=self.shown.get(pitfall_id, 0),
                picked=self.picked.get(pitfall_id, 0),
                rate=_ratio(self.picked.get(pitfall_id, 0), self.shown.get(pitfall_id, 0)),
                share_of_wrong=_ratio(self.picked.get(pitfall_id, 0), wrong),
            )
            for pitfall_id in ids
        )


# --- the analysis -----------------------------------------------------------------------------


def analyse(
    rows: Iterable[AttemptRow],
    *,
    card_id: str,
    outline: Sequence[TemplateOutline] = (),
    scope: Scope = "first_answers",
    current_versions_only: bool = False,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> CardAnalytics:
    """The card's item analysis (see the module's docstring for every definition).

    ``rows`` are first answers in chronological order, as :class:`AttemptRow` or as plain tuples
    in its field order. ``outline`` lists the card's templates as
    they are now (their order is the report's; templates and pitfalls with no attempts still
    appear); with ``current_versions_only`` rows of other template versions than the outline's
    are left out (an edited template is a different item).

    One pass over the rows only counts, into three tables keyed by what rows share (variant
    outcomes, learner x template x parameter values, durations per variant values); every figure
    is derived from those, so the cost per row is a few dictionary updates.
    """
    if scope not in SCOPES:
        raise ValueError(f"unknown scope {scope!r}")
    t = thresholds
    versions = {o.template_id: o.version for o in outline}
    Params = tuple[tuple[str, str], ...]
    # (template, point, version, params, shown, pitfall picked, correct) -> attempts
    # (template, point, version, params, shown, pitfall picked, correct) -> the attempts'
    # durations (None where unknown): their count is the number of attempts.
    outcomes: dict[
        tuple[str, str, int, Params, tuple[str, ...], str | None, bool], list[int | None]
    ] = {}
    # (learner, template, params) -> attempts << 32 | right: one int, not a list, so that the
    # table holds no container the garbage collector would have to walk.
    by_learner: dict[tuple[str, str, Params], int] = {}
    seen: set[tuple[str, str]] = set()
    excluded = 0
    earliest = scope == "earliest"
    filter_versions = current_versions_only and bool(versions)

    for row in rows:
        learner_id, point, template_id, version, correct, pitfall_id, ms, params, shown = row
        if filter_versions and versions.get(template_id, version) != version:
            excluded += 1
            continue
        if earliest:
            pair = (learner_id, template_id)
            if pair in seen:
                continue
            seen.add(pair)
        key = (template_id, point, version, params, shown, pitfall_id, correct)
        timing = outcomes.get(key)
        if timing is None:
            outcomes[key] = [ms]
        else:
            timing.append(ms)
        learner_key = (learner_id, template_id, params)
        by_learner[learner_key] = by_learner.get(learner_key, 0) + (_RIGHT if correct else _ONE)

    # Groups: per template, per (template, name, value), per point (built from templates).
    templates: dict[str, _Group] = {}
    template_point: dict[str, str] = {}
    template_versions: dict[str, set[int]] = {}
    values: dict[tuple[str, str, str], _Group] = {}
    durations: dict[tuple[str, Params], list[int]] = {}  # (template, params) -> durations
    for (
        template_id,
        point,
        version,
        params,
        shown,
        pitfall_id,
        correct,
    ), timing in outcomes.items():
        count = len(timing)
        group = templates.get(template_id)
        if group is None:
            group = templates[template_id] = _Group()
            template_point[template_id] = point
            template_versions[template_id] = set()
        template_versions[template_id].add(version)
        group.add(count, correct, pitfall_id, shown)
        for name, value in params:
            value_group = values.get((template_id, name, value))
            if value_group is None:
                value_group = values[(template_id, name, value)] = _Group()
            value_group.add(count, correct, pitfall_id, shown)
        timed = [ms for ms in timing if ms is not None]
        if timed:
            durations.setdefault((template_id, params), []).extend(timed)
    for (template_id, params), spent in durations.items():
        spent.sort()  # sorted runs: the groups' medians then sort merged runs (fast)
        templates[template_id].durations.extend(spent)
        for name, value in params:
            values[(template_id, name, value)].durations.extend(spent)

    outline_points = {o.template_id: o.point for o in outline}

    def report_point(template_id: str) -> str:
        """The exam point a template is reported under: the card's now, else as answered."""
        return outline_points.get(template_id) or template_point[template_id]

    # Per learner, nested by item so that the inner loops build no key tuples: packed counts
    # per template (template -> learner -> counts), per parameter value, per point, in all.
    per_template: dict[str, dict[str, int]] = {}
    per_value: dict[tuple[str, str, str], dict[str, int]] = {}
    for (learner_id, template_id, params), packed in by_learner.items():
        inner = per_template.get(template_id)
        if inner is None:
            inner = per_template[template_id] = {}
        inner[learner_id] = inner.get(learner_id, 0) + packed
        for name, value in params:
            inner = per_value.get((template_id, name, value))
            if inner is None:
                inner = per_value[(template_id, name, value)] = {}
            inner[learner_id] = inner.get(learner_id, 0) + packed
    per_point: dict[str, dict[str, int]] = {}
    per_learner: dict[str, int] = {}
    for template_id, inner in per_template.items():
        templates[template_id].learners.update(inner)
        point_inner = per_point.setdefault(report_point(template_id), {})
        for learner_id, packed in inner.items():
            point_inner[learner_id] = point_inner.get(learner_id, 0) + packed
            per_learner[learner_id] = per_learner.get(learner_id, 0) + packed

    # Discrimination: item score against the rest of the card (see the module's docstring).
    min_rest = t.min_rest_attempts

    def xy(items: Mapping[str, int], rest_of: Mapping[str, int]) -> tuple[list[float], list[float]]:
        """Item and rest scores of the learners whose rest has ``min_rest`` attempts.

        ``rest_of`` maps learners to the packed counts the rest is what remains of."""
        xs: list[float] = []
        ys: list[float] = []
        for learner_id, packed in items.items():
            rest = per_learner[learner_id] - rest_of[learner_id]
            rest_n = rest >> 32
            if rest_n >= min_rest:
                xs.append((packed & _RIGHT_MASK) / (packed >> 32))
                ys.append((rest & _RIGHT_MASK) / rest_n)
        return xs, ys

    template_xy = {item: xy(inner, inner) for item, inner in per_template.items()}
    point_xy = {item: xy(inner, inner) for item, inner in per_point.items()}
    value_xy: dict[tuple[str, str, str], tuple[list[float], list[float]]] = {}
    for value_key, inner in per_value.items():
        values[value_key].learners.update(inner)
        # The rest: the card's other templates.
        value_xy[value_key] = xy(inner, per_template[value_key[0]])

    def r_of(xy: tuple[list[float], list[float]] | None) -> tuple[float | None, int]:
        if xy is None:
            return None, 0
        xs, ys = xy
        return (pearson(xs, ys) if len(xs) >= t.min_learners else None), len(xs)

    # The report's order: the outline's templates, then the others (retired ones) by id.
    order = [o.template_id for o in outline]
    order += sorted(set(templates) - set(order))
    outline_by_id = {o.template_id: o for o in outline}
    values_by_template: dict[str, list[tuple[str, str]]] = {}
    for template_id, name, value in values:
        values_by_template.setdefault(template_id, []).append((name, value))

    result_templates: list[TemplateAnalytics] = []
    flags: list[Flag] = []
    for template_id in order:
        group = templates.get(template_id) or _Group()
        as_now = outline_by_id.get(template_id)
        point = report_point(template_id)
        stats = group.stats(r_of(template_xy.get(template_id)))
        pitfalls = group.pitfalls(as_now.pitfall_ids if as_now else ())
        pitfall_order = [p.pitfall_id for p in pitfalls]
        names = list(as_now.param_names) if as_now else []
        pairs = values_by_template.get(template_id, [])
        names += sorted({name for name, _ in pairs} - set(names))
        by_value: list[ParamValueStats] = []
        for name in names:
            for value in sorted((v for n, v in pairs if n == name), key=_value_key):
                value_group = values[(template_id, name, value)]
                by_value.append(
                    ParamValueStats(
                        name=name,
                        value=value,
                        stats=value_group.stats(r_of(value_xy.get((template_id, name, value)))),
                        pitfalls=value_group.pitfalls(pitfall_order),
                    )
                )
        template_flags: list[FlagKind] = []
        if stats.discrimination_high is not None and stats.discrimination_high < 0:
            flags.append(Flag("negative_discrimination", template_id, None, stats.discrimination))
            template_flags.append("negative_discrimination")
        if (
            stats.attempts >= t.min_attempts
            and stats.learners >= t.min_learners
            and stats.right == stats.attempts
        ):
            flags.append(Flag("everyone_right", template_id, None, 1.0))
            template_flags.append("everyone_right")
        elif stats.right < stats.attempts:  # all right: every pitfall is unpicked, said above
            for pitfall in pitfalls:
                if pitfall.shown >= t.min_showings and pitfall.picked == 0:
                    flags.append(
                        Flag("unpicked_pitfall", template_id, pitfall.pitfall_id, pitfall.shown)
                    )
                    if "unpicked_pitfall" not in template_flags:
                        template_flags.append("unpicked_pitfall")
        result_templates.append(
            TemplateAnalytics(
                template_id=template_id,
                point=point,
                stats=stats,
                pitfalls=pitfalls,
                params=tuple(by_value),
                versions=tuple(sorted(template_versions.get(template_id, ()))),
                flags=tuple(template_flags),
            )
        )

    point_order: list[str] = []
    for template in result_templates:
        if template.point not in point_order:
            point_order.append(template.point)
    result_points = []
    card_group = _Group()
    for point in point_order:
        point_group = _Group()
        ids = tuple(x.template_id for x in result_templates if x.point == point)
        for template_id in ids:
            if template_id in templates:
                point_group.merge(templates[template_id])
        card_group.merge(point_group)
        result_points.append(
            PointAnalytics(
                point=point, stats=point_group.stats(r_of(point_xy.get(point))), template_ids=ids
            )
        )

    shown_totals: dict[str, int] = {}
    picked_totals: dict[str, int] = {}
    where: dict[str, list[str]] = {}
    for template in result_templates:
        for pitfall in template.pitfalls:
            shown_totals[pitfall.pitfall_id] = (
                shown_totals.get(pitfall.pitfall_id, 0) + pitfall.shown
            )
            picked_totals[pitfall.pitfall_id] = (
                picked_totals.get(pitfall.pitfall_id, 0) + pitfall.picked
            )
            where.setdefault(pitfall.pitfall_id, []).append(template.template_id)
    misconceptions = tuple(
        MisconceptionStats(
            pitfall_id=pitfall_id,
            shown=shown_totals[pitfall_id],
            picked=picked_totals[pitfall_id],
            rate=_ratio(picked_totals[pitfall_id], shown_totals[pitfall_id]),
            template_ids=tuple(ids),
        )
        for pitfall_id, ids in where.items()
    )

    return CardAnalytics(
        card_id=card_id,
        scope=scope,
        stats=card_group.stats(),
        points=tuple(result_points),
        templates=tuple(result_templates),
        misconceptions=misconceptions,
        flags=tuple(sorted(flags, key=lambda f: f.kind == "unpicked_pitfall")),  # stable
        thresholds=thresholds,
        excluded_versions=excluded,
    )


# --- charts -----------------------------------------------------------------------------------

KEY_COLOR = "#55A868"
BAR_COLOR = "#4C72B0"
FLAG_COLOR = "#C44E52"
NO_DATA_COLOR = "#999999"
_FONT = 'font-family="system-ui, sans-serif" font-size="12"'


@dataclass(frozen=True)
class Bar:
    """One bar of :func:`bars_svg`: a rate in [0, 1] (None: nothing to show yet)."""

    label: str
    rate: float | None
    note: str  # beside the bar, e.g. "23% (12/52)"
    tooltip: str = ""
    color: str = BAR_COLOR


@dataclass(frozen=True)
class Dot:
    """One point of :func:`scatter_svg`."""

    label: str  # drawn beside the dot (short: a number)
    x: float  # facility, 0..1
    y: float  # discrimination, -1..1
    tooltip: str = ""
    color: str = BAR_COLOR


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _width(text: str) -> float:
    """Rough rendered width at 12 px: wide (CJK) characters count double."""
    return sum(12.0 if ord(ch) > 0x2E7F else 6.6 for ch in text)


def _clip(text: str, max_px: float) -> str:
    """``text``, cut with an ellipsis to about ``max_px`` pixels at 12 px."""
    if _width(text) <= max_px:
        return text
    room = max_px - _width("…")
    for end, ch in enumerate(text):
        room -= _width(ch)
        if room < 0:
            return text[:end] + "…"
    return text


def percent(rate: float | None) -> str:
    return "—" if rate is None else f"{100 * rate:.0f}%"


def bars_svg(bars: Sequence[Bar], *, title: str, width: int = 720) -> str:
    """A horizontal bar chart of rates (0-100 %), one labelled row per bar, as SVG text."""
    label_w, note_w, row_h, top, bottom = 250, 110, 24, 30, 28
    plot_w = width - label_w - note_w - 10
    height = top + row_h * max(1, len(bars)) + bottom
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'role="img" aria-label="{_e(title)}" class="chart" {_FONT} fill="currentColor">',
        f"<title>{_e(title)}</title>",
        f'<text x="0" y="16" font-weight="600">{_e(_clip(title, width - 10))}</text>',
    ]
    axis_y = top + row_h * max(1, len(bars))
    for tick in (0, 25, 50, 75, 100):
        x = label_w + plot_w * tick / 100
        out.append(
            f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{axis_y}" stroke="currentColor" '
            f'stroke-opacity="{0.5 if tick == 0 else 0.15}"/>'
        )
        out.append(f'<text x="{x:.1f}" y="{axis_y + 16}" text-anchor="middle">{tick}%</text>')
    for i, bar in enumerate(bars):
        y = top + i * row_h
        tip = _e(bar.tooltip or f"{bar.label}: {bar.note}")
        out.append(f"<g><title>{tip}</title>")
        out.append(
            f'<text x="{label_w - 8}" y="{y + 16}" text-anchor="end">'
            f"{_e(_clip(bar.label, label_w - 12))}</text>"
        )
        if bar.rate is None:
            out.append(
                f'<rect x="{label_w}" y="{y + 5}" width="{plot_w}" height="{row_h - 10}" '
                f'fill="none" stroke="{NO_DATA_COLOR}" stroke-dasharray="3 3"/>'
            )
        else:
            w = max(0.0, min(1.0, bar.rate)) * plot_w
            out.append(
                f'<rect x="{label_w}" y="{y + 4}" width="{w:.1f}" height="{row_h - 8}" '
                f'fill="{_e(bar.color)}"/>'
            )
        note_fill = f' fill="{_e(bar.color)}"' if bar.color == FLAG_COLOR else ""
        out.append(
            f'<text x="{label_w + plot_w + 8}" y="{y + 16}"{note_fill}>{_e(bar.note)}</text></g>'
        )
    if not bars:
        out.append(f'<text x="{label_w}" y="{top + 16}" fill-opacity="0.6">—</text>')
    out.append("</svg>")
    return "".join(out)


def scatter_svg(
    dots: Sequence[Dot],
    *,
    title: str,
    x_label: str,
    y_label: str,
    width: int = 720,
    height: int = 380,
) -> str:
    """Facility (x, 0-100 %) against discrimination (y, -1..1); below zero is shaded."""
    left, right, top, bottom = 56, 16, 30, 44
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x: float) -> float:
        return left + max(0.0, min(1.0, x)) * plot_w

    def py(y: float) -> float:
        return top + (1 - (max(-1.0, min(1.0, y)) + 1) / 2) * plot_h

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="100%" '
        f'role="img" aria-label="{_e(title)}" class="chart" {_FONT} fill="currentColor">',
        f"<title>{_e(title)}</title>",
        f'<text x="0" y="16" font-weight="600">{_e(_clip(title, width - 10))}</text>',
        # Negative discrimination: the better learners do worse on the item.
        f'<rect x="{left}" y="{py(0):.1f}" width="{plot_w}" height="{py(-1) - py(0):.1f}" '
        f'fill="{FLAG_COLOR}" fill-opacity="0.08"/>',
    ]
    for tick in (0, 25, 50, 75, 100):
        x = px(tick / 100)
        out.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + plot_h}" '
            f'stroke="currentColor" stroke-opacity="0.15"/>'
            f'<text x="{x:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{tick}%</text>'
        )
    for r_tick in (-1.0, -0.5, 0.0, 0.5, 1.0):
        y = py(r_tick)
        out.append(
            f'<line x1="{left}" y1="{y:.1f}" x2="{left + plot_w}" y2="{y:.1f}" '
            f'stroke="currentColor" stroke-opacity="{0.6 if r_tick == 0 else 0.15}"/>'
            f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{r_tick:+.1f}</text>'
        )
    out.append(
        f'<text x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle">'
        f"{_e(x_label)}</text>"
        f'<text x="14" y="{top + plot_h / 2:.1f}" text-anchor="middle" '
        f'transform="rotate(-90 14 {top + plot_h / 2:.1f})">{_e(y_label)}</text>'
    )
    centres = [(px(dot.x), py(dot.y)) for dot in dots]
    bounds = (left, top, left + plot_w, top + plot_h)
    placed = place_labels([dot.label for dot in dots], centres, bounds)
    for dot, (x, y), (lx, ly, anchor) in zip(dots, centres, placed, strict=True):
        # A label moved away from its dot is tied to it by a thin line.
        leader = (
            f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{lx:.1f}" y2="{ly - 4:.1f}" '
            f'stroke="currentColor" stroke-opacity="0.4"/>'
            if math.hypot(lx - x, ly - 4 - y) > 16
            else ""
        )
        out.append(
            f"<g><title>{_e(dot.tooltip or dot.label)}</title>{leader}"
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="6" fill="{_e(dot.color)}" fill-opacity="0.85" '
            f'stroke="currentColor" stroke-opacity="0.6"/>'
            f'<text x="{lx:.1f}" y="{ly:.1f}" text-anchor="{anchor}" font-size="11">'
            f"{_e(dot.label)}</text></g>"
        )
    out.append("</svg>")
    return "".join(out)


Box = tuple[float, float, float, float]  # left, top, right, bottom
_LABEL_H = 11.0
_DOT_R = 6.0


def label_box(text: str, x: float, y: float, anchor: str) -> Box:
    """The box a label of 11 px drawn at (x, y), baseline and anchor as SVG places it, covers."""
    w = _width(text) * 11 / 12
    start = x - w if anchor == "end" else x - w / 2 if anchor == "middle" else x
    return (start, y - _LABEL_H + 2, start + w, y + 2)


def _overlap(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def place_labels(
    labels: Sequence[str], centres: Sequence[tuple[float, float]], bounds: Box
) -> list[tuple[float, float, str]]:
    """Where to draw each dot's label (x, baseline y, text-anchor) so that no label covers
    another label or another dot: beside its dot where there is room (right, left, above,
    below), else the nearest free place further up or down, inside ``bounds`` where it can."""
    dots = [(x - _DOT_R, y - _DOT_R, x + _DOT_R, y + _DOT_R) for x, y in centres]
    taken: list[Box] = []
    found: list[tuple[float, float, str]] = []
    for i, (text, (x, y)) in enumerate(zip(labels, centres, strict=True)):
        side = ("end", -9.0) if x > bounds[2] - 30 else ("start", 9.0)
        other = ("start", 9.0) if side[0] == "end" else ("end", -9.0)
        tries = [(x + side[1], y + 4, side[0]), (x + other[1], y + 4, other[0])]
        tries += [(x, y - 9, "middle"), (x, y + 17, "middle")]
        for step in range(1, 13):  # further away, up and down alternately
            for sign in (-1, 1):
                tries.append((x + side[1], y + 4 + sign * step * (_LABEL_H + 1), side[0]))
        best = tries[0]
        for lx, ly, anchor in tries:
            box = label_box(text, lx, ly, anchor)
            inside = box[1] >= bounds[1] - 12 and box[3] <= bounds[3] + 12
            clear = not any(_overlap(box, t) for t in taken) and not any(
                _overlap(box, d) for j, d in enumerate(dots) if j != i
            )
            if inside and clear:
                best = (lx, ly, anchor)
                break
        taken.append(label_box(text, *best))
        found.append(best)
    return found


class Rated(Protocol):
    """What a bar of :func:`pitfall_bars_svg` reads: PitfallStats and MisconceptionStats."""

    @property
    def pitfall_id(self) -> str: ...
    @property
    def shown(self) -> int: ...
    @property
    def picked(self) -> int: ...
    @property
    def rate(self) -> float | None: ...


def pitfall_bars_svg(
    pitfalls: Sequence[Rated],
    *,
    title: str,
    labels: Mapping[str, str] | None = None,
    key: tuple[str, int, int] | None = None,
    flagged: Iterable[str] = (),
) -> str:
    """Selection rates of a template's (or the card's) pitfalls over the variants showing them.

    ``labels`` maps pitfall ids to titles (the id is shown otherwise); ``key`` = (label, right,
    attempts) adds the right answer's bar first, in green; flagged pitfalls are drawn in red.
    """
    labels = labels or {}
    flagged_ids = set(flagged)
    bars: list[Bar] = []
    if key is not None:
        label, right, attempts = key
        rate = _ratio(right, attempts)
        bars.append(Bar(label, rate, f"{percent(rate)} ({right}/{attempts})", color=KEY_COLOR))
    for pitfall in pitfalls:
        label = labels.get(pitfall.pitfall_id, pitfall.pitfall_id)
        note = f"{percent(pitfall.rate)} ({pitfall.picked}/{pitfall.shown})"
        bars.append(
            Bar(
                label,
                pitfall.rate,
                note,
                tooltip=f"{label} [{pitfall.pitfall_id}]: {note}",
                color=FLAG_COLOR if pitfall.pitfall_id in flagged_ids else BAR_COLOR,
            )
        )
    return bars_svg(bars, title=title)


_SCATTER_FLAGS = {"negative_discrimination", "everyone_right"}


def facility_discrimination_svg(
    templates: Sequence[TemplateAnalytics],
    *,
    title: str,
    x_label: str,
    y_label: str,
    numbers: Mapping[str, int] | None = None,
    learners_text: Callable[[int], str] | None = None,
) -> str:
    """One dot per template with a discrimination, labelled by its number in ``numbers``; red
    when the template is flagged for its discrimination or facility. ``learners_text`` writes a
    count of learners (its plural form too)."""
    learners_count = learners_text or (lambda n: f"{n} learner{'' if n == 1 else 's'}")
    dots = []
    for index, template in enumerate(templates, start=1):
        stats = template.stats
        if stats.facility is None or stats.discrimination is None:
            continue
        number = (numbers or {}).get(template.template_id, index)
        dots.append(
            Dot(
                label=str(number),
                x=stats.facility,
                y=stats.discrimination,
                tooltip=(
                    f"{number}. {template.template_id}: {x_label} {percent(stats.facility)}, "
                    f"{y_label} {stats.discrimination:+.2f} "
                    f"({learners_count(stats.discrimination_learners)})"
                ),
                color=FLAG_COLOR if set(template.flags) & _SCATTER_FLAGS else BAR_COLOR,
            )
        )
    return scatter_svg(dots, title=title, x_label=x_label, y_label=y_label)
