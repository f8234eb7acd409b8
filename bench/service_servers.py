"""Server lifecycle and databases for bench/service.py.

:func:`serve` runs uvicorn (one or more workers) on a free loopback port and always stops it;
:class:`Database` is a fresh SQLite file or a fresh PostgreSQL database (created next to the one
``--postgres`` names, dropped afterwards) with the queries the checks need.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
HOST = "127.0.0.1"


class BenchError(Exception):
    """The benchmark could not run (exit status 2)."""


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
    name: str,
    target: list[str],
    env: dict[str, str],
    ready_path: str,
    log: Path,
    timeout_s: float,
    workers: int = 1,
    server_args: Sequence[str] = (),
) -> Iterator[Server]:
    """Run uvicorn (with ``server_args``, e.g. ``--http httptools``) on a free loopback port;
    always stop it (SIGINT, then SIGKILL)."""
    port = free_port()
    # uvicorn through service_uvicorn.py: TCP_NODELAY with --workers too (see there).
    launcher = str(Path(__file__).resolve().parent / "service_uvicorn.py")
    cmd = [sys.executable, launcher, *target, "--host", HOST, "--port", str(port)]
    cmd += ["--no-access-log", "--log-level", "warning", "--timeout-graceful-shutdown", "5"]
    if workers > 1:
        cmd += ["--workers", str(workers)]
    cmd += list(server_args)
    with log.open("wb") as log_file:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        url = f"http://{HOST}:{port}"
        wait_ready(name, proc, url + ready_path, log, timeout_s, workers)
        yield Server(name=name, url=url, pid=proc.pid, log=log)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_ready(
    name: str,
    proc: subprocess.Popen[bytes],
    url: str,
    log: Path,
    timeout_s: float,
    workers: int,
) -> None:
    """Until ``url`` answers 200 (and, with several workers, until all of them are started)."""
    deadline = time.monotonic() + timeout_s
    while True:
        code = proc.poll()
        if code is not None:
            raise BenchError(
                f"the {name} server exited (status {code}) before answering {url}; "
                f"its log ends with:\n{log_tail(log)}"
            )
        try:
            up = httpx.get(url, timeout=1.0, trust_env=False).status_code == 200
        except httpx.TransportError:
            up = False
        if up and len(process_tree(proc.pid)) > workers:  # the supervisor and its workers
            return
        if up and workers == 1:
            return
        if time.monotonic() > deadline:
            raise BenchError(
                f"the {name} server did not answer {url} within {timeout_s:.0f} s; "
                f"its log ends with:\n{log_tail(log)}"
            )
        time.sleep(0.1)


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (Linux /proc)."""
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{current}/task").iterdir():
                with contextlib.suppress(OSError):
                    todo += [int(c) for c in (task / "children").read_text().split()]
    return found


def process_cpu_s(pid: int) -> float | None:
    """User + system CPU seconds so far of a process and its descendants (the workers)."""
    total, any_read = 0.0, False
    for each in process_tree(pid):
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            any_read = True
        except (OSError, IndexError, ValueError):
            continue
    return total if any_read else None


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


# --- databases --------------------------------------------------------------------------------


def libpq(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL (``postgresql+psycopg://``) as a libpq conninfo URL."""
    scheme, rest = url.split("://", 1)
    if not scheme.startswith("postgresql"):
        raise BenchError(f"not a PostgreSQL URL: {url!r}")
    return "postgresql://" + rest


@dataclass
class Database:
    """One fresh database for a scenario: ``app_url`` for the app, ``baseline`` for the
    baseline app's insert (``BENCH_BASELINE_DB``), and the checks' queries."""

    backend: str  # "sqlite" or "postgres"
    app_url: str
    baseline: str
    drop: str | None = None  # PostgreSQL: the admin conninfo and the name to drop

    def client_answer_ids(self, table: str) -> list[str]:
        query = f"SELECT client_answer_id FROM {table}"
        if self.backend == "sqlite":
            db = self.baseline if table != "attempts" else self.app_url.removeprefix("sqlite:///")
            with contextlib.closing(sqlite3.connect(db)) as conn:
                return [row[0] for row in conn.execute(query)]
        import psycopg

        with psycopg.connect(libpq(self.app_url)) as conn:
            return [row[0] for row in conn.execute(query)]

    def analyze(self) -> None:
        """PostgreSQL: ``ANALYZE`` the app's database, as autovacuum soon does on a live one.

        A database made for the scenario has no statistics yet, and psycopg's prepared
        statements keep the generic plans made while the tables were nearly empty (sequential
        scans) until statistics change: measured in a writer bench, a batch of 32 answers took
        22 ms before and 15 ms after. A live database is analyzed by autovacuum as it grows.
        SQLite has no such daemon (nothing analyzes a deployment's file): nothing is done."""
        if self.backend != "postgres":
            return
        import psycopg

        with psycopg.connect(libpq(self.app_url), autocommit=True) as conn:
            conn.execute("ANALYZE")


@contextlib.contextmanager
def sqlite_database(folder: Path) -> Iterator[Database]:
    from service_baseline import create_sqlite_baseline

    folder.mkdir(parents=True, exist_ok=True)
    baseline = folder / "baseline.db"
    create_sqlite_baseline(baseline)
    yield Database("sqlite", f"sqlite:///{folder / 'infracards.db'}", str(baseline))


@contextlib.contextmanager
def postgres_database(url: str) -> Iterator[Database]:
    """A new database ``infracards_bench_<random>`` on the server of ``url``; dropped after."""
    import psycopg
    from service_baseline import create_postgres_baseline

    admin = libpq(url)
    name = f"infracards_bench_{secrets.token_hex(4)}"
    try:
        with psycopg.connect(admin, autocommit=True, connect_timeout=5) as conn:
            conn.execute(f"CREATE DATABASE {name}")
    except psycopg.Error as exc:
        raise BenchError(f"could not create a PostgreSQL database at {url}: {exc}") from None
    base, _, _ = url.rpartition("/")
    app_url = f"{base}/{name}"
    try:
        create_postgres_baseline(libpq(app_url))
        yield Database("postgres", app_url, libpq(app_url))
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def postgres_reachable(url: str) -> bool:
    try:
        import psycopg

        with psycopg.connect(libpq(url), connect_timeout=3):
            return True
    except Exception:  # noqa: BLE001 - not installed, not running, refused: not reachable
        return False
