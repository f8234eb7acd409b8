"""Merging a guest into an account: the guest's history moves, the guest goes."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from app.auth.identity import GUEST, as_utc
from app.auth.visitors import forget_visitors
from app.db import write_transaction
from app.models import Attempt, Learner, PracticeSession, ReviewItem, ReviewLog, WebSession

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def merge_learner(*, db: Session, source_id: str, target_id: str) -> None:
    """Move a guest's attempts, sessions and review state to an account; remove the guest.

    Where both have a review item for the same template, the more recently reviewed state is kept
    and the other item's review log moves with it, so no rating is lost.
    """
    if source_id == target_id:
        return
    with write_transaction(db):
        source = db.get(Learner, source_id)
        if source is None or source.kind != GUEST:
            return
        db.execute(
            update(Attempt).where(Attempt.learner_id == source_id).values(learner_id=target_id)
        )
        db.execute(
            update(PracticeSession)
            .where(PracticeSession.learner_id == source_id)
            .values(learner_id=target_id)
        )
        theirs = {
            (i.card_id, i.template_id): i
            for i in db.scalars(select(ReviewItem).where(ReviewItem.learner_id == target_id))
        }
        for item in db.scalars(select(ReviewItem).where(ReviewItem.learner_id == source_id)):
            other = theirs.get((item.card_id, item.template_id))
            if other is None:
                item.learner_id = target_id
                continue
            mine_last = as_utc(item.last_review_at) if item.last_review_at else None
            other_last = as_utc(other.last_review_at) if other.last_review_at else None
            keep, drop = (
                (item, other)
                if (mine_last or _EPOCH) > (other_last or _EPOCH)
                else (
                    other,
                    item,
                )
            )
            db.execute(
                update(ReviewLog)
                .where(ReviewLog.review_item_id == drop.id)
                .values(review_item_id=keep.id)
            )
            keep.reviews = item.reviews + other.reviews
            keep.lapses = item.lapses + other.lapses
            db.flush()
            db.delete(drop)
            db.flush()
            keep.learner_id = target_id
        db.flush()
        db.execute(delete(WebSession).where(WebSession.learner_id == source_id))
        db.delete(source)
    forget_visitors()  # the guest's other browsers, after the commit
