"""bench/service.py in a tiny run: both servers start with one and two workers, the table prints,
every exactly-once check passes; the pieces are separate modules and the Lua is its own file."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

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
    ):
        assert out.count(row) == 2, row
    assert "× bare JSON" in out and "× insert" in out and "target" in out
    assert out.count("ok    attempts stored exactly once") == 2
    assert "FAIL" not in out
