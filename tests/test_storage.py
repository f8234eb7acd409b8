"""Storage: SQLite connection settings, BEGIN IMMEDIATE, stored attempts, idempotency under races."""

from __future__ import annotations

import threading
import uuid

import pytest
from conftest import CARD_ID, TEST_SECRET
from sqlalchemy import event, func, select, text

from app.auth.service import APP, LearnerRef, create_app_learner, hash_secret, learner_for_token
from app.batch import ByKeys
from app.db import make_engine, make_sessionmaker, write_transaction
from app.domain.catalog import Catalog
from app.domain.generation import generate_for_point
from app.models import Attempt, Learner, LearnerToken, ReviewItem
from app.practice import storing
from app.practice.answers import Context, answer_question, new_writer
from app.practice.questions import QuestionSigner
from app.practice.writer import WRITE_TRIES

SIGNER = QuestionSigner(TEST_SECRET, max_age_s=3600)
POINT = "optimizer-memory"


def token_for(card, point: str, seed: int) -> str:
    return SIGNER.sign(generate_for_point(card, point, seed).id)


def new_learner(sessions) -> LearnerRef:
    """An app learner, as the bearer lookup gives it (answers need a stored learner now)."""
    with sessions() as db:
        learner, _token = create_app_learner(db=db)
    return learner


@pytest.fixture
def engine(db_url):
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def sessions(engine):
    return make_sessionmaker(engine)


WRITERS: dict[object, object] = {}


def writer_for(sessions):
    """One answer writer per database, as an app has."""
    if sessions not in WRITERS:
        WRITERS[sessions] = new_writer(sessions)
    return WRITERS[sessions]


def submit(sessions, cards, learner, token, choice_id, key):
    ctx = Context(catalog=Catalog(cards.values()), signer=SIGNER, seed_secret=b"s" * 32)
    with sessions() as db:
        outcome = answer_question(
            db=db,
            writer=writer_for(sessions),
            ctx=ctx,
            learner=learner,
            token=token,
            choice_id=choice_id,
            client_answer_id=key,
        )
        return outcome.attempt.id, outcome.grade.correct, outcome.grade.correct_choice_id


def count_attempts(sessions) -> int:
    with sessions() as db:
        return db.scalar(select(func.count()).select_from(Attempt))


def test_sqlite_connections_use_wal_busy_timeout_and_synchronous_full(engine):
    with engine.connect() as connection:
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 5000
        assert connection.exec_driver_sql("PRAGMA synchronous").scalar() == 2  # FULL
        assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_write_transactions_begin_immediate_and_reads_begin_deferred(engine, sessions):
    statements: list[str] = []

    @event.listens_for(engine, "before_cursor_execute")
    def record(conn, cursor, statement, *args):
        statements.append(statement)

    with sessions() as db:
        db.execute(text("SELECT 1"))
        with write_transaction(db):
            db.add(Learner(id=uuid.uuid4().hex, kind=APP))
    begins = [s for s in statements if s.startswith("BEGIN")]
    assert begins == ["BEGIN DEFERRED", "BEGIN IMMEDIATE"]


def test_an_attempt_row_records_everything_needed_to_reproduce_it(sessions, cards, card):
    learner = new_learner(sessions)
    variant = generate_for_point(card, POINT, 2024)
    wrong = next(c for c in variant.choices if c.pitfall is not None)
    key = str(uuid.uuid4())
    submit(sessions, cards, learner, token_for(card, POINT, 2024), wrong.id, key)

    with sessions() as db:
        row = db.scalars(select(Attempt)).one()
        item = db.scalars(select(ReviewItem)).one()
    assert row.learner_id == learner.id
    assert (row.card_id, row.card_version, row.point) == (CARD_ID, card.version, POINT)
    assert (row.template_id, row.template_version, row.seed) == (
        variant.id.template_id,
        variant.id.template_version,
        2024,
    )
    assert row.first_answer is True and row.practice_session_id is None
    assert (item.learner_id, item.point, item.template_id) == (learner.id, POINT, row.template_id)
    assert row.params == variant.params
    assert [c["id"] for c in row.choices] == [c.id for c in variant.choices]
    assert [c["text"]["en"] for c in row.choices] == [c.text.en for c in variant.choices]
    assert [c["pitfall_id"] for c in row.choices] == [c.pitfall_id for c in variant.choices]
    assert [c["value"] for c in row.choices] == [c.value for c in variant.choices]
    assert row.choice_id == wrong.id and row.correct is False
    assert row.correct_choice_id == variant.correct_choice_id
    assert row.pitfall_id == wrong.pitfall.id
    assert row.client_answer_id == key
    assert row.created_at is not None


