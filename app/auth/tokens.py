"""Anonymous app installs and their bearer tokens: issuing, checking, listing, revoking.

A token is shown once to its holder; only its SHA-256 is stored.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Select, bindparam, select, update
from sqlalchemy.orm import Session

from app.auth.identity import (
    APP,
    LEARNER_REF_COLUMNS,
    LearnerRef,
    as_utc,
    hash_secret,
    learner_ref,
    new_id,
    new_secret,
    now_utc,
)
from app.auth.visitors import forget_visitors
from app.db import write_transaction
from app.domain.messages import Message
from app.models import Learner, LearnerToken
from app.problems import NotFound

TOKEN_TOUCH_EVERY = timedelta(hours=1)
MAX_DEVICE_NAME = 100


@dataclass(frozen=True)
class DeviceToken:
    id: int
    device_name: str | None
    created_at: datetime
    last_used_at: datetime | None


def create_app_learner(*, db: Session, device_name: str | None = None) -> tuple[LearnerRef, str]:
    """A new anonymous learner with a bearer token (returned once, stored hashed)."""
    learner = Learner(id=new_id(), kind=APP, role="learner")
    token = new_secret()
    with write_transaction(db):
        db.add(learner)
        db.flush()
        db.add(
            LearnerToken(
                learner_id=learner.id, token_hash=hash_secret(token), device_name=device_name
            )
        )
    return LearnerRef(id=learner.id, kind=APP), token


def issue_token(*, db: Session, learner_id: str, device_name: str | None) -> str:
    token = new_secret()
    with write_transaction(db):
        db.add(
            LearnerToken(
                learner_id=learner_id,
                token_hash=hash_secret(token),
                device_name=(device_name or "")[:MAX_DEVICE_NAME] or None,
            )
        )
    return token


# Validated bearer tokens are remembered in this process for TOKEN_CACHE_TTL_S: the answer and
# question routes then authenticate without a database read. Revoking a token (one device, log
# out everywhere, a password change) or changing a role in this process forgets the cache at
# once; another process (a second worker, another server) honours a revocation within
# TOKEN_CACHE_TTL_S, the longest a revoked token can still be used there. Unknown tokens are
# never cached.
TOKEN_CACHE_TTL_S = 5.0
TOKEN_CACHE_SIZE = 10_000
_token_cache: dict[str, tuple[float, LearnerRef]] = {}
_token_cache_lock = threading.Lock()


def forget_cached_tokens() -> None:
    """Drop every remembered bearer token and web visitor (after a revocation, a log-out or a
    role change)."""
    with _token_cache_lock:
        _token_cache.clear()
    forget_visitors()


def cached_learner_for_token(token: str) -> LearnerRef | None:
    """The learner of ``token`` when it was validated here less than TOKEN_CACHE_TTL_S ago."""
    key = hash_secret(token)
    found = _token_cache.get(key)
    if found is None:
        return None
    if time.monotonic() >= found[0]:
        _token_cache.pop(key, None)
        return None
    return found[1]


def _remember_token(token_hash: str, ref: LearnerRef) -> None:
    with _token_cache_lock:
        if len(_token_cache) >= TOKEN_CACHE_SIZE:
            now = time.monotonic()
            for key in [k for k, (exp, _) in _token_cache.items() if exp <= now]:
                del _token_cache[key]
            if len(_token_cache) >= TOKEN_CACHE_SIZE:
                _token_cache.clear()
        _token_cache[token_hash] = (time.monotonic() + TOKEN_CACHE_TTL_S, ref)


def _token_learner_statement() -> Select[Any]:
    """What learner_for_token reads, built once: a live token's learner (what a LearnerRef
    holds) as columns, not an ORM entity: every app request between two token-cache hits reads
    it, and the entity cost it twice as much."""
    learners, tokens = Learner.__table__, LearnerToken.__table__
    return (
        select(
            *learners.c[LEARNER_REF_COLUMNS],
            tokens.c.id.label("token_id"),
            tokens.c.last_used_at,
        )
        .join(tokens, tokens.c.learner_id == learners.c.id)
        .where(tokens.c.token_hash == bindparam("token_hash"), tokens.c.revoked_at.is_(None))
    )


_TOKEN_LEARNER = _token_learner_statement()


def learner_for_token(*, db: Session, token: str) -> LearnerRef | None:
    """The learner a (not revoked) bearer token belongs to, or None."""
    cached = cached_learner_for_token(token)
    if cached is not None:
        return cached
    token_hash = hash_secret(token)
    row = db.connection().execute(_TOKEN_LEARNER, {"token_hash": token_hash}).first()
    # End the read transaction now: a pooled connection held while the request waits for a
    # worker thread can exhaust the pool under load.
    db.commit()
    if row is None:
        return None
    now = now_utc()
    if row.last_used_at is None or now - as_utc(row.last_used_at) > TOKEN_TOUCH_EVERY:
        with write_transaction(db):
            db.execute(
                update(LearnerToken).where(LearnerToken.id == row.token_id).values(last_used_at=now)
            )
    ref = learner_ref(row, row.token_id)
    _remember_token(token_hash, ref)
    return ref


def list_tokens(*, db: Session, learner_id: str) -> list[DeviceToken]:
    rows = db.scalars(
        select(LearnerToken)
        .where(LearnerToken.learner_id == learner_id, LearnerToken.revoked_at.is_(None))
        .order_by(LearnerToken.created_at, LearnerToken.id)
    ).all()
    db.commit()
    return [
        DeviceToken(
            id=row.id,
            device_name=row.device_name,
            created_at=as_utc(row.created_at),
            last_used_at=as_utc(row.last_used_at) if row.last_used_at else None,
        )
        for row in rows
    ]


def revoke_token(*, db: Session, learner_id: str, token_id: int) -> None:
    """Revoke one of the learner's device tokens (404 when it is not theirs or already gone)."""
    with write_transaction(db):
        stored = db.scalars(
            select(LearnerToken).where(
                LearnerToken.id == token_id,
                LearnerToken.learner_id == learner_id,
                LearnerToken.revoked_at.is_(None),
            )
        ).first()
        if stored is None:
            raise NotFound(Message("No such device token."), code="token_not_found")
        stored.revoked_at = now_utc()
    forget_cached_tokens()


def revoke_all_tokens(db: Session, learner_id: str, keep_token_id: int | None) -> None:
    """Revoke every device token of the learner but ``keep_token_id`` (in the caller's
    transaction)."""
    tokens = update(LearnerToken).where(
        LearnerToken.learner_id == learner_id, LearnerToken.revoked_at.is_(None)
    )
    if keep_token_id is not None:
        tokens = tokens.where(LearnerToken.id != keep_token_id)
    db.execute(tokens.values(revoked_at=now_utc()))
    forget_cached_tokens()
