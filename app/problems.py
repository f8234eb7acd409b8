"""Refusals the use cases raise; the web and API layers turn them into 4xx responses.

Each carries a stable machine-readable ``code`` (what an app switches on) and a message in both
languages (what a learner reads). API responses are RFC 9457 problem documents; pages show the
message in the page's language.
"""

from __future__ import annotations

from typing import Any

from app.domain.messages import Message
from app.domain.texts import Text


class Problem(Exception):
    """A request the service refuses; ``message`` is safe to show to the client."""

    status_code = 400
    code = "bad_request"
    title = "Bad request"

    def __init__(
        self,
        message: str | Text,
        *,
        code: str | None = None,
        members: dict[str, Any] | None = None,
    ) -> None:
        text = message if isinstance(message, Text) else Text.verbatim(message)
        super().__init__(text.en)
        self.text = text
        if code is not None:
            self.code = code
        # Extension members of the problem document (RFC 9457), e.g. an exam's summary_url.
        self.members: dict[str, Any] = dict(members or {})

    @property
    def message(self) -> str:
        return self.text.en


class InvalidInput(Problem):
    """Well-formed but unusable input (a tampered token, a choice that is not offered ...)."""

    status_code = 400
    code = "invalid_input"
    title = "Invalid input"


class UnprocessableInput(Problem):
    """Input in the right shape holding what cannot be used or stored (a NUL in a text, NaN)."""

    status_code = 422
    code = "unprocessable_input"
    title = "Unprocessable input"


class UnknownChoiceError(Problem):
    status_code = 422
    code = "unknown_choice"
    title = "Unknown choice"


class NotFound(Problem):
    status_code = 404
    code = "not_found"
    title = "Not found"


class Conflict(Problem):
    """The request contradicts stored state (a reused client_answer_id, an expired question)."""

    status_code = 409
    code = "conflict"
    title = "Conflict"


class Unauthorized(Problem):
    status_code = 401
    code = "unauthorized"
    title = "Unauthorized"


class Forbidden(Problem):
    status_code = 403
    code = "forbidden"
    title = "Forbidden"


class LoginRequired(Forbidden):
    """A page for signed-in instructors asked by a visitor without an account: a page GET is
    sent to the login page, which comes back here after it (other requests get the 403)."""


class TooManyRequests(Problem):
    status_code = 429
    code = "rate_limited"
    title = "Too many requests"

    def __init__(self, message: str | Text, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class InvalidAnswer(Problem):
    """An answer that cannot be graded as sent (an unparseable number, a unit the question does
    not take, a typed value for a statement, a choice and a value at once): nothing is stored.
    ``field`` names the field at fault (``value``, ``unit``, ``choice_id``); ``reason`` says
    why without naming it (what a form shows beside the field)."""

    status_code = 422
    code = "invalid_answer"
    title = "Invalid answer"

    def __init__(self, field: str, reason: Text, *, code: str | None = None) -> None:
        super().__init__(Message("%(field)s: %(reason)s", field=field, reason=reason), code=code)
        self.field = field
        self.reason = reason
