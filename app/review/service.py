"""Spaced review: store the ratings of first answers (the rules: app.domain.rating), list what
is due, show progress.

The ratings are read and written inside the answer's write transaction, so an acknowledged
answer and its rating are stored together or not at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    bindparam,
    case,
    func,
    insert,
    or_,
    select,
    update,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import Session

from app.auth.service import as_utc
from app.batch import ByKeys, Read
from app.domain import habits, rating
from app.domain.calendar import day_end, local_day
from app.domain.catalog import Catalog
from app.domain.numerals import is_digits
from app.domain.scheduling import FsrsState
from app.models import Attempt, Learner, ReviewItem, ReviewLog
from app.practice.changes import ITEM_CHANGE, NEW_ITEM_CHANGE

MAX_DUE_PAGE = 100


@dataclass(frozen=True)
class DueItem:
    id: int
    card_id: str
    point: str
    template_id: str
    due_at: datetime


def known_reads(dialect: Dialect, needs: rating.Needs) -> list[Read | None]:
    """The reads of what rating answers needs (app.domain.rating.needs), to be read in the
    caller's write transaction (with its other reads: app.batch.read_together): the items are
    locked until it ends (PostgreSQL; SQLite's write lock covers them), in id order, so that two
    processes rating the same items take their locks alike."""
    return [
        _ITEMS_BY_KEY.read(dialect, needs.items),
        _EXAM_DATES.read(dialect, [(id_,) for id_ in needs.learners]),
        _FALLS.read(dialect, needs.falls),
    ]


def known_of(rows: Sequence[Sequence[Any]]) -> rating.Known:
    """What :func:`known_reads` read, as rating takes it."""
    items, exam_dates, falls = rows
    return rating.Known(
        items={
            (row.learner_id, row.card_id, row.template_id): (
                row.id,
                rating.Item(
                    row.point,
                    row.state,
                    as_utc(row.due_at),
                    row.reviews,
                    row.lapses,
                    row.last_review_at and as_utc(row.last_review_at),
                ),
            )
            for row in items
        },
        exam_dates={row.id: row.exam_date for row in exam_dates},
        falls={(row.learner_id, row.card_id, row.pitfall_id): row.times for row in falls},
        time_zones={row.id: row.time_zone for row in exam_dates},
    )


def store_ratings(
    connection: Connection, writes: rating.Writes, attempt_ids: Sequence[int]
) -> None:
    """Make ``writes`` (app.domain.rating.rate) in the caller's write transaction, after the
    learners' change numbers are taken and the rated attempts are stored: ``attempt_ids[i]`` is the id of the answer at index ``i``. The
    new items take their ids from the database; a log names its item by its key, so that no
    write waits for another's result (on PostgreSQL they go to the server together)."""
    if writes.created:
        connection.execute(
            _INSERT_ITEM,
            [
                {
                    "learner_id": key[0],
                    "change_learner_id": key[0],
                    "card_id": key[1],
                    "template_id": key[2],
                    **_columns(item),
                }
                for key, item in writes.created.items()
            ],
        )
    if writes.logs:
        connection.execute(
            _INSERT_LOG,
            [
                {
                    "item_learner_id": log.item[0],
                    "item_card_id": log.item[1],
                    "item_template_id": log.item[2],
                    "attempt_id": attempt_ids[log.answer],
                    "rating": log.rating,
                    "reviewed_at": log.reviewed_at,
                    "due_before": log.due_before,
                    "due_after": log.due_after,
                }
                for log in writes.logs
            ],
        )
    if writes.changed:
        connection.execute(
            _UPDATE_ITEM,
            [{"item_id": item_id, **_columns(item)} for item_id, item in writes.changed.items()],
        )


def _columns(item: rating.Item) -> dict[str, Any]:
    return {
        "point": item.point,
        "state": item.state,
        "due_at": item.due_at,
        "reviews": item.reviews,
        "lapses": item.lapses,
        "last_review_at": item.last_review_at,
    }


_ITEMS = ReviewItem.__table__
_ITEMS_BY_KEY = ByKeys(
    (_ITEMS.c.learner_id, _ITEMS.c.card_id, _ITEMS.c.template_id),  # their unique key
    lambda where: select(_ITEMS).where(where).order_by(_ITEMS.c.id).with_for_update(),
)
_EXAM_DATES = ByKeys(
    (Learner.__table__.c.id,),
    lambda where: select(
        Learner.__table__.c.id, Learner.__table__.c.exam_date, Learner.__table__.c.time_zone
    ).where(where),
)
_ATTEMPTS = Attempt.__table__
_FALL_KEY = (_ATTEMPTS.c.learner_id, _ATTEMPTS.c.card_id, _ATTEMPTS.c.pitfall_id)  # its index
_FALLS = ByKeys(
    _FALL_KEY,
    lambda where: (
        select(*_FALL_KEY, func.count().label("times"))
        .where(where, _ATTEMPTS.c.first_answer.is_(True))
        .group_by(*_FALL_KEY)
    ),
)
_ITEM_ID = (
    select(_ITEMS.c.id)
    .where(
        _ITEMS.c.learner_id == bindparam("item_learner_id"),
        _ITEMS.c.card_id == bindparam("item_card_id"),
        _ITEMS.c.template_id == bindparam("item_template_id"),
    )
    .scalar_subquery()
)
_INSERT_LOG = insert(ReviewLog.__table__).values(review_item_id=_ITEM_ID).inline()
# An item written takes its learner's change number, taken earlier in the same transaction
# (app.practice.changes).
_INSERT_ITEM = insert(_ITEMS).values(change_seq=NEW_ITEM_CHANGE).inline()
_UPDATE_ITEM = (
    update(_ITEMS).where(_ITEMS.c.id == bindparam("item_id")).values(change_seq=ITEM_CHANGE)
)


@dataclass(frozen=True)
class DueCursor:
    """Where a page of due items stopped: the last item's due time and id. The next page goes on
    after that place in the order (most overdue first), also once that item has been reviewed
    and is no longer due, as an app reviews a page before it asks for the next one. ``due_at``
    None: a cursor of the earlier kind (the item's id alone), read while its item is due."""

    id: int
    due_at: datetime | None = None

    def text(self) -> str:
        if self.due_at is None:
            return str(self.id)
        return f"{(self.due_at - _EPOCH) // _MICROSECOND}.{self.id}"

    @classmethod
    def read(cls, text: str) -> DueCursor:
        """The cursor ``text`` names (ValueError when it names none)."""
        parts = text.split(".")
        if len(parts) > 2 or not all(is_digits(p) and len(p) <= 18 for p in parts):
            raise ValueError(text)
        if len(parts) == 1:
            return cls(int(parts[0]))
        try:
            due_at = _EPOCH + int(parts[0]) * _MICROSECOND
        except OverflowError:
            raise ValueError(text) from None
        return cls(int(parts[1]), due_at)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def due_items(
    *,
    db: Session,
    catalog: Catalog,
    learner_id: str,
    now: datetime,
    limit: int = 20,
    after: DueCursor | None = None,
) -> list[DueItem]:
    """Items due now of the templates offered (ReviewItem.due_by), most overdue first (``after``
    continues a page): at most ``limit``, and at most one more than a page (a caller asks for
    one more to tell whether a next page waits)."""
    limit = max(1, min(limit, MAX_DUE_PAGE + 1))
    query = (
        select(ReviewItem)
        .where(
            ReviewItem.learner_id == learner_id, ReviewItem.due_by(now, catalog.offered_templates)
        )
        .order_by(ReviewItem.due_at, ReviewItem.id)
    )
    if after is not None and after.due_at is not None:
        query = query.where(
            or_(
                ReviewItem.due_at > after.due_at,
                and_(ReviewItem.due_at == after.due_at, ReviewItem.id > after.id),
            )
        ).limit(limit)
    rows = db.scalars(query).all()
    db.commit()
    items = [DueItem(r.id, r.card_id, r.point, r.template_id, as_utc(r.due_at)) for r in rows]
    if after is not None and after.due_at is None:  # the earlier kind: the item's id alone
        ids = [i.id for i in items]
        items = items[ids.index(after.id) + 1 :] if after.id in ids else []
    return items[:limit]


def due_counts(
    *,
    db: Session,
    catalog: Catalog,
    learner_id: str,
    now: datetime,
    zone_name: str | None = None,
) -> tuple[int, int]:
    """(due now, due later today) for Today and the review page, as the header counts them
    (ReviewItem.due_by: of the templates offered); "today" ends at the learner's midnight
    (``zone_name``, UTC when None)."""
    end_of_day = day_end(local_day(now, zone_name), zone_name)
    offered = catalog.offered_templates
    due_now, due_today = db.execute(
        select(func.count().filter(ReviewItem.due_by(now, offered)), func.count()).where(
            ReviewItem.learner_id == learner_id,
            ReviewItem.served(offered),
            ReviewItem.due_at < end_of_day,
        )
    ).one()
    db.commit()
    return int(due_now), int(due_today) - int(due_now)


@dataclass(frozen=True)
class PointProgress:
    card_id: str
    point: str
    attempts: int
    right: int
    due: int
    # The mean FSRS retrievability now of the point's items in Review state (None: none yet;
    # app.domain.habits.memory), how many that is, and how many are still learning.
    retention: float | None
    reviewed: int = 0
    learning: int = 0


def progress(
    *,
    db: Session,
    learner_id: str,
    now: datetime,
    catalog: Catalog,
    told: ColumnElement[bool] | None = None,
) -> list[PointProgress]:
    """Per card and exam point: first answers, right, reviews due (ReviewItem.due_by: none of a
    withdrawn card or a retired template), FSRS memory; in the card's exam-point order (``catalog``), points no longer
    on a card last. ``told``: which of the learner's attempts may be counted
    (app.practice.mistakes.results_told: not a running exam's)."""
    counts = db.execute(
        select(
            Attempt.card_id,
            Attempt.point,
            func.count(Attempt.id),
            func.sum(case((Attempt.correct.is_(True), 1), else_=0)),
        )
        .where(
            Attempt.learner_id == learner_id if told is None else told,
            Attempt.first_answer.is_(True),
        )
        .group_by(Attempt.card_id, Attempt.point)
    ).all()
    items = db.scalars(select(ReviewItem).where(ReviewItem.learner_id == learner_id)).all()
    due = {
        (card_id, point): int(n)
        for card_id, point, n in db.execute(
            select(ReviewItem.card_id, ReviewItem.point, func.count())
            .where(
                ReviewItem.learner_id == learner_id,
                ReviewItem.due_by(now, catalog.offered_templates),
            )
            .group_by(ReviewItem.card_id, ReviewItem.point)
        )
    }
    db.commit()
    result: dict[tuple[str, str], tuple[int, int]] = {}
    for card_id, point, attempts, right in counts:
        result[(card_id, point)] = (int(attempts), int(right or 0))
    states: dict[tuple[str, str], list[FsrsState]] = {}
    for item in items:
        key = (item.card_id, item.point)
        result.setdefault(key, (0, 0))
        states.setdefault(key, []).append(item.state)
    rows = []
    for (card_id, point), (attempts, right) in result.items():
        memory = habits.memory(states.get((card_id, point), []), now)
        rows.append(
            PointProgress(
                card_id=card_id,
                point=point,
                attempts=attempts,
                right=right,
                due=due.get((card_id, point), 0),
                retention=memory.retrievability,
                reviewed=memory.reviewed,
                learning=memory.learning,
            )
        )
    return sorted(rows, key=lambda row: _point_order(catalog, row))


def _point_order(catalog: Catalog, row: PointProgress) -> tuple[str, int, str]:
    card = catalog.latest(row.card_id)
    point = card.point_by_slug(row.point) if card is not None else None
    return (row.card_id, point.number if point is not None else 10**6, row.point)


def days_until(exam_date: date | None, today: date) -> int | None:
    return (exam_date - today).days if exam_date is not None else None


@dataclass(frozen=True)
class CardProgress:
    """A learner's progress on one card of the deck: first answers, right, reviews due."""

    answered: int
    right: int
    due: int


def deck_progress(
    *,
    db: Session,
    learner_id: str,
    now: datetime,
    catalog: Catalog,
    told: ColumnElement[bool] | None = None,
) -> dict[str, CardProgress]:
    """Per card (its exam points' :func:`progress` added up), for the deck's card list."""
    totals: dict[str, CardProgress] = {}
    for row in progress(db=db, learner_id=learner_id, now=now, catalog=catalog, told=told):
        was = totals.get(row.card_id, CardProgress(0, 0, 0))
        totals[row.card_id] = CardProgress(
            was.answered + row.attempts, was.right + row.right, was.due + row.due
        )
    return totals
