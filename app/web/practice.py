"""Practice pages: single questions (permalinks), practice sessions in every mode, answers and
their feedback (summaries are in app.web.sessions). Every state change is a POST checked for
CSRF; answers redirect to their feedback page (so Back, reload and a language switch show the same
feedback).
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from functools import partial
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from sqlalchemy.orm import Session
from starlette.responses import RedirectResponse, Response

from app.deps import ContextDep, DbDep, Visitor, VisitorDep, in_db
from app.domain.cards import Card
from app.domain.identity import MAX_SEED
from app.domain.languages import other_lang
from app.domain.messages import Message
from app.domain.practice import MAX_SIZE, SCOPE_MODES
from app.domain.texts import Text
from app.domain.typed import accepted_units, typed_figures, unit_label
from app.models import Attempt
from app.practice.answers import (
    Context,
    Submission,
    answer_question_async,
    resolve_token,
)
from app.practice.questions import Question, new_question, regenerate
from app.practice.scopes import NothingToPractise
from app.practice.session_flow import next_question, seconds_left
from app.practice.session_starts import start_session_from_page
from app.practice.sessions import (
    SessionOver,
    SessionState,
    finish_session,
    load_session,
    summary_path,
)
from app.problems import InvalidAnswer, InvalidInput
from app.web.forms import check_csrf, web_learner
from app.web.sessions import nothing_page, session_state
from app.web.templating import link, render_page

router = APIRouter(include_in_schema=False)

SeedParam = Annotated[int | None, Query(ge=0, le=MAX_SEED)]
_CLIENT_ANSWER_ID_CHARS = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:-"
)


PICK_ONE = Message("Pick one of the choices.")


@dataclass(frozen=True)
class TypedForm:
    """What a typed answer's form sent (shown again beside an error)."""

    value: str | None
    unit: str


def _see_other(url: str) -> RedirectResponse:
    return RedirectResponse(url, status_code=303)


# --- single questions (permalinks and old URLs) -----------------------------------------------


@router.get("/cards/{card_id}/practice")
async def practise_card(
    request: Request,
    card_id: str,
    ctx: ContextDep,
    visitor: VisitorDep,
    seed: SeedParam = None,
    point: Annotated[str | None, Query(max_length=100)] = None,
) -> Response:
    """A question on a random exam point of the card (or on ``point``, to show it again)."""
    item = new_question(
        catalog=ctx.catalog, signer=ctx.signer, card_id=card_id, point=point, seed=seed
    )
    return _question_page(request, ctx, visitor, item, None)


@router.get("/cards/{card_id}/points/{point}/practice")
async def practise_point(
    request: Request,
    card_id: str,
    point: str,
    ctx: ContextDep,
    visitor: VisitorDep,
    seed: SeedParam = None,
) -> Response:
    """A question on one exam point (by slug; old links use its number)."""
    item = new_question(
        catalog=ctx.catalog, signer=ctx.signer, card_id=card_id, point=point, seed=seed
    )
    return _question_page(request, ctx, visitor, item, None)


# --- practice sessions ------------------------------------------------------------------------


@router.post("/sessions")
def start(
    request: Request,
    db: DbDep,
    ctx: ContextDep,
    visitor: VisitorDep,
    csrf_token: Annotated[str | None, Form()] = None,
    card_id: Annotated[str, Form(max_length=100)] = "",
    mode: Annotated[str, Form(max_length=16)] = "card",
    point: Annotated[str | None, Form(max_length=100)] = None,
    size: Annotated[int | None, Form(ge=1, le=MAX_SIZE)] = None,
    templates: Annotated[str | None, Form(max_length=5000)] = None,
    typed: Annotated[str | None, Form(max_length=8)] = None,
    scope: Annotated[str, Form(max_length=8)] = "card",
    client_session_id: Annotated[str | None, Form(max_length=64)] = None,
) -> Response:
    """Start a session in a mode on a card or on the deck (``scope``; ``typed``: "Type the
    answer"), then show its first question."""
    check_csrf(visitor, csrf_token)
    if mode not in SCOPE_MODES.get(scope, ()):
        raise InvalidInput(Message("Unknown practice mode."), code="invalid_mode")
    learner = web_learner(db, visitor)
    chosen = [t for t in templates.split(",") if t] if templates else None
    on_card = card_id if scope == "card" else None
    try:
        row = start_session_from_page(
            db=db,
            catalog=ctx.catalog,
            learner_id=learner.id,
            client_session_id=client_session_id
            if client_session_id and set(client_session_id) <= _CLIENT_ANSWER_ID_CHARS
            else None,
            card_id=on_card,
            scope=scope,
            mode=mode,
            seed_secret=ctx.seed_secret,
            point=point or None,
            size=size,
            templates=chosen,
            now=ctx.clock(),
            typed=bool(typed),
        )
    except NothingToPractise as nothing:
        return nothing_page(request, ctx, visitor, on_card, nothing, chosen)
    return _see_other(link(f"/sessions/{row.id}", visitor.lang))


