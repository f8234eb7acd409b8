"""Throughput and latency of the service's hot endpoints against ceilings measured in the same run.

    python bench/service.py                          # 3000 requests per endpoint, 64 connections
    python bench/service.py --requests 10000 --workers 1 --postgres none --json
    python bench/service.py --learners 256           # learners that are seldom in the caches

The pieces: ``service_baseline.py`` (the ceilings' app), ``service_servers.py`` (uvicorn
processes, fresh databases), ``service_load.py`` with ``service_wrk.lua`` (wrk sends a prepared
request list once), ``service_scenario.py`` (the phases and the exactly-once checks). wrk is
required (``apt-get install -y wrk``; ``make bench-service`` installs it when missing).

Both servers run under the same uvicorn options: ``--http httptools --loop asyncio`` as deployed
(``--http h11`` and ``--loop uvloop`` for comparison).

Everything happens on 127.0.0.1 in a temporary folder that is removed afterwards. For each
scenario — SQLite, then PostgreSQL (``--postgres URL``, default ``TEST_POSTGRES_URL`` or the
local server at 127.0.0.1:5432 database ``test`` when it answers; a fresh database is created
beside it and dropped afterwards), each with one and with two uvicorn workers (``--workers``) —
two servers run side by side, each on a free port, loaded in turn in ``--rounds`` interleaved
rounds (every baseline endpoint, then every app endpoint, again and again), so that a machine
whose speed drifts during the run slows both sides of a ratio alike:

1. the baseline app: ``GET /json``, a bare ``async`` JSON endpoint, and ``POST /insert``, a sync
   endpoint inserting one row into the scenario's kind of database (SQLite: WAL, ``BEGIN
   IMMEDIATE``, ``synchronous=NORMAL``, like the app's database);
2. the app (``uvicorn app.main:create_app --factory``), freshly migrated: ``GET /healthz``; ``GET
   /api/v1/cards/zero-memory-offload/points/{n}/question?seed=...`` (anonymous, n and seed
   varied); ``POST /api/v1/answers`` from 32 learners (``--learners``) in turn, each POST with
   its learner's bearer token, to its own question (fetched beforehand by that learner, bound to
   it) and with a fresh ``client_answer_id``: every one is a first answer (grade, store the
   attempt, rate the review, bring a pitfall fallen for twice forward); the same POSTs again
   with ids already stored (the idempotent replay path).

Each endpoint gets a short warm-up in the first round (not reported; the question GET a longer
one, enough to fill every worker's caches as a server up for a while has them), then ``--requests``
requests in all (a share per round) from ``--concurrency`` keep-alive connections, each round
capped at ``--max-seconds``. The table shows per endpoint: responses, req/s (over the time
loaded), latency p50 and p99 (ms, wrk's, including queueing at that concurrency; the median of
the rounds'), requests not answered 200, the CPU the server (all its processes) and wrk used
while the load ran (percent of one core) and the ratio of req/s to its baseline (the median of
the rounds' ratios), beside the targets of issue 9: question ≥ 0.5 × bare JSON with p99 < 50 ms, answers ≥
0.7 × the one-row insert with p99 < 100 ms. Read the ratios, not the absolute numbers: both
sides ran on the same machine state within one run.

After the app stops, the scenario checks that every POST was answered 200 and that the
``attempts`` table holds exactly one row per distinct ``client_answer_id`` sent (none missing,
none extra, replays added nothing): exactly-once storage under concurrent load (only a request
that never got a response may be missing: a client would resend it). Exit status: 0 when every
check passed (the speed targets are reported, not enforced), 1 when a check failed, 2 when the
benchmark could not run (no wrk, a server did not start, the migration failed).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from service_load import find_wrk  # noqa: E402
from service_scenario import (  # noqa: E402
    LEARNERS,
    Options,
    ScenarioResult,
    question_warmup_count,
    run_scenario,
    warmup_count,
)
from service_servers import (  # noqa: E402
    HOST,
    BenchError,
    postgres_database,
    postgres_reachable,
    sqlite_database,
)

DEFAULT_POSTGRES = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
# endpoint key -> (the least ratio, the largest p99 in ms) asked by issue 9
TARGETS = {"question": (0.5, 50.0), "answer": (0.7, 100.0)}
WEB_LOOP_GOAL = 0.4  # the web practice loop against the bare Jinja page


def postgres_url(arg: str | None) -> str | None:
    if arg == "none":
        return None
    if arg:
        return arg
    url = os.environ.get("TEST_POSTGRES_URL")
    if url:
        return url
    return DEFAULT_POSTGRES if postgres_reachable(DEFAULT_POSTGRES) else None


def run(args: argparse.Namespace) -> dict[str, Any]:
    wrk = find_wrk(args.wrk)
    for option, module in (("--http", args.http), ("--loop", args.loop)):
        if module not in ("h11", "asyncio") and importlib.util.find_spec(module) is None:
            raise BenchError(f"{option} {module}: {module} is not installed (pip install {module})")
    pg = postgres_url(args.postgres)
    scenarios: list[ScenarioResult] = []
    with tempfile.TemporaryDirectory(prefix="infracards-bench-") as tmp_name:
        tmp = Path(tmp_name)
        opts = Options(
            args.requests,
            args.concurrency,
            args.max_seconds,
            wrk,
            tmp,
            args.startup_timeout,
            args.seed,
            args.rounds,
            args.http,
            args.loop,
            args.learners,
        )
        backends = [b for b in args.backends if b == "sqlite" or pg]
        if "postgres" in args.backends and not pg and args.backends == ["postgres"]:
            raise BenchError("--backends postgres: no PostgreSQL server (see --postgres)")
        for backend in backends:
            for workers in args.workers:
                if backend == "sqlite":
                    db_context: Any = sqlite_database(tmp / f"sqlite-{workers}")
                else:
                    assert pg is not None
                    db_context = postgres_database(pg)
                with db_context as db:
                    scenarios.append(run_scenario(db, workers, opts))
    from importlib.metadata import version

    return {
        "config": {
            "load_generator": wrk,
            "requests": args.requests,
            "warmup_requests": warmup_count(args.requests),
            "question_warmup_requests": question_warmup_count(args.requests),
            "concurrency": args.concurrency,
            "max_seconds": args.max_seconds,
            "workers": args.workers,
            "postgres": pg,
            "seed": args.seed,
            "rounds": args.rounds,
            "http": args.http,
            "loop": args.loop,
            "cpus": os.cpu_count(),
            "load_average": list(os.getloadavg()),
            "python": sys.version.split()[0],
            "uvicorn": version("uvicorn"),
            "fastapi": version("fastapi"),
        },
        "scenarios": [
            {
                "name": s.name,
                "backend": s.backend,
                "workers": s.workers,
                "results": [
                    {
                        "endpoint": r.key,
                        "label": r.label,
                        "requests": r.requests,
                        "req_per_s": r.req_per_s,
                        "p50_ms": r.p50_ms,
                        "p99_ms": r.p99_ms,
                        "non_200": r.non_200,
                        "errors": r.errors,
                        "server_cpu_pct": r.server_cpu_pct,
                        "client_cpu_pct": r.client_cpu_pct,
                        "baseline": r.baseline,
                        "ratio": r.ratio,
                        "target": target_met(r.key, r.ratio, r.p99_ms),
                    }
                    for r in s.results
                ],
                "web_loop_ratio": s.web_loop_ratio,
                "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in s.checks],
            }
            for s in scenarios
        ],
        "ok": all(c.ok for s in scenarios for c in s.checks),
    }


def target_met(key: str, ratio: float | None, p99_ms: float) -> bool | None:
    if key not in TARGETS or ratio is None:
        return None
    least, most_p99 = TARGETS[key]
    return ratio >= least and p99_ms < most_p99


BASELINE_NAMES = {
    "bare_json": "bare JSON",
    "bare_page": "bare page",
    "bare_insert": "insert",
    "healthz": "/healthz",
}


def format_report(report: dict[str, Any]) -> str:
    cfg = report["config"]

    def num(value: float | None, spec: str) -> str:
        return "-" if value is None or math.isnan(value) else format(value, spec)

    load = ", ".join(f"{x:.1f}" for x in cfg["load_average"])
    lines = [
        f"infracards service benchmark: wrk, {cfg['concurrency']} connections, "
        f"{cfg['requests']} requests per endpoint (+{cfg['warmup_requests']} warm-up, the "
        f"question GET +{cfg['question_warmup_requests']}), on {HOST}, "
        f"{cfg['cpus']} CPUs (load average {load} at the end), Python {cfg['python']}, "
        f"uvicorn {cfg['uvicorn']} (--http {cfg['http']} --loop {cfg['loop']}), "
        f"FastAPI {cfg['fastapi']}",
        "targets (issue 9): question >= 0.50 x bare JSON and p99 < 50 ms; "
        "answers >= 0.70 x insert and p99 < 100 ms; the web practice loop (a question page "
        f"and an answer form in turn) >= {WEB_LOOP_GOAL:.2f} x the bare Jinja page",
    ]
    header = (
        f"{'endpoint':<42}{'requests':>9}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'not 200':>9}{'srv CPU':>9}{'cli CPU':>9}  ratio"
    )
    for scenario in report["scenarios"]:
        lines += ["", f"{scenario['name']}:", header, "-" * (len(header) + 28)]
        for r in scenario["results"]:
            ratio = (
                "(baseline)"
                if r["baseline"] is None
                else f"{num(r['ratio'], '.2f')} × {BASELINE_NAMES[r['baseline']]}"
            )
            if r["target"] is not None:
                ratio += "  target met" if r["target"] else "  target missed"
            lines.append(
                f"{r['label']:<42}{r['requests']:>9}{num(r['req_per_s'], ',.0f'):>9}"
                f"{num(r['p50_ms'], '.1f'):>9}{num(r['p99_ms'], '.1f'):>9}"
                f"{r['non_200'] + r['errors']:>9}{num(r['server_cpu_pct'], '.0f') + '%':>9}"
                f"{num(r['client_cpu_pct'], '.0f') + '%':>9}  {ratio}"
            )
        loop = scenario.get("web_loop_ratio")
        if loop is not None:
            met = "goal met" if loop >= WEB_LOOP_GOAL else "goal missed"
            lines.append(
                f"{'web practice loop (page GET + form POST)':<42}"
                f"{'':>63}  {loop:.2f} × bare page  {met}"
            )
        lines.append("checks:")
        for c in scenario["checks"]:
            lines.append(f"  {'ok  ' if c['ok'] else 'FAIL'}  {c['name']}: {c['detail']}")
    return "\n".join(lines)


def json_safe(value: Any) -> Any:
    """NaN (no latency measured) is not JSON: write null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_safe(v) for v in value]
    return value


def positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {value}")
    return value


def worker_counts(text: str) -> list[int]:
    counts = [positive_int(part) for part in text.split(",") if part.strip()]
    if not counts:
        raise argparse.ArgumentTypeError("give at least one worker count")
    return counts


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python bench/service.py",
        description="Throughput and latency of the service's endpoints against same-run ceilings "
        "(loopback only; stops by itself).",
    )
    parser.add_argument(
        "--requests",
        type=positive_int,
        default=3000,
        help="measured requests per endpoint (default 3000)",
    )
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=64,
        help="concurrent keep-alive connections (default 64)",
    )
    parser.add_argument(
        "--max-seconds",
        type=positive_float,
        default=60.0,
        help="time cap per endpoint (default 60)",
    )
    parser.add_argument(
        "--backends",
        type=lambda text: [b for b in text.split(",") if b],
        default=["sqlite", "postgres"],
        help="databases to run on, comma-separated: sqlite, postgres (default both; postgres "
        "only when a server answers)",
    )
    parser.add_argument(
        "--workers",
        type=worker_counts,
        default=[1, 2],
        help="uvicorn worker counts to run, comma-separated (default 1,2)",
    )
    parser.add_argument(
        "--postgres",
        default=None,
        metavar="URL",
        help="PostgreSQL server to also run on (default TEST_POSTGRES_URL, else "
        f"{DEFAULT_POSTGRES} when it answers); 'none' for SQLite only",
    )
    parser.add_argument(
        "--rounds",
        type=positive_int,
        default=3,
        help="interleaved rounds the requests are split over (default 3)",
    )
    parser.add_argument(
        "--http",
        choices=("httptools", "h11"),
        default="httptools",
        help="uvicorn's HTTP implementation for both servers (default httptools, as deployed; "
        "h11 is uvicorn's pure-Python fallback)",
    )
    parser.add_argument(
        "--loop",
        choices=("asyncio", "uvloop"),
        default="asyncio",
        help="uvicorn's event loop for both servers (default asyncio, as deployed; uvloop "
        "must be installed)",
    )
    parser.add_argument(
        "--learners",
        type=positive_int,
        default=LEARNERS,
        help=f"learners answering, and browsers loading pages, in turn (default {LEARNERS}: "
        "each comes back within milliseconds, so the app's 5 s caches of tokens and browser "
        "sessions nearly always hold it; with more, fewer requests find their learner cached, "
        "as when people practise)",
    )
    parser.add_argument("--wrk", default=None, help="the wrk executable (default: wrk on PATH)")
    parser.add_argument("--seed", type=int, default=0, help="seed for question numbers and seeds")
    parser.add_argument(
        "--startup-timeout",
        type=positive_float,
        default=60.0,
        help="seconds a server may take to answer (default 60)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        report = run(args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(json_safe(report), indent=2, ensure_ascii=False))
    else:
        print(format_report(report))
    if not report["ok"]:
        print("error: a check failed (see the checks above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
