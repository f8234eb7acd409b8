"""Use cases of identity: guests, accounts, passwords, web sessions, device tokens, merging.

Secrets (web session ids, bearer tokens) are 256 random bits shown once to their holder; only
their SHA-256 is stored, so a leaked database leaks no usable credential. A guest's learner row
is written with its first answer, so merely visiting pages writes nothing.
"""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import BindParameter, Select, bindparam, delete, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.auth.passwords import (
    MAX_PASSWORD_LENGTH,
    MIN_PASSWORD_LENGTH,
    hash_password,
    needs_rehash,
    verify_password,
)
from app.auth.ratelimit import LoginLimiter
from app.auth.visitors import KnownVisitor, forget_visitor, forget_visitors
from app.db import write_transaction
from app.domain.messages import Message, plural_message
from app.domain.texts import Text
from app.models import (
    Attempt,
    Learner,
    LearnerToken,
    PracticeSession,
    ReviewItem,
    ReviewLog,
    WebSession,
)
from app.problems import Conflict, InvalidInput, NotFound, TooManyRequests, Unauthorized

GUEST = "guest"
APP = "app"
ACCOUNT = "account"
ROLES = ("learner", "instructor", "admin")
SESSION_LIFETIME = timedelta(days=400)  # the longest browsers keep a cookie
SESSION_TOUCH_EVERY = timedelta(hours=1)
TOKEN_TOUCH_EVERY = timedelta(hours=1)
MAX_DEVICE_NAME = 100
_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s]+\.[^@\s]+$")

WRONG_CREDENTIALS = Message("That email and password do not match an account.")


@dataclass(frozen=True)
class LearnerRef:
    """Who is asking: the learner, how they were identified, and their role."""

    id: str
    kind: str
    role: str = "learner"
    email: str | None = None
    token_id: int | None = None  # the bearer token of this request, for API requests

    @property
    def has_account(self) -> bool:
        return self.kind == ACCOUNT


@dataclass(frozen=True)
class DeviceToken:
    id: int
    device_name: str | None
    created_at: datetime
    last_used_at: datetime | None


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


def normalise_email(email: str) -> str:
    value = email.strip().lower()
    if len(value) > 254 or not _EMAIL.match(value):
        raise InvalidInput(Message("Enter a valid email address."), code="invalid_email")
    return value


