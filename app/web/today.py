"""Today (``/``): what is due and how long it takes, the session to resume, the streak, the days
to the exam, one Start button, and the cards with their exam points; the learner's time zone
form. The facts are app.review.habits.today's, the same the API's ``/me/today`` returns."""

from __future__ import annotations

from datetime import date, datetime
from typing import Annotated

from babel.dates import format_skeleton
from babel.numbers import format_decimal
from fastapi import APIRouter, Form, Request
from sqlalchemy.orm import Session
from starlette.responses import RedirectResponse, Response

from app.auth.service import set_time_zone
from app.deps import ContextDep, DbDep, Visitor, VisitorDep
from app.domain.calendar import TIME_ZONE_MAX, local_day
from app.domain.habits import DEFAULT_SECONDS_PER_QUESTION
from app.domain.practice import DEFAULT_SIZE
from app.models import Attempt
from app.practice.mistakes import results_told
from app.review.habits import next_review, today
from app.web.forms import check_csrf, web_learner
from app.web.templating import link, render_page

router = APIRouter(include_in_schema=False)


def day_text(day: date | None, lang: str) -> str:
    """A date as the page's language writes it: ``Dec 24, 2026``, ``2026年12月24日``."""
    return format_skeleton("yMMMd", day, locale=lang) if day is not None else ""


@router.get("/")
def today_page(request: Request, db: DbDep, ctx: ContextDep, visitor: VisitorDep) -> Response:
    """Today: the reviews due, the session to resume, the streak, the exam, one Start button."""
    learner_id = visitor.learner.id if visitor.learner else None
    told = None
    if learner_id is not None:
        told = results_told(db=db, catalog=ctx.catalog, learner_id=learner_id, now=ctx.clock())
    facts = today(
        db=db,
        catalog=ctx.catalog,
        learner_id=learner_id,
        now=ctx.clock(),
        zone_name=visitor.time_zone,
        told=told,
    )
    cards = ctx.catalog.cards()
    next_card = ctx.catalog.offered(facts.next.card_id) if facts.next.card_id else None
    context = {
        "facts": facts,
        "cards": cards,
        "next_card": next_card,
        "next_point": next_card.point_by_slug(facts.next.point)
        if next_card and facts.next.point
        else None,
        "sizes": DEFAULT_SIZE,
        "seconds": format_decimal(round(facts.seconds_per_question), locale=visitor.lang),
        "default_seconds": DEFAULT_SECONDS_PER_QUESTION,
        "exam_day": day_text(facts.exam_date, visitor.lang),
        # A new visitor gets links, not forms: reading Today sets no cookie (nothing stored).
        "csrf_token": visitor.csrf_token if visitor.learner is not None else None,
    }
    return render_page(request, "today.html", context, lang=visitor.lang)


@router.post("/account/time-zone")
def save_time_zone(
    db: DbDep,
    visitor: VisitorDep,
    csrf_token: Annotated[str | None, Form()] = None,
    time_zone: Annotated[str, Form(max_length=TIME_ZONE_MAX)] = "",
) -> Response:
    """Choose the time zone days are counted in (empty: the browser's)."""
    check_csrf(visitor, csrf_token)
    learner = web_learner(db, visitor)
    set_time_zone(db=db, learner_id=learner.id, time_zone=time_zone.strip() or None)
    return RedirectResponse(link("/account", visitor.lang), status_code=303)


def next_review_view(
    *, db: Session, attempt: Attempt, now: datetime, visitor: Visitor
) -> dict[str, object] | None:
    """ "Next review in N days" under an answer's verdict (``_next_review.html``)."""
    found = next_review(db=db, attempt=attempt, now=now, zone_name=visitor.time_zone)
    if found is None:
        return None
    day = local_day(found.due_at, visitor.time_zone)
    return {"days": found.days, "date": day_text(day, visitor.lang)}