@router.get("/sessions/{session_id}")
def session_page(
    request: Request,
    session_id: str,
    db: DbDep,
    ctx: ContextDep,
    visitor: VisitorDep,
    answered: Annotated[int | None, Query(ge=1, le=MAX_SIZE)] = None,
) -> Response:
    """The session's next question, or its summary when it is over (``answered``: the number of
    a question answered again, whose first answer counts)."""
    state = session_state(db, visitor, session_id)
    item = next_question(
        catalog=ctx.catalog,
        signer=ctx.signer,
        secret=ctx.seed_secret,
        state=state,
        now=ctx.clock(),
    )
    if item is None:
        return _see_other(link(summary_path(state.row.id), visitor.lang))
    first = state.answered.get(answered - 1) if answered is not None else None
    return _question_page(request, ctx, visitor, item, state, first_answer=first)


@router.post("/sessions/{session_id}/finish")
def finish(
    session_id: str,
    db: DbDep,
    ctx: ContextDep,
    visitor: VisitorDep,
    csrf_token: Annotated[str | None, Form()] = None,
) -> Response:
    """End a session now (the rest counts as unanswered) and show the summary."""
    check_csrf(visitor, csrf_token)
    state = session_state(db, visitor, session_id)
    finish_session(db=db, catalog=ctx.catalog, state=state, now=ctx.clock())
    return _see_other(link(summary_path(state.row.id), visitor.lang))


# --- answering --------------------------------------------------------------------------------


@router.post("/answers")
async def submit_answer(
    request: Request,
    ctx: ContextDep,
    visitor: VisitorDep,
    csrf_token: Annotated[str | None, Form()] = None,
    token: Annotated[str | None, Form(max_length=1000)] = None,
    choice_id: Annotated[str | None, Form(max_length=8)] = None,
    client_answer_id: Annotated[str | None, Form(max_length=64)] = None,
    shown_at: Annotated[int | None, Form(ge=0, le=2**53)] = None,
    value: Annotated[str | None, Form(max_length=100)] = None,
    unit: Annotated[str | None, Form(max_length=16)] = None,
) -> Response:
    """Grade the chosen (or typed) answer; show its feedback (in an exam: the next question)."""
    check_csrf(visitor, csrf_token)
    if not token:
        raise InvalidInput(
            Message("The form has no question: load a new one."),
            code="invalid_token",
        )
    if not client_answer_id or not set(client_answer_id) <= _CLIENT_ANSWER_ID_CHARS:
        client_answer_id = uuid.uuid4().hex
    typed = TypedForm(value, unit) if choice_id is None and unit is not None else None
    if not choice_id and typed is None:
        return await in_db(request, partial(_again, request, ctx, visitor, token, typed, PICK_ONE))
    learner = visitor.learner or await in_db(request, partial(web_learner, visitor=visitor))
    duration_ms = int(time.time() * 1000) - shown_at if shown_at else None
    submission = Submission(
        token=token,
        choice_id=choice_id or None,
        client_answer_id=client_answer_id,
        duration_ms=duration_ms if duration_ms is None or duration_ms >= 0 else None,
        value=typed.value if typed is not None else None,
        unit=typed.unit if typed is not None else None,
    )
    try:
        # Graded here (a session's token reads its session in the threadpool) and stored by the
        # writer while the request waits on the event loop, as the API's answers are.
        outcome = await answer_question_async(
            state=request.app.state, ctx=ctx, learner=learner, submission=submission
        )
    except InvalidAnswer as problem:
        return await in_db(
            request, partial(_again, request, ctx, visitor, token, typed, problem.reason)
        )
    except SessionOver as over:  # not counted: the summary says so
        return _see_other(link(summary_path(over.session_id), visitor.lang, late=1))
    attempt = outcome.attempt
    # Back, another choice, submit (the browser may send the form's id again, or another tab's
    # form its own): the first answer counts, and the page says so.
    sent = (submission.choice_id, (submission.value or "").strip() or None, submission.unit)
    answered_before = outcome.replayed and (
        attempt.client_answer_id != client_answer_id
        or (attempt.choice_id, attempt.typed_value, attempt.typed_unit) != sent
    )
    if attempt.practice_session_id is not None:
        session_id = attempt.practice_session_id
        state = await in_db(
            request, lambda db: load_session(db=db, learner_id=learner.id, session_id=session_id)
        )
        if state.row.mode == "exam":
            number = _question_number(state, attempt.id) if answered_before else None
            return _see_other(link(f"/sessions/{state.row.id}", visitor.lang, answered=number))
    return _see_other(
        link(f"/answers/{attempt.id}", visitor.lang, again=1 if answered_before else None)
    )


