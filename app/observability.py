"""Running in production: request ids, JSON logs, Prometheus metrics, health, readiness, guards.

* **Request ids**: every request gets one (a sane incoming ``X-Request-ID`` is kept, anything else
  is replaced by a fresh one); it is sent back in ``X-Request-ID`` and is on every log line
  written while the request runs, threads included (a context variable).
* **Logs**: ``LOG_FORMAT=json`` (the default) writes one JSON object a line to stderr, uvicorn's
  own lines included; uvicorn's access log (unless ``--no-access-log`` or a level above info)
  becomes one ``app.access`` line a request: method, path, route template, status, duration.
* **Metrics** (``prometheus-client``): ``infracards_http_request_duration_seconds`` (a histogram
  by method, route template and status), ``infracards_answers_stored_total`` (attempts committed),
  ``infracards_database_errors_total`` (by kind, see :func:`app.db.failure_kind`). ``/metrics`` is
  not on any router: it answers only to ``Authorization: Bearer <METRICS_TOKEN>`` and is a 404
  while ``METRICS_TOKEN`` is unset (a loopback rule would let everything behind a local reverse
  proxy in). With several workers set ``PROMETHEUS_MULTIPROC_DIR`` to an empty folder: each
  scrape then adds up every worker.
* **Health**: ``/healthz`` says the process is alive (it touches nothing); ``/readyz`` checks
  the database (answers and takes writes), the migrations (at head), the cards (loaded from the
  database) and the data folder (writable), each with its status, and answers 503 when one fails.
* **Start-up**: :class:`StartupGate` runs the same checks when the server starts and refuses
  with one line (uvicorn exits with status 3) when the database is unusable or the data folder
  unwritable.
* **Guards**: trusted Host headers (``TRUSTED_HOSTS``) and a request-body cap (413).
"""

from __future__ import annotations

import functools
import itertools
import json
import logging
import math
import os
import re
import secrets
import shutil
import sys
import threading
import time
from collections.abc import Sequence
from contextvars import ContextVar
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI, Request
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)
from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import Session, sessionmaker
from starlette.datastructures import Headers
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.config import Settings
from app.db import ANSWERS_PENDING, engine_health, first_line, probe_database
from app.domain.texts import Text

log = logging.getLogger(__name__)
access_log = logging.getLogger("app.access")

REQUEST_ID_HEADER = "X-Request-ID"
_REQUEST_ID_RAW = REQUEST_ID_HEADER.lower().encode()
_SANE_REQUEST_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
_request_id: ContextVar[str] = ContextVar("request_id", default="-")

# Routes whose bodies may be card documents (the authoring service takes 2 MB of JSON).
LARGE_BODY_PREFIXES = ("/api/v1/instructor/", "/instructor/")
METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
MIN_FREE_BYTES = 16 * 1024 * 1024
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


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


def _header(scope: Scope, name: bytes, default: str | None = "") -> str | None:
    """One request header (``name`` in lower case) straight from the scope: no parsing of all."""
    for key, value in scope["headers"]:
        if key == name:
            return str(value.decode("latin-1"))
    return default


def current_request_id() -> str:
    return _request_id.get()


# --- logs -------------------------------------------------------------------------------------


_JSON_LINE = json.JSONEncoder(ensure_ascii=False, default=str)  # built once, not per line


