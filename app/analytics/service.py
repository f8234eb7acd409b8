"""The use case behind the analytics pages: read a card's first attempts, analyse, export CSV.

One query, one pass: only the columns the analysis needs (no ORM objects, no JSON type
processing), in id order (the order answers were stored, which scope "earliest" needs), filtered
on the card and on first answers. Per row, Python only looks up two small caches and finds the
pitfall ids in the stored choices:

* ``params`` is read as its JSON text; a card has few distinct parameter combinations, so each
  distinct text is parsed once;
* ``choices`` (both languages' texts, about 0.5 kB) is not parsed: the pitfall ids are matched in
  the JSON text with a regular expression. That is exact for any JSON text: inside a JSON string
  every quote is escaped, so ``"pitfall_id": "`` can only be a key followed by a string value.
  On PostgreSQL (where the driver returns JSON already parsed) the database lists them
  (``json_array_elements``).
"""

from __future__ import annotations

import csv
import gc
import io
import json
import re
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, String, literal_column, select, type_coerce
from sqlalchemy.orm import Session

from app.domain.analytics import (
    DEFAULT_THRESHOLDS,
    AttemptRow,
    CardAnalytics,
    Scope,
    TemplateOutline,
    Thresholds,
    analyse,
)
from app.domain.cards import Card
from app.models import Attempt

_PITFALL_ID = re.compile(r'"pitfall_id"\s*:\s*"([^"\\]*)"')
_POSTGRES_SHOWN = (
    "(SELECT string_agg(shown ->> 'pitfall_id', ' ') "
    "FROM json_array_elements(attempts.choices) AS shown)"
)
Params = tuple[tuple[str, str], ...]
_BATCH = 5000


def outline(card: Card) -> list[TemplateOutline]:
    """The card's templates as analytics lists them (current version, pitfalls, parameters)."""
    return [
        TemplateOutline(
            template_id=template.id,
            point=template.point,
            version=template.version,
            pitfall_ids=tuple(p.id for p in template.pitfalls),
            param_names=tuple(template.params),
        )
        for template in card.templates()
    ]


def _shown_column(dialect: str) -> ColumnElement[Any]:
    if dialect == "postgresql":
        return literal_column(_POSTGRES_SHOWN, String)
    return type_coerce(Attempt.choices, String)  # the JSON text, unparsed


def attempt_rows(
    *,
    db: Session,
    card_id: str,
    since: datetime | None = None,
    until: datetime | None = None,
) -> Iterator[AttemptRow]:
    """The card's first answers (oldest first), streamed from one query, as tuples in
    :class:`AttemptRow`'s field order."""
    postgres = db.get_bind().dialect.name == "postgresql"
    query = (
        select(
            Attempt.learner_id,
            Attempt.point,
            Attempt.template_id,
            Attempt.template_version,
            Attempt.correct,
            Attempt.pitfall_id,
            Attempt.duration_ms,
            type_coerce(Attempt.params, String),
            _shown_column(db.get_bind().dialect.name),
        )
        .where(Attempt.card_id == card_id, Attempt.first_answer.is_(True))
        .order_by(Attempt.id)
    )
    if since is not None:
        query = query.where(Attempt.created_at >= since)
    if until is not None:
        query = query.where(Attempt.created_at < until)
    params_cache: dict[Any, Params] = {}
    find = _PITFALL_ID.findall
    # Core, not the ORM, and the driver's own tuples (SQLAlchemy's row objects cost more than
    # the analysis): no column needs a result processor (``correct`` is made a bool below).
    # Rows go out as plain tuples in AttemptRow's field order (a NamedTuple's constructor is a
    # Python call per row).
    result = db.connection().execute(query)
    cursor = result.cursor
    rows = (row for batch in iter(lambda: cursor.fetchmany(_BATCH), []) for row in batch)
    for learner, point, template, version, correct, pitfall, ms, raw_params, raw_shown in rows:
        try:
            params = params_cache[raw_params]
        except (KeyError, TypeError):  # TypeError: a driver that returns the JSON parsed
            params = _params(raw_params)
            if isinstance(raw_params, str):
                params_cache[raw_params] = params
        if isinstance(raw_shown, str):
            shown = tuple(raw_shown.split()) if postgres else tuple(find(raw_shown))
        else:
            shown = _shown_from_json(raw_shown)
        yield (learner, point, template, version, bool(correct), pitfall, ms, params, shown)  # type: ignore[misc]
    result.close()
    db.commit()  # end the read transaction


