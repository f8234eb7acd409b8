"""Answering a question: grade it, store the attempt exactly once, rate the review, replay repeats.

Idempotency rests on the unique ``attempts.client_answer_id``: the first request stores the
attempt; a repeat (a retried request, a double-submitted form, a concurrent duplicate that loses
the insert race) gets the stored attempt's result. The same id for another learner or question is
``answer_id_reused``. Inside a practice session a position keeps its first answer: answering it
again (Back, another choice, resubmit) shows that first answer.

Only a learner's first answer to a question rates its review item: a retry after seeing the key
is stored (``first_answer`` false) but does not count as remembering.

A question token bound to a learner (fetched with a bearer token) or a session token (the
session is its learner's) answered by anyone else is refused: 403 ``token_not_yours``.

The API's answers go through :class:`AnswerWriter` (group commit): the answers that arrive
together are stored in one write transaction by one writer thread (one insert of their attempts,
one rating pass); each request is acknowledged only after that transaction committed, and a batch
whose commit fails acknowledges none of its answers (each request gets the error, a client resends
with the same ``client_answer_id``). A batch that cannot be stored whole (a lost insert race on
PostgreSQL) is rolled back and tried again, then written answer by answer, each in its own
savepoint, so one answer's failure is that answer's only.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app.auth.service import LearnerRef, now_utc
from app.db import (
    ANSWERS_PENDING,
    DriverSQL,
    KeyColumns,
    KeyedSelect,
    Read,
    WriterTurn,
    next_ids,
    next_ids_of,
    next_ids_read,
    pipelined,
    read_together,
    write_transaction,
)
from app.domain.catalog import Catalog
from app.domain.generation import Grade, UnknownChoice, Variant, grade
from app.domain.identity import QuestionId
from app.domain.messages import Message
from app.models import Attempt, PracticeSession
from app.practice.questions import (
    QuestionSigner,
    SessionPosition,
    check_token_owner,
    regenerate,
    token_not_yours,
)
from app.practice.sessions import check_can_answer, load_session, question_id_at
from app.problems import Conflict, UnknownChoiceError
from app.review.service import (
    Rating,
    RatingPass,
    RatingSubject,
    ReviewReads,
    ReviewsKnown,
    ReviewWrites,
)

MAX_DURATION_MS = 24 * 3600 * 1000
WRITE_TRIES = 3  # a batch written whole, before it is written answer by answer
log = logging.getLogger(__name__)


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

    @classmethod
    def of(cls, row: Any) -> StoredAnswer:
        """From an ``Attempt`` (or a row with its columns)."""
        return cls(*(getattr(row, name) for name in _STORED_COLUMNS))


_STORED_COLUMNS = tuple(StoredAnswer.__slots__)


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


def answer_id_reused() -> Conflict:
    return Conflict(
        Message(
            "This client_answer_id was already used for another answer: send a new one for "
            "each answer."
        ),
        code="answer_id_reused",
    )


def resolve_token(
    *, session: Session, ctx: Context, learner: LearnerRef, token: str
) -> tuple[QuestionId, SessionPosition | None]:
    content = ctx.signer.verify(token, ctx.catalog)
    if content.position is None:
        assert content.question is not None
        check_token_owner(content, learner.id)
        return content.question, None
    owner = session.scalar(
        select(PracticeSession.learner_id).where(PracticeSession.id == content.position.session_id)
    )
    if owner is not None and owner != learner.id:
        session.commit()
        raise token_not_yours()
    state = load_session(
        session=session, learner_id=learner.id, session_id=content.position.session_id
    )
    return question_id_at(state.row, content.position.position, ctx.seed_secret), content.position


def answer_question(
    *,
    session: Session,
    ctx: Context,
    learner: LearnerRef,
    token: str,
    choice_id: str,
    client_answer_id: str,
    duration_ms: int | None = None,
    answered_at: datetime | None = None,
    now: datetime | None = None,
) -> AnswerOutcome:
    """Grade ``choice_id`` for the question in ``token`` and record the attempt (once)."""
    now = now or ctx.clock()
    question, position = resolve_token(session=session, ctx=ctx, learner=learner, token=token)
    variant = regenerate(ctx.catalog, question)
    try:
        result = grade(variant, choice_id)
    except UnknownChoice:
        offered = ", ".join(c.id for c in variant.choices)
        raise UnknownChoiceError(
            Message(
                "Unknown choice %(choice)s: this question offers %(offered)s.",
                choice=repr(choice_id),
                offered=offered,
            )
        ) from None
    if duration_ms is not None:
        duration_ms = max(0, min(duration_ms, MAX_DURATION_MS))

    stored = _find(session, client_answer_id)
    if stored is None:
        if position is not None:
            state = load_session(
                session=session, learner_id=learner.id, session_id=position.session_id
            )
            first = state.answered.get(position.position)
            if first is not None:
                return _replay(StoredAnswer.of(first), variant)
            check_can_answer(state, now)
        try:
            with write_transaction(session):
                stored = _find(session, client_answer_id)
                if stored is None:
                    attempt = _store(
                        session,
                        ctx,
                        learner,
                        variant,
                        result,
                        client_answer_id,
                        position,
                        duration_ms,
                        answered_at,
                        now,
                    )
                    return AnswerOutcome(attempt, variant, result, replayed=False)
        except IntegrityError:
            # A concurrent request with the same client_answer_id won the insert.
            stored = _find(session, client_answer_id)
            if stored is None:
                raise
    if not _same_question(stored, learner, question):
        raise answer_id_reused()
    return _replay(stored, variant)


def _store(
    session: Session,
    ctx: Context,
    learner: LearnerRef,
    variant: Variant,
    result: Grade,
    client_answer_id: str,
    position: SessionPosition | None,
    duration_ms: int | None,
    answered_at: datetime | None,
    now: datetime,
) -> StoredAnswer:
    key = _question_key(learner.id, variant.id)
    row = attempt_row(
        ctx,
        learner,
        variant,
        result,
        client_answer_id,
        position,
        duration_ms,
        answered_at,
        now,
        first_answer=key not in _answered(session.connection(), [key]),
    )
    return store_attempts(session, [(ctx.catalog, row)])[0]


def attempt_row(
    ctx: Context,
    learner: LearnerRef,
    variant: Variant,
    result: Grade,
    client_answer_id: str,
    position: SessionPosition | None,
    duration_ms: int | None,
    answered_at: datetime | None,
    now: datetime,
    *,
    first_answer: bool,
) -> dict[str, Any]:
    """The columns of the attempt that stores this answer (``attempts``, all but its id)."""
    identity = variant.id
    located = ctx.catalog.locate(identity)
    return {
        "learner_id": learner.id,
        "card_id": identity.card_id,
        "card_version": located.card.version,
        "point": identity.point,
        "template_id": identity.template_id,
        "template_version": identity.template_version,
        "seed": identity.seed,
        "params": dict(variant.params),
        "choices": stored_choices(variant),
        "choice_id": result.chosen_choice_id,
        "correct_choice_id": result.correct_choice_id,
        "correct": result.correct,
        "pitfall_id": result.pitfall_id,
        "client_answer_id": client_answer_id,
        "first_answer": first_answer,
        "practice_session_id": position.session_id if position else None,
        "position": position.position if position else None,
        "duration_ms": duration_ms,
        "answered_at": answered_at,
        "dismissed": False,
        "created_at": now,
    }


_ATTEMPTS = Attempt.__table__
_INSERT_ATTEMPTS = DriverSQL.insert(_ATTEMPTS)


def store_attempts(
    session: Session,
    rows: Sequence[tuple[Catalog, dict[str, Any]]],
    *,
    known: ReviewsKnown | None = None,
) -> list[StoredAnswer]:
    """Insert the attempts (``attempt_row``s, each with the catalog it was graded by) and rate
    the first answers among them, in order (app.review.service.RatingPass), in the caller's
    write transaction; the stored answers, in order.

    Everything is read first: what rating needs (``known`` when the caller read it with its own
    reads), then ids for the attempts with the review items the ratings touch, then ids for
    the items rating creates (app.db.next_ids; on PostgreSQL each step one round trip,
    app.db.read_together). Then every write goes to the database together (app.db.pipelined:
    one round trip on PostgreSQL): the attempts in one executemany, then the rating's. Driver
    statements on the session's connection (app.db.DriverSQL); the session counts them for the
    answers-stored metric once it commits."""
    if not rows:
        return []
    connection = session.connection()
    dialect = connection.dialect
    first = [index for index, (_, row) in enumerate(rows) if row["first_answer"]]
    ratings = [_rating(rows[index][1], rows[index][0]) for index in first]
    if ratings and known is None:
        reads = ReviewReads(dialect, [r.subject for r in ratings])
        known = ReviewReads.known(read_together(connection, reads.reads))
    rating = RatingPass(ratings, known) if ratings and known is not None else None
    attempt_rows, item_rows = read_together(
        connection,
        [
            next_ids_read(dialect, "attempts", len(rows)),
            rating.item_read(dialect) if rating is not None else None,
        ],
    )
    attempt_ids = next_ids_of(dialect, attempt_rows, len(rows))
    reviews = ReviewWrites([], [], [])
    if rating is not None:
        creating = rating.take_items(item_rows)
        item_ids = next_ids(connection, "review_items", creating)
        reviews = rating.rate([attempt_ids[index] for index in first], item_ids)
    with pipelined(connection):
        _INSERT_ATTEMPTS.run_many(
            connection,
            [
                {"id": attempt_id, **row}
                for attempt_id, (_, row) in zip(attempt_ids, rows, strict=True)
            ],
        )
        reviews.run(connection)
    session.info[ANSWERS_PENDING] = session.info.get(ANSWERS_PENDING, 0) + len(rows)
    return [
        StoredAnswer(attempt_id, *(row[name] for name in _STORED_COLUMNS[1:]))
        for attempt_id, (_, row) in zip(attempt_ids, rows, strict=True)
    ]


def _rating(row: dict[str, Any], catalog: Catalog) -> Rating:
    return Rating(
        learner_id=row["learner_id"],
        card_id=row["card_id"],
        point=row["point"],
        template_id=row["template_id"],
        correct=row["correct"],
        pitfall_id=row["pitfall_id"],
        duration_ms=row["duration_ms"],
        now=row["created_at"],
        catalog=catalog,
    )


def _replay(stored: StoredAnswer, variant: Variant) -> AnswerOutcome:
    return AnswerOutcome(stored, variant, grade(variant, stored.choice_id), replayed=True)


def _find(session: Session, client_answer_id: str) -> StoredAnswer | None:
    found = _stored_answers(session.connection(), [client_answer_id])
    return found.get(client_answer_id)


_STORED = KeyedSelect(
    KeyColumns(("client_answer_id",), ("TEXT",)),  # its unique index
    f"SELECT {', '.join(_STORED_COLUMNS)} FROM attempts WHERE {{where}}",
)


def _stored_answers(connection: Connection, ids: list[str]) -> dict[str, StoredAnswer]:
    """The stored answers among ``client_answer_id``s ``ids``."""
    (rows,) = read_together(connection, [_stored_read(connection.dialect, ids)])
    return {row[1]: StoredAnswer(*row) for row in rows}


def _stored_read(dialect: Dialect, ids: list[str]) -> Read | None:
    return _STORED.read(dialect, [(client_answer_id,) for client_answer_id in dict.fromkeys(ids)])


def _same_question(stored: StoredAnswer, learner: LearnerRef, question: QuestionId) -> bool:
    return (
        stored.learner_id == learner.id
        and stored.card_id == question.card_id
        and stored.template_id == question.template_id
        and stored.template_version == question.template_version
        and stored.seed == question.seed
    )


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


# --- group commit -----------------------------------------------------------------------------


@dataclass
class _Pending:
    """One answer waiting for the writer: what to store, and where to say how it went."""

    ctx: Context
    learner: LearnerRef
    question: QuestionId
    variant: Variant
    result: Grade
    client_answer_id: str
    duration_ms: int | None
    answered_at: datetime | None
    now: datetime
    future: asyncio.Future[AnswerOutcome]
    loop: asyncio.AbstractEventLoop
    outcome: AnswerOutcome | None = None
    error: BaseException | None = None


class AnswerWriter:
    """Stores answers by group commit on one thread: one write transaction per batch.

    The writer takes every answer queued while the previous batch was written (up to
    ``max_batch``), stores them in one transaction (``BEGIN IMMEDIATE`` on SQLite; see
    :meth:`_write` for a batch that cannot be stored whole), commits, and only then resolves
    each request's future. A failed commit resolves
    them all with its error: nothing is acknowledged that is not stored. Inside the transaction
    each answer is checked against what is stored (its ``client_answer_id``, earlier answers to
    the same question for ``first_answer``), so answers in one batch see each other.
    """

    def __init__(self, sessions: sessionmaker[Session], *, max_batch: int = 256) -> None:
        self._sessions = sessions
        self._max_batch = max_batch
        self._turn = WriterTurn(sessions.kw["bind"])
        self._queue: queue.SimpleQueue[_Pending] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="answer-writer", daemon=True)
        self._thread.start()

    async def submit(self, pending_args: dict[str, Any]) -> AnswerOutcome:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[AnswerOutcome] = loop.create_future()
        self._queue.put(_Pending(**pending_args, future=future, loop=loop))
        return await future

    def _run(self) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < self._max_batch:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            try:
                self._write(batch)
            except BaseException as exc:  # noqa: BLE001 - the commit failed: acknowledge none
                log.warning("a batch of %d answers was not stored: %s", len(batch), exc)
                for item in batch:
                    item.outcome, item.error = None, exc
            # One wake-up per event loop (a worker has one), not one per answer.
            by_loop: dict[asyncio.AbstractEventLoop, list[_Pending]] = {}
            for item in batch:
                by_loop.setdefault(item.loop, []).append(item)
            for loop, items in by_loop.items():
                try:
                    loop.call_soon_threadsafe(_settle_all, items)
                except RuntimeError:  # its event loop is closed: nobody waits for it
                    pass

    def _write(self, batch: list[_Pending]) -> None:
        """The whole batch in one go; when that fails (a lost insert race on PostgreSQL, an
        answer that cannot be stored), it is rolled back and written again answer by answer."""
        # In one order on every worker (a question's answers keep their arrival order), so two
        # processes' batches take the review items' row locks alike and do not deadlock.
        ordered = sorted(
            batch, key=lambda i: (i.learner.id, i.question.card_id, i.question.template_id)
        )
        with self._turn():  # several processes on one SQLite file: one writer at a time
            self._write_in_turn(ordered)

    def _write_in_turn(self, batch: list[_Pending]) -> None:
        for attempt in range(WRITE_TRIES):
            try:
                self._write_together(batch)
                return
            except Exception as exc:  # noqa: BLE001 - rolled back: nothing of it is stored
                # A deadlock or a concurrent insert of the same review item (PostgreSQL with
                # several processes): the next try reads what the other process committed.
                log.info("a batch of %d answers is tried again (%d): %s", len(batch), attempt, exc)
                for item in batch:
                    item.outcome, item.error = None, None
        self._write_each(batch)

    def _write_together(self, batch: list[_Pending]) -> None:
        """One round of reads (the answers stored already under these ids, the questions
        answered before, and what rating them needs; on PostgreSQL sent together,
        app.db.read_together), then every attempt inserted and rated at once (see
        :func:`store_attempts`: its own reads, then the writes): driver statements, as many for
        one answer as for a full batch."""
        with self._sessions() as session, write_transaction(session):
            connection = session.connection()
            dialect = connection.dialect
            review_reads = ReviewReads(dialect, [_subject(item) for item in batch])
            stored_rows, answered_rows, *review_rows = read_together(
                connection,
                [
                    _stored_read(dialect, [item.client_answer_id for item in batch]),
                    _answered_read(
                        dialect, [_question_key(item.learner.id, item.question) for item in batch]
                    ),
                    *review_reads.reads,
                ],
            )
            stored = {row[1]: StoredAnswer(*row) for row in stored_rows}
            answered = set(answered_rows)
            storing: dict[str, tuple[_Pending, dict[str, Any]]] = {}
            repeats: list[_Pending] = []  # an id sent twice in this batch: the second replays
            for item in batch:
                found = stored.get(item.client_answer_id)
                if found is not None:
                    if _same_question(found, item.learner, item.question):
                        item.outcome = _replay(found, item.variant)
                    else:
                        item.error = answer_id_reused()
                    continue
                if item.client_answer_id in storing:
                    repeats.append(item)
                    continue
                key = _question_key(item.learner.id, item.question)
                storing[item.client_answer_id] = (
                    item,
                    attempt_row(
                        item.ctx,
                        item.learner,
                        item.variant,
                        item.result,
                        item.client_answer_id,
                        None,
                        item.duration_ms,
                        item.answered_at,
                        item.now,
                        first_answer=key not in answered,
                    ),
                )
                answered.add(key)
            attempts = store_attempts(
                session,
                [(item.ctx.catalog, row) for item, row in storing.values()],
                known=ReviewReads.known(review_rows),
            )
            for (item, _), attempt in zip(storing.values(), attempts, strict=True):
                item.outcome = AnswerOutcome(attempt, item.variant, item.result, replayed=False)
            for item in repeats:
                first = storing[item.client_answer_id][0].outcome
                assert first is not None
                if _same_question(first.attempt, item.learner, item.question):
                    item.outcome = _replay(first.attempt, item.variant)
                else:
                    item.error = answer_id_reused()

    def _write_each(self, batch: list[_Pending]) -> None:
        with self._sessions() as session, write_transaction(session):
            for item in batch:
                try:
                    with session.begin_nested():
                        item.outcome = _store_or_replay(session, item)
                except IntegrityError:
                    # Another process stored this client_answer_id meanwhile (PostgreSQL).
                    stored = _find(session, item.client_answer_id)
                    item.outcome, item.error = None, None
                    if stored is None:  # a review item inserted meanwhile: once more
                        try:
                            with session.begin_nested():
                                item.outcome = _store_or_replay(session, item)
                        except Exception:  # noqa: BLE001 - not stored: say so, the client resends
                            item.error = Conflict(
                                "the answer could not be stored: send it again",
                                code="answer_conflict",
                            )
                    elif not _same_question(stored, item.learner, item.question):
                        item.error = answer_id_reused()
                    else:
                        item.outcome = _replay(stored, item.variant)
                except Exception as exc:  # noqa: BLE001 - this answer only; its savepoint is gone
                    item.outcome, item.error = None, exc


def _store_or_replay(session: Session, item: _Pending) -> AnswerOutcome:
    stored = _find(session, item.client_answer_id)
    if stored is not None:
        if not _same_question(stored, item.learner, item.question):
            raise answer_id_reused()
        return _replay(stored, item.variant)
    attempt = _store(
        session,
        item.ctx,
        item.learner,
        item.variant,
        item.result,
        item.client_answer_id,
        None,
        item.duration_ms,
        item.answered_at,
        item.now,
    )
    return AnswerOutcome(attempt, item.variant, item.result, replayed=False)


_QUESTION_KEY = KeyColumns(  # ix_attempts_question
    ("learner_id", "card_id", "template_id", "template_version", "seed"),
    ("TEXT", "TEXT", "TEXT", "INTEGER", "INTEGER"),
)
# Which (learner, question) pairs of a batch were answered before.
_ANSWERED = KeyedSelect(
    _QUESTION_KEY,
    f"SELECT DISTINCT {', '.join(_QUESTION_KEY.names)} FROM attempts WHERE {{where}}",
)


def _question_key(learner_id: str, question: QuestionId) -> tuple[Any, ...]:
    """A learner's answers to one question, as ``_QUESTION_KEY`` names them."""
    return (
        learner_id,
        question.card_id,
        question.template_id,
        question.template_version,
        question.seed,
    )


