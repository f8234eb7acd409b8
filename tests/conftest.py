"""Fixtures for the service tests: the cards, a migrated database per test, an app and a client.

Every test gets its own SQLite file, copied from a database migrated once per xdist worker, so
tests are independent and cheap. PostgreSQL tests get a fresh database on the server named by
``TEST_POSTGRES_URL`` and are skipped, with the reason, when it is unset.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import uuid
import warnings
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi import FastAPI
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from app.catalog.validated import ValidatedCards
from app.cli import migrate
from app.config import Settings
from app.domain.cards import Card
from app.domain.catalog import load_cards

with warnings.catch_warnings():
    # Starlette 1.x nudges towards httpx2; httpx is what the project installs.
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient

ROOT = Path(__file__).resolve().parents[1]
# The served cards by default; TEST_CARDS_DIR points the service tests at another folder.
CARDS_DIR = Path(os.environ.get("TEST_CARDS_DIR", ROOT / "cards"))
CARD_ID = "zero-memory-offload"
TEST_SECRET = "test-secret-key-0123456789-abcdefghijklmnop"


def one_card_folder(folder: Path, card_id: str = CARD_ID) -> Path:
    """``folder`` made to hold a copy of one card of CARDS_DIR (a test may edit it) and its demo
    results, for tests of start-up and publishing: every start-up validates each card it finds
    over its whole domains, and these tests are about the mechanism, not about every card."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(CARDS_DIR / f"{card_id}.yaml", folder / f"{card_id}.yaml")
    results = CARDS_DIR / "demo-results"
    if results.is_dir():
        shutil.copytree(results, folder / "demo-results", dirs_exist_ok=True)
    return folder


def pytest_configure(config: pytest.Config) -> None:
    """One folder of validation records for the whole run (app.catalog.validated), made by the
    process that starts the run and inherited by the xdist workers it starts and by every server
    process a test starts (VALIDATED_CARDS_DIR). It is set before collection, so the app that
    ``tests/test_api_schema.py`` builds at import time (schemathesis reads the document then)
    validates the shipped cards whole and records them, and the ``cards`` fixture and the servers
    find them: each worker validates them whole once, where collection and the fixture did it
    twice. The folder is new for every run, so a record always comes from a whole validation in
    this run; a card a test changes is another document, validated whole by the server reading
    it."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    folder = tempfile.mkdtemp(prefix="infracards-validated-")
    os.environ["VALIDATED_CARDS_DIR"] = folder
    config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


@pytest.fixture(scope="session")
def validated_cards_dir() -> Path:
    return Path(os.environ["VALIDATED_CARDS_DIR"])


@pytest.fixture(scope="session")
def cards(validated_cards_dir: Path) -> dict[str, Card]:
    return load_cards(CARDS_DIR, ValidatedCards(validated_cards_dir))


@pytest.fixture(scope="session")
def card(cards: dict[str, Card]) -> Card:
    return cards[CARD_ID]


@pytest.fixture(scope="session")
def migrated_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at the latest migration, made once per worker and copied for each test."""
    path = tmp_path_factory.mktemp("template") / "template.db"
    migrate(f"sqlite:///{path}")
    # The engine is gone, so the WAL was checkpointed into the main file; nothing else to copy.
    for suffix in ("-wal", "-shm"):
        assert not Path(f"{path}{suffix}").exists() or Path(f"{path}{suffix}").stat().st_size == 0
    return path


@pytest.fixture
def db_url(tmp_path: Path, migrated_template: Path) -> str:
    path = tmp_path / "infracards.db"
    shutil.copyfile(migrated_template, path)
    return f"sqlite:///{path}"


def make_settings(tmp_path: Path, database_url: str, **overrides: object) -> Settings:
    values: dict[str, object] = {
        "environment": "test",
        "database_url": database_url,
        "data_dir": tmp_path / "data",
        "cards_dir": CARDS_DIR,
        "secret_key": TEST_SECRET,
        # Freezing the heap at each test app's start-up costs a full collection (tests of it
        # turn it on).
        "gc_freeze": False,
        # No fsync at each commit in the apps the tests build in process: what they assert is
        # the same either way (SQLite's WAL never corrupts), and on a disk the whole suite keeps
        # busy an fsync has stalled an answer past the writer's 6 s bound (a 503 "busy" once in
        # a full run). The default, "full", is what the server processes of the durability,
        # SIGKILL and backup tests run with, and test_storage checks the engine's pragma.
        "sqlite_synchronous": "normal",
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


@pytest.fixture
def settings(tmp_path: Path, db_url: str) -> Settings:
    return make_settings(tmp_path, db_url)


@pytest.fixture
def app(settings: Settings, cards: dict[str, Card]) -> FastAPI:
    from app.main import create_app

    return create_app(settings, cards=cards)


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture
def db(app: FastAPI) -> Iterator[Session]:
    """A session on the app's database, for looking at what the requests stored."""
    with app.state.sessionmaker() as db:
        yield db


# --- PostgreSQL -------------------------------------------------------------------------------


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh, empty PostgreSQL database (dropped afterwards) on TEST_POSTGRES_URL's server."""
    server = os.environ.get("TEST_POSTGRES_URL")
    if not server:
        pytest.skip(
            "TEST_POSTGRES_URL is not set (e.g. postgresql+psycopg://postgres@127.0.0.1:5432/test)"
        )
    name = f"infracards_test_{uuid.uuid4().hex[:16]}"
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(server).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


# --- a clock the tests move -------------------------------------------------------------------


class FakeClock:
    """The service's clock for reviews and sessions, moved by the test."""

    def __init__(self, start: datetime) -> None:
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> datetime:
        self.now += timedelta(**delta)
        return self.now


@pytest.fixture
def clock(app: FastAPI) -> FakeClock:
    fake = FakeClock(datetime.now(UTC).replace(microsecond=0))
    app.state.context = dataclasses.replace(app.state.context, clock=fake)
    return fake
