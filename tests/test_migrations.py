"""Migrations: empty database to head and back, on SQLite and PostgreSQL, with no drift from the models."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from conftest import make_settings
from fastapi.testclient import TestClient
from sqlalchemy import MetaData, Table, insert, inspect, select, text

from app.cli import alembic_config, migrate
from app.db import Base, DatabaseTimeouts, make_engine
from app.main import create_app
from app.observability.health import StartupRefused

TABLES = {"learners", "learner_tokens", "attempts"}
ROOT = Path(__file__).resolve().parents[1]
MIGRATION_LOCK = 0x696E667261  # the advisory lock migrations/env.py takes on PostgreSQL


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


# --- a database of the first release, upgraded: every row kept ------------------------------

FIRST, REVIEWS = "dd07bc22cb1c", "5b1e0c9a7d42"


def check_history_survives_every_migration(url: str) -> None:
    """A learner's token, attempt and rating stored by the first releases are all there at the
    head. (On SQLite a migration that rebuilds a table drops the old one; with foreign keys
    enforced that drop deleted every attempt and token of the rebuilt ``learners``, and detached
    the ratings of the rebuilt ``attempts``.)"""
    config = alembic_config(url)
    command.upgrade(config, FIRST)
    engine = make_engine(url)
    at = datetime(2026, 11, 29, 9, 0)
    try:
        with engine.begin() as connection:
            connection.execute(
                insert(_table(connection, "learners")),
                [{"id": "learner-1", "kind": "anonymous", "created_at": at}],
            )
            connection.execute(
                insert(_table(connection, "learner_tokens")),
                [{"learner_id": "learner-1", "token_hash": "h" * 64, "created_at": at}],
            )
            first = {
                k: v
                for k, v in _attempt("none", 0).items()
                if k not in ("first_answer", "practice_session_id", "position", "dismissed")
            }
            connection.execute(insert(_table(connection, "attempts")), [{**first, "point": 1}])
        command.upgrade(config, REVIEWS)
        with engine.begin() as connection:
            item = connection.execute(
                insert(_table(connection, "review_items")).returning(
                    _table(connection, "review_items").c.id
                ),
                [{"learner_id": "learner-1", "card_id": "zero-memory-offload",
                  "point": "optimizer-memory", "template_id": "p1-gb-vs-gib", "state": {},
                  "due_at": at, "reviews": 1, "lapses": 0}],
            ).scalar_one()  # fmt: skip
            attempt_id = connection.scalar(select(_table(connection, "attempts").c.id))
            connection.execute(
                insert(_table(connection, "review_logs")),
                [{"review_item_id": item, "attempt_id": attempt_id, "rating": 3,
                  "reviewed_at": at, "due_after": at}],
            )  # fmt: skip
        command.upgrade(config, "head")
        with engine.connect() as connection:
            tokens = _table(connection, "learner_tokens")
            attempts = _table(connection, "attempts")
            logs = _table(connection, "review_logs")
            assert connection.scalars(select(tokens.c.learner_id)).all() == ["learner-1"]
            assert connection.scalars(select(attempts.c.client_answer_id)).all() == ["answer-none"]
            assert connection.scalars(select(logs.c.attempt_id)).all() == [attempt_id]
    finally:
        engine.dispose()


def test_sqlite_first_release_history_survives_every_migration(tmp_path):
    check_history_survives_every_migration(f"sqlite:///{tmp_path / 'first.db'}")


@pytest.mark.postgres
def test_postgres_first_release_history_survives_every_migration(pg_url):
    check_history_survives_every_migration(pg_url)


def migrate_at_once(url: str, count: int = 3) -> list[subprocess.CompletedProcess[str]]:
    """``count`` ``python -m app.cli migrate`` processes started together, as several servers
    starting at once each run it."""
    env = {**os.environ, "DATABASE_URL": url}
    running = [
        subprocess.Popen(
            [sys.executable, "-m", "app.cli", "migrate"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for _ in range(count)
    ]
    return [
        subprocess.CompletedProcess(
            p.args, p.wait(timeout=120), p.stdout.read() if p.stdout else ""
        )
        for p in running
    ]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_servers_migrating_at_once_all_succeed_and_one_upgrades(backend, tmp_path, request):
    url = (
        f"sqlite:///{tmp_path / 'app.db'}"
        if backend == "sqlite"
        else request.getfixturevalue("pg_url")
    )
    done = migrate_at_once(url)
    assert [d.returncode for d in done] == [0, 0, 0], [d.stdout[-500:] for d in done]
    upgrades = [d.stdout.count("Running upgrade") for d in done]
    assert sorted(upgrades) == [0, 0, len(list_revisions(url))]  # one upgraded, two waited
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            current = MigrationContext.configure(connection).get_current_revision()
        assert current == head_revision(url)
    finally:
        engine.dispose()


def test_a_migrate_waiting_for_another_has_no_request_time_limit(pg_url):
    """A second ``migrate`` waits for the first however long its migrations take: held here
    past the 10 s a request's statement may take on PostgreSQL (DatabaseTimeouts)."""
    holder = make_engine(pg_url)
    try:
        with holder.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": MIGRATION_LOCK})
            started = time.monotonic()
            waiting = subprocess.Popen(
                [sys.executable, "-m", "app.cli", "migrate"],
                cwd=ROOT,
                env={**os.environ, "DATABASE_URL": pg_url},
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            time.sleep(DatabaseTimeouts().statement_s + 1)
            assert waiting.poll() is None  # still waiting for the lock, not refused
            connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": MIGRATION_LOCK})
            connection.commit()
        output, _ = waiting.communicate(timeout=120)
        assert waiting.returncode == 0, output[-800:]
        assert time.monotonic() - started > DatabaseTimeouts().statement_s
        assert output.count("Running upgrade") == len(list_revisions(pg_url))
    finally:
        holder.dispose()


def list_revisions(url: str) -> list[str]:
    return [s.revision for s in ScriptDirectory.from_config(alembic_config(url)).walk_revisions()]


def test_a_migration_that_would_break_a_reference_commits_nothing(tmp_path):
    """The references are checked before the migrations commit (SQLite, where they are not
    enforced while tables are rebuilt): a broken one stops the upgrade and leaves the database
    at its revision."""
    url = f"sqlite:///{tmp_path / 'broken.db'}"
    config = alembic_config(url)
    command.upgrade(config, FIRST)
    engine = make_engine(url, sqlite_foreign_keys=False)
    try:
        with engine.begin() as connection:  # an attempt of a learner that does not exist
            first = {
                k: v
                for k, v in _attempt("none", 0).items()
                if k not in ("first_answer", "practice_session_id", "position", "dismissed")
            }
            connection.execute(insert(_table(connection, "attempts")), [{**first, "point": 1}])
        with pytest.raises(Exception, match="pointing at rows that do not exist"):
            command.upgrade(config, "head")
        with engine.connect() as connection:
            assert MigrationContext.configure(connection).get_current_revision() == FIRST
    finally:
        engine.dispose()


# --- deck sessions (d8a2f6c4e1b9): a practice session may have no card -----------------------

BEFORE_DECK, DECK = "c0d4a7e2b9f1", "d8a2f6c4e1b9"


def _table(connection, name: str) -> Table:
    return Table(name, MetaData(), autoload_with=connection)


def _attempt(session_id: str, position: int) -> dict:
    return {
        "learner_id": "learner-1",
        "card_id": "zero-memory-offload",
        "card_version": 1,
        "point": "optimizer-memory",
        "template_id": "p1-gb-vs-gib",
        "template_version": 1,
        "seed": 5,
        "params": {"psi": "175000000000"},
        "choices": [],
        "choice_id": "a",
        "correct_choice_id": "a",
        "correct": True,
        "client_answer_id": f"answer-{session_id}",
        "first_answer": True,
        "practice_session_id": session_id,
        "position": position,
        "dismissed": False,
        "created_at": datetime(2026, 12, 5, 9, 0),
    }


def check_deck_sessions_migration(url: str) -> None:
    """Upgrading keeps the sessions stored before (their plans name no card); a session on the
    deck is then stored without a card. Downgrading keeps a deck session's answers, detached
    from it as answers given outside a session, and drops the deck session alone."""
    config = alembic_config(url)
    command.upgrade(config, BEFORE_DECK)
    engine = make_engine(url)
    started = datetime(2026, 12, 5, 8, 0)
    old_plan = [{"point": "optimizer-memory", "template_id": "p1-gb-vs-gib", "template_version": 1}]
    try:
        with engine.begin() as connection:
            connection.execute(
                insert(_table(connection, "learners")),
                [{"id": "learner-1", "kind": "app", "role": "learner", "created_at": started}],
            )
            connection.execute(
                insert(_table(connection, "practice_sessions")),
                [{"id": "old", "learner_id": "learner-1", "card_id": "zero-memory-offload",
                  "mode": "card", "plan": old_plan, "started_at": started}],
            )  # fmt: skip
            connection.execute(insert(_table(connection, "attempts")), [_attempt("old", 0)])
        command.upgrade(config, DECK)
        with engine.begin() as connection:
            sessions = _table(connection, "practice_sessions")
            assert next(c for c in sessions.columns if c.name == "card_id").nullable
            attempts = _table(connection, "attempts")
            in_session = select(attempts.c.practice_session_id, attempts.c.position)
            assert [tuple(r) for r in connection.execute(in_session)] == [("old", 0)]
            deck_plan = [{"card_id": "megatron-3d-pipeline", **old_plan[0]}]
            connection.execute(
                insert(sessions),
                [{"id": "deck", "learner_id": "learner-1", "card_id": None, "mode": "review",
                  "plan": deck_plan, "started_at": started}],
            )  # fmt: skip
            connection.execute(insert(_table(connection, "attempts")), [_attempt("deck", 0)])
            rows = connection.execute(
                select(sessions.c.id, sessions.c.card_id, sessions.c.plan).order_by(sessions.c.id)
            ).all()
            assert [tuple(r) for r in rows] == [
                ("deck", None, deck_plan),
                ("old", "zero-memory-offload", old_plan),
            ]
        command.downgrade(config, BEFORE_DECK)
        with engine.begin() as connection:
            sessions = _table(connection, "practice_sessions")
            assert not next(c for c in sessions.columns if c.name == "card_id").nullable
            assert connection.scalars(select(sessions.c.id)).all() == ["old"]
            attempts = _table(connection, "attempts")
            kept = connection.execute(
                select(
                    attempts.c.client_answer_id,
                    attempts.c.practice_session_id,
                    attempts.c.position,
                ).order_by(attempts.c.client_answer_id)
            ).all()
            assert [tuple(r) for r in kept] == [
                ("answer-deck", None, None),
                ("answer-old", "old", 0),
            ]
        command.upgrade(config, "head")
    finally:
        engine.dispose()


def test_sqlite_deck_sessions_migration_keeps_every_answer(tmp_path):
    check_deck_sessions_migration(f"sqlite:///{tmp_path / 'deck.db'}")


@pytest.mark.postgres
def test_postgres_deck_sessions_migration_keeps_every_answer(pg_url):
    check_deck_sessions_migration(pg_url)
