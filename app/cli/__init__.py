"""Command line: ``migrate``, ``check-cards``, ``create-user``, ``backup``, ``restore`` and the
exports (``python -m app.cli --help``), one module per group of commands:
:mod:`app.cli.migrations`, :mod:`app.cli.cards`, :mod:`app.cli.accounts`, :mod:`app.cli.backups`;
:mod:`app.cli.commands` reads the command line and runs them.

Errors are printed as one message on stderr with exit status 1 (2 for bad usage), no traceback.
"""

from app.cli.commands import main
from app.cli.migrations import MIGRATIONS_DIR, alembic_config, migrate

__all__ = ["MIGRATIONS_DIR", "alembic_config", "main", "migrate"]
