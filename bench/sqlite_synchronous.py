"""What ``SQLITE_SYNCHRONOUS=full`` costs, measured beside ``normal`` in the same run.

Two figures, each as NORMAL and FULL and their ratio:

1. one-row commits on a WAL SQLite file (sqlite3, one connection): the bare price of the fsync
   FULL adds to every commit;
2. the answer POST of the real server (``uvicorn app.main:create_app``, one worker each, both
   started at once on fresh migrated files in the same folder), loaded in alternating rounds
   (normal, full, normal, full, ...) so that drift on a shared machine hits both alike; the
   median round of each mode is reported.

    .venv/bin/python bench/sqlite_synchronous.py [--answers 600] [--rounds 3] [--dir DIR]

DIR (default: a temporary folder) should be on the disk a deployment would use: on tmpfs an
fsync is free and the figures say nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
CARD_ID = "zero-memory-offload"
MODES = ("normal", "full")


def commits_per_s(folder: Path, mode: str, count: int) -> float:
    path = folder / f"commits-{mode}.db"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(f"PRAGMA synchronous={mode.upper()}")
        conn.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT NOT NULL)")
        started = time.perf_counter()
        for i in range(count):
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO rows (body) VALUES (?)", (f"row {i} {uuid.uuid4()}",))
            conn.execute("COMMIT")
        return count / (time.perf_counter() - started)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Server:
    def __init__(self, folder: Path, mode: str) -> None:
        data = folder / f"data-{mode}"
        data.mkdir()
        self.database_url = f"sqlite:///{data / 'infracards.db'}"
        self.env = {
            **{k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "REDIS_URL")},
            "DATABASE_URL": self.database_url,
            "DATA_DIR": str(data),
            "SQLITE_SYNCHRONOUS": mode,
            "ENVIRONMENT": "bench",
            "SECRET_KEY": "bench-secret-key-0123456789-abcdefghijklmnopq",
            "LOG_LEVEL": "WARNING",
        }
        subprocess.run(
            [sys.executable, "-m", "app.cli", "migrate"],
            cwd=ROOT,
            env=self.env,
            check=True,
            capture_output=True,
            timeout=300,
        )
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = (data / "server.log").open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "app.main:create_app",
                "--factory",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--no-access-log",
                "--log-level",
                "warning",
            ],
            cwd=ROOT,
            env=self.env,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def wait_ready(self, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"the server exited ({self.proc.returncode}); see {self.log.name}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(self.url + "/healthz", timeout=2, trust_env=False).status_code == 200:
                    return
            time.sleep(0.1)
        raise SystemExit(f"the server did not start in {timeout_s:.0f} s; see {self.log.name}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.log.close()


async def prepare(url: str, learners: int, answers: int) -> list[tuple[str, dict[str, str]]]:
    """``answers`` (bearer, body) pairs on fresh questions, made before the timed round."""
    async with httpx.AsyncClient(base_url=url, timeout=60, trust_env=False) as client:
        tokens = [
            (await client.post("/api/v1/learners")).json()["access_token"] for _ in range(learners)
        ]
        per = -(-answers // learners)
        items: list[tuple[str, dict[str, str]]] = []
        for token in tokens:
            questions: list[dict] = []
            while len(questions) < per:
                batch = await client.get(
                    f"/api/v1/cards/{CARD_ID}/questions",
                    params={"count": min(50, per - len(questions))},  # the API's largest batch
                    headers={"Authorization": f"Bearer {token}"},
                )
                batch.raise_for_status()
                questions += batch.json()["items"]
            for q in questions:
                body = {
                    "token": q["token"],
                    "choice_id": q["choices"][0]["id"],
                    "client_answer_id": str(uuid.uuid4()),
                }
                items.append((token, body))
        return items[:answers]


async def answer_round(
    url: str, items: list[tuple[str, dict[str, str]]], concurrency: int
) -> float:
    queue = list(reversed(items))
    failures: list[str] = []

    async def worker(client: httpx.AsyncClient) -> None:
        while queue:
            token, body = queue.pop()
            response = await client.post(
                "/api/v1/answers", json=body, headers={"Authorization": f"Bearer {token}"}
            )
            if response.status_code != 200:
                failures.append(f"{response.status_code} {response.text[:120]}")

    limits = httpx.Limits(max_connections=concurrency)
    async with httpx.AsyncClient(
        base_url=url, timeout=60, trust_env=False, limits=limits
    ) as client:
        started = time.perf_counter()
        await asyncio.gather(*(worker(client) for _ in range(concurrency)))
        elapsed = time.perf_counter() - started
    if failures:
        raise SystemExit(f"{len(failures)} answers failed, e.g. {failures[:3]}")
    return len(items) / elapsed


def filesystem_of(path: Path) -> str:
    best = ("?", "?")
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            device, mount, fstype = line.split()[:3]
            if str(path.resolve()).startswith(mount) and len(mount) >= len(best[0]):
                best = (mount, f"{fstype} on {device}")
    return best[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--answers", type=int, default=600, help="answer POSTs per round")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per mode (alternating)")
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--commits", type=int, default=2000, help="one-row commits per mode")
    parser.add_argument("--dir", type=Path, help="where the databases go (default: a temp folder)")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="infracards-sync-", dir=args.dir) as name:
        folder = Path(name)
        print(f"databases in {folder} ({filesystem_of(folder)}), {os.cpu_count()} CPUs")
        commits = {mode: commits_per_s(folder, mode, args.commits) for mode in MODES}
        print(
            f"one-row commits/s (WAL, one connection): normal {commits['normal']:,.0f}, "
            f"full {commits['full']:,.0f}, full/normal {commits['full'] / commits['normal']:.2f}"
        )

        servers = {mode: Server(folder, mode) for mode in MODES}
        try:
            for server in servers.values():
                server.wait_ready()
            rates: dict[str, list[float]] = {mode: [] for mode in MODES}
            for round_no in range(args.rounds):
                for mode in MODES if round_no % 2 == 0 else reversed(MODES):
                    url = servers[mode].url
                    items = asyncio.run(prepare(url, 8, args.answers))
                    rate = asyncio.run(answer_round(url, items, args.concurrency))
                    rates[mode].append(rate)
                    print(f"  round {round_no + 1} {mode:>6}: {rate:,.0f} answers/s", flush=True)
        finally:
            for server in servers.values():
                server.stop()
        normal, full = (statistics.median(rates[m]) for m in MODES)
        print(
            f"answer POST/s (median of {args.rounds}, {args.answers} answers, "
            f"{args.concurrency} connections, one worker): normal {normal:,.0f}, full {full:,.0f}, "
            f"full/normal {full / normal:.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
