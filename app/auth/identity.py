"""Who is asking, and the primitives identity is made of: ids, secrets, times.

Secrets (web session ids, bearer tokens) are 256 random bits shown once to their holder; only
their SHA-256 is stored, so a leaked database leaks no usable credential.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from app.domain.messages import Message
from app.problems import InvalidInput

GUEST = "guest"
APP = "app"
ACCOUNT = "account"
ROLES = ("learner", "instructor", "admin")


@dataclass(frozen=True)
class LearnerRef:
    """Who is asking: the learner, how they were identified, and their role."""

    id: str
    kind: str
    role: str = "learner"
    email: str | None = None
    token_id: int | None = None  # the bearer token of this request, for API requests
    time_zone: str | None = None  # an IANA name the learner chose (None: not known)

    @property
    def has_account(self) -> bool:
        return self.kind == ACCOUNT


# The learners columns a LearnerRef is made of (the lookups that read a row, not an entity).
LEARNER_REF_COLUMNS = ("id", "kind", "role", "email", "time_zone")


class LearnerColumns(Protocol):
    """What a LearnerRef is made of: a Learner, or a row of LEARNER_REF_COLUMNS."""

    id: str
    kind: str
    role: str
    email: str | None
    time_zone: str | None


def learner_ref(learner: LearnerColumns, token_id: int | None = None) -> LearnerRef:
    return LearnerRef(
        id=learner.id,
        kind=learner.kind,
        role=learner.role,
        email=learner.email,
        token_id=token_id,
        time_zone=learner.time_zone,
    )


def check_role(role: str) -> None:
    if role not in ROLES:
        raise InvalidInput(
            Message(
                "unknown role %(role)s (known: %(known)s)", role=repr(role), known=", ".join(ROLES)
            )
        )


def new_id() -> str:
    return uuid.uuid4().hex


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def now_utc() -> datetime:
    return datetime.now(UTC)


def as_utc(moment: datetime) -> datetime:
    """SQLite hands back naive datetimes; they were stored in UTC."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