@pytest.mark.parametrize("misses", [1, WRITE_TRIES + 1])
def test_a_lost_insert_race_returns_the_stored_result(sessions, cards, card, monkeypatch, misses):
    """The IntegrityError path: the row appears between the writer's read and its insert (the
    read misses it ``misses`` times): the batch is rolled back and tried again (and at last
    written answer by answer, each once more in its savepoint), and replays."""
    learner = new_learner(sessions)
    token, key = token_for(card, POINT, 9), str(uuid.uuid4())
    choice = generate_for_point(card, POINT, 9).correct_choice_id
    first = submit(sessions, cards, learner, token, choice, key)

    real = storing._STORED
    missing = iter(range(misses))

    class Racy:
        def read(self, dialect, keys):  # no read: none found, as before the other's commit
            return None if next(missing, None) is not None else real.read(dialect, keys)

    monkeypatch.setattr(storing, "_STORED", Racy())
    assert submit(sessions, cards, learner, token, choice, key) == first
    assert next(missing, None) is None  # every miss was taken
    assert count_attempts(sessions) == 1


def test_concurrent_duplicates_store_one_attempt_sqlite(sessions, cards, card):
    run_concurrent_duplicates(sessions, cards, card)


@pytest.mark.postgres
def test_concurrent_duplicates_store_one_attempt_postgres(pg_url, cards, card):
    from app.cli import migrate

    migrate(pg_url)
    engine = make_engine(pg_url, pool_size=10)
    try:
        run_concurrent_duplicates(make_sessionmaker(engine), cards, card)
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_keeps_its_pool_of_connections_under_load_above_it(tmp_path, pg_url, cards):
    """Sixteen threads at once against the app's pool of four: they wait their turn on the four
    connections it keeps, and the server never sees a fifth (an overflow connection would be
    opened and closed again and again, each a new server process)."""
    from conftest import make_settings

    from app.cli import migrate
    from app.main import create_app

    migrate(pg_url)
    app = create_app(make_settings(tmp_path, pg_url, db_pool_size=4), cards=cards)
    engine, sessions = app.state.engine, app.state.sessionmaker
    opened: list[int] = []
    event.listen(engine, "connect", lambda *_: opened.append(1))
    most_seen, errors = [0], []

    def work() -> None:
        try:
            for _ in range(10):
                with sessions() as db:
                    seen = db.scalar(
                        text(
                            "SELECT count(*) FROM pg_stat_activity "
                            "WHERE datname = current_database() AND pid <> pg_backend_pid() "
                            "AND backend_type = 'client backend'"
                        )
                    )
                    most_seen[0] = max(most_seen[0], int(seen) + 1)
                    db.execute(text("SELECT pg_sleep(0.005)"))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(16)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        assert len(opened) <= 4  # the pool's own, opened once
        assert most_seen[0] <= 4  # connections of this database the server had at once
        assert engine.pool.size() == 4
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_lookups_read_outside_a_transaction_and_give_back_a_transactional_connection(
    tmp_path, pg_url, cards
):
    """A bearer token's or a browser session's lookup reads in autocommit (no BEGIN and COMMIT
    round trips: the server holds no transaction open for it), and the pool's connection it
    used, given back, runs the next session's work in a transaction again: a write rolled back
    is not stored."""
    from conftest import make_settings
    from psycopg.pq import TransactionStatus

    from app.cli import migrate
    from app.main import create_app

    migrate(pg_url)
    app = create_app(make_settings(tmp_path, pg_url, db_pool_size=1), cards=cards)
    sessions, lookups = app.state.sessionmaker, app.state.lookups
    try:
        with sessions() as db:
            learner, token = create_app_learner(db=db)

        def status(db) -> TransactionStatus:
            return db.connection().connection.driver_connection.info.transaction_status

        with lookups() as db:
            found = learner_for_token(db=db, token=token)
            assert found is not None and found.id == learner.id
            db.execute(select(Learner.id).where(Learner.id == learner.id))
            assert status(db) is TransactionStatus.IDLE  # no transaction was begun
        with sessions() as db:  # the one connection of the pool, given back
            db.execute(select(Learner.id).where(Learner.id == learner.id))
            assert status(db) is TransactionStatus.INTRANS
            db.execute(Learner.__table__.update().values(time_zone="Asia/Tokyo"))
            db.rollback()
        with sessions() as db:
            assert db.scalar(select(Learner.time_zone).where(Learner.id == learner.id)) is None
    finally:
        app.state.engine.dispose()


