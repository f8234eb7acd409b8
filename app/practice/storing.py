"""What an answer means, stored: one batch of graded answers in one write transaction
(:func:`store_batch`, the :class:`~app.practice.writer.AnswerWriter`'s store).

- idempotent by ``client_answer_id`` (its unique index): a repeat (a retried request, a
  double-submitted form, a concurrent duplicate) gets the stored attempt's result; the same id for
  another learner or question is 409 ``answer_id_reused``;
- inside a practice session a position keeps its first answer: answering it again (Back, another
  choice, resubmit) shows that first answer; a new answer after the exam's time is refused;
- only a learner's first answer to a question rates its review item (app.domain.rating): a retry
  after seeing the key is stored with ``first_answer`` false.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, select
from sqlalchemy.orm import Session

from app.auth.service import LearnerRef, as_utc
from app.batch import ByKeys, NewIds, pipelined, read_together
from app.db import ATTEMPTS_PENDING
from app.domain import rating
from app.domain.catalog import Catalog
from app.domain.generation import Grade, Variant, grade
from app.domain.identity import QuestionId
from app.domain.messages import Message
from app.domain.typed import grade_typed, read_typed
from app.models import Attempt
from app.practice.changes import LEARNER_CHANGES, next_changes, set_changes
from app.practice.questions import SessionPosition
from app.problems import Conflict, Problem
from app.review.service import known_of, known_reads, store_ratings


@dataclass(frozen=True, slots=True)
class StoredAttempt:
    """What answering needs of a stored attempt (a row of ``attempts``): its ids, the question
    it answered and the choice it made (or the number and unit it typed)."""

    id: int
    client_answer_id: str
    learner_id: str
    card_id: str
    template_id: str
    template_version: int
    seed: int
    choice_id: str | None  # None: a typed answer
    practice_session_id: str | None
    typed_value: str | None = None
    typed_unit: str | None = None


_STORED_COLUMNS = tuple(StoredAttempt.__slots__)


def _stored(row: Sequence[Any]) -> StoredAttempt:
    """From a row of ``_STORED_COLUMNS``."""
    return StoredAttempt(*tuple(row))


@dataclass(frozen=True)
class AnswerOutcome:
    attempt: StoredAttempt
    variant: Variant
    grade: Grade
    replayed: bool  # the stored first answer, not this request's choice
    # An exam's answer before it ends: stored, its result not told (SessionState.withholds_feedback)
    withheld: bool = False
    # The id this answer was sent with (a replay of the position's first answer may have been
    # stored under another): what a client matches the result to. None: the stored one's.
    sent_id: str | None = None

    @property
    def client_answer_id(self) -> str:
        return self.sent_id if self.sent_id is not None else self.attempt.client_answer_id


_ARRIVALS: Iterator[int] = itertools.count()  # Graded.arrival


@dataclass
class Graded:
    """An answer graded and waiting for the writer; ``outcome`` or ``error`` once written."""

    catalog: Catalog
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
    # Asked without its choices (a typed token or a typed session): a typed answer is then recall.
    asked_typed: bool = False
    withheld: bool = False  # an exam's answer before it ends: its result is not told
    outcome: AnswerOutcome | None = None
    error: BaseException | None = None
    # When it was graded, against every other answer of this process: which of two answers
    # sent with one client_answer_id came first, whatever order the writer stores them in.
    arrival: int = field(default_factory=lambda: next(_ARRIVALS))


def answer_id_reused() -> Conflict:
    return Conflict(
        Message(
            "This client_answer_id was already used for another answer: send a new one for "
            "each answer."
        ),
        code="answer_id_reused",
    )


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
_ATTEMPT_IDS = NewIds(_ATTEMPTS, key="client_answer_id")  # its unique index


def store_batch(db: Session, items: Sequence[Graded]) -> None:
    """Store ``items`` in ``db``'s write transaction, in order (answers in one batch see each
    other), setting each one's ``outcome`` or its own ``error``; the attempts stored are
    rated. Raises only when the database fails (nothing of it is then to be committed).

    Two steps, each sent to the database together (app.batch): every read the batch may need
    (stored answers by id and by session position, the questions answered before, what rating
    needs, ids for the new attempts), then every write."""
    connection = db.connection()
    dialect = connection.dialect
    maybe_first = [_rating_answer(item, True) for item in items]  # what rating may need
    changes, stored_rows, position_rows, answered, drawn, *known_rows = read_together(
        connection,
        [
            # first: the learners' rows are locked before their review items, as everywhere
            LEARNER_CHANGES.read(dialect, [(item.learner.id,) for item in items]),
            _STORED.read(dialect, [(i.client_answer_id,) for i in items]),
            _AT_POSITIONS.read(
                dialect,
                [(i.position.session_id, i.position.position) for i in items if i.position],
            ),
            _ANSWERED.read(dialect, [_key(item) for item in items]),
            _ATTEMPT_IDS.read(dialect, len(items)),
            *known_reads(dialect, rating.needs(maybe_first)),
        ],
    )
    by_id: dict[str, StoredAttempt | Graded] = {
        row.client_answer_id: _stored(row) for row in stored_rows
    }
    at_position: dict[tuple[str, int], StoredAttempt | Graded] = {}
    for row in position_rows:
        at_position.setdefault((row.practice_session_id, row.position), _stored(row[:-1]))
    new: list[Graded] = []
    replays: list[tuple[Graded, StoredAttempt | Graded]] = []
    # Which answer claims an id or a session's position: the first to arrive (the writer's
    # order groups a learner's answers by template, for its locks); stored in the order given.
    for item in sorted(items, key=lambda graded: graded.arrival):
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
    chosen = {id(item) for item in new}
    new = [item for item in items if id(item) in chosen]  # stored in the order given
    if new:
        firsts = rating.first_answers([_key(item) for item in new], [tuple(r) for r in answered])
        as_first = {id(item): answer for item, answer in zip(items, maybe_first, strict=True)}
        # A running exam's answers are rated when it ends (app.practice.sessions): until then
        # not even the review schedule may tell whether they were right.
        rated = [index for index, item in enumerate(new) if not item.withheld]
        answers = [
            as_first[id(new[i])] if firsts[i] else _rating_answer(new[i], False) for i in rated
        ]
        change = next_changes(changes)
        change = {item.learner.id: change[item.learner.id] for item in new}
        rows = [
            _attempt_row(item, first, change[item.learner.id])
            for item, first in zip(new, firsts, strict=True)
        ]
        with pipelined(connection):
            set_changes(connection, change)
            attempt_ids = _ATTEMPT_IDS.insert(connection, rows, drawn)
            writes = rating.rate(answers, known_of(known_rows))
            store_ratings(connection, writes, [attempt_ids[i] for i in rated])
        for item, attempt_id, row in zip(new, attempt_ids, rows, strict=True):
            item.outcome = AnswerOutcome(
                _stored_of(attempt_id, row),
                item.variant,
                item.result,
                replayed=False,
                withheld=item.withheld,
            )
        db.info[ATTEMPTS_PENDING] = db.info.get(ATTEMPTS_PENDING, 0) + len(new)
    for item, first in replays:
        stored = first if isinstance(first, StoredAttempt) else first.outcome
        if isinstance(stored, AnswerOutcome):
            stored = stored.attempt
        assert isinstance(stored, StoredAttempt)
        replayed = regrade(item.variant, stored.choice_id, stored.typed_value, stored.typed_unit)
        item.outcome = AnswerOutcome(
            stored,
            item.variant,
            replayed,
            replayed=True,
            withheld=item.withheld,
            sent_id=item.client_answer_id,
        )


def regrade(
    variant: Variant, choice_id: str | None, typed_value: str | None, typed_unit: str | None
) -> Grade:
    """A stored answer graded again: its choice, or the number and unit it typed."""
    if choice_id is None:
        assert typed_value is not None and typed_unit is not None
        return grade_typed(variant, read_typed(variant, typed_value, typed_unit))
    return grade(variant, choice_id)


def _stored_of(attempt_id: int, row: dict[str, Any]) -> StoredAttempt:
    """The stored answer an inserted attempt row is."""
    return StoredAttempt(attempt_id, *(row[name] for name in _STORED_COLUMNS[1:]))


def writer_order(item: Graded) -> tuple[str, str, str]:
    """The writer's order (a question's answers keep their arrival order)."""
    return (item.learner.id, item.question.card_id, item.question.template_id)


def _key(answer: StoredAttempt | Graded) -> tuple[Any, ...]:
    """A learner's answers to one question (ix_attempts_question)."""
    if isinstance(answer, StoredAttempt):
        return (
            answer.learner_id, answer.card_id, answer.template_id, answer.template_version,
            answer.seed,
        )  # fmt: skip
    question = answer.question
    return (
        answer.learner.id, question.card_id, question.template_id, question.template_version,
        question.seed,
    )  # fmt: skip


