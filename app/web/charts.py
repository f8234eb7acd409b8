"""The geometry of the two progress charts, drawn as SVG by ``app/pages/_charts.html``: the review
forecast (bars, one per day, their counts written above them) and the activity calendar (a week
per column, Monday on top; a day's square grows with its level as well as darkening, so the
level is not told by colour alone). Dates are written by Babel in the page's language."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

from babel.dates import format_date, format_skeleton
from babel.numbers import format_percent
from sqlalchemy import ColumnElement
from sqlalchemy.orm import Session

from app.deps import Context, Visitor
from app.domain.habits import FIXED_AFTER, activity_level
from app.review.habits import answer_activity, pitfall_mastery, review_forecast

# forecast: the drawing is 14 bars of BAR_STEP wide in a viewBox scaled to the page's width
BAR_STEP = 24
BAR_WIDTH = 16
BAR_AREA = 90  # the tallest bar
TOP = 18  # room for the count above the tallest bar
# calendar: 26 columns of 7 squares
CELL = 13
CELL_GAP = 2
LEVEL_SIDE = {1: 5, 2: 7, 3: 9, 4: 11}  # the filled square's side per level (of CELL - 2)
LEFT = 30  # room for the weekday names
HEAD = 16  # room for the month names


@dataclass(frozen=True)
class Bar:
    x: int
    y: float
    height: float
    count: int
    label: str  # the day of the month (the first bar: "today")
    date_text: str


@dataclass(frozen=True)
class ForecastChart:
    bars: list[Bar]
    width: int
    height: int
    base: int  # the y of the axis
    total: int
    days: list[tuple[str, int]]  # (date as written, count) for the table


def forecast_chart(days: Sequence[tuple[date, int]], lang: str) -> ForecastChart:
    most = max((count for _, count in days), default=0)
    bars = []
    for i, (day, count) in enumerate(days):
        height = BAR_AREA * count / most if most else 0.0
        bars.append(
            Bar(
                x=i * BAR_STEP + (BAR_STEP - BAR_WIDTH) // 2,
                y=TOP + BAR_AREA - height,
                height=height,
                count=count,
                label=str(day.day),
                date_text=_day_text(day, lang),
            )
        )
    return ForecastChart(
        bars=bars,
        width=len(days) * BAR_STEP,
        height=TOP + BAR_AREA + 18,
        base=TOP + BAR_AREA,
        total=sum(count for _, count in days),
        days=[(_day_text(day, lang), count) for day, count in days],
    )


@dataclass(frozen=True)
class Cell:
    x: int
    y: int
    level: int
    side: int  # the filled square's side (0: no answer)
    inset: float
    count: int
    date_text: str


@dataclass(frozen=True)
class ActivityChart:
    cells: list[Cell]
    months: list[tuple[int, str]]  # (x, month name) where a month starts
    weekdays: list[tuple[int, str]]  # (y, short weekday name) for Monday, Wednesday, Friday
    width: int
    height: int
    total: int
    active_days: int
    weeks: list[list[tuple[str, int]]]  # the table: one row per week, (date, count) per day


def activity_chart(days: Sequence[tuple[date, int]], lang: str) -> ActivityChart:
    cells = []
    months: list[tuple[int, str]] = []
    weeks: list[list[tuple[str, int]]] = []
    for i, (day, count) in enumerate(days):
        column, row = divmod(i, 7)
        x = LEFT + column * (CELL + CELL_GAP)
        y = HEAD + row * (CELL + CELL_GAP)
        level = activity_level(count)
        side = LEVEL_SIDE.get(level, 0)
        cells.append(Cell(x, y, level, side, (CELL - side) / 2, count, _day_text(day, lang)))
        if row == 0:
            weeks.append([])
            if day.day <= 7:
                months.append((x, format_skeleton("MMM", day, locale=lang)))
        weeks[-1].append((_day_text(day, lang), count))
    weekdays = [
        (HEAD + row * (CELL + CELL_GAP) + CELL - 2, format_date(days[row][0], "EEE", locale=lang))
        for row in (0, 2, 4)
        if len(days) > row
    ]
    columns = (len(days) + 6) // 7
    return ActivityChart(
        cells=cells,
        months=months,
        weekdays=weekdays,
        width=LEFT + columns * (CELL + CELL_GAP) + 14,  # room for a last month's name
        height=HEAD + 7 * (CELL + CELL_GAP),
        total=sum(count for _, count in days),
        active_days=sum(1 for _, count in days if count),
        weeks=weeks,
    )


def _day_text(day: date, lang: str) -> str:
    """``Wed, Dec 3`` / ``12月3日周三``."""
    return format_skeleton("MMMEd", day, locale=lang)


def percent_floor(value: float | None, lang: str) -> str:
    """A share as a whole percent, rounded down (99.6 % is not 100 %), in the page's locale."""
    if value is None:
        return "—"
    return format_percent(math.floor(100 * value + 1e-9) / 100, locale=lang)


def progress_charts(
    *,
    db: Session,
    ctx: Context,
    learner_id: str | None,
    visitor: Visitor,
    told: ColumnElement[bool] | None = None,
) -> dict[str, Any]:
    """The review page's charts and mastery per pitfall, in the learner's days and language."""
    now = ctx.clock()
    zone_name = visitor.time_zone
    return {
        "forecast": forecast_chart(
            review_forecast(
                db=db, catalog=ctx.catalog, learner_id=learner_id, now=now, zone_name=zone_name
            ),
            visitor.lang,
        ),
        "activity": activity_chart(
            answer_activity(db=db, learner_id=learner_id, now=now, zone_name=zone_name),
            visitor.lang,
        ),
        "mastery": pitfall_mastery(db=db, catalog=ctx.catalog, learner_id=learner_id, told=told),
        "percent": lambda value: percent_floor(value, visitor.lang),
        "fixed_after": FIXED_AFTER,
    }
