"""Practice sessions: start one in a mode, serve its questions in order, summarise it at the end."""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.service import as_utc, new_id, now_utc
from app.db import write_transaction
from app.domain.cards import Card, Template
from app.domain.catalog import Catalog
from app.domain.identity import QuestionId
from app.domain.messages import Message
from app.domain.practice import (
    DEFAULT_SIZE,
    EXAM_SECONDS_PER_QUESTION,
    MAX_SIZE,
    MODES,
    plan_session,
    position_seed,
    same_points,
)
from app.domain.texts import Text
from app.models import Attempt, PracticeSession, ReviewItem
from app.practice.questions import (
    Question,
    QuestionSigner,
    SessionPosition,
    get_card,
    point_slug,
    regenerate,
)
from app.practice.recent import recent_answers
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

    def over(self, now: datetime) -> bool:
        if self.row.finished_at is not None or self.next_position is None:
            return True
        deadline = self.row.deadline_at
        return deadline is not None and now > as_utc(deadline)


def nothing_to_practise(mode: str) -> Conflict:
    if mode == "review":
        text = Message("Nothing is due for review right now.")
    else:
        text = Message("No mistakes to practise yet: answer some questions first.")
    return Conflict(text, code="nothing_to_practise")


def start_session(
    *,
    db: Session,
    catalog: Catalog,
    learner_id: str,
    card_id: str,
    mode: str,
    seed_secret: bytes,
    point: str | int | None = None,
    size: int | None = None,
    templates: list[str] | None = None,
    now: datetime | None = None,
    typed: bool = False,
) -> PracticeSession:
    """A new session of ``mode`` on a card (``templates`` narrows mistakes mode to those;
    ``typed``: numeric questions are answered by typing the number and its unit).

    Its questions are chosen now, after the learner's latest answers (app.domain.selection):
    "practise again" on one template is a mistakes session narrowed to it."""
    now = now or now_utc()
    if mode not in MODES:
        raise InvalidInput(
            Message(
                "unknown mode %(mode)s (known: %(known)s)", mode=repr(mode), known=", ".join(MODES)
            ),
            code="invalid_mode",
        )
    card = get_card(catalog, card_id)
    size = DEFAULT_SIZE[mode] if size is None else size
    if not 1 <= size <= MAX_SIZE:
        raise InvalidInput(
            Message("a session has 1 to %(limit)s questions", limit=MAX_SIZE), code="invalid_size"
        )
    slug: str | None = None
    wider: list[Template] = []
    if mode == "point":
        slug = point_slug(card, point if point is not None else card.points[0].slug)
        found = card.point_by_slug(slug)
        assert found is not None
        scope = list(found.templates)
    elif mode in ("card", "exam"):
        scope = card.templates()
    else:
        scope = (
            _mistaken_templates(db, card, learner_id, templates)
            if mode == "mistakes"
            else _due_templates(db, card, learner_id, now)
        )
        if not scope:
            raise nothing_to_practise(mode)
        if mode == "review":
            size = min(size, len(scope))
        # A review serves its due templates themselves (with new numbers), never others instead.
        wider = scope if mode == "review" else same_points(card, scope)
    session_id = new_id()
    plan = plan_session(
        card,
        scope,
        size,
        seen=recent_answers(db=db, catalog=catalog, learner_id=learner_id),
        seeds=lambda position, draw: position_seed(seed_secret, session_id, position, draw),
        rng=random.Random(secrets.randbits(64)),
        wider=wider,
    )
    row = PracticeSession(
        id=session_id,
        learner_id=learner_id,
        card_id=card.id,
        mode=mode,
        point=slug,
        plan=[p.to_json() for p in plan],
        started_at=now,
        deadline_at=now + timedelta(seconds=EXAM_SECONDS_PER_QUESTION * size)
        if mode == "exam"
        else None,
        typed=typed,
    )
    with write_transaction(db):
        db.add(row)
    return row


def _mistaken_templates(
    db: Session, card: Card, learner_id: str, only: list[str] | None
) -> list[Template]:
    query = select(Attempt.template_id).where(
        Attempt.learner_id == learner_id,
        Attempt.card_id == card.id,
        Attempt.correct.is_(False),
        Attempt.dismissed.is_(False),
    )
    wrong = set(db.scalars(query.distinct()).all())
    db.commit()
    if only is not None:
        wrong &= set(only)
    return _templates(card, sorted(wrong))


