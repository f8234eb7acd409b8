"""The request-context middleware, outermost: request ids, the access line, the latency
histogram, ``/metrics``, and the headers every response carries.

Every request gets a request id (a sane incoming ``X-Request-ID`` is kept, anything else is
replaced by a fresh one); it is sent back in ``X-Request-ID`` and is on every log line written
while the request runs, threads included (app.observability.logs). An unhandled error is logged
with it and answered with it (a 500 problem on /api/).
"""

from __future__ import annotations

import itertools
import logging
import os
import re
import secrets
import threading
import time
from collections.abc import Sequence

from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import problem_response
from app.observability.logs import log_access, request_id_var
from app.observability.metrics import METRICS_PATH, Metrics, serve_metrics

log = logging.getLogger(__name__)

REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID_RAW = REQUEST_ID_HEADER.lower().encode()
_SANE_REQUEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}


class _RequestIds:
    """Fresh request ids: 32 hex digits, a random half per process (drawn again in a forked
    child) and a counter; unique without a system call per request (uuid4 reads the kernel's
    random source every time)."""

    def __init__(self) -> None:
        self._renew()
        os.register_at_fork(after_in_child=self._renew)

    def _renew(self) -> None:
        self._lock = threading.Lock()  # a fork can copy it held by another thread
        self._prefix = secrets.token_hex(8)
        self._counter = itertools.count(1)

    def next(self) -> str:
        with self._lock:
            return f"{self._prefix}{next(self._counter):016x}"


_fresh_request_ids = _RequestIds()


def scope_header(scope: Scope, name: bytes, default: str | None = "") -> str | None:
    """One request header (``name`` in lower case) straight from the scope: no parsing of all."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return default


def stamp_headers(
    message: Message, own: tuple[bytes, bytes], defaults: Sequence[tuple[bytes, bytes]]
) -> None:
    """In one pass over a response start ``message``'s headers: ``own`` instead of any header
    of its name, and each of ``defaults`` the response does not set itself."""
    name = own[0]
    headers = [header for header in message.get("headers") or () if header[0].lower() != name]
    if defaults:
        have = {header[0].lower() for header in headers}
        headers.extend(header for header in defaults if header[0] not in have)
    headers.append(own)
    message["headers"] = headers


def route_template(scope: Scope) -> str:
    """The matched route's template (``/api/v1/cards/{card_id}``), never the raw path."""
    # FastAPI >= 0.16x keeps an included route's own path on scope["route"] (no prefix) and the
    # full template on its effective route context.
    context = (scope.get("fastapi") or {}).get("effective_route_context")
    if context is not None:
        full = getattr(getattr(context, "starlette_route", None), "path_format", None) or getattr(
            context, "path_format", None
        )
        if isinstance(full, str) and full:
            return full
    route = scope.get("route")
    path = getattr(route, "path", None)
    if isinstance(path, str):
        return path
    root_path = scope.get("root_path") or ""
    if root_path and scope.get("endpoint") is not None:  # a mount: /static, /docs-assets
        return f"{root_path}/{{path}}"
    return "unmatched"


class RequestContextMiddleware:
    """Outermost: the request id, the access line, the latency histogram, ``/metrics``, and the
    headers every response carries unless it sets them itself (``response_headers``: the
    security headers, app.web.security)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        metrics: Metrics,
        metrics_token: str | None,
        access_log: bool = True,
        response_headers: Sequence[tuple[bytes, bytes]] = (),
    ) -> None:
        self.app = app
        self.metrics = metrics
        self.metrics_token = metrics_token
        self.access_log = access_log
        self.response_headers = tuple(response_headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        incoming = scope_header(scope, b"x-request-id")
        request_id = incoming if _SANE_REQUEST_ID.match(incoming) else _fresh_request_ids.next()
        token = request_id_var.set(request_id)
        status = [500]
        started = time.perf_counter()

        started_response = [False]

        async def send_with_id(message: Message) -> None:
            if message["type"] == "http.response.start":
                started_response[0] = True
                status[0] = message["status"]
                stamp_headers(
                    message, (_REQUEST_ID_RAW, request_id.encode()), self.response_headers
                )
            await send(message)

        try:
            if scope["path"] == METRICS_PATH:
                await serve_metrics(self.metrics, self.metrics_token, scope, receive, send_with_id)
                return
            if scope["method"] == "HEAD":  # its GET's status and headers, no body (RFC 9110)
                await self.app({**scope, "method": "GET"}, receive, _headers_only(send_with_id))
                return
            await self.app(scope, receive, send_with_id)
        except Exception:
            # Logged here, inside the request's context (its id on the traceback's line), and
            # answered with the id, so that a report can be matched to the log; then re-raised.
            log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            if status[0] == 500 and not started_response[0]:
                await _internal_error(scope, request_id)(scope, receive, send_with_id)
            raise
        finally:
            elapsed = time.perf_counter() - started
            method = scope["method"] if scope["method"] in METHODS else "OTHER"
            route = METRICS_PATH if scope["path"] == METRICS_PATH else route_template(scope)
            self.metrics.observe_request(method, route, status[0], elapsed)
            if self.access_log or status[0] >= 500:
                log_access(scope, method, route, status[0], elapsed)
            request_id_var.reset(token)


def _headers_only(send: Send) -> Send:
    """``send`` for a HEAD request answered as its GET: the body's messages go out empty."""

    async def send_headers(message: Message) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return send_headers


def _internal_error(scope: Scope, request_id: str) -> Response:
    """The 500 answer, with ``Connection: close``: the error is raised on to the server, which
    then closes the connection; the client must not send its next request on it."""
    detail = f"Something went wrong on our side (request id {request_id})."
    if str(scope.get("path", "")).startswith(("/api/", "/openapi")):
        response = problem_response(500, "internal_error", detail)
    else:
        response = Response(detail, 500, media_type="text/plain; charset=utf-8")
    response.headers["Connection"] = "close"
    return response