def rate_stored(
    connection: Connection, catalog: Catalog, attempts: Sequence[Attempt], asked_typed: bool
) -> None:
    """Rate answers stored without their rating (an exam's, once it ends), in the order given,
    in the caller's write transaction: as :func:`store_batch` would have rated them then."""
    answers = [
        _answer_of(catalog, attempt, asked_typed and attempt.typed_value is not None)
        for attempt in attempts
    ]
    if not answers:
        return
    known_rows = read_together(connection, known_reads(connection.dialect, rating.needs(answers)))
    writes = rating.rate(answers, known_of(known_rows))
    store_ratings(connection, writes, [attempt.id for attempt in attempts])


def _answer_of(catalog: Catalog, attempt: Attempt, typed: bool) -> rating.Answer:
    carriers = _carriers(catalog, attempt.card_id, attempt.first_answer, attempt.correct,
                         attempt.pitfall_id)  # fmt: skip
    return rating.Answer(
        attempt.learner_id, attempt.card_id, attempt.point, attempt.template_id, attempt.correct,
        attempt.pitfall_id, attempt.duration_ms, attempt.created_at, attempt.first_answer,
        carriers, typed=typed,
        answered_at=None if attempt.answered_at is None else as_utc(attempt.answered_at),
    )  # fmt: skip


