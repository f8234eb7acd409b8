"""Database plumbing: the declarative base, engines, sessions and write transactions.

SQLite (the default) runs in WAL mode with ``busy_timeout`` and ``synchronous=NORMAL`` (or
``FULL``: the ``SQLITE_SYNCHRONOUS`` setting) set on every connection. SQLAlchemy emits
``BEGIN`` itself (the driver's own transaction handling is switched off) so that
:func:`write_transaction` can start with ``BEGIN IMMEDIATE``: a deferred transaction that reads
and then writes can fail with SQLITE_BUSY_SNAPSHOT whatever the timeout. The same models
run on PostgreSQL, where these hooks are not installed.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import pydantic_core
from sqlalchemy import Connection, MetaData, Table, create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker
from sqlalchemy.types import TypeEngine

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
ANSWERS_PENDING = "answers_pending"


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    # Every model maps a Table (DeclarativeBase types __table__ as any FromClause).
    __table__: ClassVar[Table]


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def ensure_sqlite_folder(url: str) -> None:
    """Create the folder of a file-based SQLite database (``data/`` for the default one)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def json_text(value: Any) -> str:
    """What JSON columns store: pydantic-core's serializer (compact, UTF-8 as it is, ≈7x faster
    than ``json.dumps`` on an attempt's choices); any JSON reader reads it back."""
    return pydantic_core.to_json(value).decode()


def make_engine(
    url: str,
    *,
    sqlite_synchronous: str = "normal",
    timeouts: DatabaseTimeouts | None = None,
    **kwargs: Any,
) -> Engine:
    """An engine for ``url``; SQLite connections get WAL, busy_timeout, synchronous=NORMAL.

    ``sqlite_synchronous="full"`` fsyncs the WAL at every commit (survives power loss)."""
    if sqlite_synchronous.upper() not in ("NORMAL", "FULL"):
        raise ValueError(f"sqlite_synchronous must be normal or full, not {sqlite_synchronous!r}")
    timeouts = timeouts if timeouts is not None else DatabaseTimeouts()
    kwargs.setdefault("json_serializer", json_text)
    if is_sqlite(url):
        kwargs.setdefault("connect_args", {}).setdefault("timeout", timeouts.sqlite_busy_ms / 1000)
        engine = create_engine(url, **kwargs)
        _install_sqlite_hooks(engine, sqlite_synchronous.upper())
        _install_sqlite_busy_timeout(engine, timeouts)
        engine_health(engine)  # failures are recorded (and counted) for SQLite too
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    driver = make_url(url).get_driver_name()
    if make_url(url).get_backend_name() == "postgresql" and driver in ("psycopg", "psycopg2"):
        connect_args = kwargs.setdefault("connect_args", {})
        connect_args.setdefault("connect_timeout", max(2, int(timeouts.connect_s)))
        statement_ms = int(timeouts.statement_s * 1000)
        connect_args.setdefault("options", f"-c statement_timeout={statement_ms}")
    if "poolclass" not in kwargs:
        kwargs.setdefault("pool_timeout", timeouts.pool_s)
    engine = create_engine(url, **kwargs)
    _install_connect_guard(engine, timeouts)
    return engine


def _install_sqlite_hooks(engine: Engine, synchronous: str = "NORMAL") -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy emit BEGIN (see _on_begin), not the sqlite3 module.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute(f"PRAGMA synchronous={synchronous}")
            cursor.execute("PRAGMA foreign_keys=ON")
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


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    # Objects stay readable after commit: write_transaction commits a read transaction first.
    return sessionmaker(bind=engine, expire_on_commit=False)


@contextmanager
def write_transaction(session: Session) -> Iterator[Session]:
    """Run the block in one write transaction (``BEGIN IMMEDIATE`` on SQLite); commit or roll back.

    A read transaction still open on ``session`` is ended first, so the write never upgrades a
    stale snapshot.
    """
    if session.in_transaction():
        session.commit()
    session.connection(execution_options={SQLITE_BEGIN_OPTION: "IMMEDIATE"})
    try:
        yield session
        session.commit()
    except BaseException:
        session.rollback()
        raise


# --- keyed lookups ----------------------------------------------------------------------------


_PLACEHOLDER = re.compile(r"(?<![:\w]):(\w+)")


@dataclass(frozen=True)
class _Prepared:
    sql: str
    binds: tuple[tuple[str, Callable[[Any], Any]], ...]
    results: tuple[Callable[[Any], Any] | None, ...]


