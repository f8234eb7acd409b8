"""Command line: ``migrate``, ``check-cards``, ``create-user``, ``backup``, ``restore`` and the
exports (``python -m app.cli --help``).

Errors are printed as one message on stderr with exit status 1 (2 for bad usage), no traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from app.config import ROOT, get_settings

ALEMBIC_INI = ROOT / "alembic.ini"
MIGRATIONS_DIR = ROOT / "migrations"


class CliError(Exception):
    """A failure worth one line on stderr."""


def alembic_config(database_url: str, *, configure_logging: bool = True) -> object:
    """An Alembic config for the project's migrations, pointed at ``database_url``."""
    from alembic.config import Config

    config = Config(str(ALEMBIC_INI)) if ALEMBIC_INI.is_file() else Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation: a literal % in a URL (an encoded password) must be doubled.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    config.attributes["configure_logging"] = configure_logging
    return config


def migrate(database_url: str, revision: str = "head") -> None:
    """Upgrade the database to ``revision`` (creating the folder of a SQLite file)."""
    from alembic import command
    from alembic.util import CommandError
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from app.db import ensure_sqlite_folder

    try:
        ensure_sqlite_folder(database_url)
        command.upgrade(alembic_config(database_url), revision)  # type: ignore[arg-type]
    except CommandError as exc:
        raise CliError(f"migration failed: {exc}") from None
    except ArgumentError as exc:
        raise CliError(f"invalid DATABASE_URL {database_url!r}: {exc}") from None
    except SQLAlchemyError as exc:
        raise CliError(f"migration failed: {_first_line(exc)}") from None
    except ModuleNotFoundError as exc:
        raise CliError(f"database driver not installed: {exc.name}") from None
    except OSError as exc:
        raise CliError(f"migration failed: {exc}") from None


def check_cards(cards_dir: Path, report: bool = False) -> str:
    """Load and validate every card; a summary, or CliError with the card's message.

    ``report``: also each template's content-blind guesser shares (app.domain.giveaways).
    """
    from app.domain.cards import CardError
    from app.domain.catalog import load_cards

    try:
        cards = load_cards(cards_dir)
    except CardError as exc:
        raise CliError(str(exc)) from None
    lines = []
    for card in cards.values():
        templates = card.templates()
        pitfalls = sum(len(t.pitfalls) for t in templates)
        lines.append(
            f"{card.id} v{card.version}: {len(card.points)} exam points, "
            f"{len(templates)} templates, {pitfalls} pitfalls, {len(card.formulas)} formulas"
        )
        if report:
            from app.domain.giveaways import report_lines

            lines += report_lines(card)
    lines.append(f"ok: {len(cards)} card{'s' if len(cards) != 1 else ''} in {cards_dir}")
    return "\n".join(lines)


