"""Learners: web guests (a signed cookie) and app installations (opaque bearer tokens).

A bearer token is 256 random bits shown once; only its SHA-256 is stored, so a leaked database
does not leak usable tokens. A guest's row is written with its first attempt, so merely visiting
a page changes nothing in the database.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db import write_transaction
from app.models import Learner, LearnerToken

GUEST = "guest"
APP = "app"


@dataclass(frozen=True)
class LearnerRef:
    """Who is asking: a learner id and how they were identified."""

    id: str
    kind: str


def new_learner_id() -> str:
    return uuid.uuid4().hex


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def create_app_learner(*, session: Session) -> tuple[LearnerRef, str]:
    """A new learner with a new bearer token; the token is returned once and stored hashed."""
    learner = LearnerRef(id=new_learner_id(), kind=APP)
    token = secrets.token_urlsafe(32)
    with write_transaction(session):
        session.add(Learner(id=learner.id, kind=learner.kind))
        session.add(LearnerToken(learner_id=learner.id, token_hash=hash_token(token)))
    return learner, token


def learner_for_token(*, session: Session, token: str) -> LearnerRef | None:
    """The learner a (not revoked) bearer token belongs to, or None."""
    row = session.execute(
        select(Learner.id, Learner.kind)
        .join(LearnerToken, LearnerToken.learner_id == Learner.id)
        .where(LearnerToken.token_hash == hash_token(token), LearnerToken.revoked_at.is_(None))
    ).first()
    # End the read transaction now: this runs in a dependency, and a pooled connection held while
    # the request waits for a worker thread for its endpoint can exhaust the pool under load
    # (every thread waiting for a connection, every connection waiting for a thread).
    session.commit()
    return LearnerRef(id=row.id, kind=row.kind) if row is not None else None


def revoke_token(*, session: Session, token: str) -> bool:
    """Revoke a bearer token; False when it was unknown or already revoked."""
    with write_transaction(session):
        stored = session.scalars(
            select(LearnerToken).where(
                LearnerToken.token_hash == hash_token(token), LearnerToken.revoked_at.is_(None)
            )
        ).first()
        if stored is None:
            return False
        stored.revoked_at = datetime.now(UTC)
    return True


def ensure_learner(*, session: Session, learner: LearnerRef) -> None:
    """Insert the learner's row if missing; call inside a write transaction."""
    if session.get(Learner, learner.id) is not None:
        return
    try:
        with session.begin_nested():
            session.add(Learner(id=learner.id, kind=learner.kind))
    except IntegrityError:
        # Inserted concurrently by another request of the same learner: that row will do.
        pass
