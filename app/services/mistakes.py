"""A learner's mistakes: wrong attempts with their question regenerated, and counts per pitfall."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.domain.cards import Card, Pitfall
from app.domain.generation import Variant, find_template
from app.domain.texts import Text
from app.models import Attempt
from app.services.errors import Conflict
from app.services.questions import QuestionRef, regenerate

MAX_PAGE = 500
MAX_OFFSET = 10**9


@dataclass(frozen=True)
class Mistake:
    attempt_id: int
    card_id: str
    card_title: Text | None
    point: int
    template_id: str
    template_version: int
    seed: int
    params: dict[str, str]
    stem: Text | None  # None when the template has changed since (the question is retired)
    choice_id: str
    choice_text: Text
    correct_choice_id: str
    correct_choice_text: Text | None
    pitfall_id: str | None
    pitfall_title: Text
    pitfall_explanation: Text | None
    answered_at: datetime


@dataclass(frozen=True)
class PitfallCount:
    card_id: str
    pitfall_id: str
    title: Text
    count: int


def list_mistakes(
    *,
    session: Session,
    cards: dict[str, Card],
    learner_id: str,
    limit: int = 100,
    offset: int = 0,
) -> list[Mistake]:
    """The learner's wrong attempts, newest first, each with its question's stem regenerated."""
    attempts = session.scalars(
        select(Attempt)
        .where(Attempt.learner_id == learner_id, Attempt.correct.is_(False))
        .order_by(Attempt.created_at.desc(), Attempt.id.desc())
        .limit(min(max(limit, 1), MAX_PAGE))
        .offset(max(offset, 0))
    ).all()
    variants: dict[tuple[str, str, int, int], Variant | None] = {}
    return [_mistake(attempt, cards, variants) for attempt in attempts]


def count_mistakes_by_pitfall(
    *, session: Session, cards: dict[str, Card], learner_id: str
) -> list[PitfallCount]:
    """How often the learner fell for each pitfall, most frequent first."""
    rows = session.execute(
        select(Attempt.card_id, Attempt.pitfall_id, func.count(Attempt.id).label("n"))
        .where(
            Attempt.learner_id == learner_id,
            Attempt.correct.is_(False),
            Attempt.pitfall_id.is_not(None),
        )
        .group_by(Attempt.card_id, Attempt.pitfall_id)
        .order_by(func.count(Attempt.id).desc(), Attempt.card_id, Attempt.pitfall_id)
    ).all()
    counts = []
    for card_id, pitfall_id, n in rows:
        assert pitfall_id is not None  # filtered in the query
        pitfall = _find_pitfall(cards.get(card_id), None, pitfall_id)
        title = pitfall.title if pitfall is not None else Text(pitfall_id, pitfall_id)
        counts.append(PitfallCount(card_id=card_id, pitfall_id=pitfall_id, title=title, count=n))
    return counts


def _mistake(
    attempt: Attempt,
    cards: dict[str, Card],
    variants: dict[tuple[str, str, int, int], Variant | None],
) -> Mistake:
    key = (attempt.card_id, attempt.template_id, attempt.template_version, attempt.seed)
    if key not in variants:
        ref = QuestionRef(
            attempt.card_id,
            attempt.point,
            attempt.template_id,
            attempt.template_version,
            attempt.seed,
        )
        try:
            variants[key] = regenerate(cards, ref)
        except Conflict:
            variants[key] = None
    variant = variants[key]
    card = cards.get(attempt.card_id)
    choices = {c.get("id"): c for c in attempt.choices if isinstance(c, dict)}
    chosen = choices.get(attempt.choice_id, {})
    correct = choices.get(attempt.correct_choice_id)
    pitfall = _find_pitfall(card, attempt.template_id, attempt.pitfall_id)
    explanation = None
    if variant is not None:
        explanation = next(
            (c.explanation for c in variant.choices if c.id == attempt.choice_id), None
        )
    return Mistake(
        attempt_id=attempt.id,
        card_id=attempt.card_id,
        card_title=card.title if card is not None else None,
        point=attempt.point,
        template_id=attempt.template_id,
        template_version=attempt.template_version,
        seed=attempt.seed,
        params=dict(attempt.params or {}),
        stem=variant.stem if variant is not None else None,
        choice_id=attempt.choice_id,
        choice_text=_stored_text(chosen.get("text"), attempt.choice_id),
        correct_choice_id=attempt.correct_choice_id,
        correct_choice_text=_stored_text(correct.get("text"), attempt.correct_choice_id)
        if correct is not None
        else None,
        pitfall_id=attempt.pitfall_id,
        pitfall_title=pitfall.title
        if pitfall is not None
        else Text(attempt.pitfall_id or "", attempt.pitfall_id or ""),
        pitfall_explanation=explanation,
        answered_at=as_utc(attempt.created_at),
    )


def _find_pitfall(
    card: Card | None, template_id: str | None, pitfall_id: str | None
) -> Pitfall | None:
    """The pitfall of that template, or else the first pitfall with that id on the card."""
    if card is None or pitfall_id is None:
        return None
    if template_id is not None:
        found = find_template(card, template_id)
        if found is not None:
            for pitfall in found[1].pitfalls:
                if pitfall.id == pitfall_id:
                    return pitfall
    for template in card.templates():
        for pitfall in template.pitfalls:
            if pitfall.id == pitfall_id:
                return pitfall
    return None


def _stored_text(value: object, fallback: str) -> Text:
    if isinstance(value, dict):
        en = str(value.get("en") or fallback)
        return Text(en, str(value.get("zh") or en))
    return Text(fallback, fallback)


def as_utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; they were stored in UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