def _due_templates(db: Session, card: Card, learner_id: str, now: datetime) -> list[Template]:
    ids = db.scalars(
        select(ReviewItem.template_id)
        .where(
            ReviewItem.learner_id == learner_id,
            ReviewItem.card_id == card.id,
            ReviewItem.due_at <= now,
        )
        .order_by(ReviewItem.due_at)
    ).all()
    db.commit()
    return _templates(card, list(ids))


def _templates(card: Card, ids: list[str]) -> list[Template]:
    """The templates of ``card`` with these ids (one removed since is not practised any more)."""
    found = (card.template(template_id) for template_id in ids)
    return [template for template in found if template is not None]


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


def question_id_at(row: PracticeSession, position: int, secret: bytes) -> QuestionId:
    if not 0 <= position < len(row.plan):
        raise NotFound(Message("no such question in this session"), code="position_not_found")
    planned = row.plan[position]
    return QuestionId(
        card_id=row.card_id,
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
    deadline = state.row.deadline_at
    if deadline is not None and now > as_utc(deadline) + EXAM_GRACE:
        raise Conflict(
            Message("The exam's time is up: see your results."),
            code="exam_over",
        )


def finish_session(*, db: Session, session_id: str, now: datetime | None = None) -> None:
    with write_transaction(db):
        row = db.get(PracticeSession, session_id)
        if row is not None and row.finished_at is None:
            row.finished_at = now or now_utc()


@dataclass(frozen=True)
class PointScore:
    point: str
    right: int
    wrong: int
    unanswered: int


@dataclass(frozen=True)
class PitfallFallen:
    template_id: str
    pitfall_id: str
    title: Text
    times: int


@dataclass(frozen=True)
class Summary:
    mode: str
    card_id: str
    size: int
    right: int
    wrong: int
    unanswered: int
    points: list[PointScore]
    pitfalls: list[PitfallFallen]
    seconds: int
    wrong_templates: list[str]


def summarise(*, catalog: Catalog, state: SessionState, now: datetime) -> Summary:
    """Right and wrong per exam point, the pitfalls fallen for, the time spent."""
    per_point: dict[str, list[int]] = {}
    pitfalls: dict[tuple[str, str], int] = {}
    wrong_templates: list[str] = []
    for position, planned in enumerate(state.row.plan):
        score = per_point.setdefault(str(planned["point"]), [0, 0, 0])
        attempt = state.answered.get(position)
        if attempt is None:
            score[2] += 1
        elif attempt.correct:
            score[0] += 1
        else:
            score[1] += 1
            if attempt.template_id not in wrong_templates:
                wrong_templates.append(attempt.template_id)
            if attempt.pitfall_id:
                key = (attempt.template_id, attempt.pitfall_id)
                pitfalls[key] = pitfalls.get(key, 0) + 1
    last = max((as_utc(a.created_at) for a in state.answered.values()), default=None)
    end = as_utc(state.row.finished_at) if state.row.finished_at else (last or now)
    fallen = []
    for (template_id, pitfall_id), times in sorted(pitfalls.items(), key=lambda kv: -kv[1]):
        template = catalog.template_anywhere(state.row.card_id, template_id)
        pitfall = (
            next((p for p in template.pitfalls if p.id == pitfall_id), None) if template else None
        )
        title = pitfall.title if pitfall else Text.verbatim(pitfall_id)
        fallen.append(PitfallFallen(template_id, pitfall_id, title, times))
    card = catalog.latest(state.row.card_id)
    order = [p.slug for p in card.points] if card else []
    points = sorted(
        (PointScore(slug, *score) for slug, score in per_point.items()),
        key=lambda s: order.index(s.point) if s.point in order else len(order),
    )
    return Summary(
        mode=state.row.mode,
        card_id=state.row.card_id,
        size=state.size,
        right=sum(s.right for s in points),
        wrong=sum(s.wrong for s in points),
        unanswered=sum(s.unanswered for s in points),
        points=points,
        pitfalls=fallen,
        seconds=max(0, int((end - as_utc(state.row.started_at)).total_seconds())),
        wrong_templates=wrong_templates,
    )
