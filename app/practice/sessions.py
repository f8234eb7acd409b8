"""Practice sessions: start one in a mode, serve its questions in order, summarise it at the end.

A session ends when the learner ends it, when every question has an answer, or (a timed exam) at
its deadline, whatever the browser does (app.domain.practice.session_end): every reader computes
that end the same way, and the summary stores it in ``finished_at`` on its first read after it
(:func:`settle_session`, idempotent). A new answer after the end is refused with the summary's URL
(:class:`SessionOver`); an answer sent as an exam's clock ran out still counts (``EXAM_GRACE``).
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import exists, or_, select, update
from sqlalchemy.orm import Session

from app.auth.service import as_utc, new_id, now_utc
from app.db import write_transaction
from app.domain.catalog import Catalog
from app.domain.identity import QuestionId
from app.domain.messages import Message
from app.domain.practice import (
    DEFAULT_SIZE,
    EXAM_SECONDS_PER_QUESTION,
    MAX_SIZE,
    SCOPE_MODES,
    plan_deck_session,
    plan_session,
    position_seed,
    session_end,
)
from app.models import Attempt, PracticeSession, ReviewLog
from app.practice.changes import session_change, told_at
from app.practice.questions import (
    Question,
    QuestionSigner,
    SessionPosition,
    get_card,
    regenerate,
)
from app.practice.recent import recent_answers
from app.practice.scopes import card_part, deck_parts
from app.practice.storing import rate_stored
from app.problems import Conflict, InvalidInput, NotFound

EXAM_GRACE = timedelta(seconds=10)  # an answer sent as the clock ran out still counts


@dataclass(frozen=True)
class SessionState:
    row: PracticeSession
    answered: dict[int, Attempt]  # position -> the first answer there

    @property
    def size(self) -> int:
        return len(self.row.plan)

    @property
    def next_position(self) -> int | None:
        """The first position not answered yet, or None when every question has an answer."""
        for position in range(self.size):
            if position not in self.answered:
                return position
        return None

    @property
    def is_exam(self) -> bool:
        return self.row.mode == "exam"

    def ended_at(self, now: datetime) -> datetime | None:
        """When the session ended (None while it runs): app.domain.practice.session_end."""
        row = self.row
        return session_end(
            started_at=as_utc(row.started_at),
            deadline=as_utc(row.deadline_at) if row.deadline_at is not None else None,
            finished_at=as_utc(row.finished_at) if row.finished_at is not None else None,
            answered_at=[as_utc(a.created_at) for a in self.answered.values()],
            size=self.size,
            now=now,
        )

    def over(self, now: datetime) -> bool:
        return self.ended_at(now) is not None

    @property
    def ended_by_learner(self) -> bool:
        """Ended by the learner ("End the exam now"; a session's end) before any deadline: an
        exam stored as ended at its deadline ran out of time."""
        row = self.row
        if row.finished_at is None:
            return False
        return row.deadline_at is None or as_utc(row.finished_at) < as_utc(row.deadline_at)

    def withholds_feedback(self, now: datetime) -> bool:
        """Whether the session's answers get no feedback yet (right or wrong, the key, the
        pitfall, the solution): an exam's, until it ends. The one rule of every route that
        tells an answer's result (the API's answers and attempts, the web's pages)."""
        return self.is_exam and not self.over(now)


def summary_path(session_id: str) -> str:
    """Where a session's summary is (a page of this server)."""
    return f"/sessions/{session_id}/summary"


class SessionOver(Conflict):
    """A new answer in a session that is over (an exam past its time, or ended by the learner):
    not counted; the problem carries the summary's URL (``summary_url``)."""

    def __init__(self, row: PracticeSession) -> None:
        if row.mode == "exam":
            text = Message("The exam is over: this answer was not counted. See your results.")
            code = "exam_over"
        else:
            text = Message("This session is over: this answer was not counted.")
            code = "session_over"
        super().__init__(text, code=code, members={"summary_url": summary_path(row.id)})
        self.session_id = row.id


