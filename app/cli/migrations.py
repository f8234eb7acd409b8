"""``migrate``: the database upgraded to the latest migration (Alembic)."""

from __future__ import annotations

from typing import Any

from app.cli.errors import CliError, first_line
from app.config import ROOT

ALEMBIC_INI = ROOT / "alembic.ini"
MIGRATIONS_DIR = ROOT / "migrations"


def alembic_config(database_url: str, *, configure_logging: bool = True) -> object:
    """An Alembic config for the project's migrations, pointed at ``database_url``."""
    from alembic.config import Config

    config = Config(str(ALEMBIC_INI)) if ALEMBIC_INI.is_file() else Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    # ConfigParser interpolation: a literal % in a URL (an encoded password) must be doubled.
    config.set_main_option("sqlalchemy.url", database_url.replace("%", "%%"))
    config.attributes["configure_logging"] = configure_logging
    return config


def migrate(database_url: str, revision: str = "head") -> str:
    """Upgrade the database to ``revision`` (creating the folder of a SQLite file); the revision
    it is at now, as the database records it."""
    from alembic import command
    from alembic.util import CommandError
    from sqlalchemy.exc import ArgumentError, SQLAlchemyError

    from app.db import ensure_sqlite_folder

    try:
        ensure_sqlite_folder(database_url)
        config: Any = alembic_config(database_url)
        command.upgrade(config, revision)
        # The upgrade's own reading (migrations/env.py), under its lock: a second connection
        # opened now could wait on another server's migration and fail.
        return ", ".join(config.attributes.get("heads", ())) or "none"
    except CommandError as exc:
        raise CliError(f"migration failed: {exc}") from None
    except ArgumentError as exc:
        raise CliError(f"invalid DATABASE_URL {database_url!r}: {exc}") from None
    except SQLAlchemyError as exc:
        raise CliError(f"migration failed: {first_line(exc)}") from None
    except ModuleNotFoundError as exc:
        raise CliError(f"database driver not installed: {exc.name}") from None
    except OSError as exc:
        raise CliError(f"migration failed: {exc}") from None
