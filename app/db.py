"""Database plumbing: the declarative base, engines, sessions and write transactions.

SQLite (the default) runs in WAL mode with ``busy_timeout`` and ``synchronous=NORMAL`` (or
``FULL``: the ``SQLITE_SYNCHRONOUS`` setting) set on every connection. SQLAlchemy emits
``BEGIN`` itself (the driver's own transaction handling is switched off) so that
:func:`write_transaction` can start with ``BEGIN IMMEDIATE``: a deferred transaction that reads
and then writes can fail with SQLITE_BUSY_SNAPSHOT whatever the timeout. The same models
run on PostgreSQL, where these hooks are not installed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import MetaData, create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.orm import DeclarativeBase, Session, sessionmaker

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


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


def is_sqlite(url: str) -> bool:
    return make_url(url).get_backend_name() == "sqlite"


def ensure_sqlite_folder(url: str) -> None:
    """Create the folder of a file-based SQLite database (``data/`` for the default one)."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        Path(parsed.database).expanduser().parent.mkdir(parents=True, exist_ok=True)


def make_engine(url: str, *, sqlite_synchronous: str = "normal", **kwargs: Any) -> Engine:
    """An engine for ``url``; SQLite connections get WAL, busy_timeout, synchronous=NORMAL.

    ``sqlite_synchronous="full"`` fsyncs the WAL at every commit (survives power loss)."""
    if sqlite_synchronous.upper() not in ("NORMAL", "FULL"):
        raise ValueError(f"sqlite_synchronous must be normal or full, not {sqlite_synchronous!r}")
    if is_sqlite(url):
        kwargs.setdefault("connect_args", {}).setdefault("timeout", SQLITE_BUSY_TIMEOUT_MS / 1000)
        engine = create_engine(url, **kwargs)
        _install_sqlite_hooks(engine, sqlite_synchronous.upper())
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


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
