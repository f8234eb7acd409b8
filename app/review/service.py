"""Spaced review: rate each first answer into its (learner, card, template) item, list what is due.

Called inside the answer's write transaction, so an acknowledged answer and its rating are
stored together or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from sqlalchemy import (
    Boolean,
    Connection,
    case,
    func,
    select,
)
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.orm import Session

from app.auth.service import as_utc
from app.db import DriverSQL, KeyColumns, KeyedSelect, Read
from app.domain.catalog import Catalog
from app.domain.scheduling import FsrsState, bring_forward, new_state, retrievability, review
from app.models import Attempt, Learner, ReviewItem, ReviewLog

MAX_DUE_PAGE = 100
PITFALL_REPEAT = 2  # falling for a pitfall this often brings its templates forward


@dataclass(frozen=True)
class DueItem:
    id: int
    card_id: str
    point: str
    template_id: str
    due_at: datetime


ReviewKey = tuple[str, str, str]  # (learner id, card id, template id)


@dataclass(frozen=True)
class Rating:
    """A learner's first answer to a question, to rate into its review item: its attempt is
    stored in the same write transaction, after the ratings' reads."""

    learner_id: str
    card_id: str
    point: str
    template_id: str
    correct: bool
    pitfall_id: str | None
    duration_ms: int | None
    now: datetime
    catalog: Catalog  # the one it was graded by: which templates carry its pitfall

    @property
    def key(self) -> ReviewKey:
        return (self.learner_id, self.card_id, self.template_id)

    @property
    def subject(self) -> RatingSubject:
        return RatingSubject.of(
            self.learner_id,
            self.card_id,
            self.template_id,
            correct=self.correct,
            pitfall_id=self.pitfall_id,
            catalog=self.catalog,
        )


@dataclass(frozen=True)
class RatingSubject:
    """An answer that may be rated (before it is known to be a first answer): what the rating
    pass reads for it."""

    learner_id: str
    card_id: str
    template_id: str
    fell_for: str | None  # the pitfall of a wrong answer
    catalog: Catalog

    @classmethod
    def of(
        cls,
        learner_id: str,
        card_id: str,
        template_id: str,
        *,
        correct: bool,
        pitfall_id: str | None,
        catalog: Catalog,
    ) -> RatingSubject:
        return cls(learner_id, card_id, template_id, None if correct else pitfall_id, catalog)


@dataclass(frozen=True)
class ReviewsKnown:
    """What :class:`ReviewReads` read: exam dates by learner, earlier falls (first answers
    stored) by (learner, card, pitfall)."""

    exam_dates: dict[str, date | None]
    falls: dict[tuple[str, str, str], int]


class ReviewReads:
    """The first reads of a rating pass over answers among ``subjects``, which do not depend
    on which of them are first answers, for the caller to send with its own reads
    (app.db.read_together: one round trip on PostgreSQL): the learners' exam dates, and how
    often they fell for each pitfall fallen for in ``subjects`` in the first answers stored."""

    def __init__(self, dialect: Dialect, subjects: Sequence[RatingSubject]) -> None:
        learners = {s.learner_id for s in subjects}
        fallen = {(s.learner_id, s.card_id, s.fell_for) for s in subjects if s.fell_for is not None}
        self.reads: list[Read | None] = [
            _EXAM_DATES.read(dialect, [(learner,) for learner in learners]),
            _FALLS.read(dialect, list(fallen), {"first": True}),
        ]

    @staticmethod
    def known(rows: Sequence[Sequence[tuple[Any, ...]]]) -> ReviewsKnown:
        """What the reads' rows (in :attr:`reads`' order) say."""
        exam_rows, fall_rows = rows
        return ReviewsKnown(
            exam_dates=dict(exam_rows),
            falls={(learner, card, pitfall): count for learner, card, pitfall, count in fall_rows},
        )


