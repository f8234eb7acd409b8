"""Instructor pages: a card's item analysis (distractor analysis by misconception) and its CSV.

``GET /instructor/cards/{card_id}/analytics`` (``?format=csv`` for the CSV, also at
``/instructor/cards/{card_id}/analytics.csv``); options ``scope`` (``first_answers`` or
``earliest``), ``versions`` (``current``: only the templates' current versions, or ``all``) and
``days`` (only the last N days). Instructors and admins only (403 otherwise). Charts are SVG
drawn on the server (:mod:`app.domain.analytics`), inline, with no script.

Classes (:mod:`app.analytics.classes`): ``/instructor/classes`` lists an instructor's classes and
creates one (a join code); ``/instructor/classes/{id}`` shows each member's progress (the owner
or an admin; 404 for anyone else); learners with an account join at ``/classes/join``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Literal

from fastapi import APIRouter, Form, Query, Request
from markupsafe import Markup
from starlette.responses import RedirectResponse, Response

from app.analytics.classes import class_progress, classes_of, create_class, join_class
from app.analytics.service import card_analytics, to_csv
from app.deps import CatalogDep, ContextDep, InstructorVisitor, SessionDep, VisitorDep
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
from app.domain.messages import Message
from app.domain.texts import Text
from app.practice.answers import Context
from app.practice.questions import get_card
from app.problems import Problem
from app.web.forms import check_csrf
from app.web.templating import link, render_page

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
    session: SessionDep,
    card: Card,
    scope: Scope,
    versions: Versions,
    days: int | None,
    context: Context,
) -> CardAnalytics:
    since = context.clock() - timedelta(days=days) if days is not None else None
    return card_analytics(
        session=session,
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
            )
        )
    scatter = facility_discrimination_svg(
        analytics.templates,
        title=Message("Facility against discrimination (one dot per template)").get(lang),
        x_label=Message("Facility").get(lang),
        y_label=Message("Discrimination").get(lang),
        numbers=numbers,
        learners_word=Message("learners").get(lang),
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


Days = Annotated[int | None, Query(ge=1, le=MAX_DAYS, description="only the last N days")]


@router.get("/instructor/cards/{card_id}/analytics")
def analytics_page(
    request: Request,
    card_id: str,
    visitor: InstructorVisitor,
    session: SessionDep,
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
        session=session, card=card, scope=scope, versions=versions, days=days, context=context
    )
    if format == "csv":
        return csv_response(analytics)
    options = {"scope": scope, "versions": versions, "days": days}
    return _page(request, visitor, card, analytics, options)


@router.get("/instructor/cards/{card_id}/analytics.csv")
def analytics_csv(
    card_id: str,
    visitor: InstructorVisitor,
    session: SessionDep,
    catalog: CatalogDep,
    context: ContextDep,
    scope: Scope = "first_answers",
    versions: Versions = "current",
    days: Days = None,
) -> Response:
    """The card's item analysis as CSV (one long table, see ``app.analytics.service.to_csv``)."""
    card = get_card(catalog, card_id, offered=False)  # a withdrawn card's history too
    analytics = run_analytics(
        session=session, card=card, scope=scope, versions=versions, days=days, context=context
    )
    return csv_response(analytics)


# --- classes ----------------------------------------------------------------------------------

FormText = Annotated[str, Form(max_length=200)]
CsrfField = Annotated[str | None, Form()]


def _classes_page(
    request: Request,
    visitor: InstructorVisitor,
    session: SessionDep,
    *,
    error: str | None = None,
    name: str = "",
    status_code: int = 200,
) -> Response:
    assert visitor.learner is not None
    context = {
        "classes": classes_of(session=session, owner_id=visitor.learner.id),
        "csrf_token": visitor.csrf_token,
        "error": error,
        "name": name,
    }
    return render_page(
        request,
        "instructor_analytics_classes.html",
        context,
        lang=visitor.lang,
        status_code=status_code,
    )


@router.get("/instructor/classes")
def classes_page(request: Request, visitor: InstructorVisitor, session: SessionDep) -> Response:
    """The instructor's classes, their join codes and member counts; a form for a new one."""
    return _classes_page(request, visitor, session)


@router.post("/instructor/classes")
def new_class(
    request: Request,
    visitor: InstructorVisitor,
    session: SessionDep,
    csrf_token: CsrfField = None,
    name: FormText = "",
) -> Response:
    check_csrf(visitor, csrf_token)
    assert visitor.learner is not None
    try:
        created = create_class(session=session, owner_id=visitor.learner.id, name=name)
    except Problem as problem:
        return _classes_page(
            request,
            visitor,
            session,
            error=problem.text.get(visitor.lang),
            name=name,
            status_code=problem.status_code,
        )
    return RedirectResponse(link(f"/instructor/classes/{created.id}", visitor.lang), 303)


def _point_label(catalog: CatalogDep, card_id: str, slug: str) -> tuple[int, str]:
    point = catalog.point_title_card(card_id, slug)
    return (point.number, point.title.en) if point is not None else (10**6, slug)


@router.get("/instructor/classes/{class_id}")
def class_page(
    request: Request,
    class_id: int,
    visitor: InstructorVisitor,
    session: SessionDep,
    catalog: CatalogDep,
    context: ContextDep,
) -> Response:
    """Each member's progress: first answers, share right, per exam point, reviews due, last
    answer."""
    assert visitor.learner is not None
    progress = class_progress(
        session=session, class_id=class_id, viewer=visitor.learner, now=context.clock()
    )
    columns = sorted(
        progress.columns, key=lambda c: (c[0], _point_label(catalog, c[0], c[1])[0], c[1])
    )
    points = {column: catalog.point_title_card(column[0], column[1]) for column in progress.columns}
    return render_page(
        request,
        "instructor_analytics_class.html",
        {"progress": progress, "columns": columns, "points": points, "pct": percent},
        lang=visitor.lang,
    )


def _join_page(
    request: Request,
    visitor: VisitorDep,
    *,
    joined: object = None,
    error: str | None = None,
    code: str = "",
    status_code: int = 200,
) -> Response:
    context = {
        "csrf_token": visitor.csrf_token,
        "joined": joined,
        "error": error,
        "code": code,
        "signed_in": visitor.signed_in,
    }
    return render_page(
        request,
        "instructor_analytics_join.html",
        context,
        lang=visitor.lang,
        status_code=status_code,
    )


@router.get("/classes/join")
def join_page(request: Request, visitor: VisitorDep) -> Response:
    """The form where a learner enters a class's join code (an account is needed)."""
    return _join_page(request, visitor, code=request.query_params.get("code", "")[:20])


@router.post("/classes/join")
def join(
    request: Request,
    visitor: VisitorDep,
    session: SessionDep,
    csrf_token: CsrfField = None,
    code: FormText = "",
) -> Response:
    check_csrf(visitor, csrf_token)
    if visitor.learner is None or not visitor.learner.has_account:
        return _join_page(
            request,
            visitor,
            error=Message("Joining a class needs an account:").get(visitor.lang),
            code=code,
            status_code=403,
        )
    try:
        joined = join_class(session=session, learner=visitor.learner, code=code)
    except Problem as problem:
        return _join_page(
            request,
            visitor,
            error=problem.text.get(visitor.lang),
            code=code,
            status_code=problem.status_code,
        )
    return _join_page(request, visitor, joined=joined)
