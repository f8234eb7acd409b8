"""Throughput and latency of the service's hot endpoints against ceilings measured in the same run.

    python bench/service.py                          # 3000 requests per endpoint, 32 connections
    python bench/service.py --requests 10000 --concurrency 64 --json

Everything happens on 127.0.0.1 in a temporary folder that is removed afterwards: a fresh SQLite
database is migrated (``python -m app.cli migrate``), then two servers run one after the other,
each one uvicorn process (one worker) on a free port, stopped when its endpoints are measured:

1. a minimal baseline app defined in this file (:func:`baseline_app`): ``GET /json``, a bare
   ``async`` JSON endpoint, and ``POST /insert``, a sync endpoint that inserts one row into a
   WAL-mode SQLite table (``BEGIN IMMEDIATE``, ``synchronous=NORMAL``, like the app's database);
2. the app (``uvicorn app.main:create_app --factory``): ``GET /healthz``; ``GET
   /api/v1/cards/zero-memory-offload/points/{n}/question?seed=...`` with n and seed varied;
   ``POST /api/v1/answers`` with question tokens fetched beforehand and a fresh
   ``client_answer_id`` per request (grade, then store the attempt); and the same POSTs again
   with ids already stored (the idempotent replay path). One learner, by bearer token.

Each endpoint gets a short warm-up (not reported), then a fixed number of requests
(``--requests``) from ``--concurrency`` keep-alive connections, capped at ``--max-seconds``.
The load generator is wrk when it is on PATH (driven by a generated Lua script that sends each
thread's share of a prepared request list once; a request lost with a dropped connection is
resent with the same body), otherwise an asyncio loop over one ``httpx.AsyncClient`` in this
process (``--loadgen`` picks one). The table shows, per endpoint: responses, req/s, latency p50
and p99 (ms), requests not answered 200 (other status or no response), the CPU the server and
the client used while the load ran (percent of one core; the server passes 100 % when threads
work outside the GIL, in SQLite) and the ratio of req/s to its baseline from the same run:

* ``GET /healthz`` ÷ bare async JSON: the app's fixed cost per request (middleware, a sync
  endpoint in the threadpool); reported for orientation.
* question ÷ ``/healthz``: what generating and signing a question costs on top of that.
* answer POSTs ÷ SQLite insert: the share of a one-insert write endpoint's throughput that
  grading and storing an attempt (token check, learner lookup, idempotency read, insert) keeps.

Read the ratios, not the absolute numbers: both sides of a ratio ran on the same machine state
with the same load generator within one run, so machine speed and client cost largely cancel.
The research notes measured ≈ 4,900 req/s (bare async JSON) and ≈ 1,750 req/s (one SQLite
insert) on this 2-core machine with wrk and 64 connections: the baseline rows, run with wrk and
``--concurrency 64``, tell whether the machine is in a comparable state. With the httpx generator the client shares the
cores: when its CPU column is near 100 % the client, not the server, sets the pace, the
baselines are understated and the ratios are pushed towards 1 (they understate the gap).
Latencies include the time a request waits in the client and the server queues at that
concurrency.

After the app server stops, the script checks that every POST was answered 200 and that the
``attempts`` table holds exactly one row per distinct ``client_answer_id`` sent (none missing,
none extra, replays added nothing): exactly-once storage under concurrent load. Only a request
that never got a response may be missing (a client would resend it with the same id). Exit status: 0
when every check passed, 1 when one failed, 2 when the benchmark could not run (a server did
not start, the migration failed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import json
import math
import os
import random
import resource
import secrets
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from pydantic import BaseModel

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = Path(__file__).resolve().parent
HOST = "127.0.0.1"
CARD_ID = "zero-memory-offload"
MAX_SEED = 2**31 - 1  # app.services.questions.MAX_SEED
TOKEN_POOL = 200  # distinct questions the answer POSTs are spread over
REQUEST_TIMEOUT_S = 30.0
BASELINE_DB_ENV = "BENCH_BASELINE_DB"

# (method, path, body); an empty body means none.
Spec = tuple[str, str, str]


class BenchError(Exception):
    """The benchmark could not run (exit status 2)."""


# --- The baseline app -----------------------------------------------------------------------


class BaselineRow(BaseModel):
    """The body of the baseline insert (module level, so FastAPI can resolve the annotation)."""

    client_answer_id: str


def baseline_app() -> Any:
    """The ceilings: a bare async JSON endpoint and a sync endpoint doing one SQLite insert.

    Served with ``uvicorn service:baseline_app --factory --app-dir bench``; the database (made
    by :func:`create_baseline_db`) is named by the ``BENCH_BASELINE_DB`` environment variable.
    Each threadpool thread keeps its own connection, as the app's connection pool would.
    """
    from fastapi import FastAPI

    db_path = os.environ[BASELINE_DB_ENV]
    local = threading.local()

    def connection() -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(db_path, isolation_level=None, timeout=5.0)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA busy_timeout=5000")
            conn.execute("PRAGMA synchronous=NORMAL")
            local.conn = conn
        return conn

    app = FastAPI()

    @app.get("/json")
    async def bare_json() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/insert")
    def insert(row: BaselineRow) -> dict[str, str]:
        conn = connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT INTO rows (client_answer_id) VALUES (?)", (row.client_answer_id,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return {"status": "ok"}

    return app


def create_baseline_db(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "CREATE TABLE rows (id INTEGER PRIMARY KEY, client_answer_id TEXT NOT NULL UNIQUE)"
        )
        conn.commit()


# --- Servers ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Server:
    name: str
    url: str
    pid: int
    log: Path


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.strip().splitlines()[-lines:]) or "(empty log)"


@contextlib.contextmanager
def serve(
    name: str, target: list[str], env: dict[str, str], ready_path: str, log: Path, timeout_s: float
) -> Iterator[Server]:
    """Run uvicorn (one process, one worker) on a free loopback port; always stop it."""
    port = free_port()
    cmd = [sys.executable, "-m", "uvicorn", *target, "--host", HOST, "--port", str(port)]
    cmd += ["--no-access-log", "--log-level", "warning", "--timeout-graceful-shutdown", "5"]
    with log.open("wb") as log_file:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        url = f"http://{HOST}:{port}"
        wait_ready(name, proc, url + ready_path, log, timeout_s)
        yield Server(name=name, url=url, pid=proc.pid, log=log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_ready(
    name: str, proc: subprocess.Popen[bytes], url: str, log: Path, timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        code = proc.poll()
        if code is not None:
            raise BenchError(
                f"the {name} server exited (status {code}) before answering {url}; "
                f"its log ends with:\n{log_tail(log)}"
            )
        try:
            if httpx.get(url, timeout=1.0, trust_env=False).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise BenchError(
                f"the {name} server did not answer {url} within {timeout_s:.0f} s; "
                f"its log ends with:\n{log_tail(log)}"
            )
        time.sleep(0.1)


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds of a process so far (Linux /proc), or None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


# --- Load generators --------------------------------------------------------------------------


@dataclass
class Load:
    """What one load run sent and got back."""

    sent: list[Spec]  # the requests written, in order
    responses: int
    non_200: int
    errors: int  # transport errors and timeouts: no response
    seconds: float  # first request sent to last response received
    p50_ms: float
    p99_ms: float
    client_cpu_s: float | None
    problems: Counter[str] = field(default_factory=Counter)  # non-200 statuses and errors

    @property
    def unanswered(self) -> int:
        return max(0, len(self.sent) - self.responses)


def percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of an ascending list; NaN when empty."""
    if not sorted_values:
        return math.nan
    return sorted_values[max(0, math.ceil(q / 100 * len(sorted_values)) - 1)]


