"""Merging an anonymous learner (a web guest or an app install) into an account: its history
moves, it goes.

A merge runs in one write transaction that first locks both learners (PostgreSQL: in id order,
so that merges and answers that touch the same learners wait for each other instead of
deadlocking; SQLite's write lock already runs one at a time). Merging a learner that is gone
does nothing: a retried log-in (its first answer lost on the way) carries nothing twice, and two
devices merging into one account at once each move their own history, whole.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from app.analytics.models import ClassMember
from app.auth.identity import APP, GUEST, as_utc
from app.auth.tokens import forget_cached_tokens
from app.db import write_transaction
from app.models import (
    Attempt,
    Learner,
    LearnerMerge,
    LearnerToken,
    PracticeSession,
    ReviewItem,
    ReviewLog,
    WebSession,
)
from app.practice.changes import next_change

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
ANONYMOUS = (GUEST, APP)


def merge_learner(*, db: Session, source_id: str, target_id: str) -> bool:
    """Move an anonymous learner's attempts, sessions, class memberships and review state to an
    account and remove the anonymous learner (its device tokens and web sessions stop working;
    the questions issued to it are the account's to answer: its id is kept in learner_merges).
    True when something was merged; False when the source is gone, is not anonymous, or is the
    target.

    Where both have a review item for the same template, the more recently reviewed state is kept
    and the other item's review log moves with it, so no rating is lost. Everything moved is
    stamped with the account's next change (app.practice.changes), so the account's other
    devices fetch it in their next delta sync.
    """
    if source_id == target_id:
        return False
    with write_transaction(db):
        locked = db.scalars(
            select(Learner.id)
            .where(Learner.id.in_(sorted((source_id, target_id))))
            .order_by(Learner.id)
            .with_for_update()
        ).all()
        if len(locked) != 2:
            return False
        source = db.get(Learner, source_id, populate_existing=True)
        if source is None or source.kind not in ANONYMOUS:
            return False
        change = next_change(db.connection(), target_id)
        db.execute(
            update(Attempt)
            .where(Attempt.learner_id == source_id)
            .values(learner_id=target_id, change_seq=change)
        )
        db.execute(
            update(PracticeSession)
            .where(PracticeSession.learner_id == source_id)
            .values(learner_id=target_id)
        )
        joined = select(ClassMember.class_id).where(ClassMember.learner_id == target_id)
        db.execute(
            delete(ClassMember).where(
                ClassMember.learner_id == source_id, ClassMember.class_id.in_(joined)
            )
        )
        db.execute(
            update(ClassMember)
            .where(ClassMember.learner_id == source_id)
            .values(learner_id=target_id)
        )
        theirs = {
            (i.card_id, i.template_id): i
            for i in db.scalars(
                select(ReviewItem).where(ReviewItem.learner_id == target_id).order_by(ReviewItem.id)
            )
        }
        for item in db.scalars(
            select(ReviewItem).where(ReviewItem.learner_id == source_id).order_by(ReviewItem.id)
        ):
            other = theirs.get((item.card_id, item.template_id))
            if other is None:
                item.learner_id = target_id
                item.change_seq = change
                continue
            mine_last = as_utc(item.last_review_at) if item.last_review_at else None
            other_last = as_utc(other.last_review_at) if other.last_review_at else None
            keep, drop = (
                (item, other) if (mine_last or _EPOCH) > (other_last or _EPOCH) else (other, item)
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
            keep.change_seq = change
        db.flush()
        db.execute(delete(WebSession).where(WebSession.learner_id == source_id))
        db.execute(delete(LearnerToken).where(LearnerToken.learner_id == source_id))
        db.delete(source)
        # Its id, for the questions issued to it (downloaded for offline use) before signing in.
        db.add(LearnerMerge(merged_id=source_id, account_id=target_id))
    forget_cached_tokens()  # after the commit: the anonymous learner's tokens and browsers
    return True


def was_merged_into(db: Session, merged_id: str, account_id: str) -> bool:
    """Whether the learner ``merged_id`` (gone) was merged into the account ``account_id``."""
    found = db.scalar(select(LearnerMerge.account_id).where(LearnerMerge.merged_id == merged_id))
    return found == account_id