def run_concurrent_duplicates(sessions, cards, card, threads: int = 8) -> None:
    learner = new_learner(sessions)
    token, key = token_for(card, POINT, 5), str(uuid.uuid4())
    choice = generate_for_point(card, POINT, 5).choices[0].id
    barrier = threading.Barrier(threads)
    results, errors = [], []

    def worker():
        try:
            barrier.wait()
            results.append(submit(sessions, cards, learner, token, choice, key))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(timeout=60)
    assert errors == []
    assert len(results) == threads and len(set(results)) == 1
    assert count_attempts(sessions) == 1
    with sessions() as db:  # and one review rating
        assert db.scalar(select(func.count()).select_from(ReviewItem)) == 1


def test_the_same_client_answer_id_with_another_choice_replays_the_first(sessions, cards, card):
    learner = new_learner(sessions)
    token, key = token_for(card, POINT, 3), str(uuid.uuid4())
    ids = [c.id for c in generate_for_point(card, POINT, 3).choices]
    first = submit(sessions, cards, learner, token, ids[0], key)
    assert submit(sessions, cards, learner, token, ids[1], key) == first
    assert count_attempts(sessions) == 1


def test_learner_tokens_are_stored_hashed_and_resolve_to_their_learner(sessions):
    with sessions() as db:
        learner, token = create_app_learner(db=db)
    with sessions() as db:
        stored = db.scalars(select(LearnerToken)).one()
        assert stored.token_hash == hash_secret(token) and token not in stored.token_hash
        found = learner_for_token(db=db, token=token)
        assert found is not None and (found.id, found.kind) == (learner.id, learner.kind)
        assert learner_for_token(db=db, token=token + "x") is None


@pytest.mark.postgres
def test_the_api_flow_runs_on_postgres(pg_url, tmp_path, cards, card):
    from conftest import make_settings
    from fastapi.testclient import TestClient

    from app.cli import migrate
    from app.main import create_app

    migrate(pg_url)
    app = create_app(make_settings(tmp_path, pg_url), cards=cards)
    with TestClient(app) as client:
        auth = {"Authorization": f"Bearer {client.post('/api/v1/learners').json()['access_token']}"}
        body = client.get(f"/api/v1/cards/{CARD_ID}/points/1/question", params={"seed": 11}).json()
        wrong = next(
            c for c in generate_for_point(card, POINT, 11).choices if c.pitfall is not None
        )
        request = {"token": body["token"], "choice_id": wrong.id, "client_answer_id": "pg-answer-1"}
        first = client.post("/api/v1/answers", json=request, headers=auth)
        second = client.post("/api/v1/answers", json=request, headers=auth)
        assert first.status_code == 200
        assert {**first.json(), "replayed": True} == second.json()
        mistakes = client.get("/api/v1/me/mistakes", headers=auth).json()["items"]
        assert [m["pitfall"]["id"] for m in mistakes] == [wrong.pitfall.id]
        # Sign-up, login and the review schedule run on PostgreSQL too.
        client.post(
            "/api/v1/auth/register", json={"email": "pg@example.com", "password": "a good password"}
        )
        login = client.post(
            "/api/v1/auth/token",
            json={"email": "pg@example.com", "password": "a good password", "device_name": "ci"},
        )
        assert login.status_code == 200
        assert client.get("/api/v1/me/review/due", headers=auth).status_code == 200
        with app.state.sessionmaker() as db:
            assert db.scalar(select(func.count()).select_from(Attempt)) == 1


