"""Database errors of the service's own making, and the guard that keeps unstorable text out.

:class:`WriteTimedOut` (an answer's write not done within its bound) and :class:`UnstorableText`
(a NUL or a lone surrogate on its way into a statement) are answered as a busy 503 and a 422 by
``app.errors``; ``NOT_TRIED_AGAIN`` names the failures (``app.db.failure_kind``) a batch of
writes does not try again.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine

from app.domain.storable import text_problem


class UnstorableText(ValueError):
    """A statement's parameter holds text no database stores (a NUL, an unpaired surrogate):
    the request is refused with a 422, before the database sees it."""


def _check(value: object, depth: int = 0) -> None:
    if isinstance(value, str):
        problem = text_problem(value)
        if problem:
            raise UnstorableText(problem)
    elif depth < 2 and isinstance(value, dict):
        for item in value.values():
            _check(item, depth + 1)
    elif depth < 2 and isinstance(value, list | tuple):
        for item in value:
            _check(item, depth + 1)


def _refuse_unstorable(
    _conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, many: bool
) -> None:
    """Every text parameter of a statement (one row's or many rows')."""
    _check(parameters)


def guard_text(engine: Engine) -> None:
    """Refuse text that PostgreSQL (a NUL) or SQLite (a lone surrogate) cannot store, on every
    statement of ``engine``, whatever route it came from."""
    event.listen(engine, "before_cursor_execute", _refuse_unstorable)


class WriteTimedOut(Exception):
    """A write was not done within its bound (the database locked by another process, a
    frozen file system): the request is a busy 503 and may be sent again."""


# Database trouble a batch of writes does not try again: waiting again would only double the
# wait (a lock held elsewhere, a full or read-only disk, a server that does not answer).
NOT_TRIED_AGAIN = frozenset({"busy", "timeout", "disk_full", "read_only", "unreachable"})