def _answered(connection: Connection, keys: list[tuple[Any, ...]]) -> set[tuple[Any, ...]]:
    """Which of ``keys`` (:func:`_question_key`) have a stored answer: those whose next answer
    is not the learner's first to the question."""
    (rows,) = read_together(connection, [_answered_read(connection.dialect, keys)])
    return set(rows)


def _answered_read(dialect: Dialect, keys: list[tuple[Any, ...]]) -> Read | None:
    return _ANSWERED.read(dialect, list(dict.fromkeys(keys)))


def _subject(item: _Pending) -> RatingSubject:
    """What rating ``item`` may need read (app.review.service.ReviewReads)."""
    return RatingSubject.of(
        item.learner.id,
        item.question.card_id,
        item.question.template_id,
        correct=item.result.correct,
        pitfall_id=item.result.pitfall_id,
        catalog=item.ctx.catalog,
    )


def _settle_all(items: list[_Pending]) -> None:
    for item in items:
        if item.future.done():  # the request was cancelled (the client went away)
            continue
        if item.error is not None:
            item.future.set_exception(item.error)
        else:
            assert item.outcome is not None
            item.future.set_result(item.outcome)


_writers_lock = threading.Lock()


def answer_writer(state: Any) -> AnswerWriter:
    """The app's writer (``app.state``), started with its first answer."""
    writer: AnswerWriter | None = getattr(state, "answer_writer", None)
    if writer is None:
        with _writers_lock:
            writer = getattr(state, "answer_writer", None)
            if writer is None:
                writer = AnswerWriter(state.sessionmaker)
                state.answer_writer = writer
    return writer