def run_httpx(
    url: str, headers: dict[str, str], specs: list[Spec], concurrency: int, max_seconds: float
) -> Load:
    """Send ``specs`` in order from ``concurrency`` workers sharing one AsyncClient."""
    return asyncio.run(_run_httpx(url, headers, specs, concurrency, max_seconds))


async def _run_httpx(
    url: str, headers: dict[str, str], specs: list[Spec], concurrency: int, max_seconds: float
) -> Load:
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    latencies: list[float] = []
    statuses: Counter[int] = Counter()
    errors = 0
    problems: Counter[str] = Counter()
    sent = 0
    pending = iter(specs)

    async with httpx.AsyncClient(
        base_url=url, headers=headers, limits=limits, timeout=REQUEST_TIMEOUT_S, trust_env=False
    ) as client:

        async def worker() -> None:
            nonlocal errors, sent
            # The deadline is checked before taking a request, so every request taken is sent
            # and ``specs[:sent]`` is exactly what went out.
            while time.perf_counter() < deadline:
                spec = next(pending, None)
                if spec is None:
                    return
                method, path, body = spec
                sent += 1
                start = time.perf_counter()
                try:
                    response = await client.request(method, path, content=body or None)
                except httpx.HTTPError as exc:
                    errors += 1
                    problems[f"{type(exc).__name__}: {exc}"] += 1
                    continue
                latencies.append(time.perf_counter() - start)
                statuses[response.status_code] += 1
                if response.status_code != 200:
                    problems[f"HTTP {response.status_code}"] += 1

        cpu_start = time.process_time()
        start = time.perf_counter()
        deadline = start + max_seconds
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - start
        cpu = time.process_time() - cpu_start

    latencies.sort()
    return Load(
        sent=specs[:sent],
        responses=len(latencies),
        non_200=len(latencies) - statuses[200],
        errors=errors,
        problems=problems,
        seconds=seconds,
        p50_ms=percentile(latencies, 50) * 1e3,
        p99_ms=percentile(latencies, 99) * 1e3,
        client_cpu_s=cpu,
    )