class DriverSQL:
    """SQL the driver runs as written, through ``Connection.exec_driver_sql``: SQLAlchemy's
    events, error wrapping, ``handle_error`` hook and disconnect handling stay; its statement
    compilation and per-parameter processing go. For the answer writer's statements, run for
    every batch (measured: reading 32 question keys, 361 µs as a compiled ``text()``, 103 µs this
    way, 48 µs on the bare cursor).

    Written with ``:name`` placeholders (rendered as ``%(name)s`` for drivers that want that).
    The parameters named in ``binds`` and the result columns typed in ``results`` are converted
    by those SQLAlchemy types' own processors for the connection's dialect, so what is stored
    and read is exactly what the ORM stores and reads (SQLite's date-time strings, JSON text,
    psycopg's JSON wrapper); other parameters go to the driver as they are.
    """

    def __init__(
        self,
        sql: str,
        *,
        binds: Mapping[str, TypeEngine[Any]] | None = None,
        results: Sequence[TypeEngine[Any] | None] = (),
    ) -> None:
        self.sql = sql
        self._binds = dict(binds or {})
        self._results = tuple(results)
        self._prepared: dict[str, _Prepared] = {}

    @classmethod
    def insert(cls, table: Table, names: Sequence[str] | None = None) -> DriverSQL:
        """``INSERT INTO table`` of the columns ``names`` (all of them by default), each bound
        by its column's type, for :meth:`run_many`."""
        names = list(table.c.keys()) if names is None else list(names)
        return cls(
            f"INSERT INTO {table.name} ({', '.join(names)})"
            f" VALUES ({', '.join(':' + name for name in names)})",
            binds={name: table.c[name].type for name in names},
        )

    def _prepare(self, dialect: Dialect) -> _Prepared:
        prepared = self._prepared.get(dialect.name)
        if prepared is None:
            sql = self.sql
            if dialect.paramstyle in ("pyformat", "format"):
                sql = _PLACEHOLDER.sub(r"%(\1)s", sql.replace("%", "%%"))
            binds = tuple(
                (name, processor)
                for name, type_ in self._binds.items()
                if (processor := type_.dialect_impl(dialect).bind_processor(dialect)) is not None
            )
            results = tuple(
                None
                if type_ is None
                else type_.dialect_impl(dialect).result_processor(dialect, None)
                for type_ in self._results
            )
            prepared = self._prepared[dialect.name] = _Prepared(sql, binds, results)
        return prepared

    @staticmethod
    def _bound(prepared: _Prepared, params: Mapping[str, Any]) -> dict[str, Any]:
        bound = dict(params)
        for name, processor in prepared.binds:
            if name in bound:
                bound[name] = processor(bound[name])
        return bound

    def rows(self, connection: Connection, params: Mapping[str, Any]) -> list[tuple[Any, ...]]:
        """Run it once; its rows, their typed columns converted."""
        prepared = self._prepare(connection.dialect)
        fetched = connection.exec_driver_sql(prepared.sql, self._bound(prepared, params)).all()
        return self._converted(prepared, fetched)

    def read(self, params: Mapping[str, Any]) -> Read:
        """This statement with ``params``, to run with others (:func:`read_together`)."""
        return Read(self, params)

    @staticmethod
    def _converted(prepared: _Prepared, fetched: Sequence[Any]) -> list[tuple[Any, ...]]:
        if not any(prepared.results):
            return [tuple(row) for row in fetched]
        processors = prepared.results
        return [
            tuple(
                value if processor is None or value is None else processor(value)
                for value, processor in zip(row, processors, strict=False)
            )
            for row in fetched
        ]

    def run_many(self, connection: Connection, rows: Sequence[Mapping[str, Any]]) -> None:
        """Run it for each of ``rows`` (the driver's executemany), returning nothing."""
        if rows:
            prepared = self._prepare(connection.dialect)
            connection.exec_driver_sql(prepared.sql, [self._bound(prepared, row) for row in rows])


@dataclass(frozen=True)
class Read:
    """A :class:`DriverSQL` read with its parameters (:func:`read_together`)."""

    statement: DriverSQL
    params: Mapping[str, Any]

    def rows(self, connection: Connection) -> list[tuple[Any, ...]]:
        return self.statement.rows(connection, self.params)