@dataclass
class _Item:
    """A review item as read (or created) by a :class:`RatingPass`, changed in place."""

    id: int
    learner_id: str
    card_id: str
    template_id: str
    point: str
    state: FsrsState
    due_at: datetime
    reviews: int
    lapses: int
    last_review_at: datetime | None
    changed: bool = False
    stored: bool = True  # False: created by this rating pass, inserted at its end


@dataclass(frozen=True)
class ReviewWrites:
    """What a rating pass writes (:meth:`RatingPass.rate`): its new review items, the review logs
    and the changed items; :meth:`run` after the ratings' attempts are inserted (the logs refer
    to them), one executemany each."""

    new_items: list[dict[str, Any]]
    logs: list[dict[str, Any]]
    updates: list[dict[str, Any]]

    def run(self, connection: Connection) -> None:
        _INSERT_ITEMS.run_many(connection, self.new_items)
        _INSERT_LOGS.run_many(connection, self.logs)
        _UPDATE_ITEMS.run_many(connection, self.updates)


class RatingPass:
    """Rating first answers into their review items, in the caller's write transaction, in
    order (as if one after the other): each rating schedules its item with FSRS and logs the
    rating; a learner who falls for a pitfall for the ``PITFALL_REPEAT``-th time (counting the
    first answers stored before and those rated before in ``ratings``) has every other template
    of the card carrying that pitfall made due now (its item created when missing).

    In steps, so that the caller sends its reads with its own and every write of its
    transaction together (app.db.read_together, app.db.pipelined), before the ratings'
    attempts are stored: ``known`` (:class:`ReviewReads`, read by the caller for answers that
    include these), then :meth:`item_read` (the items the ratings touch, locked until the
    transaction ends (PostgreSQL; SQLite's write lock covers them) in id order, so that two
    processes rating the same items take their locks alike and cannot lose an update) and
    :meth:`take_items`, then ids for the items it creates (app.db.next_ids), then
    :meth:`rate`. Driver statements (app.db.DriverSQL), as many for one rating as for hundreds.
    """

    def __init__(self, ratings: Sequence[Rating], known: ReviewsKnown) -> None:
        self._ratings = list(ratings)
        self._known = known
        self._needed, self._forward = _touched(self._ratings, known.falls)
        self._items: dict[ReviewKey, _Item] = {}

    def item_read(self, dialect: Dialect) -> Read | None:
        return _LOCKED_ITEMS.read(dialect, list(self._needed))

    def take_items(self, rows: Sequence[tuple[Any, ...]]) -> int:
        """The items read (:meth:`item_read`); how many items the pass creates."""
        for row in rows:
            item = _Item(*row)
            item.due_at = as_utc(item.due_at)
            self._items[(item.learner_id, item.card_id, item.template_id)] = item
        return sum(1 for key in self._needed if key not in self._items)

    def rate(self, attempt_ids: Sequence[int], item_ids: Sequence[int]) -> ReviewWrites:
        """Rate (each rating stored as the attempt at its place in ``attempt_ids``; the items
        created take ``item_ids``, as many as :meth:`take_items` said); what to write."""
        items = self._items
        missing = [key for key in self._needed if key not in items]
        items.update(_created_items([(key, *self._needed[key]) for key in missing], item_ids))
        logs = []
        for index, r in enumerate(self._ratings):
            item = items[r.key]
            due_before = item.due_at if item.reviews else None
            outcome = review(
                item.state,
                correct=r.correct,
                duration_ms=r.duration_ms,
                now=r.now,
                exam_date=self._known.exam_dates.get(r.learner_id),
                item_key=f"{r.learner_id}:{r.card_id}:{r.template_id}",
            )
            item.state, item.due_at, item.point = outcome.state, outcome.due, r.point
            item.reviews += 1
            item.lapses += 0 if r.correct else 1
            item.last_review_at = r.now
            item.changed = True
            logs.append(
                {
                    "review_item_id": item.id,
                    "attempt_id": attempt_ids[index],
                    "rating": outcome.rating,
                    "reviewed_at": r.now,
                    "due_before": due_before,
                    "due_after": outcome.due,
                }
            )
            for key in self._forward.get(index, ()):
                other = items[key]
                if other.due_at > r.now:
                    other.state = bring_forward(other.state, r.now)
                    other.due_at = r.now
                    other.changed = True
        return ReviewWrites(
            new_items=[
                {name: getattr(item, name) for name in _ITEM_COLUMNS}
                for item in items.values()
                if not item.stored
            ],
            logs=logs,
            updates=[
                {"id": item.id, **{name: getattr(item, name) for name in _ITEM_CHANGES}}
                for item in items.values()
                if item.stored and item.changed
            ],
        )