@functools.lru_cache(maxsize=4)
def _utc_second(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def log_time(created: float) -> str:
    """``2026-12-01T16:43:56.165+00:00``: a record's time in UTC to the millisecond (the second
    formatted once: a busy server writes many lines in each)."""
    fraction, whole = math.modf(created)  # rounded to the microsecond as datetime rounds it
    micros = round(fraction * 1_000_000)
    if micros >= 1_000_000:
        whole, micros = whole + 1, micros - 1_000_000
    return f"{_utc_second(int(whole))}.{micros // 1000:03d}+00:00"


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message, request_id (+ ``fields``)."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": log_time(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
            "request_id": getattr(record, "request_id", None) or _request_id.get(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            data.update(fields)
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return _JSON_LINE.encode(data)


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", None):
            record.request_id = _request_id.get()
        return True


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time (test runners swap it)."""

    _infracards = True

    def __init__(self) -> None:
        super().__init__()

    @property  # type: ignore[override]
    def stream(self) -> Any:
        return sys.stderr

    @stream.setter
    def stream(self, _value: Any) -> None:
        pass


def configure_logging(settings: Settings) -> logging.Handler:
    """Install (once per process) the stderr handler on the root logger and on uvicorn's."""
    root = logging.getLogger()
    handler = next((h for h in root.handlers if getattr(h, "_infracards", False)), None)
    if handler is None:
        handler = _StderrHandler()
        handler.addFilter(_RequestIdFilter())
        root.addHandler(handler)
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(
            logging.Formatter("%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s")
        )
    app_logger = logging.getLogger("app")
    if app_logger.level == logging.NOTSET:
        app_logger.setLevel(settings.log_level.upper())
    uvicorn_logger = logging.getLogger("uvicorn")
    uvicorn_logger.handlers = [handler]
    uvicorn_logger.propagate = False
    return handler


def access_log_wanted() -> bool:
    """Whether uvicorn would write access lines (not ``--no-access-log``, not a higher level)."""
    uvicorn_access = logging.getLogger("uvicorn.access")
    if uvicorn_access.level == logging.NOTSET and not uvicorn_access.handlers:
        return True  # not served by uvicorn (a test client, another server): app.access decides
    if uvicorn_access.disabled or not uvicorn_access.isEnabledFor(logging.INFO):
        return False
    return bool(uvicorn_access.handlers) or uvicorn_access.propagate


def replace_uvicorn_access_log() -> bool:
    """One ``app.access`` line per request instead of uvicorn's (it knows the route and the
    request id); False when the access log is off."""
    global _access_wanted
    if _access_wanted is None:  # decided once: afterwards uvicorn's logger is the one disabled
        _access_wanted = access_log_wanted()
    logging.getLogger("uvicorn.access").disabled = True
    return _access_wanted


_access_wanted: bool | None = None


# --- metrics ----------------------------------------------------------------------------------


class Metrics:
    """This app's Prometheus metrics, in a registry of its own (several apps in one test run)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Histogram(
            "infracards_http_request_duration_seconds",
            "Time to answer an HTTP request, by method, route template and status.",
            ["method", "route", "status"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.answers = Counter(
            "infracards_answers_stored",
            "Answers (attempts) committed to the database.",
            registry=self.registry,
        )
        self.database_errors = Counter(
            "infracards_database_errors",
            "Database failures seen (busy, timeout, unreachable, disk_full, read_only, unavailable).",
            ["kind"],
            registry=self.registry,
        )

        # Each (method, route, status) series, looked up once: labels() checks and locks.
        self._request_series: dict[tuple[str, str, int], Any] = {}

    def observe_request(self, method: str, route: str, status: int, seconds: float) -> None:
        """One request's latency (method from ``METHODS``, route a template: bounded labels)."""
        series = self._request_series.get((method, route, status))
        if series is None:
            series = self.requests.labels(method, route, str(status))
            self._request_series[(method, route, status)] = series
        series.observe(seconds)

    def exposition(self) -> bytes:
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            return generate_latest(registry)
        return generate_latest(self.registry)


def count_stored_answers(sessions: sessionmaker[Session], metrics: Metrics) -> None:
    """Count the attempts each session inserted (``app.practice.answers.store_attempts`` notes
    them in ``session.info``), once its transaction has committed."""

    @event.listens_for(sessions, "after_commit")
    def _committed(session: Session) -> None:
        pending = session.info.pop(ANSWERS_PENDING, 0)
        if pending:
            metrics.answers.inc(pending)

    @event.listens_for(sessions, "after_rollback")
    def _rolled_back(session: Session) -> None:
        session.info.pop(ANSWERS_PENDING, None)


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


# --- request ids, access log, latency, /metrics ----------------------------------------------


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
        incoming = _header(scope, b"x-request-id")
        request_id = incoming if _SANE_REQUEST_ID.match(incoming) else _fresh_request_ids.next()
        token = _request_id.set(request_id)
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
            if scope["path"] == "/metrics":
                await self._metrics(scope, receive, send_with_id)
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
            route = "/metrics" if scope["path"] == "/metrics" else route_template(scope)
            self.metrics.observe_request(method, route, status[0], elapsed)
            if self.access_log or status[0] >= 500:
                self._log(scope, method, route, status[0], elapsed)
            _request_id.reset(token)

    def _log(self, scope: Scope, method: str, route: str, status: int, elapsed: float) -> None:
        level = logging.ERROR if status >= 500 and status != 503 else logging.INFO
        if not access_log.isEnabledFor(level):
            return
        # The record made and handled directly: Logger.log would also look up the calling
        # frame, which no access line shows (a tenth of a question request went to logging).
        record = access_log.makeRecord(
            access_log.name,
            level,
            __file__,
            0,
            "%s %s %s %.1f ms",
            (method, scope["path"], status, elapsed * 1000),
            None,
            extra={
                "fields": {
                    "method": method,
                    "path": scope["path"],
                    "route": route,
                    "status": status,
                    "duration_ms": round(elapsed * 1000, 2),
                    "client": (scope.get("client") or ("", 0))[0],
                }
            },
        )
        access_log.handle(record)

    async def _metrics(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self.metrics_token:
            response: Response = _problem(404, "not_found", "There is no such page.")
        else:
            given = Headers(scope=scope).get("authorization", "")
            expected = f"Bearer {self.metrics_token}"
            if not secrets.compare_digest(given.encode(), expected.encode()):
                response = _problem(
                    401, "unauthorized", "this needs 'Authorization: Bearer <METRICS_TOKEN>'"
                )
                response.headers["WWW-Authenticate"] = "Bearer"
            else:
                body = await anyio.to_thread.run_sync(self.metrics.exposition)
                response = Response(body, media_type=CONTENT_TYPE_LATEST)
        await response(scope, receive, send)


def _internal_error(scope: Scope, request_id: str) -> Response:
    detail = f"Something went wrong on our side (request id {request_id})."
    if str(scope.get("path", "")).startswith(("/api/", "/openapi")):
        return _problem(500, "internal_error", detail)
    return Response(detail, 500, media_type="text/plain; charset=utf-8")


def _problem(status: int, code: str, detail: str) -> JSONResponse:
    from http import HTTPStatus

    return JSONResponse(
        {
            "type": "about:blank",
            "title": HTTPStatus(status).phrase,
            "status": status,
            "code": code,
            "detail": detail,
        },
        status,
        media_type="application/problem+json",
    )


# --- request-body cap -------------------------------------------------------------------------

TOO_LARGE = Text(
    "The request body is too large.",
    "请求内容太大。",
)


class BodyLimitMiddleware:
    """413 for a body over the cap (``MAX_BODY_BYTES``; card-document routes get more).

    A declared Content-Length is checked before anything is read (the server delivers no more
    than it declares); a chunked body is read up to the cap and then handed on.
    """

    def __init__(self, app: ASGIApp, *, default_bytes: int, large_bytes: int) -> None:
        self.app = app
        self.default_bytes = default_bytes
        self.large_bytes = max(large_bytes, default_bytes)

    def limit(self, path: str) -> int:
        return self.large_bytes if path.startswith(LARGE_BODY_PREFIXES) else self.default_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit(scope["path"])
        declared = _header(scope, b"content-length", None)
        if declared is not None:
            if declared.strip().isdigit() and int(declared) > limit:
                await self._refuse(scope, receive, send, limit)
                return
            await self.app(scope, receive, send)
            return
        if "chunked" not in (_header(scope, b"transfer-encoding") or "").lower():
            await self.app(scope, receive, send)
            return
        messages: list[Message] = []
        size = 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > limit:
                await self._refuse(scope, receive, send, limit)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Message:
            if messages:
                return messages.pop(0)
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, limit: int) -> None:
        from app.errors import error_response

        request = Request(scope, receive)
        message = Text(
            f"{TOO_LARGE.en} The limit here is {limit} bytes.",
            f"{TOO_LARGE.zh}此处上限为 {limit} 字节。",
        )
        response = error_response(
            request, 413, message, code="payload_too_large", extra={"limit_bytes": limit}
        )
        response.headers["Connection"] = "close"
        await response(scope, receive, send)


# --- health, readiness and start-up ----------------------------------------------------------


@functools.cache
def migration_heads() -> list[str]:
    """The latest revisions of the migrations shipped with this code (read once)."""
    from alembic.script import ScriptDirectory

    from app.cli import MIGRATIONS_DIR

    return sorted(ScriptDirectory(str(MIGRATIONS_DIR)).get_heads())


def migration_state(engine: Engine) -> dict[str, Any]:
    from alembic.migration import MigrationContext

    heads = migration_heads()
    try:
        with engine.connect() as connection:
            current = sorted(MigrationContext.configure(connection).get_current_heads())
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "detail": f"cannot read the migration state: {first_line(exc)}"}
    if current != heads:
        return {
            "ok": False,
            "detail": (
                f"the database is at {', '.join(current) or 'no migration'}, the latest is "
                f"{', '.join(heads)}: run `python -m app.cli migrate`"
            ),
            "current": current,
            "head": heads,
        }
    return {"ok": True, "detail": "at head", "current": current}


def cards_state(app: FastAPI) -> dict[str, Any]:
    refused = getattr(app.state, "card_error", None)
    if refused:
        return {"ok": False, "detail": refused}
    live = app.state.live_catalog
    catalog = live.catalog
    count = len(catalog.cards())
    from_db = getattr(live, "_stamp", None) is not None  # set once the database's versions load
    if not from_db:
        return {"ok": False, "detail": "the cards are not loaded from the database"}
    return {"ok": True, "detail": f"{count} cards loaded"}


def folders_to_write(settings: Settings) -> list[Path]:
    """The data folder (the development key lives there) and a SQLite file's folder."""
    folders = []
    if settings.secret_key is None or not settings.secret_key.get_secret_value():
        folders.append(settings.data_dir)
    url = make_url(settings.database_url)
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        name = url.database
        if name.startswith("file:"):  # a URI filename
            name = name[5:].split("?", 1)[0]
        folders.append(Path(name).expanduser().resolve().parent)
    unique: list[Path] = []
    for folder in folders:
        if folder.resolve() not in [f.resolve() for f in unique]:
            unique.append(folder)
    return unique


def write_probe(folder: Path) -> None:
    """Create, write and remove a file in ``folder`` (tried, not guessed: root ignores modes)."""
    probe = folder / f".write-probe-{os.getpid()}-{secrets.token_hex(4)}"
    folder.mkdir(parents=True, exist_ok=True)
    with open(probe, "xb") as handle:
        handle.write(b"ok")
    probe.unlink()


def folder_state(folder: Path) -> dict[str, Any]:
    """Whether ``folder`` takes a new file and has some room left."""
    try:
        write_probe(folder)
        free = shutil.disk_usage(folder).free
    except OSError as exc:
        return {"ok": False, "detail": f"{folder} is not writable: {exc.strerror or exc}"}
    if free < MIN_FREE_BYTES:
        return {"ok": False, "detail": f"{folder} has only {free} bytes free", "free_bytes": free}
    return {"ok": True, "detail": f"{folder} is writable", "free_bytes": free}


def readiness(app: FastAPI) -> dict[str, Any]:
    """Every check, each ``{"ok": ..., "detail": ...}``; the database checks stop at the first."""
    engine: Engine = app.state.engine
    checks: dict[str, Any] = {}
    for folder in folders_to_write(app.state.settings):
        state = folder_state(folder)
        checks.setdefault("data_folder", state)
        if not state["ok"]:
            checks["data_folder"] = state
    checks["database"] = probe_database(engine)
    if checks["database"].get("kind") not in ("unreachable", "timeout", "busy"):
        checks["migrations"] = migration_state(engine)
    else:
        checks["migrations"] = {"ok": False, "detail": "not checked: no database"}
    checks["cards"] = cards_state(app)
    last = engine_health(engine).last_failure
    if last is not None:
        checks["database"]["last_failure"] = {
            "kind": last[1],
            "seconds_ago": round(time.monotonic() - last[0], 1),
            "detail": last[2],
        }
    return checks


def readyz_response(app: FastAPI) -> JSONResponse:
    checks = readiness(app)
    ready = all(check["ok"] for check in checks.values())
    headers = {} if ready else {"Retry-After": str(app.state.settings.db_retry_after_s)}
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": checks},
        200 if ready else 503,
        headers={"Cache-Control": "no-store", **headers},
    )


def startup_refusal(app: FastAPI) -> str | None:
    """One line saying why the server must not start, or None."""
    early = getattr(app.state, "startup_error", None)
    if early:
        return f"refusing to start: the data folder is unusable: {early}"
    checks = readiness(app)
    for name in ("data_folder", "migrations", "database", "cards"):
        check = checks.get(name)
        if check is not None and not check["ok"] and not check["detail"].startswith("not checked"):
            where = make_url(app.state.settings.database_url).render_as_string(hide_password=True)
            if name == "data_folder":
                return f"refusing to start: the data folder is unusable: {check['detail']}"
            return f"refusing to start: {name} check failed for {where}: {check['detail']}"
    return None


class StartupRefused(RuntimeError):
    """The server refused to start; the message is the one line it logged."""


class StartupGate:
    """Runs :func:`startup_refusal` at lifespan start-up; refuses with one line if it fails.

    uvicorn logs the line and exits with status 3. Should the server run without lifespan
    events, every request is a 503 with the same line instead.
    """

    OPEN_PATHS = ("/healthz", "/readyz")

    def __init__(self, app: ASGIApp, *, fastapi_app: FastAPI) -> None:
        self.app = app
        self.fastapi_app = fastapi_app
        self.refused: str | None = None
        # Set by create_app before the stack is built: read once, not on every request.
        state = fastapi_app.state
        self._failed_early = bool(
            getattr(state, "startup_error", None) or getattr(state, "card_error", None)
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            message = await receive()
            if message["type"] == "lifespan.startup":
                refusal = await anyio.to_thread.run_sync(startup_refusal, self.fastapi_app)
                if refusal is not None:
                    self.refused = refusal
                    log.critical(refusal)
                    await send({"type": "lifespan.startup.failed", "message": refusal})
                    # uvicorn has logged the line and exits with status 3 (no traceback: the
                    # failure was reported); a test client raises this.
                    raise StartupRefused(refusal)
            pending = [message]

            async def replay() -> Message:
                if pending:
                    return pending.pop()
                return await receive()

            await self.app(scope, replay, send)
            return
        if self.refused is None and self._failed_early:
            self.refused = startup_refusal(self.fastapi_app)  # served without lifespan events
        if (
            self.refused is not None
            and scope["type"] == "http"
            and scope["path"] not in self.OPEN_PATHS
        ):
            response = _problem(503, "not_started", self.refused)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


# --- trusted hosts ----------------------------------------------------------------------------


class TrustedHosts(TrustedHostMiddleware):
    """Starlette's TrustedHostMiddleware, its verdict on a Host header remembered.

    Clients send a handful of Host values; Starlette parses the header list and the host on
    every request (2 % of a question GET). Each request of a value not yet known goes through
    Starlette's middleware, which refuses it as it always did or lets it through to
    :meth:`_let_through`, which remembers the value (at most ``KEPT`` of them); later requests
    with a remembered value go straight through.
    """

    KEPT = 64

    def __init__(self, app: ASGIApp, **options: Any) -> None:
        super().__init__(self._let_through, **options)
        self._inner = app
        self._trusted: set[str | None] = set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.allow_any or (
            scope["type"] == "http" and _header(scope, b"host", None) in self._trusted
        ):
            await self._inner(scope, receive, send)
            return
        await super().__call__(scope, receive, send)

    async def _let_through(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and len(self._trusted) < self.KEPT:
            self._trusted.add(_header(scope, b"host", None))
        await self._inner(scope, receive, send)


# --- wiring -----------------------------------------------------------------------------------


def install_guards(app: FastAPI, settings: Settings) -> None:
    """Inside the request context: start-up gate, body cap, trusted hosts (outermost last)."""
    app.add_middleware(StartupGate, fastapi_app=app)
    app.add_middleware(
        BodyLimitMiddleware,
        default_bytes=settings.max_body_bytes,
        large_bytes=settings.max_card_body_bytes,
    )
    app.add_middleware(TrustedHosts, allowed_hosts=settings.trusted_host_list, www_redirect=False)


def install_observability(
    app: FastAPI, settings: Settings, *, response_headers: Sequence[tuple[bytes, bytes]] = ()
) -> Metrics:
    """Outermost: logs, request ids, metrics (database errors, answers), ``/readyz``, and
    ``response_headers`` on every response that does not set them itself."""
    configure_logging(settings)
    metrics = Metrics()
    app.state.metrics = metrics
    engine_health(app.state.engine).listeners.append(
        lambda kind: metrics.database_errors.labels(kind).inc()
    )
    count_stored_answers(app.state.sessionmaker, metrics)
    token = settings.metrics_token.get_secret_value() if settings.metrics_token else None
    app.add_middleware(
        RequestContextMiddleware,
        metrics=metrics,
        metrics_token=token or None,
        access_log=replace_uvicorn_access_log(),
        response_headers=response_headers,
    )

    @app.get("/readyz", include_in_schema=False)
    def readyz() -> JSONResponse:
        return readyz_response(app)

    return metrics
