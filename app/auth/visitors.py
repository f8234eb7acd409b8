"""Web visitors remembered in this process for a few seconds, so that page views read nothing.

A page GET by a browser whose session was looked up here less than ``VISITOR_CACHE_TTL_S`` ago
takes its learner and the header's due count from here instead of the database, until the
next of its reviews falls due (the count would change then).
Only GET and HEAD read from here: every other request checks its session in the database, and
once its response starts forgets what this process remembered of its browser (so the page after
an answer or a log-out is read afresh). Whatever ends or changes sessions or roles in this
process forgets every visitor at once, with the remembered bearer tokens
(``app.auth.service.forget_cached_tokens``); another process sees such a change, and a due count
moved by another process, within ``VISITOR_CACHE_TTL_S``, as it sees a revoked bearer token.
Sessions that are unknown are never remembered.
"""

from __future__ import annotations

import hashlib
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from app.auth.service import LearnerRef

VISITOR_CACHE_TTL_S = 5.0
VISITOR_CACHE_SIZE = 10_000


@dataclass(frozen=True)
class KnownVisitor:
    """A browser session's learner, how many of its reviews were due when it was read, and when
    the next one falls due (None: none will)."""

    learner: LearnerRef
    due_count: int
    next_due_at: datetime | None


_visitors: dict[str, tuple[float, KnownVisitor]] = {}
_lock = threading.Lock()


def _key(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def remembered_visitor(secret: str, now: datetime) -> KnownVisitor | None:
    """The visitor of this session secret when it was read here less than
    ``VISITOR_CACHE_TTL_S`` ago and none of its reviews has fallen due since (at ``now``)."""
    key = _key(secret)
    found = _visitors.get(key)
    if found is None:
        return None
    expires, visitor = found
    if time.monotonic() >= expires or (
        visitor.next_due_at is not None and now >= visitor.next_due_at
    ):
        _visitors.pop(key, None)
        return None
    return visitor


def remember_visitor(secret: str, visitor: KnownVisitor) -> None:
    with _lock:
        if len(_visitors) >= VISITOR_CACHE_SIZE:
            now = time.monotonic()
            for key in [k for k, (expires, _) in _visitors.items() if expires <= now]:
                del _visitors[key]
            if len(_visitors) >= VISITOR_CACHE_SIZE:
                _visitors.clear()
        _visitors[_key(secret)] = (time.monotonic() + VISITOR_CACHE_TTL_S, visitor)


def forget_visitor(secret: str) -> None:
    """Forget one browser session (after a request that may have changed what it shows)."""
    with _lock:
        _visitors.pop(_key(secret), None)


def forget_visitors() -> None:
    """Forget every browser session (after sessions, tokens or roles changed)."""
    with _lock:
        _visitors.clear()