def _again(
    request: Request,
    ctx: Context,
    visitor: Visitor,
    token: str,
    typed: TypedForm | None,
    error: Message | Text,
    db: Session,
) -> Response:
    """The question again with ``error`` beside the form (nothing was stored); the summary when
    its session is over."""
    learner = web_learner(db, visitor)
    question, position = resolve_token(db=db, ctx=ctx, learner=learner, token=token)
    state = None
    if position is not None:
        state = load_session(db=db, learner_id=learner.id, session_id=position.session_id)
        if state.over(ctx.clock()):
            return _see_other(link(summary_path(state.row.id), visitor.lang))
    item = Question(
        variant=regenerate(ctx.catalog, question),
        token=token,
        expires_at=ctx.signer.expires_at(),
        show_seed=True,
        position=position,
    )
    return _question_page(
        request, ctx, visitor, item, state, error=error, status_code=422, typed=typed
    )


def _question_number(state: SessionState, attempt_id: int) -> int | None:
    """The question number (from 1) a session's stored answer answered."""
    for position, attempt in state.answered.items():
        if attempt.id == attempt_id:
            return position + 1
    return None


def _question_page(
    request: Request,
    ctx: ContextDep,
    visitor: VisitorDep,
    item: Question,
    state: SessionState | None,
    *,
    error: Text | None = None,
    status_code: int = 200,
    typed: TypedForm | None = None,
    first_answer: Attempt | None = None,
) -> Response:
    card: Card = ctx.catalog.locate(item.variant.id).card
    position = item.position.position if item.position else None
    # "Type the answer": a number and a unit instead of choices, where the question can be typed.
    units = accepted_units(item.variant) if state is not None and state.row.typed else ()
    context = {
        "card": card,
        "point": card.point_by_slug(item.variant.id.point),
        "variant": item.variant,
        "token": item.token,
        "csrf_token": visitor.csrf_token,
        # One id per rendered form: submitting the same form twice records one attempt.
        "client_answer_id": uuid.uuid4().hex,
        "shown_at": int(time.time() * 1000),
        "state": state,
        "position": position,
        "error": error,
        "deadline": state.row.deadline_at if state else None,
        "seconds_left": seconds_left(state, ctx.clock()) if state else None,
        "typed_units": [(unit, unit_label(unit)) for unit in units],
        "typed_figures": typed_figures(item.variant) if units else None,
        "typed": typed or TypedForm("", item.variant.content.template.unit or ""),
        "summary_url": link(summary_path(state.row.id), visitor.lang) if state else None,
        "first_answer": first_answer,
        "time_zone": visitor.time_zone,
    }
    switch = None
    if state is None:
        other = other_lang(visitor.lang)
        switch = link(
            f"/cards/{card.id}/points/{item.variant.id.point}/practice",
            other,
            seed=item.variant.id.seed,
        )
    return render_page(
        request,
        "practice.html",
        context,
        lang=visitor.lang,
        status_code=status_code,
        switch_url=switch,
    )
