"""Answering a question: one path for the web form, the API's single answers and its batches.

Each answer is graded where it arrives (:func:`prepare`: the token verified, its question
regenerated and graded) and handed to the app's :class:`AnswerWriter`, which stores the answers
that arrive together in one write transaction on one thread (group commit) by
:func:`app.practice.storing.store_batch`, the one place that says what an answer means.

An answer is acknowledged only after its transaction committed; a batch whose commit fails
acknowledges none of its answers (each gets the error; a client resends with the same
``client_answer_id``). A batch that cannot be stored whole (a lost insert race on PostgreSQL) is
rolled back and tried again, then written answer by answer, each in its own savepoint, so one
answer's failure is that answer's only.

A question token bound to a learner (fetched with a bearer token) or a session token (the session
is its learner's) answered by anyone else is refused: 403 ``token_not_yours``; a token bound to an
anonymous learner since merged into an account (signing in) is the account's.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.auth.service import LearnerRef, now_utc, was_merged_into
from app.domain.catalog import Catalog
from app.domain.generation import Grade, UnknownChoice, Variant, grade
from app.domain.identity import QuestionId
from app.domain.messages import Message
from app.domain.practice import answered_within
from app.domain.typed import TypedError, accepted_units, grade_typed, read_typed
from app.models import PracticeSession
from app.practice.questions import (
    QuestionSigner,
    SessionPosition,
    TokenContent,
    check_token_owner,
    regenerate,
    token_not_yours,
)
from app.practice.sessions import SessionState, check_can_answer, load_session, question_id_at
from app.practice.storing import (
    AnswerOutcome,
    Graded,
    store_batch,
    writer_order,
)
from app.practice.writer import AnswerWriter
from app.problems import InvalidAnswer, Problem, UnknownChoiceError

MAX_DURATION_MS = 24 * 3600 * 1000


@dataclass(frozen=True)
class Context:
    """What a use case needs besides the database session: the catalog and the secrets."""

    catalog: Catalog
    signer: QuestionSigner
    seed_secret: bytes
    # The clock of reviews and sessions (tests and demos move it; the server uses real time).
    clock: Callable[[], datetime] = field(default=now_utc)


@dataclass(frozen=True)
class Submission:
    """An answer as a client sends it: a ``choice_id``, or a typed ``value`` with its ``unit``
    (exactly one of the two forms; see :func:`graded`)."""

    token: str
    choice_id: str | None
    client_answer_id: str
    duration_ms: int | None = None
    answered_at: datetime | None = None
    value: str | None = None
    unit: str | None = None


# --- the entry points ---------------------------------------------------------------------------


def answer_question(
    *,
    db: Session,
    writer: AnswerWriter[Graded],
    ctx: Context,
    learner: LearnerRef,
    token: str,
    choice_id: str | None,
    client_answer_id: str,
    duration_ms: int | None = None,
    answered_at: datetime | None = None,
    now: datetime | None = None,
    value: str | None = None,
    unit: str | None = None,
) -> AnswerOutcome:
    """Grade ``choice_id`` (or the typed ``value`` in ``unit``) for the question in ``token`` and
    store the attempt (once); returns once it is committed (a thread of the web framework's
    threadpool waits for the writer)."""
    submission = Submission(
        token, choice_id, client_answer_id, duration_ms, answered_at, value, unit
    )
    (result,) = answer_questions(
        db=db, writer=writer, ctx=ctx, learner=learner, submissions=[submission], now=now
    )
    if isinstance(result, BaseException):
        raise result
    return result


def answer_questions(
    *,
    db: Session,
    writer: AnswerWriter[Graded],
    ctx: Context,
    learner: LearnerRef,
    submissions: Sequence[Submission],
    now: datetime | None = None,
) -> list[AnswerOutcome | Problem]:
    """Several answers submitted together (stored together): a result for each, in order; an
    answer's problem is that answer's only. A database failure is raised."""
    now = now or ctx.clock()
    results: list[AnswerOutcome | Problem | Graded] = []
    for submission in submissions:
        try:
            content = ctx.signer.verify(submission.token, ctx.catalog)
            results.append(prepare(ctx, learner, submission, now, content, db))
        except Problem as problem:
            db.rollback()
            results.append(problem)
    db.commit()  # the reads are over: the writer's transaction sees what is committed
    writer.wait([item for item in results if isinstance(item, Graded)])
    return [_result(item) if isinstance(item, Graded) else item for item in results]


async def answer_question_async(
    *,
    state: Any,
    ctx: Context,
    learner: LearnerRef,
    submission: Submission,
    now: datetime | None = None,
) -> AnswerOutcome:
    """:func:`answer_question` for the event loop: a question token is graded here (a session
    token reads its session in the threadpool first) and the request awaits the writer."""
    import anyio.to_thread  # the threadpool the web framework's sync routes use

    now = now or ctx.clock()
    content = ctx.signer.verify(submission.token, ctx.catalog)
    if content.position is None and content.learner_id in (None, learner.id):
        item = prepare(ctx, learner, submission, now, content, None)
    else:  # a session, or a token issued to another learner id (merged into this account?)

        def in_db() -> Graded:
            with state.sessionmaker() as db:
                return prepare(ctx, learner, submission, now, content, db)

        item = await anyio.to_thread.run_sync(in_db)
    await answer_writer(state).submit([item])
    result = _result(item)
    if isinstance(result, BaseException):
        raise result
    return result


def _result(item: Graded) -> AnswerOutcome | Problem:
    if item.error is None:
        assert item.outcome is not None
        return item.outcome
    if isinstance(item.error, Problem):
        return item.error
    raise item.error  # the database failed: no answer of the batch is stored


def prepare(
    ctx: Context,
    learner: LearnerRef,
    submission: Submission,
    now: datetime,
    content: TokenContent,
    db: Session | None,
) -> Graded:
    """The answer graded, for the writer (``db`` reads a session token's session)."""
    refusal = None
    withheld = False
    if content.position is None:
        assert content.question is not None
        _check_owner(db, content, learner.id)
        question, asked_typed = content.question, content.typed
    else:
        assert db is not None
        question, state = _position(db, ctx, learner, content.position)
        asked_typed = state.row.typed
        withheld = state.withholds_feedback(now)
        try:
            check_can_answer(state, now)
        except Problem as problem:
            refusal = problem
    variant = regenerate(ctx.catalog, question)
    result = graded(variant, submission, asked_typed=asked_typed)
    duration_ms = submission.duration_ms
    if duration_ms is not None:
        duration_ms = max(0, min(duration_ms, MAX_DURATION_MS))
    return Graded(
        ctx.catalog, learner, question, content.position, variant, result,
        submission.client_answer_id, duration_ms,
        answered_within(submission.answered_at, content.issued_at, now), now, refusal,
        asked_typed=asked_typed,
        withheld=withheld,
    )  # fmt: skip


def graded(variant: Variant, submission: Submission, *, asked_typed: bool = False) -> Grade:
    """The submission's choice or typed value graded; :class:`InvalidAnswer` (422, naming the
    field) or :class:`UnknownChoiceError` when it cannot be, so nothing is stored.
    ``asked_typed``: shown without its choices, so a choice sent for a question that takes a
    number is a guess at a letter never seen, refused."""
    typed = submission.value is not None or submission.unit is not None
    if submission.choice_id is not None and typed:
        raise InvalidAnswer(
            "choice_id",
            Message("Send either choice_id, or value and unit: not both."),
            code="answer_form",
        )
    if not typed:
        if submission.choice_id is None:
            raise InvalidAnswer(
                "choice_id", Message("Send choice_id, or value and unit."), code="answer_form"
            )
        if asked_typed and accepted_units(variant):
            raise InvalidAnswer(
                "choice_id",
                Message("This question was asked without its choices: send value and unit."),
                code="answer_form",
            )
        try:
            return grade(variant, submission.choice_id)
        except UnknownChoice:
            offered = ", ".join(c.id for c in variant.choices)
            raise UnknownChoiceError(
                Message(
                    "Unknown choice %(choice)s: this question offers %(offered)s.",
                    choice=repr(submission.choice_id),
                    offered=offered,
                )
            ) from None
    if submission.unit is None:
        raise InvalidAnswer(
            "unit", Message("Say which unit the number is in."), code="invalid_unit"
        )
    try:
        return grade_typed(variant, read_typed(variant, submission.value or "", submission.unit))
    except TypedError as error:
        code = "invalid_unit" if error.field == "unit" else "invalid_value"
        if not accepted_units(variant):
            code = "not_typeable"
        raise InvalidAnswer(error.field, error.message, code=code) from None


def resolve_token(
    *, db: Session, ctx: Context, learner: LearnerRef, token: str
) -> tuple[QuestionId, SessionPosition | None]:
    content = ctx.signer.verify(token, ctx.catalog)
    if content.position is None:
        assert content.question is not None
        _check_owner(db, content, learner.id)
        return content.question, None
    question, _ = _position(db, ctx, learner, content.position)
    return question, content.position


def _check_owner(db: Session | None, content: TokenContent, learner_id: str) -> None:
    """:func:`check_token_owner`, where a token issued to an anonymous learner since merged into
    this account (signing in) is the account's: questions downloaded before signing in and
    answered offline are kept. ``db`` None: the token names no learner or this one."""
    other = content.learner_id
    if other is not None and other != learner_id:
        assert db is not None
        if was_merged_into(db, other, learner_id):
            return
    check_token_owner(content, learner_id)


def _position(
    db: Session, ctx: Context, learner: LearnerRef, position: SessionPosition
) -> tuple[QuestionId, SessionState]:
    """The question at a session's position, and the session (its learner's only)."""
    owner = db.scalar(
        select(PracticeSession.learner_id).where(PracticeSession.id == position.session_id)
    )
    if owner is not None and owner != learner.id:
        db.commit()
        raise token_not_yours()
    state = load_session(db=db, learner_id=learner.id, session_id=position.session_id)
    return question_id_at(state.row, position.position, ctx.seed_secret), state


_writers_lock = threading.Lock()


def new_writer(sessions: sessionmaker[Session], wait_s: float = 30.0) -> AnswerWriter[Graded]:
    """A writer of answers (one per database and process: it is the one writer)."""
    return AnswerWriter(sessions, store_batch, writer_order, wait_s=wait_s)


def write_wait_s(settings: Any, dialect: str) -> float:
    """How long an answer waits for the writer before its 503: the database's own bound (SQLite's
    busy timeout; PostgreSQL's statement timeout, after which the client gives up a second
    later) and one second more."""
    if dialect == "sqlite":
        return float(settings.sqlite_busy_timeout_ms) / 1000 + 1.0
    return float(settings.db_statement_timeout_s) + 2.0


def answer_writer(state: Any) -> AnswerWriter[Graded]:
    """The app's writer (``app.state``), started with its first answer."""
    writer: AnswerWriter[Graded] | None = getattr(state, "answer_writer", None)
    if writer is None:
        with _writers_lock:
            writer = getattr(state, "answer_writer", None)
            if writer is None:
                dialect = state.sessionmaker.kw["bind"].dialect.name
                writer = new_writer(state.sessionmaker, write_wait_s(state.settings, dialect))
                state.answer_writer = writer
    return writer