def read_together(
    connection: Connection, reads: Sequence[Read | None]
) -> list[list[tuple[Any, ...]]]:
    """The rows of each of ``reads`` (none for a ``None``), which must not depend on each
    other: on PostgreSQL (psycopg) all sent before any answer is awaited and answered together
    (its pipeline mode, through the driver's cursors, the parameters bound by the server as
    for any statement: one round trip, and an empty one to leave the pipeline), errors raised
    as SQLAlchemy raises them (see :func:`driver_errors`); elsewhere one after another
    (:meth:`DriverSQL.rows`). Measured on a batch of 32 answers: 2.2-2.6 ms a call, against
    3.0-3.6 ms as one message of several statements (client-side binding: each statement
    parsed and planned anew) and about 1.3 ms for each statement on its own."""
    sent = [read for read in reads if read is not None]
    if connection.dialect.driver != "psycopg" or len(sent) < 2:
        return [[] if read is None else read.rows(connection) for read in reads]
    if not connection.in_transaction():
        # What SQLAlchemy's own first statement would do (autobegin): the caller's commit or
        # rollback ends the transaction the driver begins for these reads.
        connection.begin()
    dialect = connection.dialect
    driver_connection = connection.connection.driver_connection
    assert driver_connection is not None  # a connection in a transaction has its driver's
    results = []
    with driver_errors(connection), driver_connection.pipeline() as pipeline:
        cursors = []
        for read in sent:
            statement = read.statement._prepare(dialect)
            cursor = driver_connection.cursor()
            cursor.execute(statement.sql, read.statement._bound(statement, read.params))
            cursors.append((statement, cursor))
        pipeline.sync()
        for statement, cursor in cursors:
            with cursor:
                results.append(DriverSQL._converted(statement, cursor.fetchall()))
    found = iter(results)
    return [[] if read is None else next(found) for read in reads]


@contextmanager
def pipelined(connection: Connection) -> Iterator[None]:
    """The statements the block runs on ``connection`` sent together (psycopg's pipeline mode:
    one round trip to the server for all of them instead of one each) for a block that writes
    and reads nothing back; elsewhere (SQLite) the block just runs. A statement's failure
    surfaces at the end of the block (or at a later statement), raised as :func:`driver_errors`
    raises it."""
    if connection.dialect.driver != "psycopg":
        yield
        return
    with driver_errors(connection):
        driver_connection = connection.connection.driver_connection
        assert driver_connection is not None  # a checked-out connection has its driver's
        with driver_connection.pipeline():
            yield


@contextmanager
def driver_errors(connection: Connection) -> Iterator[None]:
    """The driver's own errors, raised in the block by calls past SQLAlchemy, raised as
    SQLAlchemy raises them (``IntegrityError``, ``OperationalError`` …, the driver's error as
    ``orig``) and recorded in the engine's health like any other database failure; a connection
    lost meanwhile is invalidated, so the pool does not hand it out again."""
    dbapi = connection.dialect.loaded_dbapi
    try:
        yield
    except dbapi.Error as exc:
        driver_connection = connection.connection.driver_connection
        lost = connection.dialect.is_disconnect(exc, driver_connection, None)
        wrapped = sa_exc.DBAPIError.instance(
            None, None, exc, dbapi.Error, connection_invalidated=lost, dialect=connection.dialect
        )
        kind = failure_kind(wrapped)
        if kind is not None:
            engine_health(connection.engine).record(kind, first_line(exc))
        if lost:
            connection.invalidate(exc)
        raise wrapped from exc


@lru_cache(maxsize=32)
def _largest_id(table: str) -> DriverSQL:
    return DriverSQL(f"SELECT max(id) FROM {table}")


@lru_cache(maxsize=32)
def _sequence_ids(table: str) -> DriverSQL:
    return DriverSQL(
        f"SELECT nextval(pg_get_serial_sequence('{table}', 'id')) FROM generate_series(1, :count)"
    )


def next_ids(connection: Connection, table: str, count: int) -> list[int]:
    """``count`` unused ids for ``table``'s integer primary key ``id``, for rows the caller's
    write transaction inserts with their ids given (one executemany, nothing to read back): on
    PostgreSQL the column's sequence's next values; on SQLite those after the largest, which is
    what SQLite would give them one by one (its write lock, held since ``BEGIN IMMEDIATE``,
    keeps them free until the commit). :func:`next_ids_read` reads them with other reads."""
    if count <= 0:
        return []
    read = next_ids_read(connection.dialect, table, count)
    return next_ids_of(connection.dialect, read.rows(connection), count)


def next_ids_read(dialect: Dialect, table: str, count: int) -> Read:
    """The read behind :func:`next_ids` (``count`` at least 1), for :func:`read_together`;
    :func:`next_ids_of` turns its rows into the ids."""
    if dialect.name == "postgresql":
        return _sequence_ids(table).read({"count": count})
    return _largest_id(table).read({})


def next_ids_of(dialect: Dialect, rows: Sequence[tuple[Any, ...]], count: int) -> list[int]:
    """The ``count`` ids the rows of a :func:`next_ids_read` give."""
    if dialect.name == "postgresql":
        return sorted(row[0] for row in rows)
    largest = rows[0][0] or 0
    return list(range(largest + 1, largest + 1 + count))


