"""More than one server: two app processes on different ports share one PostgreSQL (and Redis
for the login limits). A web session started on A is valid on B, bearer tokens work on both and
a revocation on one reaches the other, five wrong passwords are five whichever process answered
them, a card an instructor publishes on A is served by B within the refresh interval, and a load
spread over both (questions from one, answers to the other, the same answer sent to both at
once) stores every acknowledged answer exactly once.

Needs ``TEST_POSTGRES_URL`` and ``TEST_REDIS_URL`` (``.ci/run`` sets both); skipped, saying so,
without them. The limiter's own behaviour (memory per process, Redis shared, Redis down) is
tested here without servers.
"""

from __future__ import annotations

import json
import os
import random
import re
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from live_servers import (
    API,
    AnswerLoad,
    ServerProcess,
    bearer,
    check_exactly_once,
    new_learners,
    resend,
    server_env,
)

from app.auth.ratelimit import LoginLimiter
from app.catalog.service import REFRESH_EVERY_S
from app.cli import migrate
from app.config import Settings

CARD = json.loads((Path(__file__).parent / "cards_fixtures" / "kv_cache_card.json").read_text())
PASSWORD = "a long enough password 42"
COOKIE = "infracards_session"


def _redis_server_url() -> str:
    url = os.environ.get("TEST_REDIS_URL")
    if not url:
        pytest.skip("TEST_REDIS_URL is not set (e.g. redis://127.0.0.1:6379)")
    pytest.importorskip("redis", reason="the redis package is not installed (pip install redis)")
    return url


@pytest.fixture
def redis_url() -> str:
    """TEST_REDIS_URL with a database number of its own (1-15), so concurrent runs rarely share
    the per-address login counter; the keys expire after the one-minute windows."""
    base = _redis_server_url().rstrip("/")
    if re.search(r"/\d+$", base):
        return base
    return f"{base}/{random.randint(1, 15)}"


@pytest.fixture
def two_servers(
    pg_url: str, redis_url: str, tmp_path: Path
) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    migrate(pg_url)
    env = server_env(tmp_path / "data", pg_url, REDIS_URL=redis_url)
    # Started together: each start-up takes seconds on two busy cores.
    a = ServerProcess(env, tmp_path / "a.log")
    b = ServerProcess(env, tmp_path / "b.log")
    try:
        a.wait_ready()
        b.wait_ready()
        yield a, b
    except BaseException:
        for server in (a, b):
            print(f"--- {server.log} ---\n{server.log_tail(60)}")
        raise
    finally:
        a.stop()
        b.stop()


def csrf(page: str) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', page)
    assert match, page[:500]
    return match.group(1)


def register_instructor(pg_url: str, email: str) -> None:
    from app.auth.service import register
    from app.db import make_engine, make_sessionmaker

    engine = make_engine(pg_url)
    try:
        with make_sessionmaker(engine)() as db:
            register(db=db, email=email, password=PASSWORD, role="instructor")
    finally:
        engine.dispose()


def token_for(client: httpx.Client, email: str, password: str = PASSWORD) -> httpx.Response:
    return client.post(
        f"{API}/auth/token", json={"email": email, "password": password, "device_name": "test"}
    )


