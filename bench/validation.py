"""A card's validation through the API, and the compilation of many card formulas.

    python bench/validation.py                     # the ZeRO card, then three times its size
    python bench/validation.py --sizes 1 3 5 --formulas 4000 8000 16000 --json

Everything happens in a temporary folder removed afterwards: a fresh SQLite database is
migrated, an instructor signs in with a bearer token, and each card document is sent to
``POST /api/v1/instructor/cards/validations`` (the job; its status polled every 0.1 s until
done) through Starlette's TestClient. A card ``N`` times the ZeRO card's size has every template
copied ``N - 1`` more times under new ids (the same content, so the same work per template).

Measured for each card: the wall-clock time from the POST to the job's end, the job's own
``seconds``, the templates validated, and the CPU time it took: the web process's and the
sandbox workers' (read from /proc: the workers are not this process's children). CPU time does
not depend on the machine's load; wall-clock time does (the load average is printed with it):
on an idle 2-core machine the wall clock is about the CPU time over the 2 workers.

Then the compilation of a card with ``--formulas`` card formulas, each using an earlier one
(``f_i = psi * k + f_{i // 2}``): CPU seconds of ``parse_card`` in this process, and the seconds
per thousand formulas, which stay flat when compilation is linear.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import shutil
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

PASSWORD = "bench instructor password"
CARD = ROOT / "cards" / "zero-memory-offload.yaml"


def scaled(document: dict[str, Any], times: int) -> dict[str, Any]:
    scaled_document = copy.deepcopy(document)
    for point in scaled_document["points"]:
        originals = point["templates"]
        point["templates"] = [
            {**copy.deepcopy(t), "id": t["id"] if n == 1 else f"{t['id']}-x{n}"}
            for n in range(1, times + 1)
            for t in originals
        ]
    return scaled_document


def _process_cpu(pid: int) -> float:
    """User + system CPU seconds of a live process (Linux /proc)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _sandbox_cpu() -> float:
    from app.authoring.sandbox import default_sandbox

    pool = default_sandbox()
    return sum(_process_cpu(w.process.pid) for w in list(pool._workers))


def validate_through_api(sizes: list[int]) -> list[dict[str, Any]]:
    from app.auth.service import register
    from app.cli.migrations import migrate
    from app.config import Settings
    from app.domain.catalog import load_cards
    from app.main import create_app

    folder = Path(tempfile.mkdtemp(prefix="bench-validation-"))
    results = []
    try:
        db_url = f"sqlite:///{folder / 'bench.db'}"
        migrate(db_url)
        settings = Settings(
            environment="test",
            database_url=db_url,
            data_dir=folder / "data",
            cards_dir=ROOT / "cards",
            secret_key="bench-secret-key-0123456789-abcdefghijklmnop",  # type: ignore[arg-type]
            gc_freeze=False,
            log_level="WARNING",
        )
        app = create_app(settings, cards=load_cards(ROOT / "cards"))
        with app.state.sessionmaker() as db:
            register(db=db, email="prof@example.com", password=PASSWORD, role="instructor")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
            from fastapi.testclient import TestClient
        document = yaml.safe_load(CARD.read_text("utf-8"))
        with TestClient(app) as client:
            token = client.post(
                "/api/v1/auth/token",
                json={"email": "prof@example.com", "password": PASSWORD, "device_name": "bench"},
            ).json()["access_token"]
            headers = {"Authorization": f"Bearer {token}"}
            # Start the sandbox's workers before measuring (a server has them from its first
            # formula check).
            client.get(
                "/api/v1/instructor/cards/zero-memory-offload/preview",
                params={"template_id": "p1-total-16psi"},
                headers=headers,
            )
            for times in sizes:
                card = scaled(document, times)
                load = os.getloadavg()[0]
                cpu_before = time.process_time() + _sandbox_cpu()
                started = time.perf_counter()
                answer = client.post(
                    "/api/v1/instructor/cards/validations", json=card, headers=headers
                )
                assert answer.status_code == 202, answer.text
                url = answer.headers["location"]
                while True:
                    job = client.get(url, headers=headers).json()
                    if job["status"] == "done":
                        break
                    time.sleep(0.1)
                wall = time.perf_counter() - started
                cpu = time.process_time() + _sandbox_cpu() - cpu_before
                errors = [p for p in job["problems"] if p["severity"] == "error"]
                results.append(
                    {
                        "card": f"{times}x",
                        "templates": job["templates_total"],
                        "errors": len(errors),
                        "wall_s": round(wall, 2),
                        "job_s": job["seconds"],
                        "cpu_s": round(cpu, 2),
                        "load_average": round(load, 2),
                    }
                )
                print(
                    f"{times}x card: {job['templates_total']} templates, {len(errors)} errors, "
                    f"{wall:.1f} s wall ({cpu:.1f} s CPU, web process and sandbox workers; "
                    f"load average {load:.2f} at the start)",
                    flush=True,
                )
                for error in errors:
                    print(f"  error: {error['template_id']}: {error['message']}", flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return results


def compile_formulas(counts: list[int]) -> list[dict[str, Any]]:
    from app.domain.cards import parse_card

    document = yaml.safe_load(CARD.read_text("utf-8"))
    document["points"] = document["points"][:1]
    document["points"][0]["templates"] = document["points"][0]["templates"][:1]
    results = []
    for count in counts:
        card = copy.deepcopy(document)
        card["formulas"] = list(card["formulas"]) + [
            {
                "id": f"f{i}",
                "title": {"en": "f", "zh": "f"},
                "expr": "psi" if i == 0 else f"psi * {i % 7 + 1} + f{i // 2}",
                "latex": "f",
            }
            for i in range(count)
        ]
        load = os.getloadavg()[0]
        started = time.process_time()
        parse_card(card)
        cpu = time.process_time() - started
        results.append(
            {
                "formulas": count,
                "cpu_s": round(cpu, 2),
                "cpu_s_per_1000": round(cpu / count * 1000, 3),
                "load_average": round(load, 2),
            }
        )
        print(
            f"{count} card formulas compiled in {cpu:.2f} s CPU "
            f"({cpu / count * 1000:.3f} s per 1,000; load average {load:.2f})",
            flush=True,
        )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="*", default=[1, 3])
    parser.add_argument("--formulas", type=int, nargs="*", default=[4000, 8000, 16000])
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = {
        "validation": validate_through_api(args.sizes),
        "compilation": compile_formulas(args.formulas),
    }
    if args.json:
        print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
