"""The mistake book, the review page (what is due, the exam date) and progress."""

from __future__ import annotations

from datetime import date
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from starlette.responses import RedirectResponse, Response

from app.auth.service import check_exam_date, exam_date_of, set_exam_date
from app.deps import CatalogDep, ContextDep, DbDep, VisitorDep
from app.domain.calendar import local_day
from app.domain.messages import Message
from app.practice.mistakes import (
    dismiss,
    mistake_book,
    parse_pitfall_filter,
    pitfall_filters,
    results_told,
)
from app.practice.scopes import NOTHING_TO_DO, deck_reach
from app.problems import InvalidInput
from app.review.service import days_until, due_counts, due_items, progress
from app.web.charts import progress_charts
from app.web.forms import check_csrf, web_learner
from app.web.templating import link, render_page
from app.web.today import day_text

router = APIRouter(include_in_schema=False)
Filter = Annotated[str | None, Query(max_length=100)]
# The ids of every pitfall shown under one title, joined (PitfallFilter.value).
PitfallsFilter = Annotated[str | None, Query(max_length=2000)]


@router.get("/mistakes")
def mistakes_page(
    request: Request,
    db: DbDep,
    catalog: CatalogDep,
    ctx: ContextDep,
    visitor: VisitorDep,
    point: Filter = None,
    pitfall: PitfallsFilter = None,
) -> Response:
    """Mistakes grouped by exam point and pitfall, with the explanation of that very variant;
    the pitfall filter lists each title once and selects every pitfall shown under it."""
    learner_id = visitor.learner.id if visitor.learner else None
    chosen = parse_pitfall_filter(pitfall)
    book = (
        mistake_book(
            db=db,
            catalog=catalog,
            learner_id=learner_id,
            now=ctx.clock(),
            point=point or None,
            pitfalls=chosen,
        )
        if learner_id
        else []
    )
    everything = (
        mistake_book(db=db, catalog=catalog, learner_id=learner_id, now=ctx.clock())
        if learner_id and (point or chosen)
        else book
    )
    options = pitfall_filters(everything, visitor.lang)
    context = {
        "book": book,
        "catalog": catalog,
        "cards": {c.id: c for c in catalog.cards()},
        "filtered": bool(point or chosen),
        "point_filter": point or "",
        "pitfall_filter": next((o.value for o in options if set(o.pitfall_ids) & set(chosen)), ""),
        "pitfall_options": options,
        "csrf_token": visitor.csrf_token,
    }
    return render_page(request, "mistakes.html", context, lang=visitor.lang)


@router.post("/mistakes/dismiss")
def dismiss_mistake(
    db: DbDep,
    visitor: VisitorDep,
    csrf_token: Annotated[str | None, Form()] = None,
    card_id: Annotated[str, Form(max_length=100)] = "",
    point: Annotated[str, Form(max_length=100)] = "",
    template_id: Annotated[str, Form(max_length=100)] = "",
    pitfall_id: Annotated[str | None, Form(max_length=100)] = None,
    shown_point: Annotated[str | None, Form(max_length=100)] = None,
    shown_pitfall: Annotated[str | None, Form(max_length=2000)] = None,
) -> Response:
    """ "I understand this now": hide the group from the book (statistics keep it), and come
    back to the book as it was filtered (``shown_point``, ``shown_pitfall``)."""
    check_csrf(visitor, csrf_token)
    if visitor.learner is not None:
        dismiss(
            db=db,
            learner_id=visitor.learner.id,
            card_id=card_id,
            point=point,
            pitfall_id=pitfall_id or None,
            template_id=template_id,
        )
    back = link("/mistakes", visitor.lang, point=shown_point or None, pitfall=shown_pitfall or None)
    return RedirectResponse(back, status_code=303)


@router.get("/review")
def review_page(request: Request, db: DbDep, ctx: ContextDep, visitor: VisitorDep) -> Response:
    """What is due today, the exam date and days left, progress per exam point."""
    return _review_page(request, db, ctx, visitor)


def _review_page(
    request: Request,
    db: DbDep,
    ctx: ContextDep,
    visitor: VisitorDep,
    exam_error: str | None = None,
    status_code: int = 200,
) -> Response:
    catalog = ctx.catalog
    now = ctx.clock()
    learner_id = visitor.learner.id if visitor.learner else None
    zone_name = visitor.time_zone
    told = (
        results_told(db=db, catalog=catalog, learner_id=learner_id, now=now) if learner_id else None
    )
    due_now, later = (
        due_counts(db=db, catalog=catalog, learner_id=learner_id, now=now, zone_name=zone_name)
        if learner_id
        else (0, 0)
    )
    items = (
        due_items(db=db, catalog=catalog, learner_id=learner_id, now=now, limit=100)
        if learner_id
        else []
    )
    exam = exam_date_of(db=db, learner_id=learner_id) if learner_id else None
    by_card: dict[str, int] = {}
    for item in items:
        by_card[item.card_id] = by_card.get(item.card_id, 0) + 1
    deck = (
        deck_reach(db=db, catalog=catalog, learner_id=learner_id, now=now, told=told)
        if learner_id
        else NOTHING_TO_DO
    )
    context = {
        "due_now": due_now,
        "due_later": later,
        "deck": deck,
        "items": items,
        "by_card": by_card,
        "cards": {c.id: c for c in catalog.cards()},
        "catalog": catalog,
        "exam_date": exam,
        "days_left": days_until(exam, local_day(now, zone_name)),
        "progress": progress(db=db, learner_id=learner_id, now=now, catalog=catalog, told=told)
        if learner_id
        else [],
        "csrf_token": visitor.csrf_token,
        "today": local_day(now, zone_name).isoformat(),
        "exam_day": day_text(exam, visitor.lang),
        "exam_error": exam_error,
        **progress_charts(db=db, ctx=ctx, learner_id=learner_id, visitor=visitor, told=told),
    }
    return render_page(request, "review.html", context, lang=visitor.lang, status_code=status_code)


def _exam_day(text: str, today: date) -> date | None:
    """The exam date typed (None: none), today or later."""
    if not text:
        return None
    try:
        value = date.fromisoformat(text)
    except ValueError:
        raise InvalidInput(Message("Enter the exam date as a date."), code="invalid_date") from None
    return check_exam_date(value, today)


@router.post("/review/exam-date")
def save_exam_date(
    request: Request,
    db: DbDep,
    ctx: ContextDep,
    visitor: VisitorDep,
    csrf_token: Annotated[str | None, Form()] = None,
    exam_date: Annotated[str, Form()] = "",
) -> Response:
    check_csrf(visitor, csrf_token)
    learner = web_learner(db, visitor)
    try:
        value = _exam_day(exam_date, local_day(ctx.clock(), visitor.time_zone))
    except InvalidInput as problem:  # the form again, with the reason
        return _review_page(
            request, db, ctx, visitor, problem.text.get(visitor.lang), problem.status_code
        )
    set_exam_date(db=db, learner_id=learner.id, exam_date=value)
    return RedirectResponse(link("/review", visitor.lang), status_code=303)
