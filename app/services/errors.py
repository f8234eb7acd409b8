"""Errors the services raise; the web and API layers turn them into 4xx responses."""

from __future__ import annotations


class ServiceError(Exception):
    """A request the service refuses; ``message`` is safe to show to the client."""

    status_code = 400

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(ServiceError):
    """Well-formed but unusable input (a tampered token, a choice that is not offered ...)."""

    status_code = 400


class UnknownChoiceError(ServiceError):
    """A choice id that the question does not offer."""

    status_code = 422


class NotFound(ServiceError):
    status_code = 404


class Conflict(ServiceError):
    """The request contradicts stored state (a reused client_answer_id, an expired question)."""

    status_code = 409


class Unauthorized(ServiceError):
    status_code = 401