def start_session(
    *,
    db: Session,
    catalog: Catalog,
    learner_id: str,
    card_id: str | None,
    mode: str,
    seed_secret: bytes,
    point: str | int | None = None,
    size: int | None = None,
    templates: list[str] | None = None,
    now: datetime | None = None,
    typed: bool = False,
    scope: str = "card",
    client_session_id: str | None = None,
) -> PracticeSession:
    """A new session of ``mode`` on a card, or on the deck (``scope`` ``deck``, no card: every
    card at once, interleaved); ``templates`` narrows mistakes mode to those; ``typed``: numeric
    questions are answered by typing the number and its unit; ``client_session_id``: the id the
    client gave this start (app.practice.session_starts).

    Its questions are chosen now, after the learner's latest answers (app.domain.selection):
    "practise again" on one template is a mistakes session narrowed to it."""
    now = now or now_utc()
    check_scope_and_mode(scope, mode, card_id)
    size = DEFAULT_SIZE[mode] if size is None else size
    if not 1 <= size <= MAX_SIZE:
        raise InvalidInput(
            Message("a session has 1 to %(limit)s questions", limit=MAX_SIZE), code="invalid_size"
        )
    session_id = new_id()
    seen = recent_answers(db=db, catalog=catalog, learner_id=learner_id)

    def seeds(position: int, draw: int) -> int:
        return position_seed(seed_secret, session_id, position, draw)

    rng = random.Random(secrets.randbits(64))
    slug: str | None = None
    # A running exam's wrong answers are no mistakes to practise until it ends.
    withheld = running_exams(db=db, learner_id=learner_id, now=now) if mode == "mistakes" else None
    if card_id is None:
        parts = deck_parts(
            db=db, catalog=catalog, learner_id=learner_id, mode=mode, size=size, now=now,
            templates=templates, withheld=withheld or frozenset(),
        )  # fmt: skip
        plan = plan_deck_session(parts, seen=seen, seeds=seeds, rng=rng)
    else:
        card = get_card(catalog, card_id)
        card_id = card.id
        part, slug = card_part(
            db=db, card=card, learner_id=learner_id, mode=mode, size=size, now=now, point=point,
            templates=templates, withheld=withheld or frozenset(),
        )  # fmt: skip
        plan = plan_session(
            card, part.scope, part.count, seen=seen, seeds=seeds, rng=rng, wider=part.wider
        )
    row = PracticeSession(
        id=session_id,
        learner_id=learner_id,
        card_id=card_id,
        mode=mode,
        point=slug,
        plan=[p.to_json() for p in plan],
        started_at=now,
        deadline_at=now + timedelta(seconds=EXAM_SECONDS_PER_QUESTION * len(plan))
        if mode == "exam"
        else None,
        typed=typed,
        client_session_id=client_session_id,
    )
    with write_transaction(db):
        db.add(row)
    return row


def check_scope_and_mode(scope: str, mode: str, card_id: str | None) -> None:
    """Refuse a mode its scope does not have (app.domain.practice.SCOPE_MODES), a card session
    without its card and a deck session with one."""
    if scope not in SCOPE_MODES:
        raise InvalidInput(
            Message(
                "unknown scope %(scope)s (known: %(known)s)",
                scope=repr(scope),
                known=", ".join(SCOPE_MODES),
            ),
            code="invalid_scope",
        )
    if (card_id is None) != (scope == "deck"):
        text = (
            Message("A session on the deck has no card_id: it spans every card.")
            if scope == "deck"
            else Message("A session on a card needs its card_id.")
        )
        raise InvalidInput(text, code="invalid_scope")
    if mode not in SCOPE_MODES[scope]:
        raise InvalidInput(
            Message(
                "unknown mode %(mode)s (known: %(known)s)",
                mode=repr(mode),
                known=", ".join(SCOPE_MODES[scope]),
            ),
            code="invalid_mode",
        )


def load_session(*, db: Session, learner_id: str, session_id: str) -> SessionState:
    row = db.get(PracticeSession, session_id)
    if row is None or row.learner_id != learner_id:
        db.commit()
        raise NotFound(
            Message("This practice session does not exist."),
            code="session_not_found",
        )
    attempts = db.scalars(
        select(Attempt)
        .where(Attempt.practice_session_id == session_id)
        .order_by(Attempt.created_at, Attempt.id)
    ).all()
    db.commit()
    answered: dict[int, Attempt] = {}
    for attempt in attempts:
        if attempt.position is not None:
            answered.setdefault(attempt.position, attempt)
    return SessionState(row=row, answered=answered)


def settle_ended_exams(
    *, db: Session, catalog: Catalog, learner_id: str, now: datetime
) -> frozenset[str]:
    """Store the end of the learner's exams that are over (out of time, or every question
    answered) but not yet ended, rating their answers: before anything shows what rating made of
    them (the review queue, Today, progress). The ids of those still running
    (:func:`running_exams`, read in the same pass)."""
    open_exams = db.scalars(
        select(PracticeSession.id).where(
            PracticeSession.learner_id == learner_id,
            PracticeSession.mode == "exam",
            PracticeSession.finished_at.is_(None),
        )
    ).all()
    db.commit()
    running = set()
    for session_id in open_exams:
        state = load_session(db=db, learner_id=learner_id, session_id=session_id)
        state = settle_session(db=db, catalog=catalog, state=state, now=now)
        if state.withholds_feedback(now):
            running.add(session_id)
    return frozenset(running)


