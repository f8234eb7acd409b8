"""Cards live in the database; `export-card` writes one back to YAML, and the round trip holds."""

from __future__ import annotations

import subprocess
import sys

import yaml
from conftest import CARDS_DIR, ROOT

from app.domain.cards import card_to_yaml, parse_card, read_card
from app.domain.catalog import document_hash


def test_import_then_export_round_trips_the_card_identically(tmp_path):
    card = read_card(CARDS_DIR / "zero-memory-offload.yaml")
    exported = card_to_yaml(card.document)
    again = parse_card(yaml.safe_load(exported))
    assert document_hash(again.document) == document_hash(card.document)
    assert card_to_yaml(again.document) == exported  # export → import → export is identical
    path = tmp_path / "zero-memory-offload.yaml"
    path.write_text(exported, encoding="utf-8")
    assert document_hash(read_card(path).document) == document_hash(card.document)


def test_export_card_writes_the_published_version_from_the_database(client, db_url, tmp_path):
    out = tmp_path / "exported.yaml"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "export-card",
            "--card",
            "zero-memory-offload",
            "--out",
            str(out),
            "--database-url",
            db_url,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    original = read_card(CARDS_DIR / "zero-memory-offload.yaml")
    exported = read_card(out.rename(tmp_path / "zero-memory-offload.yaml"))
    assert document_hash(exported.document) == document_hash(original.document)
    missing = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "export-card",
            "--card",
            "nope",
            "--database-url",
            db_url,
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert (
        missing.returncode == 1
        and missing.stderr.startswith("error: ")
        and "Traceback" not in missing.stderr
    )