def _params(raw: Any) -> Params:
    value = json.loads(raw) if isinstance(raw, str) else raw
    if not isinstance(value, dict):
        return ()
    return tuple(sorted((str(k), str(v)) for k, v in value.items()))


def _shown_from_json(choices: Any) -> tuple[str, ...]:
    if not isinstance(choices, list):
        return ()
    return tuple(c["pitfall_id"] for c in choices if isinstance(c, dict) and c.get("pitfall_id"))


def card_analytics(
    *,
    db: Session,
    card: Card,
    scope: Scope = "first_answers",
    current_versions_only: bool = False,
    since: datetime | None = None,
    until: datetime | None = None,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> CardAnalytics:
    """The card's item analysis (definitions in :mod:`app.domain.analytics`).

    The rows stream from the query into the analysis (never all held at once), with the cyclic
    garbage collector paused meanwhile: the pass allocates ~10^5 short-lived tuples and no
    cycles, and each collection would walk the whole heap of a server process (measured: the
    query ran 1.5-2.5x slower with it on).
    """
    paused = gc.isenabled()
    gc.disable()
    try:
        return analyse(
            attempt_rows(db=db, card_id=card.id, since=since, until=until),
            card_id=card.id,
            outline=outline(card),
            scope=scope,
            current_versions_only=current_versions_only,
            thresholds=thresholds,
        )
    finally:
        if paused:
            gc.enable()


# --- CSV --------------------------------------------------------------------------------------

CSV_COLUMNS = (
    "level",
    "point",
    "template_id",
    "param",
    "value",
    "pitfall_id",
    "attempts",
    "learners",
    "right",
    "facility",
    "discrimination",
    "discrimination_learners",
    "median_ms",
    "shown",
    "picked",
    "selection_rate",
    "share_of_wrong",
    "flags",
)


def _num(value: float | None) -> str:
    return "" if value is None else f"{value:.6g}"


def to_csv(analytics: CardAnalytics) -> str:
    """One long table: a row per card, exam point, template, parameter value, and pitfall
    (per template, per parameter value, and per misconception over the card), told apart by
    ``level``; empty cells where a figure is not defined."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)

    def stats_cells(stats: Any) -> list[str]:
        return [
            str(stats.attempts),
            str(stats.learners),
            str(stats.right),
            _num(stats.facility),
            _num(stats.discrimination),
            str(stats.discrimination_learners),
            _num(stats.median_ms),
        ]

    blank_stats = [""] * 7
    blank_pitfall = [""] * 4
    unpicked = {(f.template_id, f.pitfall_id) for f in analytics.flags if f.pitfall_id}

    def pitfall_cells(p: Any) -> list[str]:
        return [str(p.shown), str(p.picked), _num(p.rate), _num(p.share_of_wrong)]

    writer.writerow(["card", "", "", "", "", "", *stats_cells(analytics.stats), *blank_pitfall, ""])
    for point in analytics.points:
        writer.writerow(
            ["point", point.point, "", "", "", "", *stats_cells(point.stats), *blank_pitfall, ""]
        )
    for template in analytics.templates:
        base = [template.point, template.template_id]
        writer.writerow(
            [
                "template",
                *base,
                "",
                "",
                "",
                *stats_cells(template.stats),
                *blank_pitfall,
                ";".join(template.flags),
            ]
        )
        for pitfall in template.pitfalls:
            flag = (
                "unpicked_pitfall" if (template.template_id, pitfall.pitfall_id) in unpicked else ""
            )
            writer.writerow(
                [
                    "pitfall",
                    *base,
                    "",
                    "",
                    pitfall.pitfall_id,
                    *blank_stats,
                    *pitfall_cells(pitfall),
                    flag,
                ]
            )
        for value in template.params:
            cells = [*base, value.name, value.value]
            writer.writerow(["param", *cells, "", *stats_cells(value.stats), *blank_pitfall, ""])
            for pitfall in value.pitfalls:
                writer.writerow(
                    [
                        "param_pitfall",
                        *cells,
                        pitfall.pitfall_id,
                        *blank_stats,
                        *pitfall_cells(pitfall),
                        "",
                    ]
                )
    for misconception in analytics.misconceptions:
        writer.writerow(
            [
                "misconception",
                "",
                ";".join(misconception.template_ids),
                "",
                "",
                misconception.pitfall_id,
                *blank_stats,
                str(misconception.shown),
                str(misconception.picked),
                _num(misconception.rate),
                "",
                "",
            ]
        )
    return buffer.getvalue()
