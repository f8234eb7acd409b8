"""Delta sync: the attempts and review items of a learner changed since a cursor, so that an
offline app refreshes in one call (the change numbers: app.practice.changes).

A page is keyed by ``(change_seq, id)`` in each of the two streams (attempts, review items),
read up to the learner's latest change number read first; a row written again moves to its new
number and is sent again (apps apply attempts by id and review items by card and template: the
last one sent wins).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, select, tuple_
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.domain.catalog import Catalog
from app.domain.messages import Message
from app.domain.numerals import is_digits
from app.models import Attempt, Learner, ReviewItem
from app.practice.mistakes import AttemptView, results_told
from app.practice.questions import find_variant
from app.practice.storing import stored_question
from app.problems import InvalidInput

MAX_CHANGES_PAGE = 500
_CURSOR_VERSION = "c1"


@dataclass(frozen=True)
class Cursor:
    """Where a sync stopped: the last (change, id) sent of each stream, for one learner."""

    attempts: tuple[int, int] = (-1, 0)
    reviews: tuple[int, int] = (-1, 0)

    def text(self, learner_id: str) -> str:
        return ".".join(
            [_CURSOR_VERSION, *map(str, (*self.attempts, *self.reviews)), _tag(learner_id)]
        )


def _tag(learner_id: str) -> str:
    """Which learner a cursor belongs to (not who: a digest)."""
    return hashlib.sha256(learner_id.encode()).hexdigest()[:12]


def invalid_cursor() -> InvalidInput:
    return InvalidInput(Message("invalid cursor"), code="invalid_cursor")


def read_cursor(text: str | None, learner_id: str) -> tuple[Cursor, bool]:
    """The cursor of ``text`` (none: from the start) and whether it was another learner's (an
    install since merged into this account: the app starts again from the start)."""
    if text is None:
        return Cursor(), False
    parts = text.split(".")
    if len(parts) != 6 or parts[0] != _CURSOR_VERSION:
        raise invalid_cursor()
    numbers = parts[1:5]
    if not all(is_digits(n.removeprefix("-")) for n in numbers):
        raise invalid_cursor()
    if any(len(n) > 18 for n in numbers):
        raise invalid_cursor()
    a_seq, a_id, r_seq, r_id = map(int, numbers)
    if parts[5] != _tag(learner_id):
        return Cursor(), True
    return Cursor((a_seq, a_id), (r_seq, r_id)), False


@dataclass(frozen=True)
class Changes:
    attempts: list[AttemptView]
    review_items: list[ReviewItem]
    cursor: Cursor
    more: bool
    reset: bool


def changes_since(
    *,
    db: Session,
    catalog: Catalog,
    learner_id: str,
    now: datetime,
    cursor: Cursor,
    reset: bool = False,
    limit: int = 200,
) -> Changes:
    """The learner's attempts and review items changed after ``cursor``, oldest change first, at
    most ``limit`` of each; ``more`` when either stream has more. A running exam's answers are
    not sent until it ends (they then come with their exam's end)."""
    limit = max(1, min(limit, MAX_CHANGES_PAGE))
    told = results_told(db=db, catalog=catalog, learner_id=learner_id, now=now)
    latest = db.scalar(select(Learner.change_seq).where(Learner.id == learner_id)) or 0
    attempts = _after(
        db, select(Attempt).where(told), Attempt.change_seq, Attempt.id, cursor.attempts, latest,
        limit,
    )  # fmt: skip
    items = _after(
        db,
        select(ReviewItem).where(ReviewItem.learner_id == learner_id),
        ReviewItem.change_seq,
        ReviewItem.id,
        cursor.reviews,
        latest,
        limit,
    )
    db.commit()
    more = len(attempts) > limit or len(items) > limit
    attempts, items = attempts[:limit], items[:limit]
    after = Cursor(
        (attempts[-1].change_seq, attempts[-1].id) if attempts else cursor.attempts,
        (items[-1].change_seq, items[-1].id) if items else cursor.reviews,
    )
    views = [AttemptView(row, find_variant(catalog, stored_question(row))) for row in attempts]
    return Changes(views, list(items), after, more, reset)


def _after(
    db: Session,
    query: Select[Any],
    seq: InstrumentedAttribute[int],
    id_: InstrumentedAttribute[int],
    after: tuple[int, int],
    latest: int,
    limit: int,
) -> list[Any]:
    rows = db.scalars(
        query.where(tuple_(seq, id_) > tuple_(*after), seq <= latest)
        .order_by(seq, id_)
        .limit(limit + 1)
    ).all()
    return list(rows)
