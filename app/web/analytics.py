"""Instructor pages: a card's item analysis (distractor analysis by misconception) and its CSV.

``GET /instructor/cards/{card_id}/analytics`` (``?format=csv`` for the CSV, also at
``/instructor/cards/{card_id}/analytics.csv``); options ``scope`` (``first_answers`` or
``earliest``), ``versions`` (``current``: only the templates' current versions, or ``all``) and
``days`` (only the last N days). Instructors and admins only (403 otherwise). Charts are SVG
drawn on the server (:mod:`app.domain.analytics`), inline, with no script.

An instructor's classes and their members' progress are pages of :mod:`app.web.classes`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from markupsafe import Markup
from pydantic import Field
from starlette.responses import Response

from app.analytics.service import card_analytics, to_csv
from app.deps import CatalogDep, ContextDep, DbDep, InstructorVisitor
from app.domain.analytics import (
    SCOPES,
    CardAnalytics,
    Scope,
    TemplateAnalytics,
    facility_discrimination_svg,
    percent,
    pitfall_bars_svg,
)
from app.domain.cards import Card
from app.domain.formulas import FormulaError, parse_number
from app.domain.messages import Message, plural_message
from app.domain.texts import Text
from app.practice.answers import Context
from app.practice.questions import get_card
from app.web.forms import BlankIsNone
from app.web.templating import render_page

router = APIRouter(include_in_schema=False)

Versions = Literal["current", "all"]
MAX_DAYS = 3650
TOP_MISCONCEPTIONS = 20  # bars in the card's misconception chart

_LATEX = {
    r"\Psi": "Ψ",
    r"\psi": "ψ",
    r"\times": "×",
    r"\cdot": "·",
    r"\to": "→",
    r"\approx": "≈",
    r"\le": "≤",
    r"\ge": "≥",
    r"\,": " ",
    r"\%": "%",
}


def plain_math(text: str) -> str:
    """A text with inline LaTeX made readable as plain text (SVG labels cannot hold MathML)."""
    if "$" not in text and "\\" not in text:
        return text
    out = text.replace("$", "")
    out = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"\1/\2", out)
    for command, char in _LATEX.items():
        out = out.replace(command, char)
    out = re.sub(r"\\(mathrm|text|mathbf|operatorname)\{([^{}]*)\}", r"\2", out)
    out = re.sub(r"[_^]\{([^{}]*)\}", r"\1", out)
    out = re.sub(r"\\([A-Za-z]+)", r"\1", out)
    return out.replace("{", "").replace("}", "")


def run_analytics(
    *,
    db: DbDep,
    card: Card,
    scope: Scope,
    versions: Versions,
    days: int | None,
    context: Context,
) -> CardAnalytics:
    since = context.clock() - timedelta(days=days) if days is not None else None
    return card_analytics(
        db=db,
        card=card,
        scope=scope,
        current_versions_only=versions == "current",
        since=since,
    )


@dataclass(frozen=True)
class TemplateView:
    number: int
    analytics: TemplateAnalytics
    chart: Markup
    worst_value: tuple[str, str] | None  # (name, value) with the lowest facility
    shown_values: Mapping[tuple[str, str], str]  # (name, value) as the question texts show it


def shown_values(card: Card, analytics: TemplateAnalytics) -> dict[tuple[str, str], str]:
    """Each parameter value of the report as the questions show it (``7B``, not
    ``7000000000``); one the card's current template cannot show (a retired template, a
    parameter since removed) as it was stored."""
    template = card.template(analytics.template_id)
    names = set(template.params) | {d.name for d in template.derived} if template else set()
    shown: dict[tuple[str, str], str] = {}
    for value in analytics.params:
        key = (value.name, value.value)
        shown[key] = value.value
        if template is not None and value.name in names:
            try:
                shown[key] = template.display(value.name, parse_number(value.value))
            except FormulaError:
                pass  # not a number the card could have drawn: as stored
    return shown


def pitfall_titles(card: Card, lang: str) -> dict[str, str]:
    titles: dict[str, str] = {}
    for template in card.templates():
        for pitfall in template.pitfalls:
            titles.setdefault(pitfall.id, plain_math(pitfall.title.get(lang)))
    return titles


def pitfall_texts(card: Card) -> dict[str, Text]:
    texts: dict[str, Text] = {}
    for template in card.templates():
        for pitfall in template.pitfalls:
            texts.setdefault(pitfall.id, pitfall.title)
    return texts


def csv_response(analytics: CardAnalytics) -> Response:
    return Response(
        to_csv(analytics),
        media_type="text/csv; charset=utf-8",
        headers={
            "Content-Disposition": f'attachment; filename="{analytics.card_id}-analytics.csv"'
        },
    )


def _page(
    request: Request,
    visitor: InstructorVisitor,
    card: Card,
    analytics: CardAnalytics,
    options: Mapping[str, object],
) -> Response:
    lang = visitor.lang
    titles = pitfall_titles(card, lang)
    numbers = {t.template_id: i for i, t in enumerate(analytics.templates, start=1)}
    unpicked = {(f.template_id, f.pitfall_id) for f in analytics.flags if f.pitfall_id}
    views = []
    for template in analytics.templates:
        chart = pitfall_bars_svg(
            template.pitfalls,
            title=Message(
                "%(number)s. %(template)s: selection rate of each choice",
                number=numbers[template.template_id],
                template=template.template_id,
            ).get(lang),
            labels=titles,
            key=(Message("Right answer").get(lang), template.stats.right, template.stats.attempts),
            flagged=[p for (t_id, p) in unpicked if t_id == template.template_id and p],
        )
        rated = [v for v in template.params if v.stats.facility is not None]
        worst = min(rated, key=lambda v: v.stats.facility or 0.0) if len(rated) > 1 else None
        views.append(
            TemplateView(
                number=numbers[template.template_id],
                analytics=template,
                chart=Markup(chart),
                worst_value=(worst.name, worst.value) if worst else None,
                shown_values=shown_values(card, template),
            )
        )
    scatter = facility_discrimination_svg(
        analytics.templates,
        title=Message("Facility against discrimination (one dot per template)").get(lang),
        x_label=Message("Facility").get(lang),
        y_label=Message("Discrimination").get(lang),
        numbers=numbers,
        learners_text=learners_counter(lang),
    )
    misconceptions = sorted(
        analytics.misconceptions, key=lambda m: (-(m.rate or 0.0), -m.shown, m.pitfall_id)
    )
    by_misconception = pitfall_bars_svg(  # the most picked (the table has them all)
        misconceptions[:TOP_MISCONCEPTIONS],
        title=Message("Selection rate of each misconception over the variants that show it").get(
            lang
        ),
        labels=titles,
    )
    context = {
        "card": card,
        "a": analytics,
        "templates": views,
        "numbers": numbers,
        "scatter": Markup(scatter),
        "misconceptions": misconceptions,
        "top_misconceptions": TOP_MISCONCEPTIONS,
        "misconception_chart": Markup(by_misconception),
        "pitfall_texts": pitfall_texts(card),
        "pct": percent,
        "seconds": _seconds,
        "signed": _signed,
        "scopes": SCOPES,
        "options": options,
        "unpicked": unpicked,
        "undiscriminated": sum(1 for t in analytics.templates if t.stats.discrimination is None),
    }
    return render_page(request, "instructor_analytics.html", context, lang=lang)


def _seconds(ms: float | None) -> str:
    return "—" if ms is None else f"{ms / 1000:.1f} s"


def _signed(r: float | None) -> str:
    return "—" if r is None else f"{r:+.2f}"


Days = Annotated[
    Annotated[int, Field(ge=1, le=MAX_DAYS)] | None,
    BlankIsNone,
    Query(description="only the last N days"),
]


@router.get("/instructor/cards/{card_id}/analytics")
def analytics_page(
    request: Request,
    card_id: str,
    visitor: InstructorVisitor,
    db: DbDep,
    catalog: CatalogDep,
    context: ContextDep,
    scope: Scope = "first_answers",
    versions: Versions = "current",
    days: Days = None,
    format: Literal["html", "csv"] = "html",
) -> Response:
    """The card's item analysis; ``?format=csv`` downloads the same figures as CSV."""
    card = get_card(catalog, card_id, offered=False)  # a withdrawn card's history too
    analytics = run_analytics(
        db=db, card=card, scope=scope, versions=versions, days=days, context=context
    )
    if format == "csv":
        return csv_response(analytics)
    options = {"scope": scope, "versions": versions, "days": days}
    return _page(request, visitor, card, analytics, options)


@router.get("/instructor/cards/{card_id}/analytics.csv")
def analytics_csv(
    card_id: str,
    visitor: InstructorVisitor,
    db: DbDep,
    catalog: CatalogDep,
    context: ContextDep,
    scope: Scope = "first_answers",
    versions: Versions = "current",
    days: Days = None,
) -> Response:
    """The card's item analysis as CSV (one long table, see ``app.analytics.service.to_csv``)."""
    card = get_card(catalog, card_id, offered=False)  # a withdrawn card's history too
    analytics = run_analytics(
        db=db, card=card, scope=scope, versions=versions, days=days, context=context
    )
    return csv_response(analytics)


def learners_counter(lang: str) -> Callable[[int], str]:
    """A count of learners in ``lang``, in its plural form."""
    return lambda n: plural_message("%(num)s learner", "%(num)s learners", n, num=n).get(lang)
