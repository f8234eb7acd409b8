"""Instructions per request, counted by Valgrind's callgrind, against the bench's bare JSON endpoint
counted in the same run.

    python bench/instructions.py                          # 1,000 requests each, 6,000 warm-up
    python bench/instructions.py --requests 300 --warm-up 1000 --keep DIR

Wall-clock ratios on a shared 2-core machine swing by ±20 % from run to run (``make
bench-service``); instruction counts repeat to within about 1 %, so a change to a hot path can be
measured here first. Each request goes through the whole ASGI app in this process (the
middlewares, routing, the endpoint, the response), sent a scope like the one uvicorn builds,
without a socket: what the server itself adds (uvicorn, httptools, asyncio) is not counted; it
was about 130k instructions a request for the bare endpoint and 190k for a question (counted in
a running server under wrk), so served ratios come out a little higher than these.

The endpoints: the bare ``async`` JSON endpoint of ``service_baseline.py`` (the denominator, as
in ``make bench-service``), ``GET /healthz`` and the question GET of ``make bench-service``
(``/api/v1/cards/zero-memory-offload/points/{n}/question?seed=...``, n and seed drawn afresh for
every request, anonymous), each warmed up first (the question's caches fill over the first
thousands of questions: texts, combinations, choices) and then counted with instrumentation on
only around its own requests. The app runs as ``make run`` serves it, on a fresh migrated SQLite
database in a temporary folder, its access log off as in the bench.

Needs ``valgrind`` (with its headers: Debian's package has them) and a C compiler for the
three-line helper that switches counting on and off (``CALLGRIND_START_INSTRUMENTATION``);
under Valgrind everything runs about 50 times slower: a default run takes about two minutes.
Exit status 0 when counted, 2 when it could not run.
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import logging
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
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
ENDPOINTS = ("bare_json", "healthz", "question")
LABELS = {
    "bare_json": "bare async JSON (baseline app)",
    "healthz": "GET /healthz",
    "question": "GET .../points/{n}/question?seed=",
}


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
    bare = per_request["bare_json"]
    print(
        f"infracards instructions per request (callgrind, in process), {requests} requests each, "
        f"Python {sys.version.split()[0]}"
    )
    print(f"{'endpoint':<40} {'instructions':>14}  ratio (bare JSON / endpoint)")
    print("-" * 86)
    for name in ENDPOINTS:
        count = per_request[name]
        ratio = "(baseline)" if name == "bare_json" else f"{bare / count:.2f} x bare JSON"
        print(f"{LABELS[name]:<40} {count / 1000:>13,.1f}k  {ratio}")


# --- the child: the apps, the requests, counting on only around each endpoint's requests -------


def request_scope(path: str, query: str = "") -> dict[str, Any]:
    """What uvicorn (httptools) hands the app for a keep-alive GET from wrk."""
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "server": ("127.0.0.1", 8000),
        "client": ("127.0.0.1", 50000),
        "scheme": "http",
        "method": "GET",
        "root_path": "",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": [(b"host", b"127.0.0.1:8000")],
        "state": {},
    }


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


async def call(app: Any, scope: dict[str, Any]) -> None:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await app(scope, receive, send)
    if sent[0]["status"] != 200:
        raise BenchError(f"{scope['path']} answered {sent[0]['status']}: {sent[1:]}")


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

        phases: dict[str, tuple[Any, Callable[[], dict[str, Any]]]] = {
            "bare_json": (baseline, lambda: request_scope("/json")),
            "healthz": (app, lambda: request_scope("/healthz")),
            "question": (app, question),
        }

        async def main() -> None:
            stops = [await start(app), await start(baseline)]
            for name, (target, make) in phases.items():
                for _ in range(args.warm_up):
                    await call(target, make())
                scopes = [make() for _ in range(args.requests)]
                helper.counting_on()
                for scope in scopes:
                    await call(target, scope)
                helper.counting_off(name.encode())
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
