"""``create-user``: an account with a role (the first instructor, an admin)."""

from __future__ import annotations

from app.cli.errors import CliError, first_line


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
        raise CliError(
            f"cannot create the user: {first_line(exc)} (is the database migrated?)"
        ) from None
    finally:
        engine.dispose()
    return f"created {learner.role} {learner.email} ({learner.id})"