_EXAM_DATES = KeyedSelect(
    KeyColumns(("id",), ("TEXT",)),
    "SELECT id, exam_date FROM learners WHERE {where}",
    results=(None, Learner.__table__.c.exam_date.type),
)


_FALL_KEY = KeyColumns(("learner_id", "card_id", "pitfall_id"), ("TEXT",) * 3)  # its index
_FALLS = KeyedSelect(
    _FALL_KEY,
    f"SELECT {', '.join(_FALL_KEY.names)}, count(*) FROM attempts"
    f" WHERE {{where}} AND first_answer = :first GROUP BY {', '.join(_FALL_KEY.names)}",
    binds={"first": Boolean()},
)


def _carrying(catalog: Catalog, card_id: str, template_id: str, pitfall_id: str) -> dict[str, str]:
    """The card's other templates offering ``pitfall_id``: template id -> exam point."""
    card = catalog.latest(card_id)
    if card is None:
        return {}
    offering = card.templates_offering(pitfall_id)
    return {other: point for other, point in offering.items() if other != template_id}


# The columns an _Item is read from, in its fields' order.
_ITEM_COLUMNS = tuple(f.name for f in fields(_Item) if f.name not in ("changed", "stored"))


_ITEMS = ReviewItem.__table__
_LOCKED_ITEMS = KeyedSelect(
    KeyColumns(("learner_id", "card_id", "template_id"), ("TEXT",) * 3),  # their unique key
    f"SELECT {', '.join(_ITEM_COLUMNS)} FROM review_items WHERE {{where}} ORDER BY id",
    results=[_ITEMS.c[name].type for name in _ITEM_COLUMNS],
    for_update=True,
)


_INSERT_ITEMS = DriverSQL.insert(_ITEMS, _ITEM_COLUMNS)
_INSERT_LOGS = DriverSQL.insert(
    ReviewLog.__table__,
    ("review_item_id", "attempt_id", "rating", "reviewed_at", "due_before", "due_after"),
)


def _touched(
    ratings: Sequence[Rating], falls: dict[tuple[str, str, str], int]
) -> tuple[dict[ReviewKey, tuple[str, datetime]], dict[int, list[ReviewKey]]]:
    """The items the ratings touch, in the order they do: their own, and those brought forward
    (key -> exam point and time, for an item to create); and which items each rating (by
    index) brings forward."""
    forward: dict[int, list[ReviewKey]] = {}
    needed = {r.key: (r.point, r.now) for r in ratings}
    running = dict(falls)
    for index, r in enumerate(ratings):
        if r.correct or r.pitfall_id is None:
            continue
        fall = (r.learner_id, r.card_id, r.pitfall_id)
        running[fall] = running.get(fall, 0) + 1
        if running[fall] >= PITFALL_REPEAT:
            carrying = _carrying(r.catalog, r.card_id, r.template_id, r.pitfall_id)
            forward[index] = [(r.learner_id, r.card_id, t) for t in carrying]
            for key, point in zip(forward[index], carrying.values(), strict=True):
                needed.setdefault(key, (point, r.now))
    return needed, forward


def _created_items(
    wanted: list[tuple[ReviewKey, str, datetime]], ids: Sequence[int]
) -> dict[ReviewKey, _Item]:
    """New review items (key, exam point, now), due now, with fresh FSRS states seeded by their
    ``ids`` (app.db.next_ids); inserted, as the ratings leave them, at the end of the pass."""
    return {
        key: _Item(
            item_id,
            *key,
            point,
            new_state(item_id, now),
            now,
            0,
            0,
            None,
            changed=True,
            stored=False,
        )
        for item_id, (key, point, now) in zip(ids, wanted, strict=True)
    }


