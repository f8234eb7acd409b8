"""Accounts: registering (a guest keeps its history), logging in, passwords, roles, exam dates."""

from __future__ import annotations

from datetime import date

from email_validator import EmailNotValidError, validate_email
from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.auth.identity import ACCOUNT, LearnerRef, check_role, learner_ref, new_id
from app.auth.passwords import (
    MAX_PASSWORD_LENGTH,
    MIN_PASSWORD_LENGTH,
    hash_password,
    needs_rehash,
    verify_password,
)
from app.auth.ratelimit import LoginLimiter
from app.auth.tokens import forget_cached_tokens
from app.auth.visitors import forget_visitors
from app.auth.web_sessions import end_sessions
from app.db import write_transaction
from app.domain.calendar import is_time_zone
from app.domain.messages import Message, plural_message
from app.models import EMAIL_MAX, Learner
from app.problems import Conflict, InvalidInput, NotFound, TooManyRequests, Unauthorized

WRONG_CREDENTIALS = Message("That email and password do not match an account.")


def normalise_email(email: str) -> str:
    """The address as stored: its syntax checked (email-validator, no DNS look-up), lower case."""
    value = email.strip()
    if len(value) > EMAIL_MAX:
        raise InvalidInput(
            Message("An email address may have at most %(limit)s characters.", limit=EMAIL_MAX),
            code="invalid_email",
        )
    try:
        checked = validate_email(value, check_deliverability=False)
    except EmailNotValidError:
        raise InvalidInput(Message("Enter a valid email address."), code="invalid_email") from None
    normalised = checked.normalized.lower()
    if len(normalised) > EMAIL_MAX:  # an internationalised domain may grow
        raise InvalidInput(Message("Enter a valid email address."), code="invalid_email")
    return normalised


