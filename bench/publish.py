"""Publishing the shipped card version after version: does it stay flat?

    python bench/publish.py                       # versions 1..50, figures at 1, 10 and 50
    python bench/publish.py --versions 20 --at 1 10 20 --json

Everything happens in a temporary folder removed afterwards: a fresh SQLite database is
migrated and a server app built as ``make run`` builds it (the card files loaded and validated,
the database's versions loaded, the catalog's refresher thread started). An instructor then
publishes cards/zero-memory-offload.yaml as versions 1..N through the service functions the
dashboard uses (:func:`app.authoring.service.save_draft`, then
:func:`~app.authoring.service.publish`: validation in the sandbox, the new version compiled,
stored and swapped in), each version one small wording change to one template (a different
template each time; publishing raises that template's version and the card's).

Measured, at the versions of ``--at``:

- publish: the wall-clock seconds of ``save_draft`` + ``publish``;
- restart: a new app on the same database (``create_app``: the card files loaded and validated,
  the stored versions' manifests read, each card's current version compiled) until its first
  question is answered;
- a learner's question while a publication runs: a thread asks for questions of the card
  (``GET /api/v1/cards/zero-memory-offload/question``) on the publishing app and on a second
  app on the same database (whose refresher thread rebuilds its catalog meanwhile) during the
  publish; p50 and p99 of those, against the same requests while nothing is published (measured
  in the same run: the baseline).

The process's garbage collector is tuned as a server's is once started (``GC_FREEZE``: what
start-up built frozen, young objects collected less often; ``--no-gc-freeze`` leaves Python's
defaults), and the longest collection during each measured publication is printed: a full
collection stops every thread of the process, requests included.

The ratios are against version 1 (publish, restart) and against the idle baseline (question
p99). The goal: publish and restart flat within 20 % from version 1 to 50; the learner's p99
during a publication close to the idle one (the process's CPU is shared, so not equal).
"""

from __future__ import annotations

import argparse
import gc
import json
import logging
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PASSWORD = "bench instructor password"
CARD_ID = "zero-memory-offload"
QUESTION = f"/api/v1/cards/{CARD_ID}/question"

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    from fastapi.testclient import TestClient


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


class Learner(threading.Thread):
    """Asks for questions one after another until stopped; the seconds each took."""

    def __init__(self, app: Any, headers: dict[str, str]) -> None:
        super().__init__(daemon=True)
        self.client = TestClient(app)  # no lifespan: the app's own runs in the `with` block
        self.headers = headers
        self.stopping = threading.Event()
        self.seconds: list[float] = []
        self.errors = 0

    def run(self) -> None:
        seed = 0
        while not self.stopping.is_set():
            seed += 1
            started = time.perf_counter()
            response = self.client.get(QUESTION, params={"seed": seed}, headers=self.headers)
            self.seconds.append(time.perf_counter() - started)
            self.errors += response.status_code != 200

    def stop(self) -> list[float]:
        self.stopping.set()
        self.join()
        return self.seconds


def edited(document: dict[str, Any], number: int) -> dict[str, Any]:
    """The card with template ``number`` (in turn) reworded: what an instructor would change."""
    document = json.loads(json.dumps(document))
    templates = [t for p in document["points"] for t in p["templates"]]
    template = templates[number % len(templates)]
    template["stem"]["en"] = template["stem"]["en"].rstrip() + f" (revision {number})"
    return document


class CollectorPauses:
    """The garbage collector's passes while it is entered: (when it started, seconds)."""

    def __init__(self) -> None:
        self.passes: list[tuple[float, float]] = []
        self._started = 0.0

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.passes.append((self._started, time.perf_counter() - self._started))

    def __enter__(self) -> CollectorPauses:
        gc.callbacks.append(self._callback)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._callback)

    def longest(self, since: float) -> float:
        return max((s for at, s in self.passes if at >= since), default=0.0)