@pytest.mark.postgres
def test_two_processes_share_sessions_tokens_limits_publications_and_answers(
    two_servers: tuple[ServerProcess, ServerProcess], pg_url: str
) -> None:
    a, b = two_servers
    with a.client() as on_a, b.client() as on_b:
        # --- a web session started on A is the same session on B, and ends on both ---
        email = f"web-{uuid.uuid4().hex[:8]}@example.com"
        created = on_a.post(f"{API}/auth/register", json={"email": email, "password": PASSWORD})
        assert created.status_code == 201, created.text
        login_page = on_a.get("/login")
        logged_in = on_a.post(
            "/login",
            data={"csrf_token": csrf(login_page.text), "email": email, "password": PASSWORD},
        )
        assert logged_in.status_code == 303, logged_in.text
        cookie = {COOKIE: on_a.cookies[COOKIE]}
        with b.client(cookies=cookie) as browser_b:
            account_b = browser_b.get("/account")
            assert account_b.status_code == 200 and email in account_b.text
            out = browser_b.post("/logout", data={"csrf_token": csrf(account_b.text)})
            assert out.status_code == 303
        with a.client(cookies=cookie) as browser_a:  # the ended session: back to the login page
            assert browser_a.get("/account").status_code == 303
        on_a.cookies.clear()

        # --- bearer tokens: made on one, used on the other; a revocation reaches the other ---
        learner = on_a.post(f"{API}/learners").json()
        me = on_b.get(f"{API}/me", headers=bearer(learner["access_token"]))
        assert me.status_code == 200 and me.json()["learner_id"] == learner["learner_id"]
        device = token_for(on_b, email)
        assert device.status_code == 200, device.text
        device_headers = bearer(device.json()["access_token"])
        assert on_a.get(f"{API}/me", headers=device_headers).json()["email"] == email
        assert on_b.delete(f"{API}/me/token", headers=device_headers).status_code == 204
        deadline = time.monotonic() + 10  # A may have cached the token for a few seconds
        while on_a.get(f"{API}/me", headers=device_headers).status_code != 401:
            assert time.monotonic() < deadline, "A still accepts a token revoked on B"
            time.sleep(0.25)

        # --- login limits are counted in Redis: 10 wrong passwords for one account from one
        # address (app.auth.ratelimit), over A and B together, then 429 ---
        limited = f"limit-{uuid.uuid4().hex[:8]}@example.com"
        on_b.post(f"{API}/auth/register", json={"email": limited, "password": PASSWORD})
        codes = [
            token_for(client, limited, f"wrong password {i}").status_code
            for i, client in enumerate([on_a, on_b] * 5)
        ]
        assert codes == [401] * 10
        for client in (on_b, on_a):  # even the right password, on either server
            refused = token_for(client, limited)
            assert refused.status_code == 429, refused.text
            assert int(refused.headers["retry-after"]) >= 1

        # --- an instructor publishes on A; B serves the card within the refresh interval ---
        prof = f"prof-{uuid.uuid4().hex[:8]}@example.com"
        register_instructor(pg_url, prof)
        prof_headers = bearer(token_for(on_a, prof).json()["access_token"])
        assert "kv-cache" not in [c["id"] for c in on_b.get(f"{API}/cards").json()]
        draft = on_a.post(f"{API}/instructor/cards", json=CARD, headers=prof_headers)
        assert draft.status_code == 201, draft.text
        published_at = time.monotonic()
        published = on_a.post(f"{API}/instructor/cards/kv-cache/publish", headers=prof_headers)
        assert published.status_code == 200, published.text
        while "kv-cache" not in [c["id"] for c in on_b.get(f"{API}/cards").json()]:
            assert time.monotonic() - published_at < REFRESH_EVERY_S + 5, "B never served it"
            time.sleep(0.1)
        seen_after = time.monotonic() - published_at
        learner_headers = bearer(learner["access_token"])
        question = on_b.get(f"{API}/cards/kv-cache/question", headers=learner_headers)
        assert question.status_code == 200, question.text
        q = question.json()
        kv_answer = f"kv-{uuid.uuid4()}"
        answered = on_a.post(
            f"{API}/answers",
            json={
                "token": q["token"],
                "choice_id": q["choices"][0]["id"],
                "client_answer_id": kv_answer,
            },
            headers=learner_headers,
        )
        assert answered.status_code == 200, answered.text
        kv = {kv_answer: answered.json()["attempt_id"]}

    # --- a load over both: questions from one server, answers to the other ---
    learners = new_learners(a.url, 4) + new_learners(b.url, 4)
    load = AnswerLoad([a.url, b.url], learners, threads=10, limit=120, answer_elsewhere=True)
    load.start().join(timeout_s=120)
    assert not load.failures and not load.unanswered, (load.failures[:5], len(load.unanswered))
    acked, sent = dict(load.acked), set(load.sent)
    assert len(acked) == 120
    check_exactly_once(pg_url, {**acked, **kv}, sent | set(kv))
    # Resent to both servers: every one replays the attempt first stored.
    answers = [load.sent[cid] for cid in sorted(acked)]
    for url in (a.url, b.url):
        for cid, body in resend(url, answers).items():
            assert body["replayed"] is True and body["attempt_id"] == acked[cid]
    # The same new answer sent to A and B at the same moment: one attempt, both told so.
    duplicates = same_answer_to_both(a.url, b.url, learners, count=20)
    check_exactly_once(pg_url, {**acked, **kv, **duplicates}, sent | set(kv) | set(duplicates))
    print(
        f"\ntwo servers: B served the card {seen_after:.2f} s after A published it; "
        f"{len(acked)} answers over both stored once ({load.conflicts} answer_conflict 409s "
        f"resent), resent to both and replayed; "
        f"{len(duplicates)} sent to both at once, one attempt each"
    )


