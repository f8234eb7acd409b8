"""``create-user``: an account with a role (the first instructor, an admin)."""

from __future__ import annotations

from app.cli.errors import CliError, database_error


def create_user(database_url: str, email: str, password: str, role: str) -> str:
    """Create an account with a role (the first instructor, an admin); a one-line summary."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.auth.service import register
    from app.db import make_engine, make_sessionmaker
    from app.problems import Problem

    engine = make_engine(database_url)
    try:
        with make_sessionmaker(engine)() as db:
            learner = register(db=db, email=email, password=password, role=role)
    except Problem as exc:
        raise CliError(exc.message) from None
    except SQLAlchemyError as exc:
        raise database_error("cannot create the user", exc) from None
    finally:
        engine.dispose()
    return f"created {learner.role} {learner.email} ({learner.id})"
