"""Session summaries (each question with its answer and key, an exam's past results) and the page
that says there is nothing to practise; the session a page names, its learner's only."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from app.deps import ContextDep, DbDep, Visitor, VisitorDep
from app.domain.messages import Message
from app.practice.answers import Context
from app.practice.questions import get_card
from app.practice.scopes import NothingToPractise
from app.practice.sessions import SessionState, load_session, settle_session
from app.practice.summaries import past_exams, summarise
from app.problems import NotFound
from app.web.templating import render_page

router = APIRouter(include_in_schema=False)


@router.get("/sessions/{session_id}/summary")
def summary_page(
    request: Request,
    session_id: str,
    db: DbDep,
    ctx: ContextDep,
    visitor: VisitorDep,
    late: Annotated[int | None, Query(ge=0, le=1)] = None,
) -> Response:
    """Right and wrong per card and exam point, the pitfalls fallen for, time spent, each
    question with its key, practise again; an exam's past results (``late``: an answer came
    after the end). A session on the deck has no card: its scores are grouped by card."""
    state = session_state(db, visitor, session_id)
    now = ctx.clock()
    state = settle_session(db=db, catalog=ctx.catalog, state=state, now=now)
    card_id = state.row.card_id
    card = get_card(ctx.catalog, card_id, offered=False) if card_id is not None else None
    exams = []
    if state.is_exam:
        exams = past_exams(db=db, learner_id=state.row.learner_id, card_id=card_id, now=now)
    context = {
        "card": card,
        "cards": {each.id: each for each in ctx.catalog.all_cards()},
        "summary": summarise(catalog=ctx.catalog, state=state, now=now, secret=ctx.seed_secret),
        "state": state,
        "csrf_token": visitor.csrf_token,
        "finished": state.over(now),
        "withheld": state.withholds_feedback(now),
        "late": bool(late),
        "past_exams": exams,
        "time_zone": visitor.time_zone,
    }
    return render_page(request, "summary.html", context, lang=visitor.lang)


def session_state(db: DbDep, visitor: VisitorDep, session_id: str) -> SessionState:
    """The session a page's address names: the visitor's only (404 for anyone else's)."""
    if visitor.learner is None:
        raise NotFound(
            Message("This practice session does not exist."),
            code="session_not_found",
        )
    return load_session(db=db, learner_id=visitor.learner.id, session_id=session_id[:64])


def nothing_page(
    request: Request,
    ctx: Context,
    visitor: Visitor,
    card_id: str | None,
    nothing: NothingToPractise,
    templates: list[str] | None,
) -> Response:
    """No mistakes (or nothing due) to practise, on a card or on the deck (``card_id`` None):
    said on a page that offers practice instead."""
    card = get_card(ctx.catalog, card_id) if card_id is not None else None
    found = [card.template(t) for t in templates or ()] if card is not None else []
    points = {t.point for t in found if t is not None}
    context = {
        "card": card,
        "message": nothing.text,
        "point": card.point_by_slug(points.pop()) if card and len(points) == 1 else None,
        "csrf_token": visitor.csrf_token,
    }
    return render_page(request, "nothing_to_practise.html", context, lang=visitor.lang)