def test_writers_of_several_processes_take_turns_on_one_sqlite_file(tmp_path):
    """The group-commit writers of the workers sharing a SQLite file take turns through a lock
    file (a waiter is woken the moment the holder lets go, not after SQLite's busy sleeps); an
    engine whose lock file cannot be made still writes."""
    import threading
    import time

    from sqlalchemy import create_engine

    from app.practice.writer import WriterTurn

    url = f"sqlite:///{tmp_path / 'shared.db'}"
    first, second = WriterTurn(create_engine(url)), WriterTurn(create_engine(url))
    order: list[str] = []

    def write_second() -> None:
        with second():
            order.append("second")

    with first():
        waiting = threading.Thread(target=write_second)
        waiting.start()
        time.sleep(0.2)
        assert order == []  # the other writer waits for its turn
        order.append("first done")
    waiting.join(timeout=5)
    assert order == ["first done", "second"]
    assert (tmp_path / "shared.db.writers").exists()
    unwritable = WriterTurn(create_engine(f"sqlite:///{tmp_path / 'missing' / 'x.db'}"))
    with unwritable():  # no folder for the lock file: SQLite's own lock only
        pass
    with WriterTurn(create_engine("sqlite://"))():  # in memory: nothing to share
        pass


# --- the writer's Core statements ------------------------------------------------------------


def _stored_as_given(sessions, cards, card) -> None:
    """An answer stored by the writer's Core statements (ids from the database) reads back
    through the ORM as it was given, and the ORM's own inserts before and after it take ids
    around it."""
    from datetime import UTC, datetime, timedelta

    from app.models import ReviewLog

    learner = new_learner(sessions)
    variant = generate_for_point(card, POINT, 77)
    wrong = next(c for c in variant.choices if c.pitfall is not None)
    # After the token is issued (an answer is kept between its question's issue and its
    # arrival), with microseconds that must survive the round trip.
    base = datetime.now(UTC).replace(microsecond=0) + timedelta(hours=1)
    stored_at = base + timedelta(seconds=6, microseconds=890123)
    answered_at = base + timedelta(microseconds=5)

    def orm_attempt(key: str) -> int:
        with sessions() as db, write_transaction(db):
            row = Attempt(
                learner_id=learner.id, card_id=CARD_ID, card_version=1, point=POINT,
                template_id="t", template_version=1, seed=1, params={}, choices=[],
                choice_id="a", correct_choice_id="a", correct=True, client_answer_id=key,
            )  # fmt: skip
            db.add(row)
            db.flush()
            return row.id

    before = orm_attempt("orm-before")
    ctx = Context(catalog=Catalog(cards.values()), signer=SIGNER, seed_secret=b"s" * 32)
    with sessions() as db:
        outcome = answer_question(
            db=db, writer=writer_for(sessions), ctx=ctx, learner=learner,
            token=token_for(card, POINT, 77),
            choice_id=wrong.id, client_answer_id="driver", duration_ms=4321,
            answered_at=answered_at, now=stored_at,
        )  # fmt: skip
    after = orm_attempt("orm-after")
    assert before < outcome.attempt.id < after

    def utc(value: datetime) -> datetime:
        return value if value.tzinfo else value.replace(tzinfo=UTC)

    with sessions() as db:
        row = db.scalars(select(Attempt).where(Attempt.client_answer_id == "driver")).one()
        item = db.scalars(select(ReviewItem)).one()
        log = db.scalars(select(ReviewLog)).one()
    assert row.id == outcome.attempt.id
    assert utc(row.created_at) == stored_at and utc(row.answered_at) == answered_at
    assert row.params == variant.params and row.duration_ms == 4321
    assert row.correct is False and row.first_answer is True and row.dismissed is False
    assert [c["text"]["zh"] for c in row.choices] == [c.text.zh for c in variant.choices]
    assert [c["value"] for c in row.choices] == [c.value for c in variant.choices]
    assert row.pitfall_id == wrong.pitfall.id and row.practice_session_id is None
    # rated when it was given (an offline answer's answered_at), not when it arrived
    assert (item.reviews, item.lapses, utc(item.last_review_at)) == (1, 1, answered_at)
    assert isinstance(item.state, dict) and item.state
    assert utc(item.due_at) == answered_at + timedelta(minutes=2)  # a wrong answer's step
    assert (log.review_item_id, log.attempt_id) == (item.id, row.id)
    assert utc(log.reviewed_at) == answered_at and log.due_before is None
    assert utc(log.due_after) == utc(item.due_at)