_ITEM_CHANGES = ("point", "state", "due_at", "reviews", "lapses", "last_review_at")
_UPDATE_ITEMS = DriverSQL(
    "UPDATE review_items SET "
    + ", ".join(f"{name} = :{name}" for name in _ITEM_CHANGES)
    + " WHERE id = :id",
    binds={name: _ITEMS.c[name].type for name in _ITEM_CHANGES},
)


def due_items(
    *,
    session: Session,
    learner_id: str,
    now: datetime,
    limit: int = 20,
    after_id: int | None = None,
) -> list[DueItem]:
    """Items due now, most overdue first (``after_id`` continues a page)."""
    query = (
        select(ReviewItem)
        .where(ReviewItem.learner_id == learner_id, ReviewItem.due_at <= now)
        .order_by(ReviewItem.due_at, ReviewItem.id)
    )
    rows = session.scalars(query).all()
    session.commit()
    items = [DueItem(r.id, r.card_id, r.point, r.template_id, as_utc(r.due_at)) for r in rows]
    if after_id is not None:
        ids = [i.id for i in items]
        items = items[ids.index(after_id) + 1 :] if after_id in ids else []
    return items[: max(1, min(limit, MAX_DUE_PAGE))]


def due_counts(*, session: Session, learner_id: str, now: datetime) -> tuple[int, int]:
    """(due now, due later today) for the header and the review page."""
    end_of_day = datetime.combine(now.date() + timedelta(days=1), time(0, 0), tzinfo=UTC)
    rows = session.execute(
        select(ReviewItem.due_at).where(
            ReviewItem.learner_id == learner_id, ReviewItem.due_at < end_of_day
        )
    ).all()
    session.commit()
    now_count = sum(1 for (due,) in rows if as_utc(due) <= now)
    return now_count, len(rows) - now_count


@dataclass(frozen=True)
class PointProgress:
    card_id: str
    point: str
    attempts: int
    right: int
    due: int
    retention: float | None  # mean FSRS retrievability of the point's items now


def progress(*, session: Session, learner_id: str, now: datetime) -> list[PointProgress]:
    counts = session.execute(
        select(
            Attempt.card_id,
            Attempt.point,
            func.count(Attempt.id),
            func.sum(case((Attempt.correct.is_(True), 1), else_=0)),
        )
        .where(Attempt.learner_id == learner_id, Attempt.first_answer.is_(True))
        .group_by(Attempt.card_id, Attempt.point)
    ).all()
    items = session.scalars(select(ReviewItem).where(ReviewItem.learner_id == learner_id)).all()
    session.commit()
    result: dict[tuple[str, str], dict[str, object]] = {}
    for card_id, point, attempts, right in counts:
        result[(card_id, point)] = {"attempts": attempts, "right": int(right or 0)}
    retention: dict[tuple[str, str], list[float]] = {}
    due: dict[tuple[str, str], int] = {}
    for item in items:
        key = (item.card_id, item.point)
        result.setdefault(key, {"attempts": 0, "right": 0})
        if item.state.get("stability") is not None:
            retention.setdefault(key, []).append(retrievability(item.state, now))
        if as_utc(item.due_at) <= now:
            due[key] = due.get(key, 0) + 1
    return [
        PointProgress(
            card_id=card_id,
            point=point,
            attempts=int(values["attempts"]),  # type: ignore[call-overload]
            right=int(values["right"]),  # type: ignore[call-overload]
            due=due.get((card_id, point), 0),
            retention=sum(retention[(card_id, point)]) / len(retention[(card_id, point)])
            if (card_id, point) in retention
            else None,
        )
        for (card_id, point), values in sorted(result.items())
    ]


def days_until(exam_date: date | None, today: date) -> int | None:
    return (exam_date - today).days if exam_date is not None else None