def run(versions: int, at: list[int], gc_freeze: bool) -> dict[str, Any]:
    from app.auth.accounts import register
    from app.authoring import service
    from app.cli.migrations import migrate
    from app.config import Settings
    from app.main import collector_tuned, create_app

    folder = Path(tempfile.mkdtemp(prefix="bench-publish-"))
    figures: dict[str, Any] = {
        "publish_s": {},
        "restart_s": {},
        "question_during_publish": {},
        "longest_collection_s": {},
    }
    try:
        db_url = f"sqlite:///{folder / 'bench.db'}"
        migrate(db_url)
        logging.getLogger("alembic").setLevel(logging.WARNING)  # each start-up checks the head
        settings = Settings(
            environment="test",
            database_url=db_url,
            data_dir=folder / "data",
            cards_dir=ROOT / "cards",
            secret_key="bench-secret-key-0123456789-abcdefghijklmnop",  # type: ignore[arg-type]
            log_level="WARNING",
            gc_freeze=False,  # frozen once below: several apps in one process
        )
        app = create_app(settings)
        other = create_app(settings)  # another server process's app on the same database
        other.state.live_catalog.every = 0.2
        with app.state.sessionmaker() as db:
            actor = register(db=db, email="prof@example.com", password=PASSWORD, role="instructor")
        pauses = CollectorPauses()
        with (
            TestClient(app) as client,
            TestClient(other) as second,
            collector_tuned(gc_freeze),  # what each server process does once started
            pauses,
        ):
            learner = client.post("/api/v1/learners").json()["token"]
            headers = {"Authorization": f"Bearer {learner}"}
            assert client.get(QUESTION, headers=headers).status_code == 200
            assert second.get(QUESTION, headers=headers).status_code == 200
            # The idle baseline: the same requests, nothing published.
            idle = {name: Learner(a, headers) for name, a in (("same", app), ("other", other))}
            for thread in idle.values():
                thread.start()
            time.sleep(3.0)
            baseline = {name: thread.stop() for name, thread in idle.items()}
            figures["question_idle"] = {
                name: {"p50_s": percentile(s, 50), "p99_s": percentile(s, 99), "count": len(s)}
                for name, s in baseline.items()
            }
            with app.state.sessionmaker() as db:
                current = service.get_draft(db=db, card_id=CARD_ID).document
            first = int(current["version"])
            for number in range(1, versions + 1):
                measured = number in at
                learners = {}
                if measured:
                    learners = {"same": Learner(app, headers), "other": Learner(other, headers)}
                    for thread in learners.values():
                        thread.start()
                    time.sleep(0.3)
                current = edited(current, number)
                started = time.perf_counter()
                with app.state.sessionmaker() as db:
                    service.save_draft(db=db, actor=actor, card_id=CARD_ID, document=current)
                    version = service.publish(
                        db=db, actor=actor, live=app.state.live_catalog, card_id=CARD_ID
                    )
                elapsed = time.perf_counter() - started
                assert version == first + number, (version, first, number)
                if measured:
                    deadline = time.monotonic() + 30  # until the other app serves it too
                    while (other.state.live_catalog.catalog.latest(CARD_ID).version) != version:
                        assert time.monotonic() < deadline, "the other app never refreshed"
                        time.sleep(0.05)
                    during = {name: thread.stop() for name, thread in learners.items()}
                    figures["publish_s"][number] = elapsed
                    figures["question_during_publish"][number] = {
                        name: {
                            "p50_s": percentile(s, 50),
                            "p99_s": percentile(s, 99),
                            "max_s": max(s),
                            "count": len(s),
                            "errors": learners[name].errors,
                        }
                        for name, s in during.items()
                    }
                    figures["longest_collection_s"][number] = pauses.longest(since=started)
                    figures["restart_s"][number] = restart(settings, headers)
                    report(figures, number)
        figures["audit_bytes_per_publish"] = audit_bytes(app)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return figures


def restart(settings: Any, headers: dict[str, str]) -> float:
    """Seconds from ``create_app`` to the first question answered (the server's start-up)."""
    from app.main import create_app

    started = time.perf_counter()
    with TestClient(create_app(settings)) as client:
        assert client.get(QUESTION, headers=headers).status_code == 200
        return time.perf_counter() - started


def audit_bytes(app: Any) -> float:
    from sqlalchemy import select

    from app.models import AuditEntry

    with app.state.sessionmaker() as db:
        entries = db.scalars(select(AuditEntry).where(AuditEntry.action == "publish")).all()
        sizes = [len(json.dumps([e.before, e.after, e.changes])) for e in entries]
    return statistics.mean(sizes) if sizes else 0.0


def report(figures: dict[str, Any], number: int) -> None:
    publish = figures["publish_s"][number]
    restart_s = figures["restart_s"][number]
    during = figures["question_during_publish"][number]
    print(
        f"version {number}: publish {publish:.2f} s, restart {restart_s:.2f} s; learner question "
        f"during the publish p50/p99/max: same app "
        f"{during['same']['p50_s'] * 1000:.0f}/{during['same']['p99_s'] * 1000:.0f}/"
        f"{during['same']['max_s'] * 1000:.0f} ms ({during['same']['count']} requests), "
        f"other app {during['other']['p50_s'] * 1000:.0f}/{during['other']['p99_s'] * 1000:.0f}/"
        f"{during['other']['max_s'] * 1000:.0f} ms ({during['other']['count']} requests); "
        f"longest garbage collection {figures['longest_collection_s'][number] * 1000:.0f} ms; "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )


def summary(figures: dict[str, Any]) -> None:
    first, last = min(figures["publish_s"]), max(figures["publish_s"])
    idle = figures["question_idle"]
    print(
        f"idle learner question p50/p99: same app {idle['same']['p50_s'] * 1000:.0f}/"
        f"{idle['same']['p99_s'] * 1000:.0f} ms, other app {idle['other']['p50_s'] * 1000:.0f}/"
        f"{idle['other']['p99_s'] * 1000:.0f} ms (the baseline)"
    )
    for name in ("publish_s", "restart_s"):
        ratio = figures[name][last] / figures[name][first]
        verdict = "flat" if ratio <= 1.2 else "NOT flat"
        print(
            f"{name.removesuffix('_s')}: version {last} / version {first} = {ratio:.2f} "
            f"({verdict} within 20 %)"
        )
    for number, during in figures["question_during_publish"].items():
        ratios = ", ".join(
            f"{name} app {during[name]['p99_s'] / idle[name]['p99_s']:.1f}x"
            for name in ("same", "other")
        )
        print(f"learner question p99 during the publish of version {number} / idle: {ratios}")
    print(f"audit log: {figures['audit_bytes_per_publish']:.0f} bytes per publish entry")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", type=int, default=50)
    parser.add_argument("--at", type=int, nargs="*", default=[1, 10, 50])
    parser.add_argument(
        "--no-gc-freeze",
        action="store_true",
        help="leave the garbage collector as Python sets it (the server's GC_FREEZE=false)",
    )
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    at = sorted(v for v in args.at if 1 <= v <= args.versions)
    figures = run(args.versions, at, gc_freeze=not args.no_gc_freeze)
    summary(figures)
    if args.json:
        print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
