"""A practice session's summary: right and wrong per card and exam point, the pitfalls fallen for,
the time it took, and each question with the learner's answer and the key; an exam's past
results."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.service import as_utc
from app.domain.cards import Pitfall
from app.domain.catalog import Catalog
from app.domain.generation import Choice, Variant
from app.domain.identity import QuestionId
from app.domain.texts import Text
from app.domain.typed import accepted_units
from app.models import Attempt, PracticeSession
from app.practice.questions import find_variant
from app.practice.sessions import SessionState, question_id_at


@dataclass(frozen=True)
class PointScore:
    card_id: str
    point: str
    right: int
    wrong: int
    unanswered: int


@dataclass(frozen=True)
class CardScore:
    """A card's part of a summary: its exam points' scores, in the card's order."""

    card_id: str
    points: list[PointScore]

    @property
    def right(self) -> int:
        return sum(s.right for s in self.points)

    @property
    def wrong(self) -> int:
        return sum(s.wrong for s in self.points)

    @property
    def unanswered(self) -> int:
        return sum(s.unanswered for s in self.points)


@dataclass(frozen=True)
class PitfallFallen:
    card_id: str
    template_id: str
    pitfall_id: str
    title: Text
    times: int


@dataclass(frozen=True)
class QuestionLine:
    """One question of a summary: what was asked, the learner's choice, the key."""

    position: int
    variant: Variant
    key: Choice
    chosen: Choice | None  # None: unanswered, or answered by typing
    attempt_id: int | None
    typed: str | None = None  # a typed answer: the value and unit typed
    typed_correct: bool = False
    typed_pitfall: Pitfall | None = None  # the pitfall a wrong typed value was diagnosed as
    asked_typed: bool = False  # shown without its choices ("Type the answer"): no letters

    @property
    def answered(self) -> bool:
        return self.chosen is not None or self.typed is not None

    @property
    def correct(self) -> bool:
        if self.typed is not None:
            return self.typed_correct
        return self.chosen is not None and self.chosen.pitfall is None

    @property
    def card_id(self) -> str:
        return self.variant.id.card_id

    @property
    def pitfall(self) -> Pitfall | None:
        return (
            self.typed_pitfall
            if self.typed is not None
            else (self.chosen.pitfall if self.chosen is not None else None)
        )


@dataclass(frozen=True)
class Summary:
    mode: str
    card_id: str | None  # None: a session spanning the deck
    size: int
    right: int
    wrong: int
    unanswered: int
    cards: list[CardScore]  # in learning order (one for a one-card session)
    pitfalls: list[PitfallFallen]
    seconds: int
    wrong_templates: list[str]
    questions: list[QuestionLine]

    @property
    def points(self) -> list[PointScore]:
        """Every exam point's score, card after card."""
        return [score for card in self.cards for score in card.points]


def summarise(*, catalog: Catalog, state: SessionState, now: datetime, secret: bytes) -> Summary:
    """Right and wrong per card and exam point, the pitfalls fallen for, the time spent, and each
    question answered (every question once the session is over; an exam lists none before its
    end, when nothing of it is told)."""
    row = state.row
    per_point: dict[tuple[str, str], list[int]] = {}
    pitfalls: dict[tuple[str, str, str], int] = {}
    wrong_templates: list[str] = []
    for position, planned in enumerate(row.plan):
        where = (row.planned_card(position), str(planned["point"]))
        score = per_point.setdefault(where, [0, 0, 0])
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
                key = (attempt.card_id, attempt.template_id, attempt.pitfall_id)
                pitfalls[key] = pitfalls.get(key, 0) + 1
    last = max((as_utc(a.created_at) for a in state.answered.values()), default=None)
    ended = state.ended_at(now)
    end = ended or last or now
    fallen = []
    for (card_id, template_id, pitfall_id), times in sorted(
        pitfalls.items(), key=lambda kv: -kv[1]
    ):
        template = catalog.template_anywhere(card_id, template_id)
        pitfall = (
            next((p for p in template.pitfalls if p.id == pitfall_id), None) if template else None
        )
        title = pitfall.title if pitfall else Text.verbatim(pitfall_id)
        fallen.append(PitfallFallen(card_id, template_id, pitfall_id, title, times))
    cards = _card_scores(catalog, per_point)
    return Summary(
        mode=row.mode,
        card_id=row.card_id,
        size=state.size,
        right=sum(c.right for c in cards),
        wrong=sum(c.wrong for c in cards),
        unanswered=sum(c.unanswered for c in cards),
        cards=cards,
        pitfalls=fallen,
        seconds=max(0, int((end - as_utc(row.started_at)).total_seconds())),
        wrong_templates=wrong_templates,
        questions=_question_lines(
            catalog, state, secret, over=ended is not None, withheld=state.withholds_feedback(now)
        ),
    )