# wrk runs one Lua state per thread. Thread k takes its share of the request list (one request
# per line: METHOD<TAB>PATH<TAB>BODY) and sends each line once: delay() grants one request per
# line and then holds the connection idle, so the run ends with nothing in flight. wrk also calls
# request() without a grant: once on thread 0 before the run, to inspect the script (counted
# nowhere), and when it reconnects after a connection dropped with a request unanswered; then
# the thread resends its latest line (same client_answer_id: what a retrying client does) and
# counts it as `resent`, one per lost request. When its share is answered a thread says so on
# stderr and the script interrupts wrk (SIGINT), which otherwise runs for the whole -d. Times
# come from the monotonic clock through LuaJIT's FFI, so the rate leaves out wrk's idle tail.
WRK_LUA = r"""
local ffi = require("ffi")
ffi.cdef[[
typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
int clock_gettime(int clock_id, bench_timespec *tp);
]]
local timespec = ffi.new("bench_timespec")
local function now_us()
  ffi.C.clock_gettime(1, timespec)  -- CLOCK_MONOTONIC
  return tonumber(timespec.tv_sec) * 1000000 + tonumber(timespec.tv_nsec) / 1000
end

local threads = {}
local created = 0

function setup(thread)
  thread:set("index", created)
  created = created + 1
  table.insert(threads, thread)
end

function init(args)
  local lines = {}
  for line in io.lines(args[1]) do lines[#lines + 1] = line end
  local nthreads = tonumber(args[2])
  local base, extra = math.floor(#lines / nthreads), #lines % nthreads
  local first = index * base + math.min(index, extra)
  share = base + ((index < extra) and 1 or 0)
  specs = {}
  for i = first + 1, first + share do
    local method, path, body = lines[i]:match("^(%u+)\t([^\t]*)\t(.*)$")
    if body == "" then body = nil end
    specs[#specs + 1] = {method, path, body}
  end
  granted, sent, resent, received, non200 = 0, 0, 0, 0, 0
  first_us, last_us, finished = 0, 0, false
end

function delay()
  if granted >= share then return 3600000 end  -- share handed out: stay idle
  granted = granted + 1
  return 0
end

function request()
  local spec
  if sent < granted then  -- a granted request: the next line
    sent = sent + 1
    if sent == 1 then first_us = now_us() end
    spec = specs[sent]
  else  -- no grant: wrk inspecting the script, or a resend after a lost request
    if granted > 0 then resent = resent + 1 end
    spec = specs[math.max(sent, 1)]
  end
  return wrk.format(spec[1], spec[2], nil, spec[3])
end

function response(status, headers, body)
  received = received + 1
  last_us = now_us()
  if status ~= 200 then non200 = non200 + 1 end
  if not finished and sent >= share and received >= sent then
    finished = true
    io.stderr:write("bench-thread-done\n")
  end
end

function done(summary, latency, requests)
  local parts = {}
  for _, t in ipairs(threads) do
    parts[#parts + 1] = string.format(
      '{"sent": %d, "resent": %d, "received": %d, "non200": %d, "first_us": %.0f, "last_us": %.0f}',
      t:get("sent"), t:get("resent"), t:get("received"), t:get("non200"),
      t:get("first_us"), t:get("last_us"))
  end
  -- wrk's timeout count is left out: it also counts the connections held idle by delay().
  local e = summary.errors
  io.write(string.format(
    'BENCH_RESULT {"p50_us": %.0f, "p99_us": %.0f, "socket_errors": %d, "threads": [%s]}\n',
    latency:percentile(50), latency:percentile(99),
    e.connect + e.read + e.write, table.concat(parts, ", ")))
end
"""