def create_user(database_url: str, email: str, password: str, role: str) -> str:
    """Create an account with a role (the first instructor, an admin); a one-line summary."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.auth.service import register
    from app.db import make_engine, make_sessionmaker
    from app.problems import Problem

    engine = make_engine(database_url)
    try:
        with make_sessionmaker(engine)() as session:
            learner = register(session=session, email=email, password=password, role=role)
    except Problem as exc:
        raise CliError(exc.message) from None
    except SQLAlchemyError as exc:
        raise CliError(
            f"cannot create the user: {_first_line(exc)} (is the database migrated?)"
        ) from None
    finally:
        engine.dispose()
    return f"created {learner.role} {learner.email} ({learner.id})"


def export_questions(
    cards_dir: Path, card_id: str, fmt: str, out: Path, lang: str, variants: str
) -> str:
    """Write one card's fixed variants as an Anki package or Moodle XML; a one-line summary."""
    from app.domain.cards import CardError
    from app.domain.catalog import load_cards
    from app.domain.export_plan import ExportError
    from app.domain.languages import LANGS

    if lang not in LANGS:
        raise CliError(f"unknown language {lang!r} (known: {', '.join(LANGS)})")
    if not variants.isdigit():
        raise CliError(f"--variants must be a whole number, got {variants!r}")
    try:
        from app.authoring.exports import FORMATS, export_card
    except ModuleNotFoundError as exc:
        raise CliError(f"exports need the package {exc.name!r} (pip install genanki)") from None
    if fmt not in FORMATS:
        raise CliError(f"unknown export format {fmt!r} (known: {', '.join(FORMATS)})")
    try:
        cards = load_cards(cards_dir)
    except CardError as exc:
        raise CliError(str(exc)) from None
    card = cards.get(card_id)
    if card is None:
        raise CliError(f"unknown card {card_id!r} (known: {', '.join(sorted(cards))})")
    try:
        export = export_card(card, fmt, "zh" if lang == "zh" else "en", int(variants))
    except ExportError as exc:
        raise CliError(str(exc)) from None
    except ModuleNotFoundError as exc:
        raise CliError(f"exports need the package {exc.name!r} (pip install genanki)") from None
    try:
        out.write_bytes(export.content)
    except OSError as exc:
        raise CliError(f"cannot write {str(out)!r}: {exc.strerror or exc}") from None
    return f"wrote {out} ({fmt}, {lang}, {card.id} v{card.version}, {len(export.content)} bytes)"


def export_card(database_url: str, card_id: str, out: Path | None) -> str:
    """The latest published version of a card, from the database, as card-file YAML."""
    from sqlalchemy import select
    from sqlalchemy.exc import SQLAlchemyError

    from app.db import make_engine, make_sessionmaker
    from app.domain.cards import card_to_yaml
    from app.models import CardVersion

    engine = make_engine(database_url)
    try:
        with make_sessionmaker(engine)() as session:
            document = session.scalars(
                select(CardVersion.document)
                .where(CardVersion.card_id == card_id)
                .order_by(CardVersion.version.desc())
                .limit(1)
            ).first()
    except SQLAlchemyError as exc:
        raise CliError(
            f"cannot read the card: {_first_line(exc)} (is the database migrated?)"
        ) from None
    finally:
        engine.dispose()
    if document is None:
        raise CliError(f"no published card {card_id!r} in the database")
    text = card_to_yaml(document)
    if out is None:
        return text.rstrip("\n")
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"cannot write {out}: {exc.strerror}") from None
    return f"wrote {card_id} version {document.get('version')} to {out}"


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
            f"{action} copies SQLite databases; for PostgreSQL ({_safe_url(database_url)}) "
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