def graded(ctx: Context, question: QuestionId, choice_id: str) -> tuple[Variant, Grade]:
    variant = regenerate(ctx.catalog, question)
    try:
        return variant, grade(variant, choice_id)
    except UnknownChoice:
        offered = ", ".join(c.id for c in variant.choices)
        raise UnknownChoiceError(
            Message(
                "Unknown choice %(choice)s: this question offers %(offered)s.",
                choice=repr(choice_id),
                offered=offered,
            )
        ) from None


async def answer_question_grouped(
    *,
    state: Any,
    ctx: Context,
    learner: LearnerRef,
    token: str,
    choice_id: str,
    client_answer_id: str,
    duration_ms: int | None = None,
    answered_at: datetime | None = None,
    now: datetime | None = None,
) -> AnswerOutcome:
    """:func:`answer_question` for the event loop: a question token is graded here and stored
    by the app's :class:`AnswerWriter`; a session token takes the one-request path in the
    threadpool (its position's first answer and the exam clock are checked there)."""
    import anyio.to_thread  # the threadpool the web framework's sync routes use

    now = now or ctx.clock()
    content = ctx.signer.verify(token, ctx.catalog)
    if content.position is not None:

        def in_session() -> AnswerOutcome:
            with state.sessionmaker() as session:
                return answer_question(
                    session=session,
                    ctx=ctx,
                    learner=learner,
                    token=token,
                    choice_id=choice_id,
                    client_answer_id=client_answer_id,
                    duration_ms=duration_ms,
                    answered_at=answered_at,
                    now=now,
                )

        return await anyio.to_thread.run_sync(in_session)
    assert content.question is not None
    check_token_owner(content, learner.id)
    variant, result = graded(ctx, content.question, choice_id)
    if duration_ms is not None:
        duration_ms = max(0, min(duration_ms, MAX_DURATION_MS))
    return await answer_writer(state).submit(
        {
            "ctx": ctx,
            "learner": learner,
            "question": content.question,
            "variant": variant,
            "result": result,
            "client_answer_id": client_answer_id,
            "duration_ms": duration_ms,
            "answered_at": answered_at,
            "now": now,
        }
    )