@dataclass(frozen=True)
class KeyColumns:
    """Columns that together name rows (a composite index), for reading many keys at once.

    SQLite gets ``(a = :k0_0 AND b = :k0_1) OR (...)`` with a power-of-two number of key slots
    (spares repeat the first key), so that a dozen statements serve every count; each term
    seeks the index (SQLite's row-value ``IN (VALUES ...)`` scans the whole index instead).
    PostgreSQL gets one array per column, ``(a, b) IN (SELECT * FROM unnest(:k_0, :k_1))``: one
    short statement whatever the count (psycopg re-parses statements over 4 KB every time).
    """

    names: tuple[str, ...]
    pg_types: tuple[str, ...]  # each column's PostgreSQL type, for its array

    def slots(self, dialect: str, count: int) -> int:
        """The ``slots`` argument of :meth:`where` for ``count`` keys."""
        if dialect == "postgresql":
            return 0
        return 1 << max(0, count - 1).bit_length()

    def where(self, dialect: str, slots: int) -> str:
        if dialect == "postgresql":
            arrays = ", ".join(f"CAST(:k_{j} AS {t}[])" for j, t in enumerate(self.pg_types))
            return f"({', '.join(self.names)}) IN (SELECT * FROM unnest({arrays}))"
        terms = (
            "(" + " AND ".join(f"{name} = :k{i}_{j}" for j, name in enumerate(self.names)) + ")"
            for i in range(slots)
        )
        return "(" + " OR ".join(terms) + ")"

    def params(self, dialect: str, keys: Sequence[tuple[Any, ...]]) -> dict[str, Any]:
        """The parameters of :meth:`where` for ``keys`` (at least one)."""
        if dialect == "postgresql":
            return {f"k_{j}": [key[j] for key in keys] for j in range(len(self.names))}
        slots = list(keys) + [keys[0]] * (self.slots(dialect, len(keys)) - len(keys))
        return {f"k{i}_{j}": value for i, key in enumerate(slots) for j, value in enumerate(key)}


class KeyedSelect:
    """A read of the rows named by many keys at once: ``sql`` with ``{where}`` where the
    :class:`KeyColumns` condition goes, run as :class:`DriverSQL` (one statement per dialect and
    slot count, made on first use and kept: a dozen at most). ``for_update`` locks the rows read
    on PostgreSQL (SQLite's write lock covers them already)."""

    def __init__(
        self,
        key: KeyColumns,
        sql: str,
        *,
        binds: Mapping[str, TypeEngine[Any]] | None = None,
        results: Sequence[TypeEngine[Any] | None] = (),
        for_update: bool = False,
    ) -> None:
        self.key = key
        self._sql = sql
        self._binds = binds
        self._results = results
        self._for_update = for_update
        self._statements: dict[tuple[str, int], DriverSQL] = {}

    def rows(
        self,
        connection: Connection,
        keys: Sequence[tuple[Any, ...]],
        params: Mapping[str, Any] | None = None,
    ) -> list[tuple[Any, ...]]:
        """The rows of ``keys`` (none for no keys); ``params`` fill the rest of ``sql``."""
        read = self.read(connection.dialect, keys, params)
        return [] if read is None else read.rows(connection)

    def read(
        self,
        dialect: Dialect,
        keys: Sequence[tuple[Any, ...]],
        params: Mapping[str, Any] | None = None,
    ) -> Read | None:
        """:meth:`rows` as a read for :func:`read_together` (None for no keys)."""
        if not keys:
            return None
        name = dialect.name
        slots = self.key.slots(name, len(keys))
        statement = self._statements.get((name, slots))
        if statement is None:
            sql = self._sql.format(where=self.key.where(name, slots))
            if self._for_update and name == "postgresql":
                sql += " FOR UPDATE"
            statement = DriverSQL(sql, binds=self._binds, results=self._results)
            self._statements[(name, slots)] = statement
        return statement.read({**self.key.params(name, keys), **(params or {})})


class WriterTurn:
    """Whose turn it is to write, among the processes sharing one SQLite file: an exclusive
    ``flock`` on ``<database>.writers``, held around a batch's write transaction. Waiting on
    SQLite's own lock, a writer sleeps in 1, 2, 5, 10 … ms steps (its busy handler) and misses
    the moments the lock is free; the kernel wakes a flock waiter as soon as the holder lets go.
    A no-op on PostgreSQL, for in-memory SQLite and when the lock file cannot be opened (SQLite's
    lock still serialises the writers then)."""

    def __init__(self, engine: Engine) -> None:
        database = engine.url.database if engine.dialect.name == "sqlite" else None
        self._path = f"{database}.writers" if database and database != ":memory:" else None
        self._fd: int | None = None

    @contextmanager
    def __call__(self) -> Iterator[None]:
        if self._path is not None and self._fd is None:
            try:
                self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as exc:
                log.warning("writers take turns by SQLite's lock only: %s", first_line(exc))
                self._path = None
        if self._fd is None:
            yield
            return
        fcntl.flock(self._fd, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
