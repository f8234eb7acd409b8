"""bench/service.py in a tiny run: both servers start with one and two workers, the table prints,
every exactly-once check passes; the pieces are separate modules and the Lua is its own file.
And the answer path it measures: group commit stores concurrent answers once each, and a batch
whose commit fails acknowledges none of them."""

from __future__ import annotations

import concurrent.futures
import os
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT
from live_servers import SERVED_CARDS_DIR

BENCH = ROOT / "bench"


def test_the_benchmark_is_split_into_modules_with_the_lua_script_in_its_own_file():
    for name in (
        "service_baseline.py",
        "service_servers.py",
        "service_load.py",
        "service_scenario.py",
        "service_uvicorn.py",
        "service_wrk.lua",
    ):
        assert (BENCH / name).is_file(), name
    assert len((BENCH / "service.py").read_text().splitlines()) < 400
    assert "function request()" in (BENCH / "service_wrk.lua").read_text()
    assert "function request()" not in (BENCH / "service_load.py").read_text()


def test_without_wrk_the_benchmark_says_how_to_get_it(tmp_path):
    proc = subprocess.run(
        [sys.executable, str(BENCH / "service.py"), "--wrk", str(tmp_path / "no-wrk")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; sys.path.insert(0, 'bench'); "
            "import service_load as s; print(s.INSTALL_HINT)",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert "apt-get install -y wrk" in proc.stdout


@pytest.mark.skipif(
    shutil.which("wrk") is None, reason="wrk is not installed (apt-get install -y wrk)"
)
def test_service_benchmark_prints_its_table_and_passes_its_checks():
    # The card it asks about alone: each worker's start-up validates every card it serves.
    env = {**os.environ, "CARDS_DIR": str(SERVED_CARDS_DIR)}
    proc = subprocess.run(
        [
            sys.executable,
            str(BENCH / "service.py"),
            "--requests",
            "60",
            "--concurrency",
            "8",
            "--workers",
            "1,2",
            "--postgres",
            "none",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "req/s" in out and "p50 ms" in out and "p99 ms" in out
    assert "SQLite, 1 worker:" in out and "SQLite, 2 workers:" in out
    for row in (
        "bare async JSON (baseline app)",
        "sync SQLite insert (baseline app)",
        "GET /healthz",
        "/points/{n}/question",
        "POST /answers, new client_answer_id",
        "POST /answers, replayed client_answer_id",
        "bare Jinja page (baseline app)",
        "GET /cards/.../practice?seed= (page)",
        "POST /answers (form, 303)",
        "web practice loop (page GET + form POST)",
    ):
        assert out.count(row) == 2, row
    assert "× bare JSON" in out and "× insert" in out and "× bare page" in out
    assert "target" in out and "goal" in out
    assert out.count("ok    attempts stored exactly once") == 2
    assert "FAIL" not in out


# --- the answer path the benchmark measures: group commit -----------------------------------


def _answers(client, count):
    from test_token_binding import fetch, new_learner

    bearer = new_learner(client)
    questions = [fetch(client, bearer, seed=s) for s in range(1, 6)]
    import uuid

    return bearer, [
        {
            "token": questions[i % 5]["token"],
            "choice_id": "abcd"[i % 4],
            "client_answer_id": str(uuid.uuid4()),
        }
        for i in range(count)
    ]


def test_concurrent_answers_share_transactions_and_are_each_stored_once(app, client, db):
    import asyncio

    from app.models import Attempt, ReviewLog

    bearer, bodies = _answers(client, 60)
    bodies += bodies[:20]  # concurrent replays of the same client_answer_id

    async def send_all():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as c:
            return await asyncio.gather(
                *(c.post("/api/v1/answers", json=b, headers=bearer) for b in bodies)
            )

    import httpx

    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # no event loop of an earlier test
        responses = pool.submit(asyncio.run, send_all()).result()
    assert [r.status_code for r in responses] == [200] * len(bodies)
    ids = [r.client_answer_id for r in db.query(Attempt).all()]
    assert sorted(ids) == sorted({b["client_answer_id"] for b in bodies})
    by_id = {}
    for body, response in zip(bodies, responses, strict=True):
        by_id.setdefault(body["client_answer_id"], set()).add(response.json()["attempt_id"])
    assert all(len(v) == 1 for v in by_id.values())  # a replay names the stored attempt
    # Five questions: five first answers, each rated once; the rest are retries.
    firsts = db.query(Attempt).filter(Attempt.first_answer.is_(True)).count()
    assert firsts == 5 and db.query(ReviewLog).count() == 5


def test_a_batch_whose_commit_fails_acknowledges_nothing(app, client, db, monkeypatch):
    from contextlib import contextmanager

    from sqlalchemy.exc import OperationalError

    import app.practice.writer as answers
    from app.models import Attempt

    bearer, bodies = _answers(client, 1)
    real = answers.write_transaction

    @contextmanager
    def failing(session):
        with real(session):
            yield session
            session.flush()
            raise OperationalError("COMMIT", {}, Exception("disk I/O error"))

    monkeypatch.setattr(answers, "write_transaction", failing)
    refused = client.post("/api/v1/answers", json=bodies[0], headers=bearer)
    assert refused.status_code >= 500 and refused.status_code != 200
    assert db.query(Attempt).count() == 0
    monkeypatch.setattr(answers, "write_transaction", real)
    again = client.post("/api/v1/answers", json=bodies[0], headers=bearer)
    assert again.status_code == 200 and again.json()["replayed"] is False
    db.commit()  # a fresh read
    assert db.query(Attempt).count() == 1


def test_the_instruction_count_reads_callgrind_s_dumps_and_prints_ratios(tmp_path, capsys):
    """bench/instructions.py's parent reads each phase's dump (named by its client request) and
    prints instructions per request and the ratio to the bare endpoint; the run under Valgrind
    itself takes minutes and is left to ``make bench-instructions``."""
    sys.path.insert(0, str(BENCH))
    try:
        import instructions
    finally:
        sys.path.remove(str(BENCH))
    totals = {
        "bare_json": 334_000_000,
        "healthz": 367_000_000,
        "question": 668_000_000,
        "insert": 1_500_000_000,
        "answer": 3_000_000_000,
    }
    for index, (name, total) in enumerate(totals.items(), start=1):
        (tmp_path / f"callgrind.out.7.{index}").write_text(
            f"version: 1\ncreator: callgrind-3.19.0\npid: 7\ncmd:  python\npart: {index}\n\n"
            f"desc: I1 cache:\ndesc: Timerange: Basic block 0 - 1\n"
            f"desc: Trigger: Client Request: {name}\n\npositions: line\nevents: Ir\n"
            f"summary: {total}\n\n\ntotals: {total}\n"
        )
    (tmp_path / "callgrind.out.7").write_text("desc: Trigger: Program termination\ntotals: 5\n")
    found = instructions.counts(tmp_path)
    assert found == totals
    instructions.report(found, requests=1000)
    lines = capsys.readouterr().out.splitlines()
    assert any(
        line.startswith("GET .../points/{n}/question") and "0.50 x bare_json" in line
        for line in lines
    ), lines
    assert any("367.0k" in line and "0.91 x bare_json" in line for line in lines), lines
    assert any(line.startswith("POST /answers") and "0.50 x insert" in line for line in lines)
