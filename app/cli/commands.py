"""The command line read and run: the parser of every command, and ``main``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from app.cli.accounts import create_user
from app.cli.backups import backup, restore
from app.cli.cards import check_cards, export_card, export_questions
from app.cli.errors import CliError, safe_url
from app.cli.migrations import migrate
from app.config import SettingsError, get_settings

# The exit status of a command stopped by Ctrl-C (128 + SIGINT), as shells report it.
INTERRUPTED = 130


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
    export.add_argument("--format", required=True, metavar="apkg|moodle|qti", dest="export_format")
    export.add_argument("--out", required=True, type=Path, help="the file to write")
    export.add_argument("--lang", default="en", metavar="en|zh", help="default: en")
    export.add_argument(
        "--variants", default="5", metavar="N", help="fixed variants per template (default: 5)"
    )
    export.add_argument(
        "--numeric",
        default="fixed",
        metavar="fixed|calculated",
        help="numeric templates in Moodle XML: fixed variants (default) or calculated "
        "multichoice questions where Moodle can compute them",
    )
    export.add_argument("--cards-dir", type=Path, help="default: CARDS_DIR or cards/")
    backup_cmd = commands.add_parser(
        "backup", help="copy the SQLite database to a file, consistent while servers run"
    )
    backup_cmd.add_argument("dest", metavar="DEST", help="a file, or a folder")
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
    except SettingsError as exc:  # one line, naming the variables and never their values
        print(f"error: {exc}", file=sys.stderr)
        return 1
    try:
        if args.command == "migrate":
            url = args.database_url or settings.database_url
            at = migrate(url, args.revision)
            print(f"database at {safe_url(url)} is at revision {at}")
        elif args.command == "create-user":
            password = sys.stdin.readline().rstrip("\r\n")
            if not password:
                raise CliError("no password on standard input")
            url = args.database_url or settings.database_url
            print(create_user(url, args.email, password, args.role))
        elif args.command == "check-cards":
            cards_dir = args.cards_dir or settings.cards_dir
            print(check_cards(cards_dir, args.report, settings.validated_cards_folder))
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
                    args.numeric,
                )
            )
        elif args.command == "backup":
            print(backup(args.database_url or settings.database_url, args.dest, args.force))
        elif args.command == "restore":
            print(restore(args.database_url or settings.database_url, args.src, args.force))
    except CliError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:  # Ctrl-C: one line and the shell's status for SIGINT, no traceback
        print("error: interrupted", file=sys.stderr)
        return INTERRUPTED
    return 0