def _card_scores(catalog: Catalog, per_point: dict[tuple[str, str], list[int]]) -> list[CardScore]:
    """The scores per exam point grouped by card: the cards in learning order (one no longer
    offered last), each card's exam points in its order (one no longer on it last)."""
    deck = [card.id for card in catalog.cards()]
    by_card: dict[str, list[PointScore]] = {}
    for (card_id, slug), score in per_point.items():
        by_card.setdefault(card_id, []).append(PointScore(card_id, slug, *score))
    cards = []
    for card_id in sorted(by_card, key=lambda c: (deck.index(c) if c in deck else len(deck), c)):
        card = catalog.latest(card_id)
        order = [p.slug for p in card.points] if card else []
        points = sorted(
            by_card[card_id],
            key=lambda s: order.index(s.point) if s.point in order else len(order),
        )
        cards.append(CardScore(card_id, points))
    return cards


def _question_lines(
    catalog: Catalog, state: SessionState, secret: bytes, *, over: bool, withheld: bool
) -> list[QuestionLine]:
    if withheld:
        return []
    lines = []
    for position in range(state.size):
        attempt = state.answered.get(position)
        if attempt is None and not over:
            continue  # a question still to come is not shown before it is asked
        identity = question_id_at(state.row, position, secret)
        if attempt is not None:  # what was asked then (a plan's question, by its stored seed)
            identity = QuestionId(
                attempt.card_id,
                attempt.point,
                attempt.template_id,
                attempt.template_version,
                attempt.seed,
            )
        variant = find_variant(catalog, identity)
        if variant is None:
            continue  # its template was retired since
        lines.append(
            QuestionLine(
                position=position,
                variant=variant,
                key=variant.choice(variant.correct_choice_id),
                chosen=(
                    variant.choice(attempt.choice_id)
                    if attempt is not None and attempt.choice_id is not None
                    else None
                ),
                attempt_id=attempt.id if attempt is not None else None,
                typed=(
                    f"{attempt.typed_value} {attempt.typed_unit}"
                    if attempt is not None and attempt.typed_value is not None
                    else None
                ),
                typed_correct=bool(attempt.correct) if attempt is not None else False,
                asked_typed=bool(state.row.typed and accepted_units(variant)),
                typed_pitfall=next(
                    (
                        p
                        for p in variant.content.template.pitfalls
                        if attempt is not None and p.id == attempt.pitfall_id
                    ),
                    None,
                ),
            )
        )
    return lines


@dataclass(frozen=True)
class ExamResult:
    """A past exam: when it started, its score, the time it used."""

    session_id: str
    started_at: datetime
    right: int
    size: int
    seconds: int


PAST_EXAMS = 10


def past_exams(
    *, db: Session, learner_id: str, card_id: str | None, now: datetime, limit: int = PAST_EXAMS
) -> list[ExamResult]:
    """The learner's latest exams on a card (``card_id`` None: on the deck) that are over
    (newest first): an exam past its deadline counts as over here too, whether or not its
    summary was ever opened."""
    on_card = (
        PracticeSession.card_id.is_(None) if card_id is None else PracticeSession.card_id == card_id
    )
    rows = db.scalars(
        select(PracticeSession)
        .where(
            PracticeSession.learner_id == learner_id,
            on_card,
            PracticeSession.mode == "exam",
        )
        .order_by(PracticeSession.started_at.desc(), PracticeSession.id)
        .limit(limit + 1)  # one may still be running
    ).all()
    attempts = db.scalars(
        select(Attempt)
        .where(Attempt.practice_session_id.in_([row.id for row in rows]))
        .order_by(Attempt.created_at, Attempt.id)
    ).all()
    db.commit()
    answered: dict[str, dict[int, Attempt]] = {row.id: {} for row in rows}
    for attempt in attempts:
        if attempt.practice_session_id is not None and attempt.position is not None:
            answered[attempt.practice_session_id].setdefault(attempt.position, attempt)
    results = []
    for row in rows:
        state = SessionState(row=row, answered=answered[row.id])
        end = state.ended_at(now)
        if end is None:
            continue
        started = as_utc(row.started_at)
        results.append(
            ExamResult(
                session_id=row.id,
                started_at=started,
                right=sum(1 for a in state.answered.values() if a.correct),
                size=state.size,
                seconds=max(0, int((end - started).total_seconds())),
            )
        )
    return results[:limit]
