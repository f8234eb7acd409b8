"""Spaced review: rate each first answer into its (learner, card, template) item, list what is due.

Called inside the answer's write transaction, so an acknowledged answer and its rating are
stored together or not at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta

from sqlalchemy import case, func, select
from sqlalchemy.orm import Session

from app.auth.service import as_utc
from app.domain.catalog import Catalog
from app.domain.scheduling import bring_forward, new_state, retrievability, review
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


@dataclass
class ReviewBatch:
    """What rating a batch of answers reads once (see :func:`preload`) and keeps up to date as
    it rates: the learners' exam dates, their review items (locked), and how often each learner
    has fallen for each pitfall (first answers, counted up to ``PITFALL_REPEAT``)."""

    exam_dates: dict[str, date | None] = field(default_factory=dict)
    items: dict[ReviewKey, ReviewItem] = field(default_factory=dict)
    falls: dict[tuple[str, str, str], int] = field(default_factory=dict)
    # Keys whose items were looked for already: one missing from ``items`` does not exist yet.
    looked_up: set[ReviewKey] = field(default_factory=set)


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
    attempt: Attempt,
    now: datetime,
    batch: ReviewBatch | None = None,
) -> ReviewItem:
    """Rate the learner's first answer (``attempt``, added to the session, flushed or not) to a
    question of ``template_id``, in a write transaction.

    ``batch`` carries what a batch of answers read together (:func:`preload`, which covers this
    answer's learner and item); without one, they are read here the same way. What else rating
    needs (a pitfall's other templates) is read here and added to it.
    """
    with session.no_autoflush:
        if batch is None:
            batch = preload(session, {(learner_id, card_id, template_id)})
        item = _items(session, batch, learner_id, card_id, {template_id: point}, now)[0]
        due_before = as_utc(item.due_at) if item.reviews else None
        outcome = review(
            item.state,
            correct=correct,
            duration_ms=duration_ms,
            now=now,
            exam_date=batch.exam_dates.get(learner_id),
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
                attempt=attempt,
                rating=outcome.rating,
                reviewed_at=now,
                due_before=due_before,
                due_after=outcome.due,
            )
        )
        if not correct and pitfall_id is not None:
            _bring_pitfall_forward(
                session, batch, catalog, attempt, card_id, template_id, pitfall_id, now
            )
    return item


def preload(session: Session, keys: set[ReviewKey]) -> ReviewBatch:
    """The exam dates of the learners and the review items of ``keys``, in two reads."""
    batch = ReviewBatch()
    if not keys:
        return batch
    learners = {k[0] for k in keys}
    columns = Learner.__table__.c
    batch.exam_dates = {
        learner_id: exam_date
        for learner_id, exam_date in session.connection().execute(
            select(columns.id, columns.exam_date).where(columns.id.in_(learners))
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
    batch.items = {k: v for k, v in items.items() if k in keys}
    batch.looked_up = set(keys)
    return batch


def _items(
    session: Session,
    batch: ReviewBatch,
    learner_id: str,
    card_id: str,
    points: dict[str, str],
    now: datetime,
) -> list[ReviewItem]:
    """The learner's review items of the templates in ``points`` (template id -> exam point), in
    that order: from the batch, else read (locked) in one query, else created due now."""
    wanted = [(learner_id, card_id, template_id) for template_id in points]
    missing = [key for key in wanted if key not in batch.items]
    unread = [key for key in missing if key not in batch.looked_up]
    if unread:
        for item in session.scalars(
            select(ReviewItem)
            .where(
                ReviewItem.learner_id == learner_id,
                ReviewItem.card_id == card_id,
                ReviewItem.template_id.in_([key[2] for key in unread]),
            )
            .order_by(ReviewItem.id)
            .with_for_update()
        ):
            batch.items[(item.learner_id, item.card_id, item.template_id)] = item
        batch.looked_up.update(unread)
    if missing:
        created = []
        for key in missing:
            if key not in batch.items:
                item = ReviewItem(
                    learner_id=learner_id,
                    card_id=card_id,
                    point=points[key[2]],
                    template_id=key[2],
                    state={},
                    due_at=now,
                    reviews=0,
                    lapses=0,
                )
                session.add(item)
                created.append(item)
                batch.items[key] = item
        if created:
            session.flush()  # their ids seed their FSRS states
            for item in created:
                item.state = new_state(item.id, now)
    return [batch.items[key] for key in wanted]


def _bring_pitfall_forward(
    session: Session,
    batch: ReviewBatch,
    catalog: Catalog,
    attempt: Attempt,
    card_id: str,
    template_id: str,
    pitfall_id: str,
    now: datetime,
) -> None:
    """The learner fell for ``pitfall_id`` (again, in ``attempt``): from the
    ``PITFALL_REPEAT``-th time on, every other template carrying it is due now."""
    learner_id = attempt.learner_id
    key = (learner_id, card_id, pitfall_id)
    if key in batch.falls:
        batch.falls[key] += 1  # this answer: the batch read the count for an earlier one
    else:
        # This answer and the others stored, as many as decide the threshold (this one may be
        # flushed already or not); a Core query: a fraction of an ORM query's cost.
        attempts = Attempt.__table__.c
        batch.falls[key] = 1 + len(
            session.connection()
            .execute(
                select(attempts.id)
                .where(
                    attempts.learner_id == learner_id,
                    attempts.card_id == card_id,
                    attempts.pitfall_id == pitfall_id,
                    attempts.first_answer.is_(True),
                    attempts.client_answer_id != attempt.client_answer_id,
                )
                .limit(PITFALL_REPEAT - 1)
            )
            .all()
        )
    if batch.falls[key] < PITFALL_REPEAT:
        return
    card = catalog.latest(card_id)
    if card is None:
        return
    carrying = {
        template.id: template.point
        for template in card.templates()
        if template.id != template_id and any(p.id == pitfall_id for p in template.pitfalls)
    }
    for item in _items(session, batch, learner_id, card_id, carrying, now):
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