def backup(database_url: str, dest: Path, force: bool = False) -> str:
    """Copy the SQLite database to ``dest`` with SQLite's online backup API (a consistent
    snapshot while servers keep writing: WAL readers block no writer); one self-contained file."""
    import os
    import sqlite3
    from contextlib import closing
    from datetime import UTC, datetime

    source = _sqlite_file(database_url, "backup")
    if not source.is_file():
        raise CliError(f"no database at {source} to back up")
    if dest.is_dir():
        dest = dest / f"infracards-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.db"
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
        raise CliError(f"backup failed: {_first_line(exc)}") from None
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
        raise CliError(f"cannot read {src}: {_first_line(exc)}") from None


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
        raise CliError(f"cannot read {path}: {_first_line(exc)}") from None
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
        raise CliError(f"restore failed: {_first_line(exc)}") from None
    except OSError as exc:
        raise CliError(f"restore failed: {exc.strerror or exc}: {exc.filename or target}") from None
    return f"restored {src} into {target} (migration {revision}, {answers} answers)"


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m app.cli", description="infracards admin")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    migrate_cmd = commands.add_parser(
        "migrate", help="upgrade the database to the latest migration"
    )
    migrate_cmd.add_argument("--database-url", help="default: DATABASE_URL or SQLite in data/")
    migrate_cmd.add_argument("--revision", default="head", help="target revision (default: head)")
    check = commands.add_parser("check-cards", help="load and validate every card")
    check.add_argument("--cards-dir", type=Path, help="default: CARDS_DIR or cards/")
    check.add_argument(
        "--report", action="store_true", help="print each template's giveaway shares"
    )
    user = commands.add_parser("create-user", help="create an account with a role")
    user.add_argument("--email", required=True)
    user.add_argument(
        "--password-stdin",
        action="store_true",
        required=True,
        help="read the password from the first line of standard input",
    )
    user.add_argument("--role", choices=("learner", "instructor", "admin"), default="learner")
    user.add_argument("--database-url", help="default: DATABASE_URL or SQLite in data/")
    card_export = commands.add_parser(
        "export-card", help="write a card's latest published version back to card-file YAML"
    )
    card_export.add_argument("--card", required=True, help="the card's id")
    card_export.add_argument(
        "--out", type=Path, help="the file to write (default: standard output)"
    )
    card_export.add_argument("--database-url", help="default: DATABASE_URL or SQLite in data/")
    export = commands.add_parser(
        "export-questions", help="write a card's questions as an Anki package or Moodle XML"
    )
    export.add_argument("--card", required=True, help="the card's id")
    export.add_argument("--format", required=True, metavar="apkg|moodle", dest="export_format")
    export.add_argument("--out", required=True, type=Path, help="the file to write")
    export.add_argument("--lang", default="en", metavar="en|zh", help="default: en")
    export.add_argument(
        "--variants", default="5", metavar="N", help="fixed variants per template (default: 5)"
    )
    export.add_argument("--cards-dir", type=Path, help="default: CARDS_DIR or cards/")
    backup_cmd = commands.add_parser(
        "backup", help="copy the SQLite database to a file, consistent while servers run"
    )
    backup_cmd.add_argument("dest", type=Path, metavar="DEST", help="a file, or a folder")
    backup_cmd.add_argument("--force", action="store_true", help="replace DEST if it exists")
    backup_cmd.add_argument("--database-url", help="default: DATABASE_URL or SQLite in data/")
    restore_cmd = commands.add_parser(
        "restore", help="copy a backup (at the latest migration) into the SQLite database"
    )
    restore_cmd.add_argument("src", type=Path, metavar="SRC", help="a file made by backup")
    restore_cmd.add_argument(
        "--force", action="store_true", help="replace a database that holds learners or answers"
    )
    restore_cmd.add_argument("--database-url", help="default: DATABASE_URL or SQLite in data/")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        settings = get_settings()
    except ValueError as exc:  # pydantic's ValidationError is a ValueError
        print(f"error: invalid settings: {exc}", file=sys.stderr)
        return 1
    try:
        if args.command == "migrate":
            url = args.database_url or settings.database_url
            migrate(url, args.revision)
            print(f"database at {_safe_url(url)} is at revision {args.revision}")
        elif args.command == "create-user":
            password = sys.stdin.readline().rstrip("\r\n")
            if not password:
                raise CliError("no password on standard input")
            url = args.database_url or settings.database_url
            print(create_user(url, args.email, password, args.role))
        elif args.command == "check-cards":
            print(check_cards(args.cards_dir or settings.cards_dir, args.report))
        elif args.command == "export-card":
            url = args.database_url or settings.database_url
            print(export_card(url, args.card, args.out))
        elif args.command == "export-questions":
            print(
                export_questions(
                    args.cards_dir or settings.cards_dir,
                    args.card,
                    args.export_format,
                    args.out,
                    args.lang,
                    args.variants,
                )
            )
        elif args.command == "backup":
            print(backup(args.database_url or settings.database_url, args.dest, args.force))
        elif args.command == "restore":
            print(restore(args.database_url or settings.database_url, args.src, args.force))
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _safe_url(url: str) -> str:
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


if __name__ == "__main__":
    sys.exit(main())