def running_exams(*, db: Session, learner_id: str, now: datetime) -> frozenset[str]:
    """The ids of the learner's sessions whose answers get no feedback yet
    (:meth:`SessionState.withholds_feedback`: exams that have not ended)."""
    candidates = db.scalars(  # not ended by the learner, nor past their deadline
        select(PracticeSession.id).where(
            PracticeSession.learner_id == learner_id,
            PracticeSession.mode == "exam",
            PracticeSession.finished_at.is_(None),
            or_(PracticeSession.deadline_at.is_(None), PracticeSession.deadline_at >= now),
        )
    ).all()
    db.commit()
    return frozenset(
        session_id
        for session_id in candidates
        if load_session(db=db, learner_id=learner_id, session_id=session_id).withholds_feedback(now)
    )


def question_id_at(row: PracticeSession, position: int, secret: bytes) -> QuestionId:
    if not 0 <= position < len(row.plan):
        raise NotFound(Message("no such question in this session"), code="position_not_found")
    planned = row.plan[position]
    return QuestionId(
        card_id=row.planned_card(position),
        point=str(planned["point"]),
        template_id=str(planned["template_id"]),
        template_version=int(planned["template_version"]),
        seed=position_seed(secret, row.id, position, int(planned.get("draw", 0))),
    )


def question_at(
    *,
    catalog: Catalog,
    signer: QuestionSigner,
    secret: bytes,
    state: SessionState,
    position: int,
) -> Question:
    identity = question_id_at(state.row, position, secret)
    where = SessionPosition(state.row.id, position)
    return Question(
        variant=regenerate(catalog, identity),
        token=signer.sign_position(where),
        expires_at=signer.expires_at(),
        show_seed=state.row.mode != "exam",
        position=where,
    )


def check_can_answer(state: SessionState, now: datetime) -> None:
    """Refuse a new answer in a session that is over (:class:`SessionOver`): past an exam's
    deadline (and its grace), or ended by the learner. Answering a position again is not a new
    answer (app.practice.storing replays the first one), so it is never refused here."""
    row = state.row
    deadline = as_utc(row.deadline_at) if row.deadline_at is not None else None
    late = deadline is not None and now > deadline + EXAM_GRACE
    # Ended by the learner; an exam stored as ended at its deadline still takes the grace.
    if late or state.ended_by_learner:
        raise SessionOver(row)


def _store_end(db: Session, catalog: Catalog, session_id: str, end: datetime) -> None:
    """``finished_at`` set once: the first writer's end stays (every reader computes the same).
    The writer that ends an exam rates its answers, stored unrated while it ran, in order."""
    with write_transaction(db):
        change = session_change(db.connection(), session_id)  # the learner's row, locked first
        ended = db.execute(
            update(PracticeSession)
            .where(PracticeSession.id == session_id, PracticeSession.finished_at.is_(None))
            .values(finished_at=end)
            .returning(PracticeSession.mode, PracticeSession.typed)
        ).first()
        if ended is None or ended.mode != "exam":
            return
        rated = exists().where(ReviewLog.attempt_id == Attempt.id)
        unrated = db.scalars(
            select(Attempt)
            .where(Attempt.practice_session_id == session_id, ~rated)
            .order_by(Attempt.id)
        ).all()
        rate_stored(db.connection(), catalog, unrated, asked_typed=ended.typed)
        told_at(db.connection(), session_id, change)  # a delta sync sends its answers now


def finish_session(
    *, db: Session, catalog: Catalog, state: SessionState, now: datetime | None = None
) -> None:
    """The learner ends the session now (the rest counts as unanswered); a session already over
    keeps the end it had."""
    now = now or now_utc()
    _store_end(db, catalog, state.row.id, state.ended_at(now) or now)


def settle_session(
    *, db: Session, catalog: Catalog, state: SessionState, now: datetime
) -> SessionState:
    """The session with its end stored once it is over (the first read after its end)."""
    end = state.ended_at(now)
    if end is None or state.row.finished_at is not None:
        return state
    _store_end(db, catalog, state.row.id, end)
    db.refresh(state.row)
    db.commit()
    return state
