"""Signing up without telling anyone which addresses have accounts.

A sign-up answers the same whether the address is new or already has an account: the same
status and body (the address as stored), after the same work (the password checked and hashed
either way). A new address gets its account at once, so an app signs up and then asks for its
token (``POST /auth/token``) as before. An address that has an account gets no new one and no
change; its owner is emailed instead (in the mail thread, :class:`app.mail.Mailer`, at most a
few times an hour: :meth:`app.auth.ratelimit.LoginLimiter.signup_notice`) with a link to log in
and one to choose a new password (a reset link, :mod:`app.auth.resets`).

Whoever signs up learns whether the account is theirs only by logging in with the password they
chose, which the login limits throttle, and which the owner of a taken address hears of.
"""

from __future__ import annotations

from email.message import EmailMessage

from sqlalchemy.orm import Session, sessionmaker

from app.auth.accounts import create_account, normalise_email
from app.auth.ratelimit import LoginLimiter
from app.auth.resets import issue_reset, reset_link
from app.domain.languages import DEFAULT_LANG
from app.domain.messages import Message
from app.mail import Mailer


def sign_up(
    *,
    db: Session,
    limiter: LoginLimiter,
    mailer: Mailer,
    sessions: sessionmaker[Session],
    email: str,
    password: str,
    lang: str,
    base_url: str,
) -> str:
    """A new learner account for ``email``, or (the address has one) an email to its owner; the
    address as stored either way. Refused alike in both cases: an address that is not one, a
    weak password (:class:`app.problems.InvalidInput`)."""
    email = normalise_email(email)
    may_tell = limiter.signup_notice(email=email)  # counted either way: the same work
    if create_account(db=db, email=email, password=password) is not None or not may_tell:
        return email

    def work() -> None:
        with sessions() as mail_db:
            token = issue_reset(db=mail_db, email=email)
        if token is not None:
            login = (
                base_url.rstrip("/") + "/login" + (f"?lang={lang}" if lang != DEFAULT_LANG else "")
            )
            mailer.send(taken_email(email, login, reset_link(base_url, token, lang), lang))

    mailer.submit(work)
    return email


def taken_email(to: str, login: str, reset: str, lang: str) -> EmailMessage:
    """To an account's owner: someone tried to sign up with its address."""
    message = EmailMessage()
    message["To"] = to
    message["Subject"] = Message("Someone tried to sign up with your address").get(lang)
    lines = [
        Message(
            "Someone (we hope you) tried to create an infracards account with this email "
            "address. It already has an account, so no new one was created."
        ).get(lang),
        "",
        Message("If it was you, log in:").get(lang),
        login,
        "",
        Message("Forgot your password? Choose a new one here:").get(lang),
        reset,
        Message("This link works once, within an hour.").get(lang),
        "",
        Message("If it was not you, ignore this email: your account stays as it is.").get(lang),
    ]
    message.set_content("\n".join(lines) + "\n")
    return message
