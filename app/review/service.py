"""Spaced review: rate each first answer into its (learner, card, template) item, list what is due.

Called inside the answer's write transaction, so an acknowledged answer and its rating are
stored together or not at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.auth.service import as_utc
from app.domain.catalog import Catalog
from app.domain.scheduling import bring_forward, new_state, retrievability, review
from app.models import Attempt, Learner, ReviewItem, ReviewLog

MAX_DUE_PAGE = 100
_LOOK_UP = object()  # record_review reads the exam date itself
PITFALL_REPEAT = 2  # falling for a pitfall this often brings its templates forward


@dataclass(frozen=True)
class DueItem:
    id: int
    card_id: str
    point: str
    template_id: str
    due_at: datetime


def record_review(
    *,
    session: Session,
    catalog: Catalog,
    learner_id: str,
    card_id: str,
    point: str,
    template_id: str,
    correct: bool,
    pitfall_id: str | None,
    duration_ms: int | None,
    attempt_id: int,
    now: datetime,
    exam_date: date | None | object = _LOOK_UP,
    item: ReviewItem | None = None,
) -> ReviewItem:
    """Rate the learner's first answer to a question of ``template_id`` (in a write transaction).

    ``exam_date`` and ``item`` may come from :func:`preload` (a batch of answers reads them
    once); without them, or when the item was not there, they are read here.
    """
    if exam_date is _LOOK_UP:
        exam_date = session.scalar(select(Learner.exam_date).where(Learner.id == learner_id))
    if item is None:
        item = _item(session, learner_id, card_id, point, template_id, now)
    due_before = as_utc(item.due_at) if item.reviews else None
    outcome = review(
        item.state,
        correct=correct,
        duration_ms=duration_ms,
        now=now,
        exam_date=exam_date,
        item_key=f"{learner_id}:{card_id}:{template_id}",
    )
    item.state = outcome.state
    item.due_at = outcome.due
    item.point = point
    item.reviews += 1
    item.lapses += 0 if correct else 1
    item.last_review_at = now
    session.add(
        ReviewLog(
            review_item_id=item.id,
            attempt_id=attempt_id,
            rating=outcome.rating,
            reviewed_at=now,
            due_before=due_before,
            due_after=outcome.due,
        )
    )
    if not correct and pitfall_id is not None:
        _bring_pitfall_forward(session, catalog, learner_id, card_id, template_id, pitfall_id, now)
    return item


ReviewKey = tuple[str, str, str]  # (learner id, card id, template id)


def preload(
    session: Session, keys: set[ReviewKey]
) -> tuple[dict[str, date | None], dict[ReviewKey, ReviewItem]]:
    """The exam dates of the learners and the review items of ``keys``, in two reads."""
    if not keys:
        return {}, {}
    learners = {k[0] for k in keys}
    exam_dates: dict[str, date | None] = {
        learner_id: exam_date
        for learner_id, exam_date in session.execute(
            select(Learner.id, Learner.exam_date).where(Learner.id.in_(learners))
        )
    }
    items = {
        (i.learner_id, i.card_id, i.template_id): i
        for i in session.scalars(
            select(ReviewItem)
            .where(
                ReviewItem.learner_id.in_(learners),
                ReviewItem.template_id.in_({k[2] for k in keys}),
            )
            # Locked until the batch commits (PostgreSQL; SQLite's write lock already covers
            # it), in one order: two processes rating the same item cannot lose an update.
            .order_by(ReviewItem.id)
            .with_for_update()
        )
    }
    return exam_dates, {k: v for k, v in items.items() if k in keys}


def _item(
    session: Session, learner_id: str, card_id: str, point: str, template_id: str, now: datetime
) -> ReviewItem:
    item = session.scalars(
        select(ReviewItem)
        .where(
            ReviewItem.learner_id == learner_id,
            ReviewItem.card_id == card_id,
            ReviewItem.template_id == template_id,
        )
        .with_for_update()
    ).first()
    if item is None:
        item = ReviewItem(
            learner_id=learner_id,
            card_id=card_id,
            point=point,
            template_id=template_id,
            state={},
            due_at=now,
            reviews=0,
            lapses=0,
        )
        session.add(item)
        session.flush()
        item.state = new_state(item.id, now)
    return item


def _bring_pitfall_forward(
    session: Session,
    catalog: Catalog,
    learner_id: str,
    card_id: str,
    template_id: str,
    pitfall_id: str,
    now: datetime,
) -> None:
    times = session.scalar(
        select(func.count(Attempt.id)).where(
            Attempt.learner_id == learner_id,
            Attempt.card_id == card_id,
            Attempt.pitfall_id == pitfall_id,
            Attempt.first_answer.is_(True),
        )
    )
    if (times or 0) < PITFALL_REPEAT:
        return
    card = catalog.latest(card_id)
    if card is None:
        return
    for template in card.templates():
        if template.id == template_id or all(p.id != pitfall_id for p in template.pitfalls):
            continue
        item = _item(session, learner_id, card_id, template.point, template.id, now)
        if as_utc(item.due_at) > now:
            item.state = bring_forward(item.state, now)
            item.due_at = now


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
