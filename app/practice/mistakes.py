"""The learner's history: every attempt (paginated), and the mistake book grouped by pitfall.

Old attempts regenerate from the catalog's version of their template, so the mistake book shows
the very question that was answered, its explanation and worked solution, even after the
template was edited.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from fractions import Fraction

from sqlalchemy import ColumnElement, select, update
from sqlalchemy.orm import Session

from app.auth.service import as_utc
from app.db import write_transaction
from app.domain.catalog import Catalog
from app.domain.generation import Grade, Variant
from app.domain.texts import Text
from app.domain.typed import TypedAnswer
from app.models import Attempt
from app.practice.changes import next_change
from app.practice.questions import find_variant
from app.practice.scopes import told_of
from app.practice.sessions import running_exams, settle_ended_exams
from app.practice.storing import regrade, stored_question

MAX_PAGE = 500
# The pitfall filter's value: the ids of every pitfall shown under one title, joined.
PITFALL_SEPARATOR = ","
MAX_FILTERED_PITFALLS = 50


@dataclass(frozen=True)
class AttemptView:
    """An attempt with its question regenerated (``variant`` None when the catalog lost it)."""

    attempt: Attempt
    variant: Variant | None

    @property
    def answered_at(self) -> datetime:
        return as_utc(self.attempt.answered_at or self.attempt.created_at)

    def chosen_text(self) -> Text:
        """The choice made, or the number and unit typed."""
        row = self.attempt
        if row.choice_id is None:
            typed = TypedAnswer(row.typed_value or "", row.typed_unit or "1", Fraction(0))
            return Text(typed.shown("en"), typed.shown("zh"))
        return _stored_text(row, row.choice_id)

    def correct_text(self) -> Text:
        if self.attempt.correct_choice_id is None:  # typed: the key as the question shows it
            return self.variant.answer if self.variant is not None else Text.verbatim("?")
        return _stored_text(self.attempt, self.attempt.correct_choice_id)

    def regraded(self) -> Grade | None:
        if self.variant is None:
            return None
        row = self.attempt
        return regrade(self.variant, row.choice_id, row.typed_value, row.typed_unit)

    def pitfall_title(self) -> Text | None:
        if self.variant is None or self.attempt.pitfall_id is None:
            return None
        result = self.regraded()
        return result.pitfall.title if result and result.pitfall else None

    def pitfall_explanation(self) -> Text | None:
        if self.variant is None or self.attempt.correct:
            return None
        result = self.regraded()
        return result.pitfall_explanation if result else None


def _stored_text(attempt: Attempt, choice_id: str) -> Text:
    for choice in attempt.choices or []:
        if choice.get("id") == choice_id and isinstance(choice.get("text"), dict):
            text = choice["text"]
            en = str(text.get("en") or choice_id)
            return Text(en, str(text.get("zh") or en))
    return Text.verbatim(choice_id)


def results_told(
    *, db: Session, catalog: Catalog, learner_id: str, now: datetime
) -> ColumnElement[bool]:
    """Before showing what the learner's answers made of their progress, reviews or pitfalls:
    exams that ran out of time unseen are ended (their answers rated), and the attempts whose
    result may be told are these (:func:`told`)."""
    running = settle_ended_exams(db=db, catalog=catalog, learner_id=learner_id, now=now)
    return told_of(learner_id, running)


def told(db: Session, learner_id: str, now: datetime) -> ColumnElement[bool]:
    """The learner's attempts whose result may be told: not those of an exam still running
    (app.practice.sessions.running_exams), listed once it ends."""
    return told_of(learner_id, running_exams(db=db, learner_id=learner_id, now=now))


def list_attempts(
    *,
    db: Session,
    catalog: Catalog,
    learner_id: str,
    now: datetime,
    limit: int = 50,
    before_id: int | None = None,
    wrong_only: bool = False,
) -> tuple[list[AttemptView], int | None]:
    """Newest first; the id to pass as ``before_id`` for the next page (None at the end). An
    exam's answers are listed once it ends."""
    limit = max(1, min(limit, MAX_PAGE))
    query = select(Attempt).where(told(db, learner_id, now))
    if wrong_only:
        query = query.where(Attempt.correct.is_(False))
    if before_id is not None:
        query = query.where(Attempt.id < before_id)
    rows = db.scalars(query.order_by(Attempt.id.desc()).limit(limit + 1)).all()
    db.commit()
    more = len(rows) > limit
    rows = rows[:limit]
    views = [AttemptView(row, find_variant(catalog, stored_question(row))) for row in rows]
    return views, (rows[-1].id if more and rows else None)


