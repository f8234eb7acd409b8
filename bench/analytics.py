"""The instructor analytics page at 100,000 attempts, against baselines measured in the same run.

    python bench/analytics.py                       # 100,000 attempts, 1,000 learners, 5 runs
    python bench/analytics.py --attempts 20000 --repeat 3 --json

Everything happens in a temporary folder that is removed afterwards: a fresh SQLite database is
migrated (``app.cli.migrate``); the ZeRO card's templates are generated for a fixed set of seeds
(the choices stored exactly as the service stores them, both languages' texts included); then
``--attempts`` first answers by ``--learners`` simulated learners are inserted, with a made-up
but structured pattern (a logistic model of ability and difficulty; the largest ``n_d`` value is
harder; one template answered by everyone right, one where stronger learners do worse, and one
pitfall per template nobody picks), so every part of the page has something to draw.

Measured (seconds; median of ``--repeat`` runs after one warm-up), through the app with
Starlette's TestClient signed in as an instructor:

* ``page``: ``GET /instructor/cards/zero-memory-offload/analytics`` (query, analysis, charts,
  HTML);
* ``csv``: ``GET .../analytics.csv``;
* ``use case``: ``app.analytics.service.card_analytics`` called directly (the page less its HTML);
* ``query`` and ``analyse``: its two halves apart (the rows read into a list by
  ``app.analytics.service.attempt_rows``, then ``app.domain.analytics.analyse`` over the list),
  with the garbage collector paused as the use case pauses it;
* baselines on the same table, same process: ``count``: ``SELECT count(*) FROM attempts``;
  ``read``: ``SELECT`` of the columns the analysis needs (params and the whole choices JSON,
  unparsed) for the card's first answers, ``fetchall()`` with the sqlite3 module.

The ratios page ÷ read and page ÷ count say how much the page costs over merely reading the data,
whatever the machine's speed. Each figure is given as wall-clock time and as the process's CPU
time: on a machine shared with other work the wall clock includes waiting for a core (the load
average before and after is printed), the CPU time much less so. Exit status 0 when the page's
median (``--clock wall``, the default, or ``cpu``) is under ``--limit`` (1 s), 1 when it is not.
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import os
import random
import re
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
import warnings
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sqlalchemy import insert  # noqa: E402

from app.analytics.service import attempt_rows, card_analytics, outline  # noqa: E402
from app.auth.service import register  # noqa: E402
from app.cli import migrate  # noqa: E402
from app.config import Settings  # noqa: E402
from app.domain.analytics import analyse  # noqa: E402
from app.domain.cards import Card  # noqa: E402
from app.domain.catalog import load_cards  # noqa: E402
from app.domain.generation import generate  # noqa: E402
from app.models import Attempt, Learner  # noqa: E402
from app.practice.storing import stored_choices  # noqa: E402

CARD_ID = "zero-memory-offload"
PASSWORD = "correct horse battery"
SEEDS_PER_TEMPLATE = 40


def seed_attempts(db_url: str, card: Card, *, attempts: int, learners: int, seed: int = 7) -> dict:
    """Insert ``learners`` learners and ``attempts`` first answers; returns what was planted."""
    from sqlalchemy import create_engine

    rng = random.Random(seed)
    templates = card.templates()
    variants = {t.id: [generate(card, t, s) for s in range(SEEDS_PER_TEMPLATE)] for t in templates}
    easy = templates[0].id  # everyone right
    reversed_ = templates[1].id  # stronger learners do worse
    difficulty = {t.id: rng.gauss(-0.3, 0.8) for t in templates}
    # Per template: one pitfall nobody picks, the others weighted at random.
    weights = {}
    for t in templates:
        ids = [p.id for p in t.pitfalls]
        w = {pid: rng.uniform(0.2, 3.0) for pid in ids}
        w[ids[-1]] = 0.0
        weights[t.id] = w
    learner_ids = [f"bench{i:06d}".ljust(12, "0") for i in range(learners)]
    ability = {lid: rng.gauss(0.0, 1.0) for lid in learner_ids}
    start = datetime(2026, 11, 1, tzinfo=UTC)
    engine = create_engine(db_url)
    rows = []
    for i in range(attempts):
        learner_id = learner_ids[i] if i < learners else rng.choice(learner_ids)
        template = templates[rng.randrange(len(templates))]
        variant = variants[template.id][rng.randrange(SEEDS_PER_TEMPLATE)]
        a = ability[learner_id]
        logit = (-a if template.id == reversed_ else a) - difficulty[template.id]
        n_d = variant.params.get("n_d")
        if n_d is not None and int(n_d) >= 64:  # where learners fail
            logit -= 1.5
        right = template.id == easy or rng.random() < 1 / (1 + math.exp(-logit))
        wrong_choices = [c for c in variant.choices if c.pitfall_id is not None]
        if right:
            choice = next(c for c in variant.choices if c.id == variant.correct_choice_id)
        else:
            w = [weights[template.id].get(c.pitfall_id, 1.0) for c in wrong_choices]
            choice = rng.choices(wrong_choices, weights=w)[0] if sum(w) > 0 else wrong_choices[0]
        rows.append(
            {
                "learner_id": learner_id,
                "card_id": card.id,
                "card_version": card.version,
                "point": template.point,
                "template_id": template.id,
                "template_version": template.version,
                "seed": variants[template.id].index(variant),
                "params": dict(variant.params),
                "choices": stored_choices(variant),
                "choice_id": choice.id,
                "correct_choice_id": variant.correct_choice_id,
                "correct": bool(right),
                "pitfall_id": None if right else choice.pitfall_id,
                "client_answer_id": f"bench-{i}",
                "first_answer": True,
                "duration_ms": int(rng.lognormvariate(9.6, 0.5)),
                "dismissed": False,
                "created_at": start + timedelta(seconds=i * 20),
            }
        )
    with engine.begin() as connection:
        connection.execute(
            insert(Learner),
            [
                {"id": lid, "kind": "guest", "role": "learner", "created_at": start}
                for lid in learner_ids
            ],
        )
        for offset in range(0, len(rows), 5000):
            connection.execute(insert(Attempt), rows[offset : offset + 5000])
    engine.dispose()
    return {"everyone_right": easy, "negative": reversed_}


def timed(fn, repeat: int) -> tuple[list[float], list[float]]:  # type: ignore[no-untyped-def]
    """Wall-clock and process CPU seconds (all threads: the app runs in the client's portal
    thread) of ``repeat`` calls after one warm-up."""
    fn()
    wall, cpu = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        fn()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return wall, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--attempts", type=int, default=100_000)
    parser.add_argument("--learners", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--limit", type=float, default=1.0, help="seconds the page must stay under")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="what the limit applies to: wall-clock time, or the process's CPU time (steadier "
        "on a machine shared with other work)",
    )
    args = parser.parse_args(argv)

    load_before = os.getloadavg()
    folder = Path(tempfile.mkdtemp(prefix="infracards-bench-analytics-"))
    try:
        db_path = folder / "bench.db"
        db_url = f"sqlite:///{db_path}"
        migrate(db_url)
        cards = load_cards(ROOT / "cards")
        card = cards[CARD_ID]
        t0 = time.perf_counter()
        planted = seed_attempts(db_url, card, attempts=args.attempts, learners=args.learners)
        seed_s = time.perf_counter() - t0

        from app.main import create_app

        settings = Settings(
            environment="test",
            database_url=db_url,
            data_dir=folder / "data",
            cards_dir=ROOT / "cards",
            secret_key="bench-secret-key-0123456789-abcdefghijklmnop",  # type: ignore[arg-type]
        )
        app = create_app(settings, cards=cards)
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
            from fastapi.testclient import TestClient
        with app.state.sessionmaker() as db:
            register(db=db, email="prof@example.com", password=PASSWORD, role="instructor")
        with TestClient(app) as client:
            login = client.get("/login")
            token = re.search(r'name="csrf_token" value="([^"]+)"', login.text).group(1)  # type: ignore[union-attr]
            signed = client.post(
                "/login",
                data={"csrf_token": token, "email": "prof@example.com", "password": PASSWORD},
            )
            assert signed.status_code == 200, signed.status_code
            url = f"/instructor/cards/{CARD_ID}/analytics"

            def page() -> None:
                response = client.get(url)
                assert response.status_code == 200, response.status_code

            def csv_() -> None:
                response = client.get(url + ".csv")
                assert response.status_code == 200, response.status_code

            page_t = timed(page, args.repeat)
            csv_t = timed(csv_, args.repeat)
            body = client.get(url).text
            html_kb = len(body.encode()) / 1024
            assert planted["everyone_right"] in body and "Negative discrimination" in body

        def query() -> None:
            with app.state.sessionmaker() as db:
                rows = list(attempt_rows(db=db, card_id=CARD_ID))
            holder["rows"] = rows

        def use_case() -> None:
            with app.state.sessionmaker() as db:
                card_analytics(db=db, card=card, current_versions_only=True)

        holder: dict = {}
        use_case_t = timed(use_case, args.repeat)
        gc.disable()  # as the use case does
        try:
            query_t = timed(query, args.repeat)
            rows = holder["rows"]
            rows_read = len(rows)
            analyse_t = timed(
                lambda: analyse(
                    rows, card_id=CARD_ID, outline=outline(card), current_versions_only=True
                ),
                args.repeat,
            )
        finally:
            gc.enable()
        raw = sqlite3.connect(db_path)

        def count() -> None:
            raw.execute("SELECT count(*) FROM attempts").fetchone()

        def read() -> None:
            raw.execute(
                "SELECT learner_id, point, template_id, template_version, correct, pitfall_id, "
                "duration_ms, params, choices FROM attempts WHERE card_id = ? AND first_answer = 1 "
                "ORDER BY id",
                (CARD_ID,),
            ).fetchall()

        count_t = timed(count, args.repeat)
        read_t = timed(read, args.repeat)
        raw.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

    med = statistics.median
    measured = {
        "page": page_t,
        "csv": csv_t,
        "use_case": use_case_t,
        "query": query_t,
        "analyse": analyse_t,
        "read": read_t,
        "count": count_t,
    }
    figures: dict = {
        "attempts": args.attempts,
        "learners": args.learners,
        "rows_read": rows_read,
        "seed_s": round(seed_s, 2),
        "html_kib": round(html_kb, 1),
        "load_average": [round(x, 2) for x in load_before + os.getloadavg()],
        "cpus": os.cpu_count(),
    }
    for name, (wall, cpu) in measured.items():
        figures[name] = {
            "wall_median_s": round(med(wall), 5),
            "wall_min_s": round(min(wall), 5),
            "cpu_median_s": round(med(cpu), 5),
        }
    page_wall, page_cpu = med(page_t[0]), med(page_t[1])
    figures["page_over_read"] = round(page_wall / med(read_t[0]), 2)
    figures["page_over_read_cpu"] = round(page_cpu / med(read_t[1]), 2)
    figures["page_over_count"] = round(page_wall / max(med(count_t[0]), 1e-9), 1)
    checked = page_cpu if args.clock == "cpu" else page_wall
    figures["limit_s"] = args.limit
    figures["clock"] = args.clock
    figures["ok"] = checked < args.limit
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        print(
            f"{args.attempts:,} attempts by {args.learners:,} learners (seeded in {seed_s:.1f} s); "
            f"load average {load_before[0]:.2f} before, {os.getloadavg()[0]:.2f} after, "
            f"{os.cpu_count()} CPUs"
        )
        print(f"  {'':10s} {'wall median':>12s} {'wall min':>10s} {'CPU median':>11s}")
        labels = {
            "page": f"page ({html_kb:.0f} KiB)",
            "csv": "csv",
            "use_case": "use case",
            "query": "  query",
            "analyse": "  analyse",
            "read": "read (base)",
            "count": "count(*)",
        }
        for name, (wall, cpu) in measured.items():
            print(
                f"  {labels[name]:16s} {med(wall) * 1000:8.1f} ms {min(wall) * 1000:7.1f} ms "
                f"{med(cpu) * 1000:8.1f} ms"
            )
        print(
            f"  ratios: page / read {figures['page_over_read']:.2f} "
            f"(CPU {figures['page_over_read_cpu']:.2f}), "
            f"page / count(*) {figures['page_over_count']:.0f}"
        )
        verdict = "OK" if figures["ok"] else "TOO SLOW"
        print(f"  {verdict}: page {args.clock} median {checked:.3f} s, limit {args.limit} s")
    return 0 if figures["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
