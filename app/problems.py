"""Refusals the use cases raise; the web and API layers turn them into 4xx responses.

Each carries a stable machine-readable ``code`` (what an app switches on) and a message in both
languages (what a learner reads). API responses are RFC 9457 problem documents; pages show the
message in the page's language.
"""

from __future__ import annotations

from typing import Any

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


class TooManyRequests(Problem):
    status_code = 429
    code = "rate_limited"
    title = "Too many requests"

    def __init__(self, message: str | Text, *, retry_after_s: int) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s
