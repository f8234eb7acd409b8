"""Health, readiness and the start-up gate.

``/healthz`` (app.main) says the process is alive and touches nothing; ``/readyz`` checks the
database (answers and takes writes), the migrations (at head), the cards (loaded from the
database) and the data folder (writable), each with its status, and answers 503 when one fails.
:class:`StartupGate` runs the same checks when the server starts and refuses with one line
(uvicorn exits with status 3) when the database is unusable or the data folder unwritable.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hmac
import logging
import os
import secrets
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI, Request
from sqlalchemy.engine import Engine, make_url
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.config import Settings
from app.db import SQLITE_BEGIN_OPTION, engine_health, failure_kind, first_line
from app.errors import problem_response

log = logging.getLogger(__name__)

MIN_FREE_BYTES = 16 * 1024 * 1024


def probe_database(engine: Engine) -> dict[str, Any]:
    """Whether the database answers and takes writes: ``{"ok": bool, "detail": str}``.

    The write probe updates ``alembic_version`` to itself and rolls back (``BEGIN IMMEDIATE`` on
    SQLite takes the write lock), so a read-only or full database says so here.
    """
    try:
        with engine.connect() as connection:
            connection.exec_driver_sql("SELECT 1")
            connection.rollback()
            options = {SQLITE_BEGIN_OPTION: "IMMEDIATE"} if engine.dialect.name == "sqlite" else {}
            with connection.execution_options(**options).begin() as transaction:
                connection.exec_driver_sql("UPDATE alembic_version SET version_num = version_num")
                transaction.rollback()
    except Exception as exc:  # noqa: BLE001 - any failure is the answer
        kind = failure_kind(exc) or "error"
        return {"ok": False, "kind": kind, "detail": first_line(exc)}
    return {"ok": True, "detail": "reachable and writable"}


@functools.cache
def migration_heads() -> list[str]:
    """The latest revisions of the migrations shipped with this code (read once)."""
    from alembic.script import ScriptDirectory

    from app.cli.migrations import MIGRATIONS_DIR

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
    if not live.loaded:  # the database's versions are not loaded
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


READY_WITHIN_S = 1.0  # /readyz answers within this, whatever the file system or database does


class ReadinessProbe:
    """Runs :func:`readiness` on a thread of its own, at most one run at a time, and waits for it
    at most ``within_s``: a frozen file system or a locked database makes ``/readyz`` a 503 that
    says so within a second, not a hang. A run still stuck is waited for again by the next
    request instead of starting another (stuck threads do not pile up)."""

    def __init__(self, app: FastAPI, within_s: float = READY_WITHIN_S) -> None:
        self._app = app
        self._within_s = within_s
        self._pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="readyz")
        self._running: concurrent.futures.Future[dict[str, Any]] | None = None
        self._lock = threading.Lock()

    async def response(self, detailed: bool = True) -> JSONResponse:
        with self._lock:
            if self._running is None or self._running.done():
                self._running = self._pool.submit(readiness, self._app)
            running = self._running
        try:
            checks = await asyncio.wait_for(
                asyncio.shield(asyncio.wrap_future(running)), self._within_s
            )
        except TimeoutError:
            checks = {
                "checks_finished": {
                    "ok": False,
                    "detail": f"the checks did not finish within {self._within_s:g} s "
                    "(the file system or the database does not answer)",
                }
            }
        return readiness_response(self._app, checks, detailed)


def readiness_response(app: FastAPI, checks: dict[str, Any], detailed: bool = True) -> JSONResponse:
    """The checks' verdicts; their details (paths, free bytes, errors) only when ``detailed``."""
    ready = all(check["ok"] for check in checks.values())
    headers = {} if ready else {"Retry-After": str(app.state.settings.db_retry_after_s)}
    shown = checks if detailed else {name: {"ok": c["ok"]} for name, c in checks.items()}
    return JSONResponse(
        {"status": "ready" if ready else "not ready", "checks": shown},
        200 if ready else 503,
        headers={"Cache-Control": "no-store", **headers},
    )


def install_readiness(app: FastAPI) -> None:
    """``/readyz``, left out of the OpenAPI document: each check's verdict for anyone, and its
    details (the data folder's path, free bytes, database errors) only with the metrics token
    (``Authorization: Bearer <METRICS_TOKEN>``)."""
    probe = ReadinessProbe(app)
    token = app.state.settings.metrics_token
    expected = f"Bearer {token.get_secret_value()}" if token else None

    @app.get("/readyz", include_in_schema=False)
    async def readyz(request: Request) -> JSONResponse:
        given = request.headers.get("authorization", "")
        detailed = expected is not None and hmac.compare_digest(given.encode(), expected.encode())
        return await probe.response(detailed)


# --- start-up ---------------------------------------------------------------------------------


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
            response = problem_response(503, "not_started", self.refused)
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)
