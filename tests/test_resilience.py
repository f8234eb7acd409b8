"""When the database is in trouble: 503s with Retry-After, honest /healthz and /readyz, a start-up
that refuses with one line, and the routes that need no database keep answering.

Failure modes: PostgreSQL on a closed port, PostgreSQL black-holed (a local TCP server that
accepts and never answers, and a proxy to the real server that stops answering mid-run), a
read-only SQLite database, a read-only data folder (an injected EROFS: root ignores modes) and a
full disk (an injected ``database or disk is full``). Timeouts are set short so each test takes
seconds.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from conftest import CARD_ID, ROOT, TEST_SECRET, make_settings, one_card_folder
from fastapi.testclient import TestClient
from sqlalchemy import event
from sqlalchemy import exc as sa_exc

from app.auth.cookies import SessionCookie
from app.cli import migrate
from app.db import ConnectGuard, failure_kind
from app.main import create_app
from app.observability import health
from app.observability.health import StartupRefused

API = "/api/v1"
FAST = {
    "db_connect_timeout_s": 2,  # libpq's minimum
    "db_statement_timeout_s": 1.0,
    "db_pool_timeout_s": 1.0,
    "db_retry_after_s": 1,
    "sqlite_busy_timeout_ms": 500,
    "metrics_token": "metrics-token-for-the-tests",
}
# /readyz shows its checks' details only to the metrics token.
METRICS = {"Authorization": "Bearer metrics-token-for-the-tests"}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class BlackHole:
    """A TCP server on 127.0.0.1 that accepts, reads and never answers; or, given ``upstream``,
    a proxy that forwards until :meth:`swallow` is called, then swallows everything."""

    def __init__(self, upstream: tuple[str, int] | None = None) -> None:
        self.upstream = upstream
        self.swallowing = upstream is None
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.sockets: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def swallow(self) -> None:
        self.swallowing = True

    def forward(self) -> None:
        self.swallowing = False

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.sockets.append(client)
            server = None
            if self.upstream is not None and not self.swallowing:
                server = socket.create_connection(self.upstream)
                self.sockets.append(server)
                threading.Thread(target=self._pump, args=(server, client), daemon=True).start()
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket | None) -> None:
        try:
            while data := source.recv(65536):
                if target is not None and not self.swallowing:
                    target.sendall(data)
        except OSError:
            pass

    def close(self) -> None:
        self.closed = True
        for sock in [self.listener, *self.sockets]:
            try:
                sock.close()
            except OSError:
                pass


@pytest.fixture
def black_hole():
    hole = BlackHole()
    yield hole
    hole.close()


def pg_settings(tmp_path, port: int, **overrides):
    url = f"postgresql+psycopg://postgres@127.0.0.1:{port}/test"
    return make_settings(tmp_path, url, **{**FAST, **overrides})


def assert_unavailable(response, reason: str | None = None) -> dict:
    assert response.status_code == 503, response.text
    assert response.headers["retry-after"] == "1"
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["status"] == 503 and body["code"] in ("database_unavailable", "busy"), body
    if reason is not None:
        assert body["reason"] == reason, body
    return body


def assert_unrelated_routes_answer(client: TestClient, limit_s: float = 5.0) -> None:
    """The routes that need no database: health, static files, the API description (generated
    once first: that takes a while on a busy machine, database or not). They answer without
    asking the database for anything (no connection checked out or opened while they run: a
    route that did would wait on a locked or black-holed database) and without hanging (within
    ``limit_s``, generous for a loaded machine: a full collection in a test process that has
    built hundreds of apps once took 2.2 s of four requests)."""
    from sqlalchemy import event

    engine = client.app.state.engine
    used: list[str] = []

    def checkout(*_args) -> None:
        used.append("checkout")

    def connect(*_args) -> None:
        used.append("connect")

    event.listen(engine, "checkout", checkout)
    event.listen(engine, "connect", connect)
    try:
        assert client.get("/openapi.json").status_code == 200
        started = time.monotonic()
        assert client.get("/healthz").json() == {"status": "ok"}
        assert client.get("/static/style.css").status_code == 200
        assert client.get("/docs").status_code == 200
        assert client.get("/openapi.json").status_code == 200
        elapsed = time.monotonic() - started
    finally:
        event.remove(engine, "checkout", checkout)
        event.remove(engine, "connect", connect)
    assert used == [], used
    assert elapsed < limit_s, elapsed


def timed(call):
    started = time.monotonic()
    result = call()
    return result, time.monotonic() - started


# --- PostgreSQL on a closed port ------------------------------------------------------------


def test_closed_port_start_up_refuses_with_one_line_at_once(tmp_path, cards):
    app = create_app(pg_settings(tmp_path, free_port()), cards=cards)
    started = time.monotonic()
    with pytest.raises(StartupRefused) as refused, TestClient(app):
        pass
    elapsed = time.monotonic() - started
    message = str(refused.value)
    assert message.startswith("refusing to start: database check failed") and "\n" not in message
    assert "127.0.0.1" in message and "Connection refused" in message
    assert elapsed < 1, elapsed  # no waiting: a closed port answers at once


def test_closed_port_requests_are_503s_and_other_routes_answer(tmp_path, cards):
    client = TestClient(create_app(pg_settings(tmp_path, free_port()), cards=cards))
    created, elapsed = timed(lambda: client.post(f"{API}/learners"))
    assert_unavailable(created, "unreachable")
    assert elapsed < 1
    ready = client.get("/readyz", headers=METRICS)
    assert ready.status_code == 503 and ready.headers["retry-after"] == "1"
    checks = ready.json()["checks"]
    assert ready.json()["status"] == "not ready"
    assert checks["database"]["ok"] is False and checks["database"]["kind"] == "unreachable"
    assert checks["cards"]["ok"] is False
    assert_unrelated_routes_answer(client)
    # What needs no stored state goes on: the card list, a page for a new visitor, a question
    # (its token is signed, nothing is stored until it is answered).
    for path in ("/", f"/cards/{CARD_ID}", f"{API}/cards"):
        assert client.get(path).status_code == 200, path
    question = client.get(f"{API}/cards/{CARD_ID}/points/optimizer-memory/question?seed=1")
    assert question.status_code == 200 and question.json()["token"]
    # A page that needs the visitor's session: a 503 page, quickly, not a hang or a 500.
    client.cookies.set("infracards_session", SessionCookie(TEST_SECRET).value("s" * 40))
    page, elapsed = timed(lambda: client.get("/"))
    assert page.status_code == 503 and "text/html" in page.headers["content-type"]
    assert page.headers["retry-after"] == "1" and elapsed < 1


# --- PostgreSQL that accepts and never answers ----------------------------------------------


def test_black_holed_start_up_does_not_hang(tmp_path, cards, black_hole):
    # create_app's catalog load waits out the 2 s connect timeout; the gate then fails at once,
    # or waits out one more when the retry interval has passed meanwhile (a loaded machine).
    started = time.monotonic()
    app = create_app(pg_settings(tmp_path, black_hole.port), cards=cards)
    with pytest.raises(StartupRefused, match="connection timeout expired|not retried yet"):
        with TestClient(app):
            pass
    # Not a hang: two 2 s connect timeouts at most. On two cores loaded by the whole suite
    # (Chromium among it) the start-up took 10.1 s once, so the bound leaves twice that.
    assert time.monotonic() - started < 20


def test_black_holed_requests_time_out_into_503s(tmp_path, cards, black_hole):
    client = TestClient(
        create_app(pg_settings(tmp_path, black_hole.port, db_retry_after_s=1), cards=cards)
    )
    time.sleep(1.1)  # past the cool-down of create_app's failed attempt
    results: dict[str, object] = {}

    def slow_request() -> None:
        results["response"], results["elapsed"] = timed(lambda: client.post(f"{API}/learners"))

    worker = threading.Thread(target=slow_request)
    worker.start()
    time.sleep(0.2)
    # While that request waits on the database, the others answer.
    assert_unrelated_routes_answer(client)
    worker.join(10)
    assert_unavailable(results["response"], "unreachable")
    assert 1.5 < results["elapsed"] < 4, results["elapsed"]  # the 2 s connect timeout
    # The next ones fail at once (one attempt a second probes the database).
    again, elapsed = timed(lambda: client.post(f"{API}/learners"))
    assert_unavailable(again, "unreachable")
    assert elapsed < 0.5
    ready, elapsed = timed(lambda: client.get("/readyz", headers=METRICS))
    assert ready.status_code == 503 and elapsed < 4


@pytest.mark.postgres
def test_postgres_that_stops_answering_mid_run(tmp_path, cards, pg_url):
    from sqlalchemy.engine import make_url

    migrate(pg_url)
    real = make_url(pg_url)
    proxy = BlackHole(upstream=(real.host or "127.0.0.1", real.port or 5432))
    try:
        url = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        settings = make_settings(tmp_path, url, **FAST)
        with TestClient(create_app(settings, cards=cards)) as client:
            assert client.get("/readyz", headers=METRICS).status_code == 200
            assert client.post(f"{API}/learners").status_code == 201
            proxy.swallow()
            response, elapsed = timed(lambda: client.post(f"{API}/learners"))
            assert_unavailable(response)
            # The pooled connection's ping waits out the client's 2 s deadline (statement_timeout
            # 1 s + 1 s), the guard then refuses the reconnection at once.
            assert elapsed < 3.5, elapsed
            again, elapsed = timed(lambda: client.post(f"{API}/learners"))
            assert_unavailable(again, "unreachable")
            assert elapsed < 0.5, elapsed
            assert_unrelated_routes_answer(client)
            ready, elapsed = timed(lambda: client.get("/readyz", headers=METRICS))
            assert ready.status_code == 503 and elapsed < 5, elapsed
            proxy.forward()
            deadline = time.monotonic() + 10
            while client.post(f"{API}/learners").status_code != 201:
                assert time.monotonic() < deadline, "the service did not recover"
                time.sleep(0.3)
            assert client.get("/readyz", headers=METRICS).status_code == 200
    finally:
        proxy.close()


def test_postgres_that_stops_answering_in_the_middle_of_an_answer_batch(
    tmp_path, cards, pg_url, monkeypatch
):
    """The database stops answering after the answer writer has its connection: its first read
    in the write transaction waits out the client's deadline, the answer is a 503 (not a
    hang, not a 500), and once the database answers again the resent answer is stored once."""
    from sqlalchemy import func, select
    from sqlalchemy.engine import make_url

    from app.models import Attempt
    from app.practice import storing

    migrate(pg_url)
    real = make_url(pg_url)
    proxy = BlackHole(upstream=(real.host or "127.0.0.1", real.port or 5432))
    try:
        url = real.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        with TestClient(create_app(make_settings(tmp_path, url, **FAST), cards=cards)) as client:
            learner = client.post(f"{API}/learners").json()
            auth = {"Authorization": f"Bearer {learner['access_token']}"}
            question = client.get(
                f"{API}/cards/{CARD_ID}/points/1/question", params={"seed": 7}, headers=auth
            ).json()
            body = {
                "token": question["token"],
                "choice_id": question["choices"][0]["id"],
                "client_answer_id": str(uuid.uuid4()),
            }
            real_reads = storing._STORED

            class ReadsIntoABlackHole:
                def read(self, dialect, keys):
                    proxy.swallow()  # the writer has its connection: its reads go next
                    return real_reads.read(dialect, keys)

            monkeypatch.setattr(storing, "_STORED", ReadsIntoABlackHole())
            response, elapsed = timed(
                lambda: client.post(f"{API}/answers", json=body, headers=auth)
            )
            assert_unavailable(response)
            assert elapsed < 6, elapsed  # the 2 s deadline, then the guard refuses at once
            assert_unrelated_routes_answer(client)
            monkeypatch.setattr(storing, "_STORED", real_reads)
            proxy.forward()
            deadline = time.monotonic() + 10
            while (
                again := client.post(f"{API}/answers", json=body, headers=auth)
            ).status_code != 200:
                assert again.status_code == 503, again.text
                assert time.monotonic() < deadline, "the service did not recover"
                time.sleep(0.3)
            replay = client.post(f"{API}/answers", json=body, headers=auth).json()
            assert replay.pop("replayed") is True and again.json() == {**replay, "replayed": False}
            with client.app.state.sessionmaker() as db:
                stored = db.scalar(
                    select(func.count())
                    .select_from(Attempt)
                    .where(Attempt.client_answer_id == body["client_answer_id"])
                )
            assert stored == 1
    finally:
        proxy.close()


# --- a read-only database, a read-only data folder, a full disk ------------------------------


def read_only_url(db_url: str) -> str:
    path = db_url.removeprefix("sqlite:///")
    return f"sqlite:///file:{path}?mode=ro&uri=true"


def test_read_only_database_refuses_to_start(tmp_path, cards, db_url, monkeypatch):
    monkeypatch.chdir(tmp_path)
    settings = make_settings(tmp_path, read_only_url(db_url), **FAST)
    with pytest.raises(StartupRefused, match="readonly database"):
        with TestClient(create_app(settings, cards=cards)):
            pass
    # The URI names the database; nothing is made in the working directory (it made a folder
    # named "file:" there, holding the database's path).
    assert not (tmp_path / "file:").exists()


def test_read_only_database_writes_are_503s_reads_go_on(tmp_path, cards, db_url):
    client = TestClient(
        create_app(make_settings(tmp_path, read_only_url(db_url), **FAST), cards=cards)
    )
    assert_unavailable(client.post(f"{API}/learners"), "read_only")
    ready = client.get("/readyz", headers=METRICS).json()
    assert ready["checks"]["database"]["kind"] == "read_only"
    assert ready["checks"]["migrations"]["ok"] is True  # it can still be read
    assert client.get(f"{API}/cards").status_code == 200
    assert_unrelated_routes_answer(client)


def test_read_only_data_folder_refuses_to_start(tmp_path, cards, db_url, monkeypatch):
    def read_only(path: Path) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))

    monkeypatch.setattr(health, "write_probe", read_only)
    app = create_app(make_settings(tmp_path, db_url, **FAST), cards=cards)
    with pytest.raises(StartupRefused, match="data folder is unusable: .*Read-only file system"):
        with TestClient(app):
            pass
    client = TestClient(app)
    ready = client.get("/readyz", headers=METRICS)
    assert ready.status_code == 503 and ready.json()["checks"]["data_folder"]["ok"] is False


def inject_disk_full(engine) -> None:
    def full(cursor, statement, parameters, context):
        if statement.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")):
            raise sqlite3.OperationalError("database or disk is full")

    event.listen(engine, "do_execute", full)
    event.listen(engine, "do_executemany", full)


def test_full_disk_writes_are_503s_with_retry_after(tmp_path, cards, db_url):
    app = create_app(make_settings(tmp_path, db_url, **FAST), cards=cards)
    with TestClient(app) as client:
        learner = client.post(f"{API}/learners")
        assert learner.status_code == 201
        inject_disk_full(app.state.engine)
        for _ in range(3):
            assert_unavailable(client.post(f"{API}/learners"), "disk_full")
        ready = client.get("/readyz", headers=METRICS)
        assert ready.status_code == 503
        assert ready.json()["checks"]["database"]["kind"] == "disk_full"
        assert ready.json()["checks"]["database"]["last_failure"]["kind"] == "disk_full"
        assert_unrelated_routes_answer(client)


def test_full_disk_at_start_up_refuses(tmp_path, cards, db_url):
    app = create_app(make_settings(tmp_path, db_url, **FAST), cards=cards)
    inject_disk_full(app.state.engine)
    with pytest.raises(StartupRefused, match="database or disk is full"):
        with TestClient(app):
            pass


# --- the classification, the guard, the real server -----------------------------------------


class _PgError(Exception):
    def __init__(self, message: str, sqlstate: str) -> None:
        super().__init__(message)
        self.sqlstate = sqlstate


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (sa_exc.TimeoutError("QueuePool limit of size 5 overflow 10 reached"), "busy"),
        (sa_exc.OperationalError("x", {}, sqlite3.OperationalError("database is locked")), "busy"),
        (
            sa_exc.OperationalError("x", {}, sqlite3.OperationalError("disk I/O error")),
            "unavailable",
        ),
        (
            sa_exc.OperationalError("x", {}, sqlite3.OperationalError("no such table: x")),
            "unavailable",
        ),
        (sa_exc.OperationalError("x", {}, _PgError("could not write", "53100")), "disk_full"),
        (sa_exc.InternalError("x", {}, _PgError("read-only transaction", "25006")), "read_only"),
        (sa_exc.OperationalError("x", {}, _PgError("canceling statement", "57014")), "timeout"),
        (
            sa_exc.OperationalError("x", {}, _PgError("terminating connection", "57P01")),
            "unreachable",
        ),
        (sa_exc.IntegrityError("x", {}, sqlite3.IntegrityError("UNIQUE constraint failed")), None),
        (sa_exc.ProgrammingError("x", {}, _PgError("syntax error", "42601")), None),
        (ValueError("not a database error"), None),
    ],
)
def test_failure_kinds(error, kind):
    assert failure_kind(error) == kind


def test_the_connect_guard_fails_fast_then_probes_once():
    guard = ConnectGuard(cooldown_s=0.2)
    assert guard.refusal() is None
    guard.done(OSError("connection refused"))
    assert "not retried yet" in (guard.refusal() or "")
    time.sleep(0.25)
    assert guard.refusal() is None  # this one probes
    assert guard.refusal() is not None  # while it does, the others fail fast
    guard.done(None)
    assert guard.refusal() is None


def _serve_once(
    tmp_path: Path, db_url: str, cards_dir: Path, *, timeout_s: int = 120, **extra_env: str
) -> subprocess.CompletedProcess:
    """``uvicorn app.main:create_app`` on a free port, run until it exits by itself."""
    env = {
        **os.environ,
        "DATABASE_URL": db_url,
        "SECRET_KEY": TEST_SECRET,
        "CARDS_DIR": str(cards_dir),
        "DATA_DIR": str(tmp_path / "data"),
        **extra_env,
    }
    command = [sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory"]
    return subprocess.run(
        [*command, "--port", str(free_port())],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def _one_line_refusal(result: subprocess.CompletedProcess) -> str:
    """The start-up refusal line of a server that exited with status 3 and no traceback."""
    assert result.returncode == 3, result.stderr[-2000:]
    assert "Traceback" not in result.stderr, result.stderr[-2000:]
    refusals = [line for line in result.stderr.splitlines() if "refusing to start" in line]
    assert len(refusals) >= 1, result.stderr[-2000:]
    return refusals[0]


def test_uvicorn_exits_non_zero_with_one_line_when_the_database_is_unreachable(tmp_path):
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test"
    result = _serve_once(
        tmp_path, url, one_card_folder(tmp_path / "cards"), DB_CONNECT_TIMEOUT_S="2", timeout_s=60
    )
    assert "database check failed" in _one_line_refusal(result)
    # LOG_FORMAT=json: every line is one JSON object, the cards' "serving the card files only"
    # warning at start-up too (it came before the log handler was installed, as plain text).
    lines = result.stderr.splitlines()
    assert any("could not read or store card versions" in line for line in lines), lines
    assert [line for line in lines if not line.startswith("{")] == []
    assert all(json.loads(line)["message"] for line in lines)


def test_uvicorn_with_invalid_settings_exits_with_one_line_and_no_value(tmp_path):
    """A wrong environment stops the server as the other start-up failures do: uvicorn's status
    3 (with --workers the supervisor stops instead of restarting the workers without end) and
    one line naming the variable. It was a 50-line traceback quoting the values given."""
    url = f"postgresql+psycopg://postgres:db-password-value@127.0.0.1:{free_port()}/test"
    for extra, words in [
        ({"ENVIRONMENT": "production", "SECRET_KEY": "short-secret-value"}, "SECRET_KEY must"),
        ({"DB_POOL_SIZE": "lots"}, "DB_POOL_SIZE: Input should be a valid integer"),
    ]:
        result = _serve_once(tmp_path, url, tmp_path / "no-cards", timeout_s=60, **extra)
        assert result.returncode == 3, result.stderr[-2000:]
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr[-2000:]
        assert result.stderr.startswith("error: invalid settings: ") and words in result.stderr
        assert "short-secret-value" not in result.stderr
        assert "db-password-value" not in result.stderr


def test_a_missing_prometheus_multiproc_dir_is_one_line_not_a_traceback(tmp_path):
    """README: with several workers set PROMETHEUS_MULTIPROC_DIR. A folder not made yet was a
    60-line traceback from prometheus-client opening its first metric file."""
    url = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test"
    folder = tmp_path / "metrics-not-made"
    result = _serve_once(
        tmp_path, url, tmp_path / "no-cards", timeout_s=60, PROMETHEUS_MULTIPROC_DIR=str(folder)
    )
    assert result.returncode == 3, result.stderr[-2000:]
    assert result.stderr == (
        f"error: PROMETHEUS_MULTIPROC_DIR {folder} is not a folder: make it (empty) first\n"
    )


def test_a_card_changed_without_a_new_version_refuses_start_up_in_one_line(tmp_path, db_url):
    """The card files publish at start-up; a file edited since, under the same version, would
    change questions already answered: the server refuses with one line (no traceback) that
    says what to do, and /readyz of an app built anyway says why."""
    cards_dir = one_card_folder(tmp_path / "cards")
    with TestClient(create_app(make_settings(tmp_path, db_url, cards_dir=cards_dir))) as client:
        assert client.get("/readyz", headers=METRICS).status_code == 200  # published
    path = cards_dir / f"{CARD_ID}.yaml"
    text = path.read_text(encoding="utf-8")
    edited = text.replace("How does ZeRO-Infinity go beyond ZeRO-Offload?", "How far past it?")
    assert edited != text
    path.write_text(edited, encoding="utf-8")
    line = _one_line_refusal(_serve_once(tmp_path, db_url, cards_dir))
    assert "differs from the version" in line and "raise the card's 'version'" in line
    app = create_app(make_settings(tmp_path, db_url, cards_dir=cards_dir))
    with pytest.raises(StartupRefused, match="raise the card's 'version'"), TestClient(app):
        pass  # the lifespan refuses
    served = TestClient(app)  # without lifespan events: every request says why
    ready = served.get("/readyz", headers=METRICS)
    assert ready.status_code == 503 and not ready.json()["checks"]["cards"]["ok"]
    question = served.get(f"/api/v1/cards/{CARD_ID}/question")
    assert question.status_code == 503 and "raise the card's 'version'" in question.json()["detail"]


def test_a_card_file_that_fails_validation_refuses_start_up_in_one_line(tmp_path, db_url):
    cards_dir = one_card_folder(tmp_path / "cards")
    path = cards_dir / f"{CARD_ID}.yaml"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("id: zero-memory-offload\n", "id: Not A Valid Id\n", 1))
    line = _one_line_refusal(_serve_once(tmp_path, db_url, cards_dir))
    assert "cards check failed" in line


def test_an_unreachable_database_never_gives_a_bare_500(tmp_path, cards):
    client = TestClient(
        create_app(pg_settings(tmp_path, free_port()), cards=cards), raise_server_exceptions=False
    )
    token = {"Authorization": f"Bearer {uuid.uuid4().hex}"}
    client.cookies.set("infracards_session", SessionCookie(TEST_SECRET).value("s" * 40))
    for method, path in [
        ("POST", f"{API}/learners"),
        ("GET", f"{API}/me/mistakes"),
        ("POST", f"{API}/answers"),
        ("GET", f"/cards/{CARD_ID}"),
    ]:
        response = client.request(method, path, headers=token, json={})
        assert response.status_code in (401, 404, 422, 503), (path, response.status_code)
        assert response.status_code != 500


def test_a_locked_sqlite_database_is_a_busy_503_after_the_busy_timeout(tmp_path, cards, db_url):
    app = create_app(make_settings(tmp_path, db_url, **FAST), cards=cards)
    with TestClient(app) as client:
        with app.state.engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 500
        holder = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")  # another process holds the write lock
            response, elapsed = timed(lambda: client.post(f"{API}/learners"))
            body = assert_unavailable(response, "busy")
            assert body["code"] == "busy" and 0.4 < elapsed < 3, elapsed
            assert_unrelated_routes_answer(client)
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        assert client.post(f"{API}/learners").status_code == 201


@pytest.mark.postgres
def test_postgres_sessions_carry_the_statement_timeout(tmp_path, cards, pg_url):
    migrate(pg_url)
    app = create_app(make_settings(tmp_path, pg_url, **FAST), cards=cards)
    with app.state.engine.connect() as connection:
        assert connection.exec_driver_sql("SHOW statement_timeout").scalar() == "1s"
        started = time.monotonic()
        with pytest.raises(sa_exc.OperationalError) as slow:
            connection.exec_driver_sql("SELECT pg_sleep(5)")
        assert failure_kind(slow.value) == "timeout" and time.monotonic() - started < 2.5
    app.state.engine.dispose()


def test_a_data_folder_that_cannot_exist_refuses_to_start_with_one_line(tmp_path, cards):
    # A real unwritable folder even for root: its parent is a file. No SECRET_KEY: the
    # development key would have to be written there.
    blocker = tmp_path / "blocker"
    blocker.write_text("a file, not a folder")
    settings = make_settings(
        tmp_path, f"sqlite:///{blocker / 'data' / 'infracards.db'}", secret_key=None
    )
    settings.data_dir = blocker / "data"
    app = create_app(settings, cards=cards)  # no traceback out of the factory
    with pytest.raises(StartupRefused, match="data folder is unusable: Not a directory") as refused:
        with TestClient(app):
            pass
    assert "\n" not in str(refused.value)
    # Served without lifespan events, it still answers nothing but its health.
    client = TestClient(create_app(settings, cards=cards))
    assert client.get("/healthz").status_code == 200
    refused_api = client.get(f"{API}/cards")
    assert refused_api.status_code == 503 and refused_api.json()["code"] == "not_started"


# --- a database locked for long, a file system that does not answer --------------------------


def send_at_once(app, requests):
    """``requests`` ((method, url, kwargs)) sent at once; each response with its seconds."""
    import asyncio
    import concurrent.futures

    import httpx

    async def send(client, method, url, kwargs):
        started = time.monotonic()
        response = await client.request(method, url, **kwargs)
        return response, time.monotonic() - started

    async def send_all():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            return await asyncio.gather(*(send(c, m, u, kw) for m, u, kw in requests))

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # no event loop of an earlier test
        return pool.submit(asyncio.run, send_all()).result()


def answer_bodies(client, count: int) -> tuple[dict, list[dict]]:
    learner = client.post(f"{API}/learners").json()
    auth = {"Authorization": f"Bearer {learner['access_token']}"}
    bodies = []
    for seed in range(count):
        question = client.get(
            f"{API}/cards/{CARD_ID}/points/1/question", params={"seed": seed}, headers=auth
        ).json()
        bodies.append(
            {
                "token": question["token"],
                "choice_id": question["choices"][0]["id"],
                "client_answer_id": uuid.uuid4().hex,
            }
        )
    return auth, bodies


def stored_count(app, keys) -> int:
    from sqlalchemy import func, select

    from app.models import Attempt

    with app.state.sessionmaker() as db:
        return int(
            db.scalar(
                select(func.count())
                .select_from(Attempt)
                .where(Attempt.client_answer_id.in_(list(keys)))
            )
        )


def test_answers_get_their_503_within_the_busy_timeout_while_sqlite_stays_locked(
    tmp_path, cards, db_url
):
    """Another process holds SQLite's write lock for much longer than the busy timeout (1 s
    here): every answer, those of the first batch and those queued behind it, gets its busy 503
    with Retry-After within about the busy timeout (before: the batch was tried three times
    more, each waiting out the timeout, and answers queued behind it waited for all of that),
    none is stored, and once the lock is gone the same answers are stored once each."""
    settings = make_settings(tmp_path, db_url, **{**FAST, "sqlite_busy_timeout_ms": 1000})
    app = create_app(settings, cards=cards)
    with TestClient(app) as client:
        auth, bodies = answer_bodies(client, 10)
        holder = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
        try:
            holder.execute("BEGIN IMMEDIATE")  # held for the whole test, well past 1 s
            first, second = bodies[:5], bodies[5:]
            waves = send_at_once(
                app, [("POST", f"{API}/answers", {"json": b, "headers": auth}) for b in first]
            )
            waves += send_at_once(
                app, [("POST", f"{API}/answers", {"json": b, "headers": auth}) for b in second]
            )
            for response, elapsed in waves:
                assert_unavailable(response, "busy")
                assert elapsed < 2.9, elapsed  # 1 s busy timeout + 1 s bound, with slack
        finally:
            holder.execute("ROLLBACK")
            holder.close()
        keys = [b["client_answer_id"] for b in bodies]
        assert stored_count(app, keys) == 0
        for body in bodies:
            assert client.post(f"{API}/answers", json=body, headers=auth).status_code == 200
        assert stored_count(app, keys) == 10


def test_an_answer_whose_write_hangs_gets_its_503_and_is_stored_once_when_sent_again(
    tmp_path, cards, db_url, monkeypatch
):
    """A write that does not come back (a frozen file system holds the commit): the answer is a
    busy 503 within the bound (busy timeout + 1 s) instead of a hang; when the file system
    answers again, sending the same answer stores it once (or replays it when the stuck write
    went through after all)."""
    from app.practice import answers

    frozen = threading.Event()
    real_store = answers.store_batch

    def store_on_a_frozen_disk(db, items):
        frozen.wait(20)
        return real_store(db, items)

    monkeypatch.setattr(answers, "store_batch", store_on_a_frozen_disk)
    app = create_app(make_settings(tmp_path, db_url, **FAST), cards=cards)
    with TestClient(app) as client:
        auth, [body] = answer_bodies(client, 1)
        try:
            response, elapsed = timed(
                lambda: client.post(f"{API}/answers", json=body, headers=auth)
            )
            assert_unavailable(response, "busy")
            assert 1.4 < elapsed < 3.5, elapsed  # the bound is 0.5 s + 1 s
            assert stored_count(app, [body["client_answer_id"]]) == 0
        finally:
            frozen.set()
        deadline = time.monotonic() + 10
        while (again := client.post(f"{API}/answers", json=body, headers=auth)).status_code != 200:
            assert again.status_code == 503 and time.monotonic() < deadline, again.text
            time.sleep(0.2)
        assert client.post(f"{API}/answers", json=body, headers=auth).json()["replayed"] is True
        assert stored_count(app, [body["client_answer_id"]]) == 1


def test_readyz_answers_within_a_second_when_the_file_system_does_not(
    tmp_path, cards, db_url, monkeypatch
):
    """A data folder whose writes hang (a frozen file system): /readyz is a 503 saying the checks
    did not finish, within about a second, and a second request does not start a second stuck
    check; once the file system answers, /readyz is 200 again."""
    frozen = threading.Event()
    probes: list[Path] = []
    real_probe = health.write_probe

    def probe_on_a_frozen_disk(folder):
        probes.append(folder)
        frozen.wait(20)
        real_probe(folder)

    app = create_app(make_settings(tmp_path, db_url, **FAST), cards=cards)
    with TestClient(app) as client:
        assert client.get("/readyz", headers=METRICS).status_code == 200
        monkeypatch.setattr(health, "write_probe", probe_on_a_frozen_disk)
        try:
            for _ in range(2):
                ready, elapsed = timed(lambda: client.get("/readyz", headers=METRICS))
                assert ready.status_code == 503 and ready.headers["retry-after"] == "1"
                assert not ready.json()["checks"]["checks_finished"]["ok"]
                assert elapsed < 2.0, elapsed
            assert len(probes) == 1  # the stuck check is waited for again, not started again
        finally:
            frozen.set()
        deadline = time.monotonic() + 5
        while client.get("/readyz", headers=METRICS).status_code != 200:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def test_readyz_keeps_its_details_for_the_metrics_token(tmp_path, cards, db_url):
    """Anyone may ask whether the service is ready; where its data lives and how full the disk
    is are for whoever holds the metrics token."""
    app = create_app(make_settings(tmp_path, db_url, **FAST), cards=cards)
    with TestClient(app) as client:
        public = client.get("/readyz")
        assert public.status_code == 200
        assert public.json() == {
            "status": "ready",
            "checks": {
                "data_folder": {"ok": True},
                "database": {"ok": True},
                "migrations": {"ok": True},
                "cards": {"ok": True},
            },
        }
        assert str(tmp_path) not in public.text and "free_bytes" not in public.text
        for wrong in ("Bearer nope", "metrics-token-for-the-tests", ""):
            assert "detail" not in client.get("/readyz", headers={"Authorization": wrong}).text
        detailed = client.get("/readyz", headers=METRICS).json()["checks"]
        assert detailed["data_folder"]["free_bytes"] > 0 and str(tmp_path) in str(detailed)