def run_wrk(
    wrk: str,
    url: str,
    headers: dict[str, str],
    specs: list[Spec],
    concurrency: int,
    max_seconds: float,
    workdir: Path,
) -> Load:
    """Send ``specs`` with wrk: each thread sends its share once, then wrk is interrupted."""
    threads = max(1, min(os.cpu_count() or 1, concurrency, len(specs)))
    connections = max(threads, concurrency - concurrency % threads)
    script, spec_file = workdir / "bench.lua", workdir / "requests.tsv"
    script.write_text(WRK_LUA, encoding="utf-8")
    spec_file.write_text("".join(f"{m}\t{p}\t{b}\n" for m, p, b in specs), encoding="utf-8")
    out_file = workdir / "wrk.out"
    cmd = [wrk, "-t", str(threads), "-c", str(connections), "-d", f"{max(1, round(max_seconds))}s"]
    cmd += ["--timeout", f"{int(REQUEST_TIMEOUT_S)}s", "-s", str(script)]
    for name, value in headers.items():
        cmd += ["-H", f"{name}: {value}"]
    cmd += [url, "--", str(spec_file), str(threads)]

    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with out_file.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True)
    stderr_lines: list[str] = []

    def watch_stderr() -> None:
        assert proc.stderr is not None
        finished = 0
        for line in proc.stderr:
            if line.strip() == "bench-thread-done":
                finished += 1
                if finished == threads:
                    threading.Thread(target=interrupt, daemon=True).start()
            else:
                stderr_lines.append(line)

    def interrupt() -> None:
        # Until wrk installs its SIGINT handler (just after starting its threads) the signal
        # is ignored, so repeat it until wrk exits.
        while proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.5)

    watcher = threading.Thread(target=watch_stderr, daemon=True)
    watcher.start()
    try:
        proc.wait(timeout=max_seconds + 30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise BenchError("wrk did not finish in time") from None
    watcher.join(timeout=5)
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)

    output = out_file.read_text(encoding="utf-8", errors="replace")
    line = next((x for x in output.splitlines() if x.startswith("BENCH_RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise BenchError(
            f"wrk failed (status {proc.returncode}):\n{output}{''.join(stderr_lines)}".strip()
        )
    result = json.loads(line.removeprefix("BENCH_RESULT "))

    sent: list[Spec] = []
    base, extra = divmod(len(specs), threads)
    for index, thread in enumerate(result["threads"]):
        first = index * base + min(index, extra)
        sent += specs[first : first + thread["sent"]]
    threads_out = result["threads"]
    responses = sum(t["received"] for t in threads_out)
    non_200 = sum(t["non200"] for t in threads_out)
    resent = sum(t["resent"] for t in threads_out)
    active = [t for t in threads_out if t["received"]]
    seconds = (
        (max(t["last_us"] for t in active) - min(t["first_us"] for t in active)) / 1e6
        if active
        else 0.0
    )
    cpu = (cpu_after.ru_utime + cpu_after.ru_stime) - (cpu_before.ru_utime + cpu_before.ru_stime)
    # Requests written and never answered: lost with a dropped connection (each was followed
    # by a resend), or still in flight when the time cap stopped wrk.
    unanswered = max(0, len(sent) + resent - responses)
    problems: Counter[str] = Counter()
    if unanswered:
        problems["no response (wrk: dropped connection, timeout or time cap)"] = unanswered
    if resent:
        problems["resent after a dropped connection (wrk)"] = resent
    if result["socket_errors"]:
        problems["connect/read/write errors (wrk)"] = result["socket_errors"]
    if non_200:
        problems["non-200 responses (wrk records no status)"] = non_200
    return Load(
        sent=sent,
        responses=responses,
        non_200=non_200,
        errors=unanswered,
        problems=problems,
        seconds=seconds,
        p50_ms=result["p50_us"] / 1e3,
        p99_ms=result["p99_us"] / 1e3,
        client_cpu_s=cpu,
    )


# --- Phases -----------------------------------------------------------------------------------


@dataclass
class Phase:
    key: str
    label: str
    make_specs: Callable[[int], list[Spec]]
    headers: dict[str, str] = field(default_factory=dict)
    baseline: str | None = None  # key of the phase whose req/s is the denominator


@dataclass
class PhaseResult:
    key: str
    label: str
    requests: int
    req_per_s: float
    p50_ms: float
    p99_ms: float
    non_200: int
    errors: int
    server_cpu_pct: float | None
    client_cpu_pct: float | None
    baseline: str | None
    ratio: float | None = None
    # Warm-up and measured requests together, for the checks.
    sent_all: list[Spec] = field(default_factory=list, repr=False)
    unanswered_all: int = 0
    non_200_all: int = 0
    problems_all: Counter[str] = field(default_factory=Counter)


@dataclass
class Options:
    requests: int
    concurrency: int
    max_seconds: float
    wrk: str | None
    workdir: Path


def warmup_count(requests: int) -> int:
    return min(200, max(5, requests // 10))


def run_phase(phase: Phase, server: Server, opts: Options) -> PhaseResult:
    """Warm up (httpx), then measure ``opts.requests`` requests with the chosen generator."""
    progress(f"  {phase.label} ...")
    warm = run_httpx(
        server.url,
        phase.headers,
        phase.make_specs(warmup_count(opts.requests)),
        opts.concurrency,
        # Generous: a warm-up cut short would count its in-flight requests as unanswered.
        60.0,
    )
    specs = phase.make_specs(opts.requests)
    cpu_before = process_cpu_s(server.pid)
    if opts.wrk:
        load = run_wrk(
            opts.wrk,
            server.url,
            phase.headers,
            specs,
            opts.concurrency,
            opts.max_seconds,
            opts.workdir,
        )
    else:
        load = run_httpx(server.url, phase.headers, specs, opts.concurrency, opts.max_seconds)
    cpu_after = process_cpu_s(server.pid)
    # CPU seconds over the seconds the load ran (the server idles before and after it).
    window = load.seconds
    server_cpu = (
        100 * (cpu_after - cpu_before) / window
        if cpu_before is not None and cpu_after is not None and window > 0
        else None
    )
    client_cpu = (
        100 * load.client_cpu_s / window if load.client_cpu_s is not None and window > 0 else None
    )
    return PhaseResult(
        key=phase.key,
        label=phase.label,
        requests=load.responses,
        req_per_s=load.responses / load.seconds if load.seconds > 0 else 0.0,
        p50_ms=load.p50_ms,
        p99_ms=load.p99_ms,
        non_200=load.non_200,
        errors=load.errors,
        server_cpu_pct=server_cpu,
        client_cpu_pct=client_cpu,
        baseline=phase.baseline,
        sent_all=warm.sent + load.sent,
        unanswered_all=warm.unanswered + load.unanswered,
        non_200_all=warm.non_200 + load.non_200,
        problems_all=warm.problems + load.problems,
    )


def json_body(**values: Any) -> str:
    return json.dumps(values, separators=(",", ":"))


def question_path(number: int, seed: int) -> str:
    return f"/api/v1/cards/{CARD_ID}/points/{number}/question?seed={seed}"


def baseline_phases() -> list[Phase]:
    def inserts(count: int) -> list[Spec]:
        return [
            ("POST", "/insert", json_body(client_answer_id=str(uuid.uuid4()))) for _ in range(count)
        ]

    return [
        Phase("bare_json", "bare async JSON (baseline app)", lambda n: [("GET", "/json", "")] * n),
        Phase(
            "bare_insert",
            "sync SQLite insert (baseline app)",
            inserts,
            headers={"Content-Type": "application/json"},
        ),
    ]


def app_phases(
    server: Server, rng: random.Random, pool_size: int, answered: list[Spec]
) -> list[Phase]:
    """The app's endpoints; creates a learner and fetches the question tokens first.

    The replay phase resends requests from ``answered``, which the caller fills with what the
    answer phase sent.
    """
    with httpx.Client(base_url=server.url, timeout=REQUEST_TIMEOUT_S, trust_env=False) as client:
        created = client.post("/api/v1/learners")
        if created.status_code != 201:
            raise BenchError(
                f"POST /api/v1/learners answered {created.status_code}: {created.text}"
            )
        bearer = created.json()["token"]
        cards = {card["id"]: card for card in client.get("/api/v1/cards").json()}
        if CARD_ID not in cards:
            raise BenchError(f"the app serves no card {CARD_ID!r} (it has {sorted(cards)})")
        points = [point["number"] for point in cards[CARD_ID]["points"]]
        pool: list[tuple[str, list[str]]] = []
        for i in range(pool_size):
            response = client.get(question_path(points[i % len(points)], rng.randint(0, MAX_SEED)))
            if response.status_code != 200:
                raise BenchError(
                    f"fetching a question answered {response.status_code}: {response.text}"
                )
            question = response.json()
            pool.append((question["token"], [choice["id"] for choice in question["choices"]]))

    def questions(count: int) -> list[Spec]:
        return [
            ("GET", question_path(rng.choice(points), rng.randint(0, MAX_SEED)), "")
            for _ in range(count)
        ]

    answer_index = itertools.count()

    def answers(count: int) -> list[Spec]:
        specs = []
        for _ in range(count):
            i = next(answer_index)
            token, choices = pool[i % len(pool)]
            # Cycle the choices too, so right and wrong answers (with pitfalls) are both stored.
            choice = choices[(i // len(pool)) % len(choices)]
            body = json_body(token=token, choice_id=choice, client_answer_id=str(uuid.uuid4()))
            specs.append(("POST", "/api/v1/answers", body))
        return specs

    answer_phase = Phase(
        "answer",
        "POST /answers, new client_answer_id",
        answers,
        headers={"Authorization": f"Bearer {bearer}", "Content-Type": "application/json"},
        baseline="bare_insert",
    )

    def replays(count: int) -> list[Spec]:
        if not answered:
            raise BenchError("no answer was sent, so there is nothing to replay")
        return [answered[i % len(answered)] for i in range(count)]

    return [
        Phase(
            "healthz", "GET /healthz", lambda n: [("GET", "/healthz", "")] * n, baseline="bare_json"
        ),
        Phase("question", "GET .../points/{n}/question?seed=", questions, baseline="healthz"),
        answer_phase,
        Phase(
            "replay",
            "POST /answers, replayed client_answer_id",
            replays,
            headers=answer_phase.headers,
            baseline="bare_insert",
        ),
    ]


# --- Running, checking, reporting -------------------------------------------------------------


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def migrate(env: dict[str, str]) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "app.cli", "migrate"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode != 0:
        raise BenchError(f"the migration failed: {(proc.stderr or proc.stdout).strip()}")


def stored_ids(db: Path, table: str) -> list[str]:
    with contextlib.closing(sqlite3.connect(db)) as conn:
        return [row[0] for row in conn.execute(f"SELECT client_answer_id FROM {table}")]


def client_answer_ids(specs: list[Spec]) -> set[str]:
    return {json.loads(body)["client_answer_id"] for _, _, body in specs}


def all_200(name: str, results: list[PhaseResult]) -> Check:
    sent = sum(len(r.sent_all) for r in results)
    non_200 = sum(r.non_200_all for r in results)
    unanswered = sum(r.unanswered_all for r in results)
    problems = sum((r.problems_all for r in results), Counter())
    detail = (
        f"{sent} sent (warm-up included), {non_200} answered other than 200, "
        f"{unanswered} without a response"
    )
    if problems:
        detail += " (" + "; ".join(f"{n} × {what}" for what, n in problems.most_common(5)) + ")"
    return Check(name, non_200 == 0 and unanswered == 0, detail)


def stored_once(name: str, rows: list[str], sent: set[str], unanswered: int) -> Check:
    """Every id sent is stored once, nothing else is; a request that got no response may or
    may not have been stored (a client would resend it with the same id)."""
    stored = set(rows)
    duplicated = len(rows) - len(stored)
    missing, extra = len(sent - stored), len(stored - sent)
    detail = (
        f"{len(rows)} rows for {len(sent)} distinct client_answer_ids sent "
        f"({missing} missing, {extra} unexpected, {duplicated} duplicated)"
    )
    return Check(name, duplicated == 0 and extra == 0 and missing <= unanswered, detail)


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.loadgen == "httpx":
        wrk = None
    else:
        wrk = shutil.which("wrk")
        if wrk is None and args.loadgen == "wrk":
            raise BenchError("--loadgen wrk: wrk is not on PATH")
    rng = random.Random(args.seed)
    results: list[PhaseResult] = []

    with tempfile.TemporaryDirectory(prefix="infracards-bench-") as tmp_name:
        tmp = Path(tmp_name)
        opts = Options(args.requests, args.concurrency, args.max_seconds, wrk, tmp)
        env = dict(os.environ)

        baseline_db = tmp / "baseline.db"
        create_baseline_db(baseline_db)
        progress("baseline app (bench/service.py:baseline_app):")
        with serve(
            "baseline",
            ["service:baseline_app", "--factory", "--app-dir", str(BENCH_DIR)],
            {**env, BASELINE_DB_ENV: str(baseline_db)},
            "/json",
            tmp / "baseline.log",
            args.startup_timeout,
        ) as server:
            for phase in baseline_phases():
                results.append(run_phase(phase, server, opts))

        data_dir = tmp / "data"
        db = data_dir / "infracards.db"
        app_env = {
            **env,
            "DATABASE_URL": f"sqlite:///{db}",
            "DATA_DIR": str(data_dir),
            "SECRET_KEY": secrets.token_urlsafe(48),
        }
        progress("migrating a fresh SQLite database ...")
        migrate(app_env)
        progress("app (app.main:create_app):")
        answered: list[Spec] = []
        with serve(
            "app",
            ["app.main:create_app", "--factory"],
            app_env,
            "/healthz",
            tmp / "app.log",
            args.startup_timeout,
        ) as server:
            for phase in app_phases(server, rng, min(TOKEN_POOL, args.requests), answered):
                result = run_phase(phase, server, opts)
                if phase.key == "answer":
                    answered.extend(result.sent_all)
                results.append(result)

        # Both servers are stopped: the databases are complete.
        by_key = {r.key: r for r in results}
        posts = [by_key["answer"], by_key["replay"]]
        checks = [
            all_200("every POST /answers answered 200", posts),
            stored_once(
                "attempts stored exactly once",
                stored_ids(db, "attempts"),
                client_answer_ids(by_key["answer"].sent_all + by_key["replay"].sent_all),
                sum(r.unanswered_all for r in posts),
            ),
            all_200("every other request answered 200", [r for r in results if r not in posts]),
            stored_once(
                "baseline inserts stored exactly once",
                stored_ids(baseline_db, "rows"),
                client_answer_ids(by_key["bare_insert"].sent_all),
                by_key["bare_insert"].unanswered_all,
            ),
        ]
        if not all(check.ok for check in checks):
            for log in (tmp / "baseline.log", tmp / "app.log"):
                progress(f"--- end of {log.name} ---\n{log_tail(log, 40)}")

    for r in results:
        base = by_key.get(r.baseline) if r.baseline else None
        if base is not None and base.req_per_s > 0:
            r.ratio = r.req_per_s / base.req_per_s

    from importlib.metadata import version

    return {
        "config": {
            "load_generator": "wrk" if wrk else "httpx",
            "wrk": wrk,
            "requests": args.requests,
            "warmup_requests": warmup_count(args.requests),
            "concurrency": args.concurrency,
            "max_seconds": args.max_seconds,
            "seed": args.seed,
            "cpus": os.cpu_count(),
            "python": sys.version.split()[0],
            "uvicorn": version("uvicorn"),
            "fastapi": version("fastapi"),
        },
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
            }
            for r in results
        ],
        "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in checks],
        "ok": all(c.ok for c in checks),
    }


BASELINE_NAMES = {"bare_json": "bare JSON", "bare_insert": "SQLite insert", "healthz": "/healthz"}


def format_report(report: dict[str, Any]) -> str:
    cfg = report["config"]

    def num(value: float | None, spec: str) -> str:
        return "-" if value is None or math.isnan(value) else format(value, spec)

    lines = [
        f"infracards service benchmark: {cfg['load_generator']}, {cfg['concurrency']} connections, "
        f"{cfg['requests']} requests per endpoint (+{cfg['warmup_requests']} warm-up), "
        f"one uvicorn worker on {HOST}, {cfg['cpus']} CPUs, Python {cfg['python']}, "
        f"uvicorn {cfg['uvicorn']}, FastAPI {cfg['fastapi']}",
        "",
    ]
    header = (
        f"{'endpoint':<42}{'requests':>9}{'req/s':>9}{'p50 ms':>9}{'p99 ms':>9}"
        f"{'not 200':>9}{'srv CPU':>9}{'cli CPU':>9}  ratio"
    )
    lines += [header, "-" * (len(header) + 20)]
    for r in report["results"]:
        ratio = (
            "(baseline)"
            if r["baseline"] is None
            else f"{num(r['ratio'], '.2f')} × {BASELINE_NAMES[r['baseline']]}"
        )
        lines.append(
            f"{r['label']:<42}{r['requests']:>9}{num(r['req_per_s'], ',.0f'):>9}"
            f"{num(r['p50_ms'], '.1f'):>9}{num(r['p99_ms'], '.1f'):>9}"
            f"{r['non_200'] + r['errors']:>9}{num(r['server_cpu_pct'], '.0f') + '%':>9}"
            f"{num(r['client_cpu_pct'], '.0f') + '%':>9}  {ratio}"
        )
    lines += ["", "checks:"]
    for c in report["checks"]:
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
        default=32,
        help="concurrent keep-alive connections (default 32)",
    )
    parser.add_argument(
        "--max-seconds",
        type=positive_float,
        default=60.0,
        help="time cap per endpoint (default 60)",
    )
    parser.add_argument(
        "--loadgen",
        choices=["auto", "wrk", "httpx"],
        default="auto",
        help="load generator: wrk if on PATH, else httpx (default auto)",
    )
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
    sys.exit(main())
