"""Database plumbing: the declarative base, engines, sessions and write transactions.

SQLite (the default) runs in WAL mode with ``busy_timeout`` and ``synchronous=FULL`` (or
``NORMAL``, an explicit opt-in: the ``SQLITE_SYNCHRONOUS`` setting) set on every connection. SQLAlchemy emits
``BEGIN`` itself (the driver's own transaction handling is switched off) so that
:func:`write_transaction` can start with ``BEGIN IMMEDIATE``: a deferred transaction that reads
and then writes can fail with SQLITE_BUSY_SNAPSHOT whatever the timeout. The same models
run on PostgreSQL, where these hooks are not installed.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pydantic_core
from sqlalchemy import (
    MetaData,
    Table,
    create_engine,
    event,
)
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

from app.db_errors import WriteTimedOut, guard_text

# A naming convention gives every constraint a stable name, which Alembic's batch mode on
# SQLite and later migrations need to find them again.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

SQLITE_BUSY_TIMEOUT_MS = 5000
SQLITE_BEGIN_OPTION = "sqlite_begin"
# Session.info key: attempts a session inserted and has not committed yet (the metrics count them).
ATTEMPTS_PENDING = "attempts_pending"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    # Every model maps a Table (DeclarativeBase types __table__ as any FromClause).
    __table__: ClassVar[Table]


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def ensure_sqlite_folder(url: str) -> None:
    """Create the folder of a file-based SQLite database (``data/`` for the default one).

    A URI filename (``sqlite:///file:/path?mode=ro&uri=true``) names a database the deployer
    opens as it says (read-only, shared cache...): its folder is not made, where it was made as
    a folder named ``file:`` in the working directory."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return
    if parsed.query.get("uri") == "true":
        return
    Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def json_text(value: Any) -> str:
    """What JSON columns store: pydantic-core's serializer (compact, UTF-8 as it is, ≈7x faster
    than ``json.dumps`` on an attempt's choices); any JSON reader reads it back."""
    return pydantic_core.to_json(value).decode()


# anyio's default threadpool has 40 threads; one more for the answer writer.
SQLITE_POOL_SIZE = 41
SQLITE_POOL_OVERFLOW = 10
# PostgreSQL connections a process keeps, no more (Settings.db_pool_size): with overflow, load
# above the pool opened and closed a server process every request or two (1,491 in a bench run).
PG_POOL_SIZE = 20


def make_engine(
    url: str,
    *,
    sqlite_synchronous: str = "full",
    sqlite_foreign_keys: bool = True,
    timeouts: DatabaseTimeouts | None = None,
    postgres_pool_size: int = PG_POOL_SIZE,
    **kwargs: Any,
) -> Engine:
    """An engine for ``url`` (PostgreSQL: a pool of ``postgres_pool_size``); SQLite connections
    get WAL, busy_timeout and synchronous=FULL (the WAL fsynced at every commit: an acknowledged
    write survives a power loss), or NORMAL when ``sqlite_synchronous="normal"`` is asked for,
    and enforce foreign keys unless ``sqlite_foreign_keys=False`` (migrations/env.py)."""
    if sqlite_synchronous.upper() not in ("NORMAL", "FULL"):
        raise ValueError(f"sqlite_synchronous must be normal or full, not {sqlite_synchronous!r}")
    timeouts = timeouts if timeouts is not None else DatabaseTimeouts()
    kwargs.setdefault("json_serializer", json_text)
    if is_sqlite(url):
        kwargs.setdefault("connect_args", {}).setdefault("timeout", timeouts.sqlite_busy_ms / 1000)
        if "poolclass" not in kwargs:
            # Room for a connection per threadpool thread and the writer: with SQLAlchemy's
            # default of 5 (+10 overflow), 64 concurrent requests opened and closed a connection
            # (four PRAGMAs each) on most requests. SQLite connections are only file handles.
            kwargs.setdefault("pool_size", SQLITE_POOL_SIZE)
            kwargs.setdefault("max_overflow", SQLITE_POOL_OVERFLOW)
        engine = create_engine(url, **kwargs)
        _install_sqlite_hooks(engine, sqlite_synchronous.upper(), sqlite_foreign_keys)
        guard_text(engine)
        _install_sqlite_busy_timeout(engine, timeouts)
        engine_health(engine)  # failures are recorded (and counted) for SQLite too
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    if "poolclass" not in kwargs:  # fixed: an overflow connection is closed when given back
        kwargs.setdefault("pool_size", postgres_pool_size)
        kwargs.setdefault("max_overflow", 0)
    driver = make_url(url).get_driver_name()
    if make_url(url).get_backend_name() == "postgresql" and driver in ("psycopg", "psycopg2"):
        connect_args = kwargs.setdefault("connect_args", {})
        connect_args.setdefault("connect_timeout", max(2, int(timeouts.connect_s)))
        statement_ms = int(timeouts.statement_s * 1000)
        connect_args.setdefault("options", f"-c statement_timeout={statement_ms}")
    if "poolclass" not in kwargs:
        kwargs.setdefault("pool_timeout", timeouts.pool_s)
    engine = create_engine(url, **kwargs)
    guard_text(engine)
    _install_connect_guard(engine, timeouts)
    return engine


def _install_sqlite_hooks(
    engine: Engine, synchronous: str = "FULL", foreign_keys: bool = True
) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy emit BEGIN (see _on_begin), not the sqlite3 module.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute(f"PRAGMA synchronous={synchronous}")
            cursor.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Any) -> None:
        mode = connection.get_execution_options().get(SQLITE_BEGIN_OPTION, "DEFERRED")
        if mode not in ("DEFERRED", "IMMEDIATE"):
            raise ValueError(f"unknown SQLite transaction mode {mode!r}")
        connection.exec_driver_sql(f"BEGIN {mode}")


