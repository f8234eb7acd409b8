"""Answering a question: one path for the web form, the API's single answers and its batches.

Each answer is graded where it arrives (:func:`prepare`: the token verified, its question
regenerated and graded) and handed to the app's :class:`AnswerWriter`, which stores the answers
that arrive together in one write transaction on one thread (group commit) by
:func:`store_batch`, the one place that says what an answer means:

- idempotent by ``client_answer_id`` (its unique index): a repeat (a retried request, a
  double-submitted form, a concurrent duplicate) gets the stored attempt's result; the same id for
  another learner or question is 409 ``answer_id_reused``;
- inside a practice session a position keeps its first answer: answering it again (Back, another
  choice, resubmit) shows that first answer; a new answer after the exam's time is refused;
- only a learner's first answer to a question rates its review item (app.domain.rating): a retry
  after seeing the key is stored with ``first_answer`` false.

An answer is acknowledged only after its transaction committed; a batch whose commit fails
acknowledges none of its answers (each gets the error; a client resends with the same
``client_answer_id``). A batch that cannot be stored whole (a lost insert race on PostgreSQL) is
rolled back and tried again, then written answer by answer, each in its own savepoint, so one
answer's failure is that answer's only.

A question token bound to a learner (fetched with a bearer token) or a session token (the session
is its learner's) answered by anyone else is refused: 403 ``token_not_yours``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, insert, select
from sqlalchemy.orm import Session, sessionmaker

from app.auth.service import LearnerRef, now_utc
from app.db import ANSWERS_PENDING, ByKeys
from app.domain import rating
from app.domain.catalog import Catalog
from app.domain.generation import Grade, UnknownChoice, Variant, grade
from app.domain.identity import QuestionId
from app.domain.messages import Message
from app.models import Attempt, PracticeSession
from app.practice.questions import (
    QuestionSigner,
    SessionPosition,
    TokenContent,
    check_token_owner,
    regenerate,
    token_not_yours,
)
from app.practice.sessions import SessionState, check_can_answer, load_session, question_id_at
from app.practice.writer import AnswerWriter
from app.problems import Conflict, Problem, UnknownChoiceError
from app.review.service import read_known, store_ratings

MAX_DURATION_MS = 24 * 3600 * 1000


@dataclass(frozen=True, slots=True)
class StoredAnswer:
    """What answering needs of a stored attempt (a row of ``attempts``): its ids, the question
    it answered and the choice it made."""

    id: int
    client_answer_id: str
    learner_id: str
    card_id: str
    template_id: str
    template_version: int
    seed: int
    choice_id: str
    practice_session_id: str | None


_STORED_COLUMNS = tuple(StoredAnswer.__slots__)


def _stored(row: Sequence[Any]) -> StoredAnswer:
    """From a row of ``_STORED_COLUMNS``."""
    return StoredAnswer(*tuple(row))


@dataclass(frozen=True)
class AnswerOutcome:
    attempt: StoredAnswer
    variant: Variant
    grade: Grade
    replayed: bool  # the stored first answer, not this request's choice


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
    """An answer as a client sends it."""

    token: str
    choice_id: str
    client_answer_id: str
    duration_ms: int | None = None
    answered_at: datetime | None = None


@dataclass
class Graded:
    """An answer graded and waiting for the writer; ``outcome`` or ``error`` once written."""

    ctx: Context
    learner: LearnerRef
    question: QuestionId
    position: SessionPosition | None
    variant: Variant
    result: Grade
    client_answer_id: str
    duration_ms: int | None
    answered_at: datetime | None
    now: datetime
    refusal: Problem | None = None  # why a new answer at its position is refused (exam over)
    outcome: AnswerOutcome | None = None
    error: BaseException | None = None


def answer_id_reused() -> Conflict:
    return Conflict(
        Message(
            "This client_answer_id was already used for another answer: send a new one for "
            "each answer."
        ),
        code="answer_id_reused",
    )


# --- the entry points ---------------------------------------------------------------------------


def answer_question(
    *,
    db: Session,
    writer: AnswerWriter[Graded],
    ctx: Context,
    learner: LearnerRef,
    token: str,
    choice_id: str,
    client_answer_id: str,
    duration_ms: int | None = None,
    answered_at: datetime | None = None,
    now: datetime | None = None,
) -> AnswerOutcome:
    """Grade ``choice_id`` for the question in ``token`` and store the attempt (once); returns
    once it is committed (a thread of the web framework's threadpool waits for the writer)."""
    submission = Submission(token, choice_id, client_answer_id, duration_ms, answered_at)
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
    if content.position is None:
        item = prepare(ctx, learner, submission, now, content, None)
    else:

        def in_session() -> Graded:
            with state.sessionmaker() as db:
                return prepare(ctx, learner, submission, now, content, db)

        item = await anyio.to_thread.run_sync(in_session)
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
    if content.position is None:
        assert content.question is not None
        check_token_owner(content, learner.id)
        question = content.question
    else:
        assert db is not None
        question, state = _position(db, ctx, learner, content.position)
        try:
            check_can_answer(state, now)
        except Problem as problem:
            refusal = problem
    variant = regenerate(ctx.catalog, question)
    try:
        result = grade(variant, submission.choice_id)
    except UnknownChoice:
        offered = ", ".join(c.id for c in variant.choices)
        raise UnknownChoiceError(
            Message(
                "Unknown choice %(choice)s: this question offers %(offered)s.",
                choice=repr(submission.choice_id),
                offered=offered,
            )
        ) from None
    duration_ms = submission.duration_ms
    if duration_ms is not None:
        duration_ms = max(0, min(duration_ms, MAX_DURATION_MS))
    return Graded(
        ctx, learner, question, content.position, variant, result,
        submission.client_answer_id, duration_ms, submission.answered_at, now, refusal,
    )  # fmt: skip


def resolve_token(
    *, session: Session, ctx: Context, learner: LearnerRef, token: str
) -> tuple[QuestionId, SessionPosition | None]:
    content = ctx.signer.verify(token, ctx.catalog)
    if content.position is None:
        assert content.question is not None
        check_token_owner(content, learner.id)
        return content.question, None
    question, _ = _position(session, ctx, learner, content.position)
    return question, content.position


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
    state = load_session(session=db, learner_id=learner.id, session_id=position.session_id)
    return question_id_at(state.row, position.position, ctx.seed_secret), state


# --- what an answer means: one batch in one write transaction ---------------------------------

_ATTEMPTS = Attempt.__table__
_STORED = ByKeys(
    (_ATTEMPTS.c.client_answer_id,),  # its unique index
    lambda where: select(*_ATTEMPTS.c[_STORED_COLUMNS]).where(where),
)
_AT_POSITIONS = ByKeys(
    (_ATTEMPTS.c.practice_session_id, _ATTEMPTS.c.position),  # ix_attempts_session_position
    lambda where: (
        select(*_ATTEMPTS.c[_STORED_COLUMNS], _ATTEMPTS.c.position)
        .where(where)
        .order_by(_ATTEMPTS.c.created_at, _ATTEMPTS.c.id)
    ),
)
_QUESTION_KEY = _ATTEMPTS.c["learner_id", "card_id", "template_id", "template_version", "seed"]
_ANSWERED = ByKeys(  # ix_attempts_question
    _QUESTION_KEY, lambda where: select(*_QUESTION_KEY).where(where).distinct()
)
_INSERT = insert(_ATTEMPTS).returning(*_ATTEMPTS.c[_STORED_COLUMNS])


def store_batch(db: Session, items: Sequence[Graded]) -> None:
    """Store ``items`` in ``db``'s write transaction, in order (answers in one batch see each
    other), setting each one's ``outcome`` or its own ``error``; the attempts stored are
    rated. Raises only when the database fails (nothing of it is then to be committed)."""
    connection = db.connection()
    by_id: dict[str, StoredAnswer | Graded] = {
        row.client_answer_id: _stored(row)
        for row in _STORED.rows(connection, [(i.client_answer_id,) for i in items])
    }
    at_position: dict[tuple[str, int], StoredAnswer | Graded] = {}
    for row in _AT_POSITIONS.rows(
        connection, [(i.position.session_id, i.position.position) for i in items if i.position]
    ):
        at_position.setdefault((row.practice_session_id, row.position), _stored(row[:-1]))
    new: list[Graded] = []
    replays: list[tuple[Graded, StoredAnswer | Graded]] = []
    for item in items:
        item.outcome = item.error = None
        first = by_id.get(item.client_answer_id)
        where = (item.position.session_id, item.position.position) if item.position else None
        if first is not None:
            if _key(first) == _key(item):
                replays.append((item, first))
            else:
                item.error = answer_id_reused()
        elif where is not None and where in at_position:
            replays.append((item, at_position[where]))
        elif item.refusal is not None:
            item.error = item.refusal
        else:
            new.append(item)
            by_id[item.client_answer_id] = item
            if where is not None:
                at_position[where] = item
    if new:
        _store_new(connection, new)
        db.info[ANSWERS_PENDING] = db.info.get(ANSWERS_PENDING, 0) + len(new)
    for item, first in replays:
        stored = first if isinstance(first, StoredAnswer) else first.outcome
        if isinstance(stored, AnswerOutcome):
            stored = stored.attempt
        assert isinstance(stored, StoredAnswer)
        replayed = grade(item.variant, stored.choice_id)
        item.outcome = AnswerOutcome(stored, item.variant, replayed, replayed=True)


def _store_new(connection: Connection, new: Sequence[Graded]) -> None:
    """Insert the new answers' attempts (their ids from the database) and rate them."""
    answered = _ANSWERED.rows(connection, [_key(item) for item in new])
    firsts = rating.first_answers([_key(item) for item in new], [tuple(row) for row in answered])
    answers = [_rating_answer(item, first) for item, first in zip(new, firsts, strict=True)]
    known = read_known(connection, answers)
    rows = connection.execute(
        _INSERT, [_attempt_row(item, first) for item, first in zip(new, firsts, strict=True)]
    )
    stored = {row.client_answer_id: _stored(row) for row in rows}
    for item in new:
        item.outcome = AnswerOutcome(
            stored[item.client_answer_id], item.variant, item.result, replayed=False
        )
    attempt_ids = [stored[item.client_answer_id].id for item in new]
    store_ratings(connection, rating.rate(answers, known), attempt_ids)


def _order(item: Graded) -> tuple[str, str, str]:
    """The writer's order (a question's answers keep their arrival order)."""
    return (item.learner.id, item.question.card_id, item.question.template_id)


def _key(answer: StoredAnswer | Graded) -> tuple[Any, ...]:
    """A learner's answers to one question (ix_attempts_question)."""
    if isinstance(answer, StoredAnswer):
        return (
            answer.learner_id, answer.card_id, answer.template_id, answer.template_version,
            answer.seed,
        )  # fmt: skip
    question = answer.question
    return (
        answer.learner.id, question.card_id, question.template_id, question.template_version,
        question.seed,
    )  # fmt: skip


def _rating_answer(item: Graded, first_answer: bool) -> rating.Answer:
    question, result = item.question, item.result
    carriers: dict[str, str] = {}
    if first_answer and not result.correct and result.pitfall_id is not None:
        card = item.ctx.catalog.latest(question.card_id)
        carriers = dict(card.templates_offering(result.pitfall_id)) if card else {}
    return rating.Answer(
        item.learner.id, question.card_id, question.point, question.template_id,
        result.correct, result.pitfall_id, item.duration_ms, item.now, first_answer, carriers,
    )  # fmt: skip


def _attempt_row(item: Graded, first_answer: bool) -> dict[str, Any]:
    """The columns of the attempt that stores ``item`` (``attempts``, all but its id)."""
    identity, result, position = item.variant.id, item.result, item.position
    return {
        "learner_id": item.learner.id,
        "card_id": identity.card_id,
        "card_version": item.ctx.catalog.locate(identity).card.version,
        "point": identity.point,
        "template_id": identity.template_id,
        "template_version": identity.template_version,
        "seed": identity.seed,
        "params": dict(item.variant.params),
        "choices": stored_choices(item.variant),
        "choice_id": result.chosen_choice_id,
        "correct_choice_id": result.correct_choice_id,
        "correct": result.correct,
        "pitfall_id": result.pitfall_id,
        "client_answer_id": item.client_answer_id,
        "first_answer": first_answer,
        "practice_session_id": position.session_id if position else None,
        "position": position.position if position else None,
        "duration_ms": item.duration_ms,
        "answered_at": item.answered_at,
        "dismissed": False,
        "created_at": item.now,
    }


def stored_choices(variant: Variant) -> list[dict[str, Any]]:
    """The choices shown, as an attempt stores them (``attempts.choices``)."""
    return [
        {
            "id": choice.id,
            "text": {"en": choice.text.en, "zh": choice.text.zh},
            "value": choice.value,
            "unit": choice.unit,
            "pitfall_id": choice.pitfall_id,
        }
        for choice in variant.choices
    ]


def stored_question(attempt: Attempt) -> QuestionId:
    return QuestionId(
        attempt.card_id, attempt.point, attempt.template_id, attempt.template_version, attempt.seed
    )


_writers_lock = threading.Lock()


def new_writer(sessions: sessionmaker[Session]) -> AnswerWriter[Graded]:
    """A writer of answers (one per database and process: it is the one writer)."""
    return AnswerWriter(sessions, store_batch, _order)


def answer_writer(state: Any) -> AnswerWriter[Graded]:
    """The app's writer (``app.state``), started with its first answer."""
    writer: AnswerWriter[Graded] | None = getattr(state, "answer_writer", None)
    if writer is None:
        with _writers_lock:
            writer = getattr(state, "answer_writer", None)
            if writer is None:
                writer = new_writer(state.sessionmaker)
                state.answer_writer = writer
    return writer