def check_new_password(password: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidInput(
            Message(
                "Choose a password of at least %(limit)s characters.", limit=MIN_PASSWORD_LENGTH
            ),
            code="weak_password",
        )
    if len(password) > MAX_PASSWORD_LENGTH:
        raise InvalidInput(
            Message("A password may have at most %(limit)s characters.", limit=MAX_PASSWORD_LENGTH),
            code="invalid_password",
        )


def _ref(learner: Learner, token_id: int | None = None) -> LearnerRef:
    return LearnerRef(
        id=learner.id, kind=learner.kind, role=learner.role, email=learner.email, token_id=token_id
    )


# --- accounts ---------------------------------------------------------------------------------


def register(
    *,
    session: Session,
    email: str,
    password: str,
    guest_id: str | None = None,
    role: str = "learner",
) -> LearnerRef:
    """A new account; a guest's learner (``guest_id``) becomes it, keeping all its history."""
    email = normalise_email(email)
    check_new_password(password)
    if role not in ROLES:
        raise InvalidInput(
            Message(
                "unknown role %(role)s (known: %(known)s)", role=repr(role), known=", ".join(ROLES)
            )
        )
    password_hash = hash_password(password)
    try:
        with write_transaction(session):
            if session.scalar(select(Learner.id).where(Learner.email == email)) is not None:
                raise Conflict(_email_taken(), code="email_taken")
            learner = session.get(Learner, guest_id) if guest_id is not None else None
            if learner is None or learner.kind != GUEST:
                learner = Learner(id=new_id(), kind=ACCOUNT)
                session.add(learner)
            learner.kind = ACCOUNT
            learner.email = email
            learner.password_hash = password_hash
            learner.role = role
            session.flush()
            ref = _ref(learner)
    except IntegrityError:
        raise Conflict(_email_taken(), code="email_taken") from None
    return ref


def _email_taken() -> Text:
    return Message("An account with this email already exists: log in instead.")


def authenticate(
    *, session: Session, limiter: LoginLimiter, email: str, password: str, address: str
) -> LearnerRef:
    """The account of ``email`` when ``password`` matches; one generic error otherwise."""
    key = email.strip().lower()[:254]
    wait = limiter.hit(email=key, address=address)
    if wait is not None:
        raise TooManyRequests(
            plural_message(
                "Too many login attempts: try again in %(num)s second.",
                "Too many login attempts: try again in %(num)s seconds.",
                wait,
            ),
            retry_after_s=wait,
        )
    learner = session.scalars(select(Learner).where(Learner.email == key)).first()
    session.commit()
    if not verify_password(learner.password_hash if learner else None, password) or not learner:
        raise Unauthorized(WRONG_CREDENTIALS, code="wrong_credentials")
    if learner.password_hash and needs_rehash(learner.password_hash):
        with write_transaction(session):
            stored = session.get(Learner, learner.id)
            if stored is not None:
                stored.password_hash = hash_password(password)
    return _ref(learner)


def change_password(
    *,
    session: Session,
    learner_id: str,
    current: str,
    new: str,
    keep_session_hash: str | None = None,
    keep_token_id: int | None = None,
) -> None:
    """Set a new password; every other web session and device token is signed out."""
    learner = session.get(Learner, learner_id)
    session.commit()
    if learner is None or not verify_password(learner.password_hash, current):
        raise Unauthorized(
            Message("The current password is not right."),
            code="wrong_credentials",
        )
    check_new_password(new)
    password_hash = hash_password(new)
    with write_transaction(session):
        stored = session.get(Learner, learner_id)
        assert stored is not None
        stored.password_hash = password_hash
        _end_sessions(session, learner_id, keep_session_hash, keep_token_id)
    forget_cached_tokens()  # after the commit too: no request re-cached a token meanwhile


def set_exam_date(*, session: Session, learner_id: str, exam_date: object) -> None:
    with write_transaction(session):
        learner = session.get(Learner, learner_id)
        if learner is None:
            raise NotFound(Message("unknown learner"))
        learner.exam_date = exam_date  # type: ignore[assignment]


def exam_date_of(*, session: Session, learner_id: str):  # type: ignore[no-untyped-def]
    return session.scalar(select(Learner.exam_date).where(Learner.id == learner_id))


def set_role(*, session: Session, email: str, role: str) -> None:
    if role not in ROLES:
        raise InvalidInput(
            Message(
                "unknown role %(role)s (known: %(known)s)", role=repr(role), known=", ".join(ROLES)
            )
        )
    with write_transaction(session):
        learner = session.scalars(
            select(Learner).where(Learner.email == normalise_email(email))
        ).first()
        if learner is None:
            raise NotFound(Message("no account with email %(email)s", email=repr(email)))
        learner.role = role
    forget_cached_tokens()


# --- anonymous app installs and device tokens -------------------------------------------------


def create_app_learner(
    *, session: Session, device_name: str | None = None
) -> tuple[LearnerRef, str]:
    """A new anonymous learner with a bearer token (returned once, stored hashed)."""
    learner = Learner(id=new_id(), kind=APP, role="learner")
    token = new_secret()
    with write_transaction(session):
        session.add(learner)
        session.flush()
        session.add(
            LearnerToken(
                learner_id=learner.id, token_hash=hash_secret(token), device_name=device_name
            )
        )
    return LearnerRef(id=learner.id, kind=APP), token


def issue_token(*, session: Session, learner_id: str, device_name: str | None) -> str:
    token = new_secret()
    with write_transaction(session):
        session.add(
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


def learner_for_token(*, session: Session, token: str) -> LearnerRef | None:
    """The learner a (not revoked) bearer token belongs to, or None."""
    cached = cached_learner_for_token(token)
    if cached is not None:
        return cached
    token_hash = hash_secret(token)
    row = session.execute(
        select(Learner, LearnerToken.id, LearnerToken.last_used_at)
        .join(LearnerToken, LearnerToken.learner_id == Learner.id)
        .where(LearnerToken.token_hash == token_hash, LearnerToken.revoked_at.is_(None))
    ).first()
    # End the read transaction now: a pooled connection held while the request waits for a
    # worker thread can exhaust the pool under load.
    session.commit()
    if row is None:
        return None
    learner, token_id, last_used = row
    now = now_utc()
    if last_used is None or now - as_utc(last_used) > TOKEN_TOUCH_EVERY:
        with write_transaction(session):
            session.execute(
                update(LearnerToken).where(LearnerToken.id == token_id).values(last_used_at=now)
            )
    ref = _ref(learner, token_id)
    _remember_token(token_hash, ref)
    return ref


def list_tokens(*, session: Session, learner_id: str) -> list[DeviceToken]:
    rows = session.scalars(
        select(LearnerToken)
        .where(LearnerToken.learner_id == learner_id, LearnerToken.revoked_at.is_(None))
        .order_by(LearnerToken.created_at, LearnerToken.id)
    ).all()
    session.commit()
    return [
        DeviceToken(
            id=row.id,
            device_name=row.device_name,
            created_at=as_utc(row.created_at),
            last_used_at=as_utc(row.last_used_at) if row.last_used_at else None,
        )
        for row in rows
    ]


def revoke_token(*, session: Session, learner_id: str, token_id: int) -> None:
    """Revoke one of the learner's device tokens (404 when it is not theirs or already gone)."""
    with write_transaction(session):
        stored = session.scalars(
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


# --- web sessions -----------------------------------------------------------------------------


def _visitor_statement() -> Select[Any]:
    """What visitor_for_web_session reads, built once: a web session's learner, its reviews due
    at ``now`` and the next due time (correlated subqueries)."""
    now: BindParameter[datetime] = bindparam("now")
    of_learner = ReviewItem.learner_id == Learner.id
    due_now = select(func.count()).where(of_learner, ReviewItem.due_at <= now)
    next_due = select(func.min(ReviewItem.due_at)).where(of_learner, ReviewItem.due_at > now)
    return (
        select(
            Learner,
            WebSession.id,
            WebSession.last_seen_at,
            due_now.scalar_subquery(),
            next_due.scalar_subquery(),
        )
        .join(WebSession, WebSession.learner_id == Learner.id)
        .where(
            WebSession.token_hash == bindparam("token_hash"),
            WebSession.expires_at > bindparam("alive_at"),
        )
    )


_VISITOR = _visitor_statement()


def visitor_for_web_session(*, session: Session, secret: str, now: datetime) -> KnownVisitor | None:
    """The learner of a web session cookie, how many of its reviews are due at ``now`` (as
    app.review.service.due_counts counts them) and when the next one falls due, in one read;
    None for an unknown or expired session."""
    values = {"now": now, "token_hash": hash_secret(secret), "alive_at": now_utc()}
    row = session.execute(_VISITOR, values).first()
    session.commit()
    if row is None:
        return None
    learner, session_id, last_seen, due_count, next_due_at = row
    touched = now_utc()
    if touched - as_utc(last_seen) > SESSION_TOUCH_EVERY:
        with write_transaction(session):
            session.execute(
                update(WebSession)
                .where(WebSession.id == session_id)
                .values(last_seen_at=touched, expires_at=touched + SESSION_LIFETIME)
            )
    return KnownVisitor(
        _ref(learner), int(due_count), None if next_due_at is None else as_utc(next_due_at)
    )


def start_web_session(
    *, session: Session, learner_id: str, lang: str | None = None, replace: str | None = None
) -> str:
    """A new web session for the learner (a fresh secret: no session fixation)."""
    secret = new_secret()
    now = now_utc()
    with write_transaction(session):
        if replace is not None:
            session.execute(delete(WebSession).where(WebSession.token_hash == hash_secret(replace)))
        session.add(
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


def ensure_guest(*, session: Session, secret: str, lang: str | None = None) -> LearnerRef:
    """The learner of this browser's session, creating a guest (and the session row) if needed.

    Call inside a write transaction: the guest is created with the first thing it stores.
    """
    found = session.execute(
        select(Learner)
        .join(WebSession, WebSession.learner_id == Learner.id)
        .where(WebSession.token_hash == hash_secret(secret))
    ).scalar()
    if found is not None:
        return _ref(found)
    learner = Learner(id=new_id(), kind=GUEST, role="learner")
    now = now_utc()
    session.add(learner)
    session.flush()
    session.add(
        WebSession(
            token_hash=hash_secret(secret),
            learner_id=learner.id,
            lang=lang,
            created_at=now,
            last_seen_at=now,
            expires_at=now + SESSION_LIFETIME,
        )
    )
    session.flush()
    return _ref(learner)


def set_session_lang(*, session: Session, secret: str, lang: str) -> None:
    with write_transaction(session):
        session.execute(
            update(WebSession).where(WebSession.token_hash == hash_secret(secret)).values(lang=lang)
        )


def end_web_session(*, session: Session, secret: str) -> None:
    with write_transaction(session):
        session.execute(delete(WebSession).where(WebSession.token_hash == hash_secret(secret)))
    forget_visitor(secret)


def end_all_sessions(*, session: Session, learner_id: str) -> None:
    """Log out everywhere: every web session and every device token of the learner."""
    with write_transaction(session):
        _end_sessions(session, learner_id, None, None)
    forget_cached_tokens()  # after the commit too: no request re-cached a token meanwhile


def _end_sessions(
    session: Session, learner_id: str, keep_session_hash: str | None, keep_token_id: int | None
) -> None:
    query = delete(WebSession).where(WebSession.learner_id == learner_id)
    if keep_session_hash is not None:
        query = query.where(WebSession.token_hash != keep_session_hash)
    session.execute(query)
    tokens = update(LearnerToken).where(
        LearnerToken.learner_id == learner_id, LearnerToken.revoked_at.is_(None)
    )
    if keep_token_id is not None:
        tokens = tokens.where(LearnerToken.id != keep_token_id)
    session.execute(tokens.values(revoked_at=now_utc()))
    forget_cached_tokens()


# --- merging a guest into an account ----------------------------------------------------------


def merge_learner(*, session: Session, source_id: str, target_id: str) -> None:
    """Move a guest's attempts, sessions and review state to an account; remove the guest.

    Where both have a review item for the same template, the more recently reviewed state is kept
    and the other item's review log moves with it, so no rating is lost.
    """
    if source_id == target_id:
        return
    with write_transaction(session):
        source = session.get(Learner, source_id)
        if source is None or source.kind != GUEST:
            return
        session.execute(
            update(Attempt).where(Attempt.learner_id == source_id).values(learner_id=target_id)
        )
        session.execute(
            update(PracticeSession)
            .where(PracticeSession.learner_id == source_id)
            .values(learner_id=target_id)
        )
        theirs = {
            (i.card_id, i.template_id): i
            for i in session.scalars(select(ReviewItem).where(ReviewItem.learner_id == target_id))
        }
        for item in session.scalars(select(ReviewItem).where(ReviewItem.learner_id == source_id)):
            other = theirs.get((item.card_id, item.template_id))
            if other is None:
                item.learner_id = target_id
                continue
            mine_last = as_utc(item.last_review_at) if item.last_review_at else None
            other_last = as_utc(other.last_review_at) if other.last_review_at else None
            keep, drop = (
                (item, other)
                if (mine_last or _EPOCH) > (other_last or _EPOCH)
                else (
                    other,
                    item,
                )
            )
            session.execute(
                update(ReviewLog)
                .where(ReviewLog.review_item_id == drop.id)
                .values(review_item_id=keep.id)
            )
            keep.reviews = item.reviews + other.reviews
            keep.lapses = item.lapses + other.lapses
            session.flush()
            session.delete(drop)
            session.flush()
            keep.learner_id = target_id
        session.flush()
        session.execute(delete(WebSession).where(WebSession.learner_id == source_id))
        session.delete(source)
    forget_visitors()  # the guest's other browsers, after the commit


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
