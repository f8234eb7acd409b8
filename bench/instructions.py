"""Instructions per request, counted by Valgrind's callgrind, against the bench's baselines
counted in the same run.

    python bench/instructions.py                          # 1,000 requests each, 6,000 warm-up
    python bench/instructions.py --requests 300 --warm-up 1000 --keep DIR

Wall-clock ratios on a shared 2-core machine swing by ±20 % from run to run (``make
bench-service``); instruction counts repeat to within about 2 %, so a change to a hot path can be
measured here first. Each request goes through the whole ASGI app in this process (the
middlewares, routing, the endpoint, the response), sent a scope like the one uvicorn builds,
without a socket: what the server itself adds (uvicorn, httptools, asyncio) is not counted; it
was about 130k instructions a request for the bare endpoint and 190k for a question (counted in
a running server under wrk), so served ratios come out a little higher than these. Every thread
is counted: the answer writer's and the threadpool's, SQLite's work in them included.

The endpoints, as ``make bench-service`` loads them: the baselines of ``service_baseline.py``
(a bare ``async`` JSON endpoint; a sync endpoint inserting one row into WAL SQLite),
``GET /healthz``, the question GET (``/api/v1/cards/zero-memory-offload/points/{n}/question
?seed=...``, n and seed drawn afresh for every request, anonymous) and the answer POST (first
answers of 32 learners in turn, each to a question fetched with its learner's token; the
answer regenerates its variant, as every answer does). GETs are sent one at a time; the two
POSTs 64 at a time (wrk's connections), so that the answer writer groups them into transactions
as it does when served.
Each endpoint is warmed up first (the question's caches fill over the first thousands of
questions: texts, combinations, choices) and then counted with instrumentation on only around
its own requests. The app runs as ``make run`` serves it, on a fresh migrated SQLite database in
a temporary folder, its access log off as in the bench.

Needs ``valgrind`` (with its headers: Debian's package has them) and a C compiler for the
three-line helper that switches counting on and off (``CALLGRIND_START_INSTRUMENTATION``);
under Valgrind everything runs many times slower: a default run takes a few minutes.
Exit status 0 when counted, 2 when it could not run.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
ROOT = BENCH_DIR.parent
CHILD_ENV = "INFRACARDS_INSTRUCTIONS_CHILD"
HELPER_C = """
#include <valgrind/callgrind.h>
void counting_on(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void counting_off(const char *name) { CALLGRIND_DUMP_STATS_AT(name); CALLGRIND_STOP_INSTRUMENTATION; }
"""
CARD_ID = "zero-memory-offload"
POINTS = 5
MAX_SEED = 2**31 - 1  # app.domain.identity.MAX_SEED
ENDPOINTS = ("bare_json", "healthz", "question", "insert", "answer")
LABELS = {
    "bare_json": "bare async JSON (baseline app)",
    "healthz": "GET /healthz",
    "question": "GET .../points/{n}/question?seed=",
    "insert": "sync SQLite insert (baseline app)",
    "answer": "POST /answers, new client_answer_id",
}
BASELINES = {"healthz": "bare_json", "question": "bare_json", "answer": "insert"}
LEARNERS = 32  # the answers' learners, as in make bench-service
CONCURRENCY = 64  # requests in flight together in the POST phases (wrk's connections)
ANSWER_WARM_UP = 500  # the answer path's own caches; generation is warm from the questions


class BenchError(Exception):
    """The benchmark could not run (exit status 2)."""


# --- the parent: build the helper, run this script under callgrind, read the counts ------------


def build_helper(folder: Path) -> Path:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise BenchError("no C compiler (cc) for the callgrind helper: apt-get install -y gcc")
    source, library = folder / "counting.c", folder / "libcounting.so"
    source.write_text(HELPER_C)
    done = subprocess.run(
        [compiler, "-shared", "-fPIC", "-O2", "-o", str(library), str(source)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise BenchError(
            "cannot build the callgrind helper (is valgrind installed, with "
            f"valgrind/callgrind.h?): {done.stderr.strip().splitlines()[-1:]}"
        )
    return library


def counts(folder: Path) -> dict[str, int]:
    """Instructions per dump, by the name each phase dumped under."""
    found: dict[str, int] = {}
    for dump in folder.glob("callgrind.out*"):
        text = dump.read_text(errors="replace")
        name = re.search(r"^desc: Trigger: Client Request: (\S+)", text, re.MULTILINE)
        total = re.search(r"^(?:summary|totals): (\d+)", text, re.MULTILINE)
        if name and total:
            found[name.group(1)] = int(total.group(1))
    return found


def run_parent(args: argparse.Namespace) -> int:
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise BenchError("valgrind is missing: apt-get install -y valgrind")
    folder = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="instructions-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        library = build_helper(folder)
        env = {**os.environ, CHILD_ENV: str(library), "PYTHONHASHSEED": "0"}
        command = [
            valgrind,
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={folder / 'callgrind.out'}",
            sys.executable,
            str(Path(__file__).resolve()),
            "--requests",
            str(args.requests),
            "--warm-up",
            str(args.warm_up),
            "--seed",
            str(args.seed),
        ]
        log = folder / "run.log"
        with log.open("wb") as out:
            code = subprocess.run(command, cwd=ROOT, env=env, stdout=out, stderr=out).returncode
        if code != 0:
            tail = log.read_text(errors="replace").strip().splitlines()[-15:]
            raise BenchError(f"the counted run failed (status {code}):\n" + "\n".join(tail))
        found = counts(folder)
        missing = [name for name in ENDPOINTS if name not in found]
        if missing:
            raise BenchError(f"no count for {', '.join(missing)} in {folder}")
        report(found, args.requests)
        return 0
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)


def report(found: dict[str, int], requests: int) -> None:
    per_request = {name: found[name] / requests for name in ENDPOINTS}
    print(
        f"infracards instructions per request (callgrind, in process), {requests} requests each, "
        f"Python {sys.version.split()[0]}"
    )
    print(f"{'endpoint':<40} {'instructions':>14}  ratio (baseline / endpoint)")
    print("-" * 86)
    for name in ENDPOINTS:
        count = per_request[name]
        base = BASELINES.get(name)
        ratio = "(baseline)" if base is None else f"{per_request[base] / count:.2f} x {base}"
        print(f"{LABELS[name]:<40} {count / 1000:>13,.1f}k  {ratio}")
    print(
        "(the POSTs' ratio is of instructions only: served, both are bound by waits as well, "
        "SQLite's write lock and the threadpool for the insert, the writer's batches for the "
        "answer: make bench-service measures those)"
    )


# --- the child: the apps, the requests, counting on only around each endpoint's requests -------


def request_scope(
    path: str,
    query: str = "",
    *,
    method: str = "GET",
    body: bytes = b"",
    bearer: str | None = None,
) -> dict[str, Any]:
    """What uvicorn (httptools) hands the app for a keep-alive request from wrk; a body is
    sent as JSON (and kept in the scope for :func:`call`)."""
    headers = [(b"host", b"127.0.0.1:8000")]
    if body:
        headers += [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]
    if bearer is not None:
        headers.append((b"authorization", f"Bearer {bearer}".encode()))
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": method,
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": headers,
        "state": {},
        BODY_KEY: body,
    }


BODY_KEY = "instructions.body"


async def start(app: Any) -> Callable[[], Any]:
    """The app's lifespan start-up (the start-up gate, the collector tuning); what shuts it
    down."""
    incoming: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outgoing: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    await incoming.put({"type": "lifespan.startup"})
    scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
    task = asyncio.ensure_future(app(scope, incoming.get, outgoing.put))
    message = await outgoing.get()
    if message["type"] != "lifespan.startup.complete":
        raise BenchError(f"the app did not start: {message}")

    async def stop() -> None:
        await incoming.put({"type": "lifespan.shutdown"})
        await task

    return stop


async def call(app: Any, scope: dict[str, Any]) -> bytes:
    """One request through ``app``; its body (BenchError unless it answered 200 or 201)."""
    sent: list[dict[str, Any]] = []
    body = scope.pop(BODY_KEY, b"")

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    if sent[0]["status"] not in (200, 201):
        raise BenchError(f"{scope['path']} answered {sent[0]['status']}: {sent[1:]}")
    return b"".join(m.get("body", b"") for m in sent[1:])


async def call_all(app: Any, scopes: list[dict[str, Any]], concurrency: int) -> None:
    """``scopes`` through ``app``, ``concurrency`` in flight at a time (1: one after another)."""
    if concurrency == 1:
        for scope in scopes:
            await call(app, scope)
        return
    for first in range(0, len(scopes), concurrency):
        await asyncio.gather(*(call(app, s) for s in scopes[first : first + concurrency]))


async def answer_scopes(app: Any, count: int, rng: random.Random) -> list[dict[str, Any]]:
    """``count`` first answers of ``LEARNERS`` learners in turn, each to a question fetched with
    its learner's token (uncounted), a choice picked at random."""
    learners = [
        json.loads(await call(app, request_scope("/api/v1/learners", method="POST")))[
            "access_token"
        ]
        for _ in range(LEARNERS)
    ]
    scopes = []
    for index in range(count):
        bearer = learners[index % LEARNERS]
        path = f"/api/v1/cards/{CARD_ID}/points/{rng.randint(1, POINTS)}/question"
        query = f"seed={rng.randint(0, MAX_SEED)}"
        shown = json.loads(await call(app, request_scope(path, query, bearer=bearer)))
        body = json.dumps(
            {
                "token": shown["token"],
                "choice_id": rng.choice(shown["choices"])["id"],
                "client_answer_id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            }
        ).encode()
        scopes.append(request_scope("/api/v1/answers", method="POST", body=body, bearer=bearer))
    return scopes


def run_child(args: argparse.Namespace) -> int:
    helper = ctypes.CDLL(os.environ[CHILD_ENV])
    sys.path.insert(0, str(BENCH_DIR))
    sys.path.insert(0, str(ROOT))
    from service_baseline import BASELINE_DB_ENV, baseline_app, create_sqlite_baseline

    folder = Path(tempfile.mkdtemp(prefix="instructions-app-"))
    try:
        create_sqlite_baseline(folder / "baseline.db")
        os.environ[BASELINE_DB_ENV] = str(folder / "baseline.db")
        from app.cli import migrate
        from app.config import Settings

        database_url = f"sqlite:///{folder / 'app.db'}"
        migrate(database_url)
        # uvicorn --no-access-log, as in make bench-service: app.observability then logs none.
        logging.getLogger("uvicorn.access").setLevel(logging.WARNING)
        from app.main import create_app

        settings = Settings(
            database_url=database_url,
            data_dir=folder / "data",
            cards_dir=ROOT / "cards",
            secret_key="instructions-bench-" + "k" * 40,
        )
        app, baseline = create_app(settings), baseline_app()
        rng = random.Random(args.seed)

        def question() -> dict[str, Any]:
            path = f"/api/v1/cards/{CARD_ID}/points/{rng.randint(1, POINTS)}/question"
            return request_scope(path, f"seed={rng.randint(0, MAX_SEED)}")

        def insert() -> dict[str, Any]:
            row = {"client_answer_id": str(uuid.UUID(int=rng.getrandbits(128), version=4))}
            return request_scope("/insert", method="POST", body=json.dumps(row).encode())

        def measure(
            name: str, target: Any, scopes: list[dict[str, Any]], concurrency: int
        ) -> Coroutine[Any, Any, None]:
            async def counted() -> None:
                helper.counting_on()
                await call_all(target, scopes, concurrency)
                helper.counting_off(name.encode())

            return counted()

        async def main() -> None:
            stops = [await start(app), await start(baseline)]
            gets = {
                "bare_json": (baseline, lambda: request_scope("/json")),
                "healthz": (app, lambda: request_scope("/healthz")),
                "question": (app, question),
            }
            for name, (target, make) in gets.items():
                await call_all(target, [make() for _ in range(args.warm_up)], 1)
                await measure(name, target, [make() for _ in range(args.requests)], 1)
            await call_all(baseline, [insert() for _ in range(ANSWER_WARM_UP)], CONCURRENCY)
            await measure("insert", baseline, [insert() for _ in range(args.requests)], CONCURRENCY)
            counted = await answer_scopes(app, args.requests, rng)
            warm = await answer_scopes(app, ANSWER_WARM_UP, rng)
            await call_all(app, warm, CONCURRENCY)
            await measure("answer", app, counted, CONCURRENCY)
            for stop in stops:
                await stop()

        asyncio.run(main())
        return 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000, help="counted requests each")
    parser.add_argument("--warm-up", type=int, default=6000, help="uncounted requests first")
    parser.add_argument("--seed", type=int, default=1, help="seed of the points and seeds asked")
    parser.add_argument("--keep", help="keep callgrind's files in this folder")
    args = parser.parse_args()
    if args.requests < 1 or args.warm_up < 0:
        parser.error("--requests must be at least 1 and --warm-up not negative")
    try:
        return run_child(args) if os.environ.get(CHILD_ENV) else run_parent(args)
    except BenchError as exc:
        print(f"instructions: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