# --- when the database is in trouble ----------------------------------------------------------

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DatabaseTimeouts:
    """How long the service waits on its database before a request becomes a 503.

    PostgreSQL: ``connect_s`` is libpq's ``connect_timeout`` (at least 2 s), ``statement_s`` the
    server's ``statement_timeout``; the client stops waiting for any answer one second later (a
    server that accepts but never answers) and closes that connection. ``pool_s`` is how long a
    request waits for a free pooled connection. ``retry_after_s`` is the 503's Retry-After and how
    long a failed connection attempt makes the next ones fail at once. SQLite: ``sqlite_busy_ms``.
    """

    connect_s: float = 5.0
    statement_s: float = 10.0
    pool_s: float = 5.0
    sqlite_busy_ms: int = SQLITE_BUSY_TIMEOUT_MS
    retry_after_s: float = 2.0


@dataclass
class EngineHealth:
    """What an engine has seen go wrong: the last failure, and who wants to hear of failures."""

    last_failure: tuple[float, str, str] | None = None  # (monotonic time, kind, first line)
    listeners: list[Callable[[str], None]] = field(default_factory=list)

    def record(self, kind: str, message: str) -> None:
        self.last_failure = (time.monotonic(), kind, message)
        for listener in list(self.listeners):
            listener(kind)


_HEALTH: weakref.WeakKeyDictionary[Engine, EngineHealth] = weakref.WeakKeyDictionary()


def engine_health(engine: Engine) -> EngineHealth:
    """The engine's :class:`EngineHealth`, its ``handle_error`` hook installed on first use."""
    health = _HEALTH.get(engine)
    if health is None:
        health = _HEALTH[engine] = EngineHealth()

        @event.listens_for(engine, "handle_error")
        def _on_error(context: Any) -> None:
            error = context.sqlalchemy_exception or context.original_exception
            kind = failure_kind(error) or failure_kind(context.original_exception)
            if kind is not None:
                health.record(kind, first_line(context.original_exception))

    return health