@dataclass(frozen=True)
class MistakeGroup:
    """One pitfall of one exam point the learner fell for, with its latest attempt."""

    card_id: str
    point: str
    template_id: str
    pitfall_id: str | None
    title: Text
    times: int
    last: AttemptView


def mistake_book(
    *,
    db: Session,
    catalog: Catalog,
    learner_id: str,
    now: datetime,
    point: str | None = None,
    pitfalls: Collection[str] = (),
) -> list[MistakeGroup]:
    """Wrong first answers grouped by (point, pitfall), most frequent first; dismissed hidden,
    and a running exam's until it ends. ``pitfalls`` (when given) keeps the attempts that fell
    for one of them."""
    query = select(Attempt).where(
        told(db, learner_id, now),
        Attempt.correct.is_(False),
        Attempt.dismissed.is_(False),
    )
    if point:
        query = query.where(Attempt.point == point)
    if pitfalls:
        query = query.where(Attempt.pitfall_id.in_(pitfalls))
    rows = db.scalars(query.order_by(Attempt.id.desc())).all()
    db.commit()
    groups: dict[tuple[str, str, str], list[Attempt]] = {}
    for row in rows:
        key = (row.card_id, row.point, row.pitfall_id or f"template:{row.template_id}")
        groups.setdefault(key, []).append(row)
    book = []
    for (card_id, slug, _key), attempts in groups.items():
        latest = attempts[0]
        view = AttemptView(latest, find_variant(catalog, stored_question(latest)))
        title = view.pitfall_title() or Text.verbatim(latest.pitfall_id or "")
        book.append(
            MistakeGroup(
                card_id=card_id,
                point=slug,
                template_id=latest.template_id,
                pitfall_id=latest.pitfall_id,
                title=title,
                times=len(attempts),
                last=view,
            )
        )
    book.sort(key=lambda g: (-g.times, -g.last.attempt.id))
    return book


@dataclass(frozen=True)
class PitfallFilter:
    """One choice of the mistake book's pitfall filter: a pitfall title as the learner reads it,
    standing for every pitfall with that title (templates of several exam points name the same
    misconception, each with its own id)."""

    title: Text
    pitfall_ids: tuple[str, ...]

    @property
    def value(self) -> str:
        return PITFALL_SEPARATOR.join(self.pitfall_ids)


def pitfall_filters(book: Iterable[MistakeGroup], lang: str) -> list[PitfallFilter]:
    """The pitfalls of a mistake book, one per title as shown in ``lang``, by title."""
    titles: dict[str, Text] = {}
    ids: dict[str, set[str]] = {}
    for group in book:
        if group.pitfall_id:
            shown = group.title.get(lang)
            titles.setdefault(shown, group.title)
            ids.setdefault(shown, set()).add(group.pitfall_id)
    return [
        PitfallFilter(title=titles[shown], pitfall_ids=tuple(sorted(ids[shown])))
        for shown in sorted(titles)
    ]


def parse_pitfall_filter(value: str | None) -> tuple[str, ...]:
    """The pitfall ids a filter's value names (a :attr:`PitfallFilter.value` or one id)."""
    parts = (part.strip() for part in (value or "").split(PITFALL_SEPARATOR))
    return tuple(dict.fromkeys(part for part in parts if part))[:MAX_FILTERED_PITFALLS]


def dismiss(
    *,
    db: Session,
    learner_id: str,
    card_id: str,
    point: str,
    pitfall_id: str | None,
    template_id: str,
) -> int:
    """ "I understand this now": hide the group's attempts from the book (statistics keep them)."""
    with write_transaction(db):
        change = next_change(db.connection(), learner_id)
        query = update(Attempt).where(
            Attempt.learner_id == learner_id,
            Attempt.card_id == card_id,
            Attempt.point == point,
            Attempt.correct.is_(False),
        )
        if pitfall_id is not None:
            query = query.where(Attempt.pitfall_id == pitfall_id)
        else:
            query = query.where(Attempt.pitfall_id.is_(None), Attempt.template_id == template_id)
        result = db.execute(query.values(dismissed=True, change_seq=change))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
