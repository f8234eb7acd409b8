"""What every command shares: its one-line failure, and how it names an exception or a URL."""

from __future__ import annotations


class CliError(Exception):
    """A failure worth one line on stderr."""


def first_line(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def safe_url(url: str) -> str:
    """A database URL without its password, to print."""
    from sqlalchemy.engine import make_url

    return make_url(url).render_as_string(hide_password=True)


def database_error(action: str, exc: BaseException) -> CliError:
    """A command's database failure as one line; the hint to migrate only where it may help,
    not for a server that cannot be reached."""
    from app.db import failure_kind

    hint = "" if failure_kind(exc) == "unreachable" else " (is the database migrated?)"
    return CliError(f"{action}: {first_line(exc)}{hint}")
