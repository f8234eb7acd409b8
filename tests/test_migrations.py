"""Migrations: empty database to head and back, on SQLite and PostgreSQL, with no drift from the models."""

from __future__ import annotations

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from conftest import make_settings
from fastapi.testclient import TestClient
from sqlalchemy import inspect

from app.cli import alembic_config, migrate
from app.db import Base, make_engine
from app.main import create_app
from app.observability.health import StartupRefused

TABLES = {"learners", "learner_tokens", "attempts"}


def head_revision(url: str) -> str:
    heads = ScriptDirectory.from_config(alembic_config(url)).get_heads()
    assert len(heads) == 1, f"the migrations have several heads: {heads}"
    return heads[0]


def check_upgrade_downgrade_and_drift(url: str) -> None:
    migrate(url)
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            assert MigrationContext.configure(connection).get_current_revision() == head_revision(
                url
            )
            assert TABLES <= set(inspect(connection).get_table_names())
            diff = compare_metadata(
                MigrationContext.configure(connection, opts={"compare_type": True}), Base.metadata
            )
            assert diff == [], f"models and migrations differ: {diff}"
            unique = inspect(connection).get_unique_constraints("attempts")
            assert {"uq_attempts_client_answer_id"} <= {u["name"] for u in unique}

        command.downgrade(alembic_config(url), "base")
        with engine.connect() as connection:
            assert not TABLES & set(inspect(connection).get_table_names())
        migrate(url)  # and up again
        with engine.connect() as connection:
            assert TABLES <= set(inspect(connection).get_table_names())
    finally:
        engine.dispose()


def test_sqlite_empty_database_to_head_and_back(tmp_path):
    check_upgrade_downgrade_and_drift(f"sqlite:///{tmp_path / 'fresh.db'}")


@pytest.mark.postgres
def test_postgres_empty_database_to_head_and_back(pg_url):
    check_upgrade_downgrade_and_drift(pg_url)


def test_migrating_twice_is_a_no_op(tmp_path):
    url = f"sqlite:///{tmp_path / 'twice.db'}"
    migrate(url)
    migrate(url)
    engine = make_engine(url)
    with engine.connect() as connection:
        assert MigrationContext.configure(connection).get_current_revision() == head_revision(url)
    engine.dispose()


def test_the_metadata_names_constraints_by_convention():
    attempts = Base.metadata.tables["attempts"]
    names = {c.name for c in attempts.constraints}
    assert {
        "pk_attempts",
        "uq_attempts_client_answer_id",
        "fk_attempts_learner_id_learners",
    } <= names


def test_the_app_refuses_to_start_when_the_database_is_not_migrated(tmp_path, cards, caplog):
    # It used to start and only log an error; now the start-up gate refuses with one line.
    settings = make_settings(tmp_path, f"sqlite:///{tmp_path / 'empty.db'}")
    with (
        caplog.at_level("ERROR", logger="app.observability"),
        pytest.raises(StartupRefused, match="app.cli migrate") as refused,
        TestClient(create_app(settings, cards=cards)),
    ):
        pass
    assert "\n" not in str(refused.value)
    assert "refusing to start" in caplog.text and "app.cli migrate" in caplog.text


def test_the_app_is_quiet_on_a_migrated_database(settings, cards, caplog):
    with (
        caplog.at_level("WARNING", logger="app.main"),
        TestClient(create_app(settings, cards=cards)),
    ):
        pass
    assert caplog.text == ""