def first_line(exc: BaseException) -> str:
    text = str(getattr(exc, "orig", None) or exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def failure_kind(exc: BaseException | None) -> str | None:
    """What kind of database trouble ``exc`` is (a 503), or None for anything else (a bug).

    ``busy`` (SQLite locked, no free pooled connection), ``timeout`` (a statement ran too long or
    the server stopped answering), ``disk_full``, ``read_only``, ``unreachable`` (cannot connect,
    connection lost) and ``unavailable`` (any other operational failure: a missing table, an
    I/O error, too many connections).
    """
    if exc is None:
        return None
    if isinstance(exc, WriteTimedOut):
        return "busy"
    if isinstance(exc, sa_exc.TimeoutError):  # the pool had no free connection in time
        return "busy"
    orig = exc.orig if isinstance(exc, sa_exc.DBAPIError) else exc
    sqlstate = str(getattr(orig, "sqlstate", None) or getattr(orig, "pgcode", None) or "")
    message = str(orig).lower()
    if "database or disk is full" in message or sqlstate == "53100":
        return "disk_full"
    if "readonly database" in message or sqlstate == "25006":
        return "read_only"
    if "not retried yet" in message:  # ConnectGuard: refused after a recent failure
        return "unreachable"
    if sqlstate == "57014" or "did not answer within" in message:
        return "timeout"
    if "database is locked" in message or "database table is locked" in message:
        return "busy"
    if sqlstate.startswith(("08", "57P")) or (
        isinstance(exc, sa_exc.DBAPIError) and exc.connection_invalidated
    ):
        return "unreachable"
    if sqlstate.startswith("53"):
        return "unavailable"
    operational = isinstance(exc, sa_exc.OperationalError) or type(orig).__name__ in (
        "OperationalError",
        "InterfaceError",
    )
    if operational:
        if any(word in message for word in ("connect", "server closed", "timeout expired")):
            return "unreachable"
        return "unavailable"
    return None


def _install_sqlite_busy_timeout(engine: Engine, timeouts: DatabaseTimeouts) -> None:
    if timeouts.sqlite_busy_ms == SQLITE_BUSY_TIMEOUT_MS:
        return  # the connect hook already set it

    @event.listens_for(engine, "connect")
    def _busy_timeout(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout={int(timeouts.sqlite_busy_ms)}")
        finally:
            cursor.close()


class ConnectGuard:
    """After a failed connection attempt, further attempts fail at once for ``cooldown_s``.

    While the database is down a request then answers 503 in microseconds instead of waiting out
    the connect timeout (and holding a thread); one attempt at a time probes it afterwards.
    """

    def __init__(self, cooldown_s: float) -> None:
        self.cooldown_s = cooldown_s
        self._lock = threading.Lock()
        self._failed_at: float | None = None
        self._error = ""
        self._probing = False

    def refusal(self) -> str | None:
        """Why this attempt is refused now, or None (it goes ahead)."""
        with self._lock:
            if self._failed_at is None:
                return None
            age = time.monotonic() - self._failed_at
            if age < self.cooldown_s or self._probing:
                return f"database unreachable {age:.1f} s ago ({self._error}): not retried yet"
            self._probing = True
            return None

    def done(self, error: BaseException | None) -> None:
        with self._lock:
            self._probing = False
            if error is None:
                self._failed_at = None
            else:
                self._failed_at = time.monotonic()
                self._error = first_line(error)


def _psycopg_connection_class(deadline_s: float, guard: ConnectGuard) -> Any:
    """A psycopg 3 connection that waits at most ``deadline_s`` for any answer of the server.

    A server that stopped answering also opens ``guard``: reconnecting fails at once for a while.
    """
    import psycopg

    class DeadlineConnection(psycopg.Connection):
        def wait(self, gen: Any, *args: Any, timeout: float | None = None, **kwargs: Any) -> Any:
            limit = deadline_s if timeout is None else timeout
            kwargs["timeout"] = limit  # psycopg passes it by keyword
            started = time.monotonic()
            try:
                return super().wait(gen, *args, **kwargs)
            except psycopg.OperationalError:
                # psycopg's timeout is an OperationalError raised once the limit has passed;
                # any other (a lost connection) is raised as it is.
                if time.monotonic() - started < limit:
                    raise
                # The protocol state is unknown now: close it, so the pool discards it.
                self.pgconn.finish()
                error = psycopg.OperationalError(
                    f"the database did not answer within {limit:g} s: connection closed"
                )
                guard.done(error)
                raise error from None

    return DeadlineConnection


def _install_connect_guard(engine: Engine, timeouts: DatabaseTimeouts) -> None:
    guard = ConnectGuard(timeouts.retry_after_s)
    engine_health(engine)
    dialect = engine.dialect
    factory: Callable[..., Any] | None = None
    if dialect.driver == "psycopg" and not getattr(dialect, "is_async", False):
        factory = _psycopg_connection_class(timeouts.statement_s + 1.0, guard).connect

    @event.listens_for(engine, "do_connect")
    def _connect(dialect: Any, _record: Any, cargs: Any, cparams: Any) -> Any:
        refusal = guard.refusal()
        if refusal is not None:
            raise dialect.loaded_dbapi.OperationalError(refusal)
        try:
            connection = (factory or dialect.loaded_dbapi.connect)(*cargs, **cparams)
        except Exception as exc:
            guard.done(exc)
            raise
        guard.done(None)
        return connection


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    # Objects stay readable after commit: write_transaction commits a read transaction first.
    return sessionmaker(bind=engine, expire_on_commit=False)


def make_lookup_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    """Sessions for a lookup of one statement (a bearer token, a browser session) and its rare
    touch: on PostgreSQL in autocommit, so the read costs one round trip where BEGIN and COMMIT
    took two more; SQLAlchemy sets it on the pool's connection at checkout and resets it when
    the connection is given back. SQLite reads in the process: the usual sessions."""
    if engine.dialect.name != "postgresql":
        return make_sessionmaker(engine)
    return make_sessionmaker(engine.execution_options(isolation_level="AUTOCOMMIT"))


@contextmanager
def write_transaction(db: Session) -> Iterator[Session]:
    """Run the block in one write transaction (``BEGIN IMMEDIATE`` on SQLite); commit or roll back.

    A read transaction still open on ``session`` is ended first, so the write never upgrades a
    stale snapshot.
    """
    if db.in_transaction():
        db.commit()
    db.connection(execution_options={SQLITE_BEGIN_OPTION: "IMMEDIATE"})
    try:
        yield db
        db.commit()
    except BaseException:
        db.rollback()
        raise
