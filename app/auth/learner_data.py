"""A learner's own data: all of it exported as one JSON document, or all of it deleted.

Every table with a learner id is named here (``LEARNER_TABLES``); the tests check that list
against the database's foreign keys, so a new table cannot be forgotten by deletion.
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy.orm import Session

from app.analytics.models import ClassMember, Classroom
from app.auth.identity import as_utc, now_utc
from app.auth.tokens import forget_cached_tokens
from app.db import write_transaction
from app.domain.messages import Message
from app.models import (
    Attempt,
    AuditEntry,
    CardDraft,
    Learner,
    LearnerMerge,
    LearnerToken,
    PasswordReset,
    PracticeSession,
    ReviewItem,
    ReviewLog,
    WebSession,
)
from app.practice.sessions import running_exams
from app.problems import NotFound

EXPORT_FORMAT = "infracards-learner-export"
EXPORT_VERSION = 1

# (table, learner column): what deleting a learner removes, or (audit, drafts) anonymises.
LEARNER_TABLES = {
    "attempts": "learner_id",
    "review_items": "learner_id",
    "practice_sessions": "learner_id",
    "learner_tokens": "learner_id",
    "learner_merges": "account_id",
    "web_sessions": "learner_id",
    "class_members": "learner_id",
    "classes": "owner_id",
    "password_resets": "learner_id",
    "card_drafts": "updated_by",
    "audit_log": "actor_id",
}


def _moment(value: datetime | None) -> str | None:
    return as_utc(value).isoformat() if value is not None else None


def _day(value: date | None) -> str | None:
    return value.isoformat() if value is not None else None


def export_learner_data(*, db: Session, learner_id: str, now: datetime) -> dict[str, Any]:
    """Everything stored about the learner (never a password hash or a token hash).

    The sessions whose answers get no feedback yet at ``now`` (exams still running,
    app.practice.sessions.running_exams) have their answers and plans left out until they end,
    as every other read leaves them out; the document names them in ``running_exams``."""
    learner = db.get(Learner, learner_id)
    if learner is None:
        db.commit()
        raise NotFound(Message("unknown learner"))
    withheld = running_exams(db=db, learner_id=learner_id, now=now)
    attempts = [
        a
        for a in db.scalars(
            select(Attempt).where(Attempt.learner_id == learner_id).order_by(Attempt.id)
        )
        if a.practice_session_id not in withheld
    ]
    items = db.scalars(
        select(ReviewItem).where(ReviewItem.learner_id == learner_id).order_by(ReviewItem.id)
    ).all()
    logs: dict[int, list[ReviewLog]] = {}
    for entry in db.scalars(
        select(ReviewLog)
        .join(ReviewItem, ReviewItem.id == ReviewLog.review_item_id)
        .where(ReviewItem.learner_id == learner_id)
        .order_by(ReviewLog.id)
    ):
        logs.setdefault(entry.review_item_id, []).append(entry)
    sessions = db.scalars(
        select(PracticeSession)
        .where(PracticeSession.learner_id == learner_id)
        .order_by(PracticeSession.started_at, PracticeSession.id)
    ).all()
    devices = db.scalars(
        select(LearnerToken).where(LearnerToken.learner_id == learner_id).order_by(LearnerToken.id)
    ).all()
    merges = db.scalars(
        select(LearnerMerge)
        .where(LearnerMerge.account_id == learner_id)
        .order_by(LearnerMerge.merged_at, LearnerMerge.merged_id)
    ).all()
    classes = db.execute(
        select(Classroom.name, ClassMember.joined_at)
        .join(ClassMember, ClassMember.class_id == Classroom.id)
        .where(ClassMember.learner_id == learner_id)
        .order_by(ClassMember.id)
    ).all()
    document = {
        "format": EXPORT_FORMAT,
        "version": EXPORT_VERSION,
        "exported_at": now_utc().isoformat(),
        "learner": {
            "learner_id": learner.id,
            "kind": learner.kind,
            "email": learner.email,
            "role": learner.role,
            "exam_date": _day(learner.exam_date),
            "time_zone": learner.time_zone,
            "created_at": _moment(learner.created_at),
        },
        "merged_learners": [
            {"learner_id": merge.merged_id, "merged_at": _moment(merge.merged_at)}
            for merge in merges
        ],
        "running_exams": sorted(s.id for s in sessions if s.id in withheld),
        "attempts": [_attempt(a) for a in attempts],
        "mistakes": [
            {
                "attempt_id": a.id,
                "card_id": a.card_id,
                "point": a.point,
                "template_id": a.template_id,
                "pitfall_id": a.pitfall_id,
                "dismissed": a.dismissed,
                "answered_at": _moment(a.answered_at or a.created_at),
            }
            for a in attempts
            if not a.correct
        ],
        "reviews": [_review(item, logs.get(item.id, [])) for item in items],
        "sessions": [
            {
                "session_id": s.id,
                "card_id": s.card_id,
                "mode": s.mode,
                "point": s.point,
                "plan": None if s.id in withheld else s.plan,
                "started_at": _moment(s.started_at),
                "deadline_at": _moment(s.deadline_at),
                "finished_at": _moment(s.finished_at),
            }
            for s in sessions
        ],
        "devices": [
            {
                "device_name": t.device_name,
                "created_at": _moment(t.created_at),
                "last_used_at": _moment(t.last_used_at),
                "revoked_at": _moment(t.revoked_at),
            }
            for t in devices
        ],
        "classes": [{"name": name, "joined_at": _moment(joined)} for name, joined in classes],
    }
    db.commit()
    return document


def _attempt(a: Attempt) -> dict[str, Any]:
    return {
        "attempt_id": a.id,
        "client_answer_id": a.client_answer_id,
        "card_id": a.card_id,
        "card_version": a.card_version,
        "point": a.point,
        "template_id": a.template_id,
        "template_version": a.template_version,
        "seed": a.seed,
        "params": a.params,
        "choices": a.choices,
        "choice_id": a.choice_id,
        "correct_choice_id": a.correct_choice_id,
        "correct": a.correct,
        "pitfall_id": a.pitfall_id,
        "first_answer": a.first_answer,
        "session_id": a.practice_session_id,
        "position": a.position,
        "duration_ms": a.duration_ms,
        "answered_at": _moment(a.answered_at),
        "dismissed": a.dismissed,
        "created_at": _moment(a.created_at),
    }


def _review(item: ReviewItem, logs: list[ReviewLog]) -> dict[str, Any]:
    return {
        "card_id": item.card_id,
        "point": item.point,
        "template_id": item.template_id,
        "due_at": _moment(item.due_at),
        "reviews": item.reviews,
        "lapses": item.lapses,
        "last_review_at": _moment(item.last_review_at),
        "state": item.state,
        "log": [
            {
                "rating": entry.rating,
                "attempt_id": entry.attempt_id,
                "reviewed_at": _moment(entry.reviewed_at),
                "due_before": _moment(entry.due_before),
                "due_after": _moment(entry.due_after),
            }
            for entry in logs
        ],
    }


def export_filename(document: dict[str, Any]) -> str:
    """The download's file name: the day of the export."""
    return f"infracards-my-data-{str(document['exported_at'])[:10]}.json"


