"""bench/service.py in a tiny run: both servers start, the table prints, every check passes."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT


def test_service_benchmark_prints_its_table_and_passes_its_checks():
    proc = subprocess.run(
        [
            sys.executable,
            str(ROOT / "bench" / "service.py"),
            "--requests",
            "50",
            "--concurrency",
            "8",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "req/s" in out and "p50 ms" in out and "p99 ms" in out
    for row in (
        "bare async JSON (baseline app)",
        "sync SQLite insert (baseline app)",
        "GET /healthz",
        "/points/{n}/question",
        "POST /answers, new client_answer_id",
        "POST /answers, replayed client_answer_id",
    ):
        assert row in out
    assert "× /healthz" in out and "× SQLite insert" in out
    assert "ok    attempts stored exactly once" in out
    assert "FAIL" not in out
