"""Database tables: learners, their API tokens, and attempts (one answered question each)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db import Base

LEARNER_ID_LENGTH = 32  # uuid4().hex
CLIENT_ANSWER_ID_MAX = 64


def utcnow() -> datetime:
    return datetime.now(UTC)


class Learner(Base):
    """Someone who practises: a web guest (cookie) or an app installation (bearer token)."""

    __tablename__ = "learners"

    id: Mapped[str] = mapped_column(String(LEARNER_ID_LENGTH), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16))  # "guest" (web cookie) | "app" (bearer token)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)

    tokens: Mapped[list[LearnerToken]] = relationship(back_populates="learner")


class LearnerToken(Base):
    """An opaque API bearer token; only its SHA-256 is stored, and it can be revoked."""

    __tablename__ = "learner_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    learner_id: Mapped[str] = mapped_column(
        ForeignKey("learners.id", ondelete="CASCADE"), index=True
    )
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    learner: Mapped[Learner] = relationship(back_populates="tokens")


class Attempt(Base):
    """One answer to one generated question, with everything needed to reproduce the question."""

    __tablename__ = "attempts"
    __table_args__ = (Index("ix_attempts_learner_id_created_at", "learner_id", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    learner_id: Mapped[str] = mapped_column(ForeignKey("learners.id", ondelete="CASCADE"))
    card_id: Mapped[str] = mapped_column(String(100))
    card_version: Mapped[int] = mapped_column(Integer)
    point: Mapped[int] = mapped_column(Integer)
    template_id: Mapped[str] = mapped_column(String(100))
    template_version: Mapped[int] = mapped_column(Integer)
    seed: Mapped[int] = mapped_column(Integer)
    # Exact parameter values as strings, e.g. {"psi": "70000000000", "n_d": "16"}.
    params: Mapped[dict[str, str]] = mapped_column(JSON)
    # The choices shown, in order: [{id, text: {en, zh}, value, unit, pitfall_id}].
    choices: Mapped[list[dict[str, Any]]] = mapped_column(JSON)
    choice_id: Mapped[str] = mapped_column(String(8))
    correct_choice_id: Mapped[str] = mapped_column(String(8))
    correct: Mapped[bool]
    pitfall_id: Mapped[str | None] = mapped_column(String(100), index=True)
    client_answer_id: Mapped[str] = mapped_column(String(CLIENT_ANSWER_ID_MAX), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