def test_core_statements_store_what_the_orm_reads_sqlite(sessions, cards, card):
    _stored_as_given(sessions, cards, card)


@pytest.mark.postgres
def test_core_statements_store_what_the_orm_reads_postgres(pg_url, cards, card):
    from app.cli import migrate

    migrate(pg_url)
    engine = make_engine(pg_url)
    try:
        _stored_as_given(make_sessionmaker(engine), cards, card)
    finally:
        engine.dispose()


# --- PostgreSQL: a lost insert race ----------------------------------------------------------


@pytest.mark.postgres
@pytest.mark.parametrize("misses", [1, WRITE_TRIES + 1])
def test_a_lost_insert_race_returns_the_stored_result_postgres(
    pg_url, cards, card, monkeypatch, misses
):
    """On PostgreSQL the unique violation aborts the transaction (or the answer's savepoint):
    the answer path still replays the stored result."""
    from app.cli import migrate

    migrate(pg_url)
    engine = make_engine(pg_url)
    try:
        sessions = make_sessionmaker(engine)
        test_a_lost_insert_race_returns_the_stored_result(
            sessions, cards, card, monkeypatch, misses
        )
    finally:
        engine.dispose()


# --- many keys in one read (app.batch.ByKeys) -----------------------------------------------------

NASTY = [
    "plain",
    "it's",
    'a "quote"',
    "back\\slash",
    "{brace,comma}",
    "NULL",
    "汉字 ✓",
    "; DROP TABLE x; --",
    "$1 %s %(k0_0)s :k1_0",
]


def _reads_by_keys(engine) -> None:
    from sqlalchemy import Column, Integer, MetaData, Table, Text, insert

    probe = Table(
        "keys_probe", MetaData(), Column("id", Integer, primary_key=True), Column("a", Text),
        Column("b", Integer),
    )  # fmt: skip
    probe.drop(engine, checkfirst=True)
    probe.create(engine)
    with engine.begin() as connection:
        connection.execute(
            insert(probe), [{"id": i, "a": note, "b": i % 3} for i, note in enumerate(NASTY)]
        )
    by_keys = ByKeys(
        (probe.c.a, probe.c.b), lambda where: select(probe.c.id).where(where).order_by(probe.c.id)
    )
    with engine.connect() as connection:
        # Golden values from the inserted rows themselves, not from the code under test.
        for count in range(1, len(NASTY) + 1):
            keys = [(note, i % 3) for i, note in enumerate(NASTY[:count])]
            assert [row.id for row in by_keys.rows(connection, keys)] == list(range(count))
        wrong = [(note, i % 3 + 1) for i, note in enumerate(NASTY)] + [("absent", 0)]
        assert by_keys.rows(connection, wrong) == []
        assert by_keys.rows(connection, [(NASTY[1], 1)] * 3) == [(1,)]
        assert by_keys.rows(connection, []) == []
    probe.drop(engine)


def test_many_keys_are_read_at_once_sqlite(engine):
    _reads_by_keys(engine)


@pytest.mark.postgres
def test_many_keys_are_read_at_once_postgres(pg_url):
    """Quotes, backslashes, braces, placeholders and SQL in the values reach PostgreSQL as
    values."""
    engine = make_engine(pg_url)
    try:
        _reads_by_keys(engine)
    finally:
        engine.dispose()
