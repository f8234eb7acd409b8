"""Logs: one JSON object a line on stderr (python-json-logger), the request id on every line.

``LOG_FORMAT=json`` (the default) writes each record as ``time`` (UTC, to the millisecond),
``level``, ``logger``, ``message``, ``request_id``, then the record's extra fields and its
``exception``; uvicorn's own lines included. uvicorn's access log (unless ``--no-access-log`` or a
level above info) becomes one ``app.access`` line a request (:func:`log_access`): method, path,
route template, status, duration, client. ``LOG_FORMAT=text`` writes plain lines for reading.

The request id is a context variable (:data:`request_id_var`), set by the request-context
middleware (app.observability.request_context), so a line written in a worker thread that runs a
request carries it too.
"""

from __future__ import annotations

import functools
import logging
import math
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from pythonjsonlogger.core import RESERVED_ATTRS
from pythonjsonlogger.json import JsonEncoder
from pythonjsonlogger.json import JsonFormatter as LibraryJsonFormatter
from starlette.types import Scope

from app.config import Settings

access_log = logging.getLogger("app.access")

request_id_var: ContextVar[str] = ContextVar("request_id", default="-")

# The fields every line starts with (as the records name them) and their names on the line.
LINE_FIELDS = ("asctime", "levelname", "name", "message", "request_id")
RENAMED = {"asctime": "time", "levelname": "level", "name": "logger", "exc_info": "exception"}
# uvicorn's lines carry a coloured copy of their message: not written.
NOT_WRITTEN = (*RESERVED_ATTRS, "color_message")
_ENCODER = JsonEncoder(ensure_ascii=False)  # the library's encoder, built once, not per line


def _serialize(log_data: dict[str, Any], **_options: Any) -> str:
    return _ENCODER.encode(log_data)


def current_request_id() -> str:
    return request_id_var.get()


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


class JsonFormatter(LibraryJsonFormatter):
    """python-json-logger's formatter writing this service's line: time, level (lower case),
    logger, message, request_id (the record's, else the running request's), then the record's
    extra fields (``extra=``) and its exception."""

    def __init__(self) -> None:
        super().__init__(
            list(LINE_FIELDS),
            rename_fields=RENAMED,
            reserved_attrs=NOT_WRITTEN,
            json_serializer=_serialize,
        )

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return log_time(record.created)

    def process_log_record(self, log_data: dict[str, Any]) -> dict[str, Any]:
        log_data["level"] = log_data["level"].lower()
        if not log_data["request_id"]:
            log_data["request_id"] = request_id_var.get()
        return log_data


class _RequestIdFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "request_id", None):
            record.request_id = request_id_var.get()
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


def log_access(scope: Scope, method: str, route: str, status: int, elapsed: float) -> None:
    """The ``app.access`` line of a request (an error for a 5xx other than 503)."""
    level = logging.ERROR if status >= 500 and status != 503 else logging.INFO
    if not access_log.isEnabledFor(level):
        return
    # A path parameter named token is a secret (a password reset link works once within an
    # hour for whoever has it): such a request's line shows its route template instead.
    path = route if "{token}" in route else scope["path"]
    # The record made and handled directly: Logger.log would also look up the calling frame,
    # which no access line shows (a tenth of a question request went to logging).
    record = access_log.makeRecord(
        access_log.name,
        level,
        __file__,
        0,
        "%s %s %s %.1f ms",
        (method, path, status, elapsed * 1000),
        None,
        extra={
            "method": method,
            "path": path,
            "route": route,
            "status": status,
            "duration_ms": round(elapsed * 1000, 2),
            "client": (scope.get("client") or ("", 0))[0],
        },
    )
    access_log.handle(record)
