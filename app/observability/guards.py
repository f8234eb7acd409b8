"""Guards inside the request context: the start-up gate, the request-body limits, trusted hosts.

* **Body limits**: the framework's own. Each route that takes a body gets FastAPI's per-route
  ``max_body_size`` (Starlette's ``RequestBodyLimitMiddleware``; a hot route the same
  middleware directly): ``MAX_BODY_BYTES``, the card-document routes (``LARGE_BODY_PREFIXES``)
  ``MAX_CARD_BODY_BYTES`` (:class:`BodyLimits`). A body over the limit is refused with a 413
  problem document (a page on web pages) naming the limit: app.errors turns the framework's
  413 into it, and :class:`DeclaredTooLarge` the plain-text answer Starlette sends itself when the
  declared Content-Length is over the limit.
* **Trusted hosts**: Starlette's ``TrustedHostMiddleware`` (``TRUSTED_HOSTS``) with its verdicts
  remembered (:class:`TrustedHosts`); its refusal is a 400, a problem document on /api/.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.config import Settings
from app.domain.numerals import is_digits
from app.errors import API_PREFIX, problem_response, too_large_response
from app.observability.health import StartupGate
from app.observability.request_context import scope_header

# Routes whose bodies may be card documents (the authoring service takes 2 MB of JSON).
LARGE_BODY_PREFIXES = ("/api/v1/instructor/", "/instructor/")
# Methods whose requests carry a body; a route of other methods never reads one: no limit.
BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
API_PATHS = (API_PREFIX, "/openapi")


# --- request-body limits ----------------------------------------------------------------------


@dataclass(frozen=True)
class BodyLimits:
    """The largest body of each route, as the ``max_body_size`` it is registered with."""

    default_bytes: int
    large_bytes: int

    @classmethod
    def from_settings(cls, settings: Settings) -> BodyLimits:
        default = settings.max_body_bytes
        return cls(default, max(settings.max_card_body_bytes, default))

    def __call__(self, path: str, methods: Collection[str]) -> int | None:
        """The limit of the route at ``path`` (its template) for ``methods``; None: no limit."""
        if not BODY_METHODS.intersection(methods):
            return None
        return self.large_bytes if path.startswith(LARGE_BODY_PREFIXES) else self.default_bytes


class DeclaredTooLarge:
    """The 413 of a declared Content-Length over a route's limit: the app's problem document
    (a page on web pages), not Starlette's plain text.

    Starlette's body limit answers such a request itself, in place of whatever the route
    answers: ``413 Content Too Large`` in plain text. That answer, seen on its way out, is
    replaced by the one the app gives a chunked body over the limit (app.errors), naming the
    limit. Only requests declaring more than the smallest limit are looked at.
    """

    def __init__(self, app: ASGIApp, *, smallest_limit: int) -> None:
        self.app = app
        self.smallest_limit = smallest_limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            declared = scope_header(scope, b"content-length", None)
            if declared is not None and is_digits(declared) and int(declared) > self.smallest_limit:
                send = _TooLargeAnswer(scope, receive, send)
        await self.app(scope, receive, send)


class _TooLargeAnswer:
    """A ``send`` that replaces the body limit's plain-text 413 with the app's."""

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send
        self.replaced = False

    async def __call__(self, message: Message) -> None:
        if self.replaced:
            return  # the rest of the plain-text answer
        limit = self.scope.get(MAX_BODY_SIZE_SCOPE_KEY)
        if (
            message["type"] == "http.response.start"
            and message["status"] == 413
            and limit is not None
            and _is_plain_text(message)
        ):
            self.replaced = True
            # A page's answer reads who is looking (the navigation): in the threadpool.
            request = Request(self.scope, self.receive)
            response = await run_in_threadpool(too_large_response, request, limit)
            await response(self.scope, self.receive, self.send)
            return
        await self.send(message)


def _is_plain_text(message: Message) -> bool:
    return any(
        name.lower() == b"content-type" and value.startswith(b"text/plain")
        for name, value in message.get("headers") or ()
    )


# --- trusted hosts ----------------------------------------------------------------------------

INVALID_HOST = "Invalid host header: this service does not answer to that host."


class TrustedHosts:
    """Starlette's TrustedHostMiddleware, its verdict on a Host header remembered.

    Clients send a handful of Host values; Starlette parses the header list and the host on
    every request (2 % of a question GET). A request with a value not yet known goes through
    Starlette's middleware, which refuses it (400 ``Invalid host header``; on /api/ a problem
    document instead) or lets it through to :meth:`_let_through`, which remembers the value (at
    most ``KEPT`` of them); later requests with a remembered value go straight through. A
    refusal never redirects (``www_redirect`` off: a redirect would echo the Host).
    """

    KEPT = 64

    def __init__(self, app: ASGIApp, *, allowed_hosts: Sequence[str]) -> None:
        self.app = app
        self.starlette = TrustedHostMiddleware(
            self._let_through, allowed_hosts=allowed_hosts, www_redirect=False
        )
        self._trusted: set[str | None] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.starlette.allow_any or (
            scope["type"] == "http"
            and (
                scope_header(scope, b"host", None) in self._trusted
                # A load balancer's or orchestrator's probe names the machine's address, not the
                # public name: /healthz and /readyz answer whatever the Host (nothing in them
                # depends on it), as /metrics does before this guard.
                or scope["path"] in StartupGate.OPEN_PATHS
            )
        ):
            await self.app(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"].startswith(API_PATHS):
            send = _ProblemRefusal(scope, receive, send)
        await self.starlette(scope, receive, send)

    async def _let_through(self, scope: Scope, receive: Receive, send: Send) -> None:
        if isinstance(send, _ProblemRefusal):
            send = send.send
        if scope["type"] == "http" and len(self._trusted) < self.KEPT:
            self._trusted.add(scope_header(scope, b"host", None))
        await self.app(scope, receive, send)


class _ProblemRefusal:
    """The ``send`` Starlette's middleware answers through on /api/: its own answer, the only
    one it makes (a refusal), becomes a problem document. A request let through gets the
    ``send`` underneath."""

    def __init__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.scope = scope
        self.receive = receive
        self.send = send

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            response = problem_response(message["status"], "invalid_host", INVALID_HOST)
            await response(self.scope, self.receive, self.send)
        # the plain-text body: already answered


# --- wiring -----------------------------------------------------------------------------------


def install_guards(app: FastAPI, settings: Settings) -> BodyLimits:
    """Inside the request context: start-up gate, the declared-size 413, trusted hosts
    (outermost last). The body limits, for the routes to be registered with."""
    limits = BodyLimits.from_settings(settings)
    app.add_middleware(StartupGate, fastapi_app=app)
    app.add_middleware(DeclaredTooLarge, smallest_limit=limits.default_bytes)
    app.add_middleware(TrustedHosts, allowed_hosts=settings.trusted_host_list)
    return limits
