"""Start-up skips validating a card this code validated whole before (app.catalog.validated)."""

from __future__ import annotations

import copy
import json
import logging
import shutil
from pathlib import Path

import pytest
from conftest import CARDS_DIR

import app.catalog.validated as validated
import app.domain.catalog as catalog
from app.catalog.validated import ValidatedCards, code_digest
from app.domain.cards import Card, CardError, card_to_yaml
from app.domain.catalog import load_cards
from app.domain.generation import generate

KV_CARD = json.loads(
    (Path(__file__).parent / "cards_fixtures" / "kv_cache_card.json").read_text(encoding="utf-8")
)


def write_card(folder: Path, document: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{document['id']}.yaml").write_text(card_to_yaml(document), encoding="utf-8")
    return folder


def shown(card: Card, seed: int) -> tuple[object, ...]:
    """What a learner is shown of the card's first template at ``seed``, and the key."""
    variant = generate(card, card.templates()[0], seed)
    choices = [(c.id, c.text, c.value, c.pitfall and c.pitfall.id) for c in variant.choices]
    return variant.stem, tuple(choices), variant.correct_choice_id, variant.solution


@pytest.fixture
def validations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the cards load_cards validates, in order."""
    seen: list[str] = []
    validate = catalog.validate_card

    def counting(card):  # type: ignore[no-untyped-def]
        seen.append(card.id)
        validate(card)

    monkeypatch.setattr(catalog, "validate_card", counting)
    return seen


def test_a_card_validated_whole_is_not_validated_again_until_its_document_changes(
    tmp_path: Path, validations: list[str]
) -> None:
    cards = write_card(tmp_path / "cards", KV_CARD)
    records = ValidatedCards(tmp_path / "records")
    first = load_cards(cards, records)
    assert validations == ["kv-cache"]
    assert [p.name.startswith("kv-cache-") for p in (tmp_path / "records").iterdir()] == [True]
    again = load_cards(cards, records)
    assert validations == ["kv-cache"]  # the record answered
    assert again["kv-cache"].document == first["kv-cache"].document
    # The same questions either way: a skipped validation only leaves combinations to be built.
    for seed in range(20):
        assert shown(again["kv-cache"], seed) == shown(first["kv-cache"], seed)

    # One word of a stem changed: another document, validated whole (and recorded) again.
    changed = copy.deepcopy(KV_CARD)
    template = changed["points"][0]["templates"][0]
    template["stem"]["en"] = template["stem"]["en"].replace("How large", "How big")
    write_card(cards, changed)
    load_cards(cards, records)
    assert validations == ["kv-cache", "kv-cache"]
    assert len(list((tmp_path / "records").iterdir())) == 2


def test_a_card_that_fails_is_never_recorded_so_every_start_up_refuses_it(
    tmp_path: Path, validations: list[str]
) -> None:
    broken = copy.deepcopy(KV_CARD)
    # A pitfall whose value is the key's: refused at every parameter combination.
    broken["points"][0]["templates"][0]["pitfalls"][0]["formula"] = "kv"
    cards = write_card(tmp_path / "cards", broken)
    records = ValidatedCards(tmp_path / "records")
    for _ in range(2):
        with pytest.raises(CardError, match="only-keys"):
            load_cards(cards, records)
    assert validations == ["kv-cache", "kv-cache"]
    assert not (tmp_path / "records").exists() or not list((tmp_path / "records").iterdir())


def test_a_record_made_by_other_domain_code_does_not_count(
    tmp_path: Path, validations: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    domain = tmp_path / "domain"
    shutil.copytree(validated.DOMAIN, domain, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(validated, "DOMAIN", domain)
    code_digest.cache_clear()
    try:
        assert code_digest() == code_digest.__wrapped__()
        cards = write_card(tmp_path / "cards", KV_CARD)
        records = ValidatedCards(tmp_path / "records")
        load_cards(cards, records)
        load_cards(cards, records)
        assert validations == ["kv-cache"]
        before = code_digest()
        rule = domain / "giveaways.py"
        rule.write_text(rule.read_text(encoding="utf-8") + "\n# a changed rule\n", "utf-8")
        code_digest.cache_clear()
        assert code_digest() != before
        load_cards(cards, records)
        assert validations == ["kv-cache", "kv-cache"]
    finally:
        code_digest.cache_clear()


def test_check_cards_validates_whole_and_records_what_passes(
    tmp_path: Path, validations: list[str]
) -> None:
    cards = write_card(tmp_path / "cards", KV_CARD)
    records = ValidatedCards(tmp_path / "records", reuse=False)
    load_cards(cards, records)
    load_cards(cards, records)
    assert validations == ["kv-cache", "kv-cache"]  # never skipped
    assert ValidatedCards(tmp_path / "records").holds(load_cards(cards)["kv-cache"])


def test_a_folder_that_cannot_be_written_costs_only_the_next_validation(
    tmp_path: Path, validations: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    cards = write_card(tmp_path / "cards", KV_CARD)
    blocked = tmp_path / "records"
    blocked.write_text("a file where the folder would be", encoding="utf-8")
    records = ValidatedCards(blocked)
    with caplog.at_level(logging.WARNING, logger="app.catalog.validated"):
        assert set(load_cards(cards, records)) == {"kv-cache"}
        assert set(load_cards(cards, records)) == {"kv-cache"}
    assert validations == ["kv-cache", "kv-cache"]
    assert "validates it whole again" in caplog.text


def test_card_files_read_by_libyaml_are_the_documents_the_python_reader_gives() -> None:
    import yaml

    from app.domain.cards import load_yaml

    assert yaml.__with_libyaml__  # the locked PyYAML wheel carries libyaml
    for path in sorted(CARDS_DIR.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        assert load_yaml(text) == yaml.safe_load(text), path.name
    # libyaml stops at 1,000 levels; the Python reader decides, here by running out of stack
    # (read_card says "nested too deeply"), as it did alone.
    deep = "x: " + "[" * 1500 + "]" * 1500
    with pytest.raises(RecursionError):
        load_yaml(deep)
    with pytest.raises(yaml.YAMLError) as refused:
        load_yaml("id: bad\nx: - - 1\n")
    with pytest.raises(yaml.YAMLError) as python:
        yaml.safe_load("id: bad\nx: - - 1\n")
    assert str(refused.value) == str(python.value)