def check_new_password(password: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise InvalidInput(
            Message(
                "Choose a password of at least %(limit)s characters.", limit=MIN_PASSWORD_LENGTH
            ),
            code="weak_password",
        )
    if not password.strip():
        raise InvalidInput(
            Message("Choose a password that is not only spaces."), code="weak_password"
        )
    if len(password) > MAX_PASSWORD_LENGTH:
        raise InvalidInput(
            Message("A password may have at most %(limit)s characters.", limit=MAX_PASSWORD_LENGTH),
            code="invalid_password",
        )


def register(*, db: Session, email: str, password: str, role: str = "learner") -> LearnerRef:
    """A new account, for the command line (``create-user``): it says when the address has one.
    Learners sign up with :func:`app.auth.signup.sign_up`, whose answer never says."""
    learner = create_account(db=db, email=email, password=password, role=role)
    if learner is None:
        raise Conflict(
            Message("An account with this email already exists: log in instead."),
            code="email_taken",
        )
    return learner


def create_account(
    *, db: Session, email: str, password: str, role: str = "learner"
) -> LearnerRef | None:
    """A new account, or None when the address already has one (nothing changes then). The
    password is checked and hashed either way, so both take the same time."""
    email = normalise_email(email)
    check_new_password(password)
    check_role(role)
    password_hash = hash_password(password)
    try:
        with write_transaction(db):
            if db.scalar(select(Learner.id).where(Learner.email == email)) is not None:
                return None
            learner = Learner(
                id=new_id(), kind=ACCOUNT, email=email, password_hash=password_hash, role=role
            )
            db.add(learner)
            db.flush()
            ref = learner_ref(learner)
    except IntegrityError:  # the same address signed up at the same moment
        return None
    return ref


def login_key(email: str) -> str:
    """The stored form of ``email`` when it is a valid address, else its trimmed lower case (an
    address that cannot have an account is still counted by the limits)."""
    try:
        return normalise_email(email)
    except InvalidInput:
        return email.strip().lower()[:EMAIL_MAX]


def too_many_logins(wait: int) -> TooManyRequests:
    return TooManyRequests(
        plural_message(
            "Too many login attempts: try again in %(num)s second.",
            "Too many login attempts: try again in %(num)s seconds.",
            wait,
        ),
        retry_after_s=wait,
    )


def admit_new_learner(limiter: LoginLimiter, address: str) -> None:
    """Count a new learner from ``address``; 429 with Retry-After when over a limit."""
    wait = limiter.new_learner(address=address)
    if wait is not None:
        raise TooManyRequests(
            plural_message(
                "Too many new accounts from here: try again in %(num)s second.",
                "Too many new accounts from here: try again in %(num)s seconds.",
                wait,
            ),
            retry_after_s=wait,
        )


def authenticate(
    *, db: Session, limiter: LoginLimiter, email: str, password: str, address: str
) -> LearnerRef:
    """The account of ``email`` when ``password`` matches; one generic error otherwise."""
    key = login_key(email)
    wait = limiter.check(email=key, address=address)
    if wait is not None:
        raise too_many_logins(wait)
    learner = db.scalars(select(Learner).where(Learner.email == key)).first()
    db.commit()
    if not verify_password(learner.password_hash if learner else None, password) or not learner:
        limiter.failed(email=key, address=address)
        raise Unauthorized(WRONG_CREDENTIALS, code="wrong_credentials")
    limiter.succeeded(email=key, address=address)
    if learner.password_hash and needs_rehash(learner.password_hash):
        with write_transaction(db):
            stored = db.get(Learner, learner.id)
            if stored is not None:
                stored.password_hash = hash_password(password)
    return learner_ref(learner)


def confirm_password(
    *, db: Session, limiter: LoginLimiter, learner: LearnerRef, password: str, address: str
) -> None:
    """The signed-in account's own password, asked again before a change that cannot be undone
    (a new password, deleting the account): counted and throttled as logins are (429 with
    Retry-After), so a stolen session cannot guess it."""
    if learner.email is None:
        raise Unauthorized(Message("The current password is not right."), code="wrong_credentials")
    try:
        authenticate(
            db=db, limiter=limiter, email=learner.email, password=password, address=address
        )
    except Unauthorized:
        raise Unauthorized(
            Message("The current password is not right."), code="wrong_credentials"
        ) from None


def change_password(
    *,
    db: Session,
    limiter: LoginLimiter,
    learner: LearnerRef,
    current: str,
    new: str,
    address: str,
    keep_session_hash: str | None = None,
    keep_token_id: int | None = None,
) -> None:
    """Set a new password (the current one confirmed, throttled as logins are); every other web
    session and device token is signed out."""
    learner_id = learner.id
    confirm_password(db=db, limiter=limiter, learner=learner, password=current, address=address)
    check_new_password(new)
    password_hash = hash_password(new)
    with write_transaction(db):
        stored = db.get(Learner, learner_id)
        assert stored is not None
        stored.password_hash = password_hash
        end_sessions(db, learner_id, keep_session_hash, keep_token_id)
    forget_cached_tokens()  # after the commit too: no request re-cached a token meanwhile


def check_exam_date(exam_date: date | None, today: date) -> date | None:
    """An exam date a learner may choose: none, or from today (on the learner's calendar) to
    :data:`MAX_DAYS_TO_EXAM` days on; the web's form and the API's ``PATCH /me`` both ask this."""
    if exam_date is None:
        return None
    if exam_date < today:
        raise InvalidInput(Message("The exam date has to be today or later."), code="invalid_date")
    if (exam_date - today).days > MAX_DAYS_TO_EXAM:
        raise InvalidInput(
            Message(
                "The exam date has to be within %(years)s years.", years=MAX_DAYS_TO_EXAM // 365
            ),
            code="invalid_date",
        )
    return exam_date


MAX_DAYS_TO_EXAM = 3 * 365  # further than this is a typing slip (9999-12-31), not a plan


def set_exam_date(*, db: Session, learner_id: str, exam_date: object) -> None:
    with write_transaction(db):
        learner = db.get(Learner, learner_id)
        if learner is None:
            raise NotFound(Message("unknown learner"))
        learner.exam_date = exam_date  # type: ignore[assignment]


def set_time_zone(*, db: Session, learner_id: str, time_zone: str | None) -> None:
    """Choose the IANA zone the learner's days are counted in (None: the browser's, else UTC)."""
    if time_zone is not None and not is_time_zone(time_zone):
        raise InvalidInput(
            Message(
                "Unknown time zone %(zone)s: use an IANA name such as Asia/Shanghai.",
                zone=repr(time_zone),
            ),
            code="invalid_time_zone",
        )
    with write_transaction(db):
        learner = db.get(Learner, learner_id)
        if learner is None:
            raise NotFound(Message("unknown learner"))
        learner.time_zone = time_zone
    forget_cached_tokens()  # the learner's cached references carry the zone
    forget_visitors()


def exam_date_of(*, db: Session, learner_id: str):  # type: ignore[no-untyped-def]
    return db.scalar(select(Learner.exam_date).where(Learner.id == learner_id))


def set_role(*, db: Session, email: str, role: str) -> None:
    check_role(role)
    with write_transaction(db):
        learner = db.scalars(select(Learner).where(Learner.email == normalise_email(email))).first()
        if learner is None:
            raise NotFound(Message("no account with email %(email)s", email=repr(email)))
        learner.role = role
    forget_cached_tokens()
