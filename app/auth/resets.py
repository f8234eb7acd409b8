"""Password reset by email: a link that works once, within an hour.

Asking for a reset answers the same whether the address has an account or not: the request only
checks the address's form and the rate limits, then hands the rest (looking the account up,
storing the link's hash, sending) to the mail thread (:class:`app.mail.Mailer`), so neither the
answer nor its timing tells. Using a link sets the new password, deletes every reset link of the
learner and signs out all their web sessions and device tokens.
"""

from __future__ import annotations

from datetime import timedelta
from email.message import EmailMessage

from sqlalchemy import delete, select
from sqlalchemy.orm import Session, sessionmaker

from app.auth.accounts import check_new_password, normalise_email
from app.auth.identity import (
    ACCOUNT,
    LearnerRef,
    as_utc,
    hash_secret,
    learner_ref,
    new_secret,
    now_utc,
)
from app.auth.passwords import hash_password
from app.auth.ratelimit import LoginLimiter
from app.auth.tokens import forget_cached_tokens
from app.auth.web_sessions import end_sessions
from app.db import write_transaction
from app.domain.languages import DEFAULT_LANG
from app.domain.messages import Message, plural_message
from app.mail import Mailer
from app.models import Learner, PasswordReset
from app.problems import InvalidInput, TooManyRequests

RESET_LIFETIME = timedelta(hours=1)
RESET_PATH = "/password-reset/"

INVALID_LINK = Message(
    "This password reset link has expired or was already used: ask for a new one."
)


def ask_for_reset(
    *,
    limiter: LoginLimiter,
    mailer: Mailer,
    sessions: sessionmaker[Session],
    email: str,
    address: str,
    lang: str,
    base_url: str,
) -> None:
    """Email a reset link to ``email`` if it has an account (in the background); the same
    outcome either way. Refused: an address that is not one, too many requests."""
    email = normalise_email(email)
    wait = limiter.reset_requested(email=email, address=address)
    if wait is not None:
        raise TooManyRequests(
            plural_message(
                "Too many password reset requests: try again in %(num)s second.",
                "Too many password reset requests: try again in %(num)s seconds.",
                wait,
            ),
            retry_after_s=wait,
        )

    def work() -> None:
        with sessions() as db:
            token = issue_reset(db=db, email=email)
        if token is not None:
            mailer.send(reset_email(email, reset_link(base_url, token, lang), lang))

    mailer.submit(work)


def reset_link(base_url: str, token: str, lang: str) -> str:
    """The web page that uses reset ``token``, in the language the email was written in."""
    link = base_url.rstrip("/") + RESET_PATH + token
    if lang != DEFAULT_LANG:
        link += f"?lang={lang}"
    return link


def issue_reset(*, db: Session, email: str) -> str | None:
    """A new reset token for the account of ``email`` (stored hashed), or None without one."""
    with write_transaction(db):
        learner = db.scalars(
            select(Learner).where(Learner.email == email, Learner.kind == ACCOUNT)
        ).first()
        if learner is None:
            return None
        token = new_secret()
        now = now_utc()
        db.execute(
            delete(PasswordReset).where(
                PasswordReset.learner_id == learner.id, PasswordReset.expires_at <= now
            )
        )
        db.add(
            PasswordReset(
                learner_id=learner.id,
                token_hash=hash_secret(token),
                created_at=now,
                expires_at=now + RESET_LIFETIME,
            )
        )
    return token


def reset_email(to: str, link: str, lang: str) -> EmailMessage:
    message = EmailMessage()
    message["To"] = to
    message["Subject"] = Message("Reset your infracards password").get(lang)
    lines = [
        Message("Someone (we hope you) asked to reset the password of this account.").get(lang),
        Message("Choose a new password here:").get(lang),
        "",
        link,
        "",
        Message(
            "The link works once, within an hour. Resetting signs out every browser and app "
            "signed in to your account."
        ).get(lang),
        Message("If you did not ask for it, ignore this email: your password stays as it is.").get(
            lang
        ),
    ]
    message.set_content("\n".join(lines) + "\n")
    return message


def _usable(db: Session, token: str) -> PasswordReset | None:
    row = db.scalars(
        select(PasswordReset).where(PasswordReset.token_hash == hash_secret(token[:100]))
    ).first()
    if row is None or as_utc(row.expires_at) <= now_utc():
        return None
    return row


def reset_link_works(*, db: Session, token: str) -> bool:
    """Whether ``token`` is a reset link not used and not expired."""
    found = _usable(db, token) is not None
    db.commit()
    return found


def reset_password(*, db: Session, token: str, new: str) -> LearnerRef:
    """Set the password of the link's learner; the link (and their others) stop working, every
    web session and device token of theirs is signed out."""
    check_new_password(new)
    if not reset_link_works(db=db, token=token):
        raise InvalidInput(INVALID_LINK, code="invalid_reset_link")
    password_hash = hash_password(new)
    with write_transaction(db):
        row = _usable(db, token)  # again, in the write transaction: used once, even when raced
        learner = db.get(Learner, row.learner_id) if row is not None else None
        if row is None or learner is None:
            raise InvalidInput(INVALID_LINK, code="invalid_reset_link")
        learner.password_hash = password_hash
        db.execute(delete(PasswordReset).where(PasswordReset.learner_id == learner.id))
        end_sessions(db, learner.id, None, None)
        ref = learner_ref(learner)
    forget_cached_tokens()
    return ref