def same_answer_to_both(url_a: str, url_b: str, learners: list[str], count: int) -> dict[str, int]:
    """Post each of ``count`` new answers to both servers at once; client_answer_id → attempt."""
    stored: dict[str, int] = {}
    with httpx.Client(base_url=url_a, timeout=30, trust_env=False) as client:
        for i in range(count):
            learner = learners[i % len(learners)]
            q = client.get(f"{API}/cards/zero-memory-offload/question", headers=bearer(learner))
            assert q.status_code == 200, q.text
            body = {
                "token": q.json()["token"],
                "choice_id": q.json()["choices"][0]["id"],
                "client_answer_id": f"both-{uuid.uuid4()}",
            }
            barrier = threading.Barrier(2)
            results: list[httpx.Response] = []

            def post(
                url: str,
                body: dict = body,
                learner: str = learner,
                barrier: threading.Barrier = barrier,
                results: list[httpx.Response] = results,
            ) -> None:
                with httpx.Client(base_url=url, timeout=30, trust_env=False) as mine:
                    barrier.wait()
                    results.append(mine.post(f"{API}/answers", json=body, headers=bearer(learner)))

            threads = [threading.Thread(target=post, args=(url,)) for url in (url_a, url_b)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join(60)
            assert [r.status_code for r in results] == [200, 200], [r.text for r in results]
            ids = {r.json()["attempt_id"] for r in results}
            assert len(ids) == 1, "two attempts stored for one client_answer_id"
            assert sorted(r.json()["replayed"] for r in results) == [False, True]
            stored[body["client_answer_id"]] = ids.pop()
    return stored


# --- the limiter itself -------------------------------------------------------------------------


def test_login_limits_are_per_process_in_memory() -> None:
    first, second = LoginLimiter(), LoginLimiter()
    assert not first.shared
    for i in range(18):
        (first if i % 2 else second).failed(email="m@example.com", address="a")
    # Nine wrong passwords each: neither process reached ten.
    assert first.check(email="m@example.com", address="a") is None
    first.failed(email="m@example.com", address="a")
    assert first.check(email="m@example.com", address="a") is not None


def test_login_limits_in_redis_are_shared_and_survive_redis_going_away() -> None:
    url = f"{_redis_server_url().rstrip('/')}"
    first, second = LoginLimiter(url), LoginLimiter(url)
    assert first.shared
    email = f"shared-{uuid.uuid4().hex}@example.com"
    address = f"test-{uuid.uuid4().hex}"
    for i in range(9):
        (first if i % 2 else second).failed(email=email, address=address)
    assert first.check(email=email, address=address) is None
    second.failed(email=email, address=address)
    wait = first.check(email=email, address=address)
    assert wait is not None and wait >= 1

    # Redis unreachable: counted in this process (still limited), no error, no hanging login.
    gone = LoginLimiter("redis://127.0.0.1:1/0")
    started = time.monotonic()
    for _ in range(10):
        gone.failed(email=email, address=address)
    assert gone.check(email=email, address=address) is not None
    assert time.monotonic() - started < 5


def test_redis_url_setting_selects_the_shared_limiter_storage() -> None:
    assert Settings(redis_url="redis://127.0.0.1:6379/0").rate_limit_storage == (
        "redis://127.0.0.1:6379/0"
    )
    explicit = Settings(redis_url="redis://r:6379", rate_limit_storage="memcached://m:11211")
    assert explicit.rate_limit_storage == "memcached://m:11211"
    assert Settings(redis_url="", rate_limit_storage="memory://").rate_limit_storage == "memory://"
    assert Settings(sqlite_synchronous="FULL").sqlite_synchronous == "full"
    with pytest.raises(ValueError):
        Settings(sqlite_synchronous="off")
