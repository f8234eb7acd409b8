"""Classes: an instructor's group of learners, who opt in with the class's join code.

Imported by :mod:`app.analytics.classes` (and so by the app), which registers the tables on
``app.db.Base.metadata``; the migration is ``migrations/versions/*_c1a55e5b0a7d_classes.py``.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base
from app.models import LEARNER_ID_LENGTH, UtcDateTime, utcnow

CLASS_NAME_MAX = 100
JOIN_CODE_LENGTH = 8


class Classroom(Base):
    """A class: its name, its owner (an instructor) and the code learners join it with."""

    __tablename__ = "classes"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(CLASS_NAME_MAX))
    join_code: Mapped[str] = mapped_column(String(JOIN_CODE_LENGTH), unique=True)
    owner_id: Mapped[str] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)


class ClassMember(Base):
    """A learner in a class (they joined with its code)."""

    __tablename__ = "class_members"
    __table_args__ = (
        UniqueConstraint("class_id", "learner_id"),
        Index("ix_class_members_learner_id", "learner_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    class_id: Mapped[int] = mapped_column(ForeignKey("classes.id", ondelete="CASCADE"))
    learner_id: Mapped[str] = mapped_column(
        String(LEARNER_ID_LENGTH), ForeignKey("learners.id", ondelete="CASCADE")
    )
    joined_at: Mapped[datetime] = mapped_column(UtcDateTime(), default=utcnow)