def delete_learner(*, db: Session, learner_id: str) -> None:
    """Delete the learner and every row of theirs, in one transaction; their web sessions and
    device tokens stop working at once. Cards they edited keep their content: the drafts and
    the audit log no longer name them."""
    with write_transaction(db):
        if db.get(Learner, learner_id) is None:
            raise NotFound(Message("unknown learner"))
        items = select(ReviewItem.id).where(ReviewItem.learner_id == learner_id)
        db.execute(delete(ReviewLog).where(ReviewLog.review_item_id.in_(items)))
        attempts = select(Attempt.id).where(Attempt.learner_id == learner_id)
        db.execute(
            update(ReviewLog).where(ReviewLog.attempt_id.in_(attempts)).values(attempt_id=None)
        )
        db.execute(delete(ReviewItem).where(ReviewItem.learner_id == learner_id))
        db.execute(delete(Attempt).where(Attempt.learner_id == learner_id))
        db.execute(delete(PracticeSession).where(PracticeSession.learner_id == learner_id))
        db.execute(delete(LearnerToken).where(LearnerToken.learner_id == learner_id))
        db.execute(delete(LearnerMerge).where(LearnerMerge.account_id == learner_id))
        db.execute(delete(WebSession).where(WebSession.learner_id == learner_id))
        db.execute(delete(PasswordReset).where(PasswordReset.learner_id == learner_id))
        db.execute(delete(ClassMember).where(ClassMember.learner_id == learner_id))
        owned = select(Classroom.id).where(Classroom.owner_id == learner_id)
        db.execute(delete(ClassMember).where(ClassMember.class_id.in_(owned)))
        db.execute(delete(Classroom).where(Classroom.owner_id == learner_id))
        db.execute(
            update(CardDraft).where(CardDraft.updated_by == learner_id).values(updated_by=None)
        )
        db.execute(
            update(AuditEntry)
            .where(AuditEntry.actor_id == learner_id)
            .values(actor_id=None, actor_email=None)
        )
        db.execute(delete(Learner).where(Learner.id == learner_id))
    forget_cached_tokens()  # after the commit: no process serves a token or session of theirs
