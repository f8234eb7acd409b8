"""Command line: ``migrate``, ``check-cards``, ``create-user``, ``backup``, ``restore`` and the
exports (``python -m app.cli --help``), one module per group of commands:
:mod:`app.cli.migrations`, :mod:`app.cli.cards`, :mod:`app.cli.accounts`, :mod:`app.cli.backups`;
:mod:`app.cli.commands` reads the command line and runs them.

Errors are printed as one message on stderr with exit status 1 (2 for bad usage), no traceback.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.cli.commands import main
    from app.cli.migrations import MIGRATIONS_DIR, alembic_config, migrate

__all__ = ["MIGRATIONS_DIR", "alembic_config", "main", "migrate"]

# Imported when first asked for (PEP 562), not with the package: ``python -m app.cli`` imports the
# package before ``__main__``, which answers Ctrl-C during the commands' imports with one line.
_HOMES = {
    "main": "app.cli.commands",
    "MIGRATIONS_DIR": "app.cli.migrations",
    "alembic_config": "app.cli.migrations",
    "migrate": "app.cli.migrations",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