def _carriers(
    catalog: Catalog, card_id: str, first_answer: bool, correct: bool, pitfall_id: str | None
) -> dict[str, str]:
    """The card's templates offering a first wrong answer's pitfall (template id -> point)."""
    if not first_answer or correct or pitfall_id is None:
        return {}
    card = catalog.latest(card_id)
    return dict(card.templates_offering(pitfall_id)) if card else {}


def _rating_answer(item: Graded, first_answer: bool) -> rating.Answer:
    question, result = item.question, item.result
    carriers = _carriers(
        item.catalog, question.card_id, first_answer, result.correct, result.pitfall_id
    )
    return rating.Answer(
        item.learner.id, question.card_id, question.point, question.template_id,
        result.correct, result.pitfall_id, item.duration_ms, item.now, first_answer, carriers,
        typed=result.typed is not None and item.asked_typed, answered_at=item.answered_at,
    )  # fmt: skip


def _attempt_row(item: Graded, first_answer: bool, change: int) -> dict[str, Any]:
    """The columns of the attempt that stores ``item`` (``attempts``, all but its id)."""
    identity, result, position = item.variant.id, item.result, item.position
    return {
        "learner_id": item.learner.id,
        "card_id": identity.card_id,
        "card_version": item.catalog.locate(identity).card.version,
        "point": identity.point,
        "template_id": identity.template_id,
        "template_version": identity.template_version,
        "seed": identity.seed,
        "params": dict(item.variant.params),
        "choices": [] if result.typed is not None else stored_choices(item.variant),
        "choice_id": result.chosen_choice_id,
        "correct_choice_id": result.correct_choice_id,
        "correct": result.correct,
        "pitfall_id": result.pitfall_id,
        "client_answer_id": item.client_answer_id,
        "first_answer": first_answer,
        "practice_session_id": position.session_id if position else None,
        "typed_value": result.typed.text if result.typed is not None else None,
        "typed_unit": result.typed.unit if result.typed is not None else None,
        "position": position.position if position else None,
        "duration_ms": item.duration_ms,
        "answered_at": item.answered_at,
        "dismissed": False,
        "created_at": item.now,
        "change_seq": change,
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
