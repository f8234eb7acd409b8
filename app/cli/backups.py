"""``backup`` and ``restore``: a SQLite database copied to a file and back, consistently while
servers run (SQLite's online backup API). PostgreSQL has pg_dump and pg_restore."""

from __future__ import annotations

from pathlib import Path

from app.cli.errors import CliError, first_line, safe_url
from app.cli.migrations import MIGRATIONS_DIR

SQLITE_HEADER = b"SQLite format 3\x00"


def _sqlite_file(database_url: str, action: str) -> Path:
    """The file of a SQLite DATABASE_URL; CliError for PostgreSQL (pg_dump) or a bad URL."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        url = make_url(database_url)
    except ArgumentError as exc:
        raise CliError(f"invalid DATABASE_URL {database_url!r}: {exc}") from None
    backend = url.get_backend_name()
    if backend == "postgresql":
        tool = "pg_dump --format=custom" if action == "backup" else "pg_restore --clean"
        raise CliError(
            f"{action} copies SQLite databases; for PostgreSQL ({safe_url(database_url)}) "
            f"use {tool} (see the README's Deployment section)"
        )
    if backend != "sqlite":
        raise CliError(f"{action} copies SQLite databases, not {backend}")
    if url.database in (None, "", ":memory:"):
        raise CliError(f"an in-memory SQLite database has no file to {action}")
    return Path(url.database).expanduser().resolve()


def _connect_ro(path: Path):  # type: ignore[no-untyped-def]
    import sqlite3

    return sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=30)


def _answers(conn) -> int:  # type: ignore[no-untyped-def]
    return int(conn.execute("SELECT count(*) FROM attempts").fetchone()[0])


def _fsync(path: Path) -> None:
    import os

    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def backup(database_url: str, dest: Path | str, force: bool = False) -> str:
    """Copy the SQLite database to ``dest`` with SQLite's online backup API (a consistent
    snapshot while servers keep writing: WAL readers block no writer); one self-contained file.

    ``dest`` is a file, or a folder for a timestamped file; a path written as a folder (ending
    in ``/``) that is no folder is refused, not made a file of that name."""
    import os
    import sqlite3
    from contextlib import closing
    from datetime import UTC, datetime

    source = _sqlite_file(database_url, "backup")
    if not source.is_file():
        raise CliError(f"no database at {source} to back up")
    as_folder = isinstance(dest, str) and dest.endswith(("/", os.sep))
    dest = Path(dest)
    if dest.is_dir():
        dest = dest / f"infracards-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.db"
    elif as_folder:
        raise CliError(f"no folder {dest.expanduser().resolve()} for the backup")
    dest = dest.expanduser().resolve()
    if dest == source:
        raise CliError("the backup would overwrite the database itself: choose another file")
    if dest.exists() and not force:
        raise CliError(f"{dest} exists: choose another name or pass --force to replace it")
    if not dest.parent.is_dir():
        raise CliError(f"no folder {dest.parent} for the backup")
    partial = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
    try:
        with closing(_connect_ro(source)) as src, closing(sqlite3.connect(partial)) as out:
            # pages=-1: one step, one read transaction, so the copy is one committed state.
            src.backup(out, pages=-1)
            out.execute("PRAGMA journal_mode=DELETE")
            check = out.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise CliError(f"the copy failed its integrity check: {check}")
            revision, answers = _revision(out), _answers(out)
        _fsync(partial)
        os.replace(partial, dest)
        _fsync(dest.parent)
    except sqlite3.Error as exc:
        raise CliError(f"backup failed: {first_line(exc)}") from None
    except OSError as exc:
        raise CliError(f"backup failed: {exc.strerror or exc}: {exc.filename or dest}") from None
    finally:
        partial.unlink(missing_ok=True)
    return (
        f"backed up {source} to {dest} ({dest.stat().st_size} bytes, "
        f"migration {revision}, {answers} answers)"
    )


def _revision(conn) -> str:  # type: ignore[no-untyped-def]
    import sqlite3

    try:
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.OperationalError:
        return "none"
    return ",".join(sorted(r[0] for r in rows)) or "none"


def _check_restorable(src: Path) -> tuple[str, int]:
    """``src`` is a sound SQLite file at the migration head: (revision, answers)."""
    import sqlite3
    from contextlib import closing

    from alembic.script import ScriptDirectory

    try:
        with src.open("rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except FileNotFoundError:
        raise CliError(f"no such file: {src}") from None
    except OSError as exc:
        raise CliError(f"cannot read {src}: {exc.strerror or exc}") from None
    if header != SQLITE_HEADER:
        raise CliError(f"{src} is not a SQLite database")
    heads = ",".join(sorted(ScriptDirectory(str(MIGRATIONS_DIR)).get_heads()))
    try:
        with closing(_connect_ro(src)) as conn:
            check = conn.execute("PRAGMA quick_check").fetchone()[0]
            if check != "ok":
                raise CliError(f"{src} fails SQLite's integrity check: {check}")
            revision = _revision(conn)
            if revision == "none":
                raise CliError(f"{src} has no migration revision: not an infracards database")
            if revision != heads:
                raise CliError(
                    f"{src} is at migration {revision}, not the latest ({heads}): migrate a copy "
                    f"first (DATABASE_URL=sqlite:///COPY python -m app.cli migrate)"
                )
            return revision, _answers(conn)
    except sqlite3.Error as exc:
        raise CliError(f"cannot read {src}: {first_line(exc)}") from None


def _rows(path: Path) -> tuple[int, int]:
    """(learners, answers) already in the database at ``path``; (0, 0) for an empty one."""
    import sqlite3
    from contextlib import closing

    try:
        with closing(_connect_ro(path)) as conn:
            learners = int(conn.execute("SELECT count(*) FROM learners").fetchone()[0])
            return learners, _answers(conn)
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return 0, 0
        raise CliError(f"cannot read {path}: {first_line(exc)}") from None
    except sqlite3.DatabaseError as exc:
        raise CliError(f"{path} is not a readable SQLite database ({exc}): pass --force") from None


def restore(database_url: str, src: Path, force: bool = False) -> str:
    """Copy a backup into the configured SQLite database (the backup API, so a reader sees the
    old or the new database, never a mix); a non-empty database only with ``force``."""
    import sqlite3
    from contextlib import closing

    target = _sqlite_file(database_url, "restore")
    src = src.expanduser().resolve()
    revision, answers = _check_restorable(src)
    if src == target:
        raise CliError("the backup is the configured database itself")
    if target.is_file() and target.stat().st_size > 0 and not force:
        learners, stored = _rows(target)
        if learners or stored:
            raise CliError(
                f"{target} is not empty ({learners} learners, {stored} answers): stop the "
                f"servers using it and pass --force to replace it"
            )
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with (
            closing(_connect_ro(src)) as source,
            closing(sqlite3.connect(target, timeout=30)) as out,
        ):
            source.backup(out, pages=-1)
            out.execute("PRAGMA journal_mode=WAL")
    except sqlite3.Error as exc:
        raise CliError(f"restore failed: {first_line(exc)}") from None
    except OSError as exc:
        raise CliError(f"restore failed: {exc.strerror or exc}: {exc.filename or target}") from None
    return f"restored {src} into {target} (migration {revision}, {answers} answers)"
