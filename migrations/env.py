"""Alembic environment: batch mode (needed for ALTER on SQLite), the app's metadata and engine.

The database URL comes from ``sqlalchemy.url`` when the caller set one (the CLI and the tests do),
otherwise from the app settings (``DATABASE_URL``). A caller may also hand over an open
connection in ``config.attributes["connection"]``.

On SQLite, migrations run with foreign keys not enforced, as SQLite's and Alembic's documentation
ask for table rebuilds: batch mode changes a table by copying it and dropping the old one, and
with foreign keys enforced that drop first deletes the old rows, firing every ``ON DELETE``
of the tables that point at it (a rebuilt ``learners`` would delete every attempt and token).
Before the migrations commit (one transaction: SQLite's DDL is transactional), ``PRAGMA
foreign_key_check`` must find every reference whole; otherwise nothing is committed.
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy import Connection, text
from sqlalchemy.pool import NullPool

from app import models  # noqa: F401  (registers the tables on Base.metadata)
from app.analytics import models as analytics_models  # noqa: F401  (classes)
from app.config import get_settings
from app.db import (
    SQLITE_BEGIN_OPTION,
    Base,
    DatabaseTimeouts,
    ensure_sqlite_folder,
    make_engine,
)

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or get_settings().database_url


def _configure(**kwargs: object) -> None:
    context.configure(
        target_metadata=target_metadata,
        render_as_batch=True,
        compare_type=True,
        **kwargs,  # type: ignore[arg-type]
    )


def run_migrations_offline() -> None:
    _configure(url=_url(), literal_binds=True, dialect_opts={"paramstyle": "named"})
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection=connection)
        with context.begin_transaction():
            context.run_migrations()
            _record_heads()
        return
    url = _url()
    ensure_sqlite_folder(url)
    engine = make_engine(
        url, poolclass=NullPool, sqlite_foreign_keys=False, timeouts=MIGRATION_TIMEOUTS
    )
    try:
        with engine.connect() as connection:
            # Every migration of a run commits together or not at all: PostgreSQL's DDL is
            # transactional, and so is SQLite's (the engine's hooks emit BEGIN; Alembic does not
            # assume it there).
            sqlite = connection.dialect.name == "sqlite"
            if sqlite:  # the write lock first: a second migrate waits for it, then reads
                connection.execution_options(**{SQLITE_BEGIN_OPTION: "IMMEDIATE"})
            _configure(connection=connection, transactional_ddl=True)
            with context.begin_transaction():
                if connection.dialect.name == "postgresql":
                    # Several servers starting at once each run ``migrate``: the first takes the
                    # lock and upgrades; the others wait, then read the revision it committed
                    # and have nothing to do (without it, one failed on a table the other had
                    # just made). SQLite's write lock does the same for a file.
                    connection.execute(
                        text("SELECT pg_advisory_xact_lock(:key)"), {"key": LOCK_KEY}
                    )
                context.run_migrations()
                _record_heads()
                if sqlite:
                    _check_foreign_keys(connection)
    finally:
        engine.dispose()


def _record_heads() -> None:
    """The revision the database is at now, read on the upgrade's own connection inside its
    transaction (under its lock), for ``migrate`` to report (app.cli.migrations)."""
    config.attributes["heads"] = context.get_context().get_current_heads()


# The advisory lock migrations hold on PostgreSQL (any fixed number; the app takes no other).
LOCK_KEY = 0x696E667261  # "infra"
# A migration may rewrite large tables, and a second ``migrate`` waits for the first: not the
# limits a request has (PostgreSQL's statement_timeout of 10 s, SQLite's 5 s busy wait).
MIGRATION_TIMEOUTS = DatabaseTimeouts(statement_s=3600.0, sqlite_busy_ms=600_000)


class BrokenReferences(RuntimeError):
    """A migration left rows that point at rows that do not exist (nothing was committed)."""


def _check_foreign_keys(connection: Connection) -> None:
    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
    if broken:
        table, rowid, parent, _ = broken[0]
        raise BrokenReferences(
            f"the migration would leave {len(broken)} row(s) pointing at rows that do not exist "
            f"(first: {table} row {rowid} -> {parent}); nothing was changed"
        )


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
