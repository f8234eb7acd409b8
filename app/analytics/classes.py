"""Classes: an instructor creates one and hands out its join code; learners with an account
join with the code; the instructor sees each member's progress.

Progress is read in two grouped queries whatever the class size: first answers per (learner,
card, exam point) (attempts, right, last answer) and reviews due now per learner. It counts a
member's whole history, also from before they joined (their joining date is shown beside it).
Join codes are 8 characters from an alphabet without look-alikes (0/O, 1/I): 32^8 ≈ 10^12 codes,
drawn with ``secrets``; shown as ``ABCD-EFGH``, accepted in any case, with or without the dash.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import case, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.analytics.models import CLASS_NAME_MAX, JOIN_CODE_LENGTH, ClassMember, Classroom
from app.auth.service import LearnerRef
from app.db import write_transaction
from app.domain.catalog import OfferedTemplates
from app.domain.messages import Message
from app.models import Attempt, Learner, ReviewItem
from app.problems import Forbidden, InvalidInput, NotFound

JOIN_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
MAX_CLASSES_PER_OWNER = 200


@dataclass(frozen=True)
class ClassSummary:
    id: int
    name: str
    join_code: str
    members: int
    created_at: datetime

    @property
    def code_display(self) -> str:
        return display_code(self.join_code)


@dataclass
class PointProgress:
    attempts: int = 0
    right: int = 0

    @property
    def facility(self) -> float | None:
        return self.right / self.attempts if self.attempts else None


@dataclass
class MemberProgress:
    learner_id: str
    email: str | None
    joined_at: datetime
    attempts: int = 0
    right: int = 0
    last_answer_at: datetime | None = None
    due_now: int = 0
    points: dict[tuple[str, str], PointProgress] = field(default_factory=dict)

    @property
    def facility(self) -> float | None:
        return self.right / self.attempts if self.attempts else None


@dataclass(frozen=True)
class ClassProgress:
    summary: ClassSummary
    columns: list[tuple[str, str]]  # (card id, exam point slug) that members answered
    members: list[MemberProgress]


def normalise_code(code: str) -> str:
    return "".join(ch for ch in code.upper() if ch.isalnum())


def display_code(code: str) -> str:
    half = len(code) // 2
    return f"{code[:half]}-{code[half:]}"


def new_code() -> str:
    return "".join(secrets.choice(JOIN_ALPHABET) for _ in range(JOIN_CODE_LENGTH))


def _summary(db: Session, row: Classroom) -> ClassSummary:
    members = db.scalar(
        select(func.count()).select_from(ClassMember).where(ClassMember.class_id == row.id)
    )
    return ClassSummary(row.id, row.name, row.join_code, int(members or 0), row.created_at)


def create_class(*, db: Session, owner_id: str, name: str) -> ClassSummary:
    name = " ".join(name.split())
    if not name or len(name) > CLASS_NAME_MAX:
        raise InvalidInput(
            Message("Give the class a name of 1 to %(limit)s characters.", limit=CLASS_NAME_MAX),
            code="invalid_class_name",
        )
    for _ in range(5):  # a collision among 10^12 codes is rare; retry a few times
        try:
            with write_transaction(db):
                owned = db.scalar(
                    select(func.count())
                    .select_from(Classroom)
                    .where(Classroom.owner_id == owner_id)
                )
                if (owned or 0) >= MAX_CLASSES_PER_OWNER:
                    raise InvalidInput(
                        Message("You have too many classes."),
                        code="too_many_classes",
                    )
                row = Classroom(name=name, join_code=new_code(), owner_id=owner_id)
                db.add(row)
                db.flush()
                summary = ClassSummary(row.id, row.name, row.join_code, 0, row.created_at)
            return summary
        except IntegrityError:
            continue
    raise RuntimeError("could not draw an unused join code")


def classes_of(*, db: Session, owner_id: str) -> list[ClassSummary]:
    members = (
        select(ClassMember.class_id, func.count().label("n"))
        .group_by(ClassMember.class_id)
        .subquery()
    )
    rows = db.execute(
        select(Classroom, func.coalesce(members.c.n, 0))
        .outerjoin(members, members.c.class_id == Classroom.id)
        .where(Classroom.owner_id == owner_id)
        .order_by(Classroom.created_at.desc(), Classroom.id.desc())
    ).all()
    db.commit()
    return [ClassSummary(c.id, c.name, c.join_code, int(n), c.created_at) for c, n in rows]


def join_class(*, db: Session, learner: LearnerRef, code: str) -> ClassSummary:
    """Add the learner (an account) to the class of ``code``; joining again changes nothing."""
    if not learner.has_account:
        raise Forbidden(
            Message("Log in (or sign up) to join a class."),
            code="account_required",
        )
    wanted = normalise_code(code)
    with write_transaction(db):
        row = db.scalar(select(Classroom).where(Classroom.join_code == wanted))
        if row is None or len(wanted) != JOIN_CODE_LENGTH:
            raise NotFound(
                Message("No class has this code: check it with your instructor."),
                code="unknown_join_code",
            )
        exists = db.scalar(
            select(ClassMember.id).where(
                ClassMember.class_id == row.id, ClassMember.learner_id == learner.id
            )
        )
        if exists is None:
            db.add(ClassMember(class_id=row.id, learner_id=learner.id))
            db.flush()
        summary = _summary(db, row)
    return summary


def owned_class(*, db: Session, class_id: int, viewer: LearnerRef) -> Classroom:
    """The class if ``viewer`` owns it (or is an admin); 404 otherwise, so ids reveal nothing."""
    row = db.get(Classroom, class_id)
    if row is None or (row.owner_id != viewer.id and viewer.role != "admin"):
        raise NotFound(Message("There is no such class."), code="class_not_found")
    return row


def class_progress(
    *,
    db: Session,
    class_id: int,
    viewer: LearnerRef,
    now: datetime,
    offered: OfferedTemplates,
) -> ClassProgress:
    """Each member's progress; their reviews due at ``now`` as they see them counted
    (ReviewItem.due_by: of the ``offered`` templates, the catalog's offered_templates)."""
    row = owned_class(db=db, class_id=class_id, viewer=viewer)
    summary = _summary(db, row)
    members = {
        learner_id: MemberProgress(learner_id, email, joined_at)
        for learner_id, email, joined_at in db.execute(
            select(ClassMember.learner_id, Learner.email, ClassMember.joined_at)
            .join(Learner, Learner.id == ClassMember.learner_id)
            .where(ClassMember.class_id == class_id)
            .order_by(Learner.email, ClassMember.learner_id)
        )
    }
    in_class = select(ClassMember.learner_id).where(ClassMember.class_id == class_id)
    columns: set[tuple[str, str]] = set()
    for learner_id, card_id, point, n, right, last in db.execute(
        select(
            Attempt.learner_id,
            Attempt.card_id,
            Attempt.point,
            func.count(),
            func.sum(case((Attempt.correct, 1), else_=0)),
            func.max(Attempt.created_at),
        )
        .where(Attempt.learner_id.in_(in_class), Attempt.first_answer.is_(True))
        .group_by(Attempt.learner_id, Attempt.card_id, Attempt.point)
    ):
        member = members[learner_id]
        member.points[(card_id, point)] = PointProgress(int(n), int(right or 0))
        member.attempts += int(n)
        member.right += int(right or 0)
        if last is not None and (member.last_answer_at is None or last > member.last_answer_at):
            member.last_answer_at = last
        columns.add((card_id, point))
    for learner_id, due in db.execute(
        select(ReviewItem.learner_id, func.count())
        .where(ReviewItem.learner_id.in_(in_class), ReviewItem.due_by(now, offered))
        .group_by(ReviewItem.learner_id)
    ):
        members[learner_id].due_now = int(due)
    db.commit()
    return ClassProgress(summary, sorted(columns), list(members.values()))
