"""Real server processes for the durability and two-server tests, and a small answer load.

:class:`ServerProcess` runs ``uvicorn app.main:create_app --factory`` (one process, one worker)
in its own process group on a free loopback port; ``kill()`` is SIGKILL, nothing flushed.
:class:`AnswerLoad` drives learners through the real flow (GET a question, POST its answer with a
fresh ``client_answer_id``) from threads and records what the server acknowledged (a 200 with
its ``attempt_id``) and what was sent without an answer (may or may not be stored).
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from conftest import CARD_ID, CARDS_DIR, ROOT, TEST_SECRET
from sqlalchemy import create_engine, text

API = "/api/v1"
START_TIMEOUT_S = 60.0  # two loaded cores: start-up (cards, sympy) takes seconds
REQUEST_TIMEOUT_S = 30.0


def _served_cards() -> Path:
    """The cards a test server serves: the ZeRO card alone (with its demo results). The server
    tests are about the server (durability, start-up, two processes), and every start-up
    validates each card it serves over its whole domains: the whole deck would triple that."""
    if CARDS_DIR != ROOT / "cards":
        return CARDS_DIR  # TEST_CARDS_DIR chose the folder
    folder = Path(tempfile.mkdtemp(prefix="infracards-served-cards-"))
    (folder / f"{CARD_ID}.yaml").symlink_to(CARDS_DIR / f"{CARD_ID}.yaml")
    if (CARDS_DIR / "demo-results").exists():
        (folder / "demo-results").symlink_to(CARDS_DIR / "demo-results")
    return folder


SERVED_CARDS_DIR = _served_cards()
# Settings a server must not inherit from the environment of the test run.
_CLEARED = ("DATABASE_URL", "REDIS_URL", "RATE_LIMIT_STORAGE", "SQLITE_SYNCHRONOUS", "PORT")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def server_env(data_dir: Path, database_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    env.update(
        ENVIRONMENT="test",
        DATABASE_URL=database_url,
        DATA_DIR=str(data_dir),
        CARDS_DIR=str(SERVED_CARDS_DIR),
        SECRET_KEY=TEST_SECRET,
        PYTHONUNBUFFERED="1",
        LOG_LEVEL="WARNING",
    )
    env.update(extra)
    return env


class ServerProcess:
    """One uvicorn process; always stopped by :meth:`stop` (the fixtures call it in finally)."""

    def __init__(
        self,
        env: dict[str, str],
        log: Path,
        port: int | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        cmd = [sys.executable, "-m", "uvicorn", "app.main:create_app", "--factory"]
        cmd += ["--host", "127.0.0.1", "--port", str(self.port), "--no-access-log"]
        cmd += ["--log-level", "warning", "--timeout-graceful-shutdown", "3", *extra_args]
        with log.open("ab") as out:
            self.proc = subprocess.Popen(
                cmd, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> ServerProcess:
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                raise AssertionError(
                    f"the server exited ({self.proc.returncode}) before answering:\n{self.log_tail()}"
                )
            try:
                if (
                    httpx.get(self.url + "/healthz", timeout=2.0, trust_env=False).status_code
                    == 200
                ):
                    return self
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"the server did not start in {timeout_s:.0f} s:\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush; the process group, so nothing is left behind."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGINT)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def log_tail(self, lines: int = 30) -> str:
        try:
            content = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(content.strip().splitlines()[-lines:]) or "(empty log)"

    def client(self, **kwargs: object) -> httpx.Client:
        return httpx.Client(
            base_url=self.url,
            timeout=REQUEST_TIMEOUT_S,
            trust_env=False,
            **kwargs,  # type: ignore[arg-type]
        )


@contextmanager
def running(env: dict[str, str], log: Path) -> Iterator[ServerProcess]:
    server = ServerProcess(env, log)
    try:
        yield server.wait_ready()
    except BaseException:
        print(f"--- server log ({log}) ---\n{server.log_tail(60)}", file=sys.stderr)
        raise
    finally:
        server.stop()


# --- learners and answers ---------------------------------------------------------------------


def new_learners(url: str, count: int) -> list[str]:
    """Bearer tokens of ``count`` anonymous app learners (POST /api/v1/learners)."""
    with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as client:
        tokens = []
        for _ in range(count):
            response = client.post(f"{API}/learners")
            assert response.status_code == 201, response.text
            tokens.append(response.json()["access_token"])
        return tokens


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass(frozen=True)
class Answer:
    learner: str  # the bearer token
    token: str  # the question token
    choice_id: str
    client_answer_id: str

    def body(self) -> dict[str, str]:
        return {
            "token": self.token,
            "choice_id": self.choice_id,
            "client_answer_id": self.client_answer_id,
        }


def post_answer(client: httpx.Client, answer: Answer) -> httpx.Response:
    return client.post(f"{API}/answers", json=answer.body(), headers=bearer(answer.learner))


@dataclass
class AnswerLoad:
    """Threads answering questions against ``urls`` (round robin per thread) until stopped.

    ``acked``: client_answer_id → attempt_id for every 200; ``unanswered``: sent, no response
    (a transport error: the server died or the request was cut); ``failures``: other statuses.
    """

    urls: Sequence[str]
    learners: Sequence[str]
    threads: int = 12
    limit: int | None = None  # answers to send in all (None: until stop())
    answer_elsewhere: bool = False  # POST each answer to the next server, not the question's
    card_id: str = CARD_ID
    acked: dict[str, int] = field(default_factory=dict)
    sent: dict[str, Answer] = field(default_factory=dict)
    unanswered: set[str] = field(default_factory=set)
    failures: list[str] = field(default_factory=list)
    conflicts: int = 0  # 409 answer_conflict answers, each resent

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._workers = [
            threading.Thread(target=self._work, args=(i,), daemon=True, name=f"load-{i}")
            for i in range(self.threads)
        ]
        self._started = 0
        self.acked_at: list[float] = []

    def start(self) -> AnswerLoad:
        for worker in self._workers:
            worker.start()
        return self

    def _claim(self) -> bool:
        with self._lock:
            if self._stop.is_set() or (self.limit is not None and self._started >= self.limit):
                return False
            self._started += 1
            return True

    def _work(self, index: int) -> None:
        rng = random.Random(index)
        url = self.urls[index % len(self.urls)]
        answer_url = self.urls[(index + 1) % len(self.urls)] if self.answer_elsewhere else url
        with (
            httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as client,
            httpx.Client(base_url=answer_url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as poster,
        ):
            while self._claim():
                learner = self.learners[rng.randrange(len(self.learners))]
                try:
                    question = client.get(
                        f"{API}/cards/{self.card_id}/question", headers=bearer(learner)
                    )
                except httpx.TransportError:
                    return  # the server is gone: nothing was sent for this answer
                if question.status_code != 200:
                    with self._lock:
                        self.failures.append(
                            f"question {question.status_code}: {question.text[:200]}"
                        )
                    continue
                q = question.json()
                answer = Answer(
                    learner,
                    q["token"],
                    rng.choice(q["choices"])["id"],
                    f"{index}-{uuid.uuid4()}",
                )
                with self._lock:
                    self.sent[answer.client_answer_id] = answer
                try:
                    response = post_answer(poster, answer)
                    # 409 answer_conflict: nothing stored, "send it again" (a concurrent write
                    # in another process, e.g. the same learner's review item); a client resends.
                    for _ in range(5):
                        if not _conflict(response):
                            break
                        with self._lock:
                            self.conflicts += 1
                        time.sleep(0.05)
                        response = post_answer(poster, answer)
                except httpx.TransportError:
                    with self._lock:
                        self.unanswered.add(answer.client_answer_id)
                    return
                with self._lock:
                    if response.status_code == 200:
                        body = response.json()
                        assert body["client_answer_id"] == answer.client_answer_id
                        self.acked[answer.client_answer_id] = body["attempt_id"]
                        self.acked_at.append(time.monotonic())
                    else:
                        self.failures.append(
                            f"answer {response.status_code}: {response.text[:200]}"
                        )

    def wait_acked(self, count: int, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.acked) < count:
            assert not self.failures, self.failures[:5]
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"only {len(self.acked)} answers acknowledged in {timeout_s} s"
                )
            if not any(w.is_alive() for w in self._workers):
                raise AssertionError(f"the load stopped after {len(self.acked)} answers")
            time.sleep(0.02)

    def stop(self, timeout_s: float = REQUEST_TIMEOUT_S + 10) -> None:
        self._stop.set()
        self.join(timeout_s)

    def join(self, timeout_s: float = REQUEST_TIMEOUT_S + 10) -> None:
        deadline = time.monotonic() + timeout_s
        for worker in self._workers:
            worker.join(max(0.1, deadline - time.monotonic()))
        assert not any(w.is_alive() for w in self._workers), "load threads still running"

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.acked)


def _conflict(response: httpx.Response) -> bool:
    if response.status_code != 409:
        return False
    try:
        return response.json().get("code") == "answer_conflict"
    except ValueError:
        return False


def resend(url: str, answers: Sequence[Answer], threads: int = 6) -> dict[str, dict]:
    """Post ``answers`` again (same client_answer_ids); client_answer_id → response body.

    Every resend must be a 200: a replay of the stored attempt, or the first store of one the
    server never acknowledged."""
    results: dict[str, dict] = {}
    errors: list[str] = []
    lock = threading.Lock()
    queue = list(answers)

    def work() -> None:
        with httpx.Client(base_url=url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as client:
            while True:
                with lock:
                    if not queue:
                        return
                    answer = queue.pop()
                response = post_answer(client, answer)
                with lock:
                    if response.status_code == 200:
                        results[answer.client_answer_id] = response.json()
                    else:
                        errors.append(f"{response.status_code}: {response.text[:200]}")

    workers = [threading.Thread(target=work, daemon=True) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(REQUEST_TIMEOUT_S * 3)
    assert not errors, errors[:5]
    assert len(results) == len(answers)
    return results


def stored_attempts(database_url: str) -> tuple[Counter[str], dict[str, int]]:
    """What the database holds: rows per client_answer_id, and each one's attempt id."""
    engine = create_engine(database_url)
    try:
        with engine.connect() as connection:
            rows = connection.execute(text("SELECT client_answer_id, id FROM attempts")).all()
    finally:
        engine.dispose()
    return Counter(r[0] for r in rows), {r[0]: r[1] for r in rows}


def check_exactly_once(
    database_url: str, acked: dict[str, int], sent: set[str]
) -> tuple[Counter[str], dict[str, int]]:
    """Every acknowledged answer is stored once, as the attempt the server named; nothing that
    was never sent is stored; nothing is stored twice."""
    counts, ids = stored_attempts(database_url)
    missing = [cid for cid in acked if counts[cid] == 0]
    assert not missing, f"{len(missing)} acknowledged answers lost, e.g. {missing[:3]}"
    twice = [cid for cid, n in counts.items() if n > 1]
    assert not twice, f"{len(twice)} answers stored more than once, e.g. {twice[:3]}"
    other = [cid for cid in acked if ids[cid] != acked[cid]]
    assert not other, f"{len(other)} stored under another attempt id than acknowledged"
    extra = set(counts) - sent
    assert not extra, f"{len(extra)} stored answers were never sent, e.g. {sorted(extra)[:3]}"
    return counts, ids
