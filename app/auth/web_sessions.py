"""Web sessions: the server-side session behind a browser's cookie, and the guest it may create.

A guest's learner row is written with its first answer, so merely visiting pages writes nothing.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import BindParameter, Select, bindparam, delete, func, select, update
from sqlalchemy.orm import Session

from app.auth.identity import (
    GUEST,
    LEARNER_REF_COLUMNS,
    LearnerRef,
    as_utc,
    hash_secret,
    learner_ref,
    new_id,
    new_secret,
    now_utc,
)
from app.auth.tokens import forget_cached_tokens, revoke_all_tokens
from app.auth.visitors import KnownVisitor, forget_visitor
from app.db import write_transaction
from app.domain.catalog import OfferedTemplates
from app.models import Learner, ReviewItem, WebSession

SESSION_LIFETIME = timedelta(days=400)  # the longest browsers keep a cookie
SESSION_TOUCH_EVERY = timedelta(hours=1)


def _session_statement(*columns: Any) -> Select[Any]:
    """A live web session's learner (what a LearnerRef holds), the session's id and when it was
    last seen, and ``columns``: by the hash of its secret (``token_hash``), unexpired at
    ``alive_at``. Columns, not an ORM entity: it runs on the connection, as a page view does."""
    learners, sessions = Learner.__table__, WebSession.__table__
    return (
        select(
            *learners.c[LEARNER_REF_COLUMNS],
            sessions.c.id.label("session_id"),
            sessions.c.last_seen_at,
            *columns,
        )
        .join(sessions, sessions.c.learner_id == learners.c.id)
        .where(
            sessions.c.token_hash == bindparam("token_hash"),
            sessions.c.expires_at > bindparam("alive_at"),
        )
    )


def _visitor_statement() -> Select[Any]:
    """What visitor_for_web_session reads, built once: the session's learner, its reviews due at
    ``now`` of the ``offered`` templates and the next due time there (correlated subqueries)."""
    now: BindParameter[datetime] = bindparam("now")
    offered: tuple[BindParameter[Any], BindParameter[Any]] = (
        bindparam("offered", expanding=True),
        bindparam("retired", expanding=True),
    )
    of_learner = ReviewItem.learner_id == Learner.__table__.c.id
    due_now = select(func.count()).where(of_learner, ReviewItem.due_by(now, offered))
    next_due = select(func.min(ReviewItem.due_at)).where(
        of_learner, ReviewItem.served(offered), ~ReviewItem.due_by(now, offered)
    )
    return _session_statement(
        due_now.scalar_subquery().label("due_count"),
        next_due.scalar_subquery().label("next_due_at"),
    )


_VISITOR = _visitor_statement()
_SESSION = _session_statement()


def visitor_for_web_session(
    *, db: Session, secret: str, now: datetime, offered: OfferedTemplates
) -> KnownVisitor | None:
    """The learner of a web session cookie, how many of its reviews are due at ``now`` (as
    app.review.service.due_counts counts them: of the ``offered`` templates, the catalog's
    offered_templates) and when the next one falls due, in one read; None for an unknown or expired
    session."""
    values = {
        "now": now,
        "offered": list(offered.cards),
        "retired": list(offered.retired),
        "token_hash": hash_secret(secret),
        "alive_at": now_utc(),
    }
    row = _read_session(db, _VISITOR, values)
    if row is None:
        return None
    next_due_at = None if row.next_due_at is None else as_utc(row.next_due_at)
    return KnownVisitor(learner_ref(row), int(row.due_count), next_due_at)


def learner_for_web_session(*, db: Session, secret: str) -> LearnerRef | None:
    """The learner of a web session cookie, without its reviews (a form's request: it shows no
    page of its own but the rare refusal); None for an unknown or expired session. A quarter of
    what :func:`visitor_for_web_session` costs (24 against 97 µs of SQLite on the benchmark's
    database), and the form POST's largest part."""
    row = _read_session(db, _SESSION, {"token_hash": hash_secret(secret), "alive_at": now_utc()})
    return None if row is None else learner_ref(row)


def _read_session(db: Session, statement: Select[Any], values: dict[str, Any]) -> Any:
    """The row of a live session (None: unknown or expired), its last use recorded at most every
    ``SESSION_TOUCH_EVERY``."""
    row = db.connection().execute(statement, values).first()
    db.commit()
    if row is None:
        return None
    touched = now_utc()
    if touched - as_utc(row.last_seen_at) > SESSION_TOUCH_EVERY:
        with write_transaction(db):
            db.execute(
                update(WebSession)
                .where(WebSession.id == row.session_id)
                .values(last_seen_at=touched, expires_at=touched + SESSION_LIFETIME)
            )
    return row


def start_web_session(
    *, db: Session, learner_id: str, lang: str | None = None, replace: str | None = None
) -> str:
    """A new web session for the learner (a fresh secret: no session fixation)."""
    secret = new_secret()
    now = now_utc()
    with write_transaction(db):
        if replace is not None:
            db.execute(delete(WebSession).where(WebSession.token_hash == hash_secret(replace)))
        db.add(
            WebSession(
                token_hash=hash_secret(secret),
                learner_id=learner_id,
                lang=lang,
                created_at=now,
                last_seen_at=now,
                expires_at=now + SESSION_LIFETIME,
            )
        )
    return secret


def ensure_guest(*, db: Session, secret: str, lang: str | None = None) -> LearnerRef:
    """The learner of this browser's session, creating a guest (and the session row) if needed.

    Call inside a write transaction: the guest is created with the first thing it stores.
    """
    found = db.execute(
        select(Learner)
        .join(WebSession, WebSession.learner_id == Learner.id)
        .where(WebSession.token_hash == hash_secret(secret))
    ).scalar()
    if found is not None:
        return learner_ref(found)
    learner = Learner(id=new_id(), kind=GUEST, role="learner")
    now = now_utc()
    db.add(learner)
    db.flush()
    db.add(
        WebSession(
            token_hash=hash_secret(secret),
            learner_id=learner.id,
            lang=lang,
            created_at=now,
            last_seen_at=now,
            expires_at=now + SESSION_LIFETIME,
        )
    )
    db.flush()
    return learner_ref(learner)


def set_session_lang(*, db: Session, secret: str, lang: str) -> None:
    with write_transaction(db):
        db.execute(
            update(WebSession).where(WebSession.token_hash == hash_secret(secret)).values(lang=lang)
        )


def end_web_session(*, db: Session, secret: str) -> None:
    with write_transaction(db):
        db.execute(delete(WebSession).where(WebSession.token_hash == hash_secret(secret)))
    forget_visitor(secret)


def end_all_sessions(*, db: Session, learner_id: str) -> None:
    """Log out everywhere: every web session and every device token of the learner."""
    with write_transaction(db):
        end_sessions(db, learner_id, None, None)
    forget_cached_tokens()  # after the commit too: no request re-cached a token meanwhile


def end_sessions(
    db: Session, learner_id: str, keep_session_hash: str | None, keep_token_id: int | None
) -> None:
    """End the learner's web sessions and revoke their device tokens, but the ones to keep (in
    the caller's transaction)."""
    query = delete(WebSession).where(WebSession.learner_id == learner_id)
    if keep_session_hash is not None:
        query = query.where(WebSession.token_hash != keep_session_hash)
    db.execute(query)
    revoke_all_tokens(db, learner_id, keep_token_id)
