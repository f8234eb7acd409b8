"""What every form POST does first: check the CSRF token, and know (or create) the learner; and
how a GET form's blank number reads."""

from __future__ import annotations

from pydantic import BeforeValidator
from sqlalchemy.orm import Session

from app.auth.service import LearnerRef, ensure_guest
from app.db import write_transaction
from app.deps import Visitor
from app.domain.messages import Message
from app.problems import Problem


class CsrfError(Problem):
    status_code = 403
    code = "csrf_failed"
    title = "Forbidden"


def check_csrf(visitor: Visitor, submitted: str | None) -> None:
    if not visitor.csrf.check(visitor.browser, submitted):
        raise CsrfError(
            Message("This form has expired or cookies are off: reload the page and try again.")
        )


def web_learner(db: Session, visitor: Visitor) -> LearnerRef:
    """The visitor's learner; a new guest (with its session row) on a browser's first write."""
    if visitor.learner is not None:
        return visitor.learner
    with write_transaction(db):
        learner = ensure_guest(db=db, secret=visitor.browser.secret, lang=visitor.lang)
    visitor.learner = learner
    return learner


def _blank_is_none(value: object) -> object:
    return None if value == "" else value


# An optional number in a GET form: a browser sends the field empty (``days=``) when it is left
# blank, which means "not given", not a bad number.
BlankIsNone = BeforeValidator(_blank_is_none)
