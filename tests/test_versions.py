"""Wording-only edits are minor revisions of a template version; value edits are major versions.

The kv-cache fixture card is edited here and compared over its whole domain (16 combinations);
the golden values are computed in the test from the card's formula (K and V, 2 bytes each)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from app.domain.cards import CardError, parse_card
from app.domain.catalog import check_versions
from app.domain.manifests import VersionManifest, manifest_of
from app.domain.versions import compare_cards, compare_templates

CARD = json.loads((Path(__file__).parent / "cards_fixtures" / "kv_cache_card.json").read_text())


def kv(layers, heads, head_dim, seq, batch):
    return 2 * 2 * layers * heads * head_dim * seq * batch


def edited(change, version=2, revision=None):
    document = copy.deepcopy(CARD)
    document["version"] = version
    template = document["points"][0]["templates"][0]
    change(template)
    if revision is not None:
        template["revision"] = revision
    return document


def reword(template):
    template["stem"]["en"] = template["stem"]["en"].replace("How large is", "What size is")
    template["solution"][0]["zh"] += "。"
    template["pitfalls"][2]["explanation"]["en"] = "{value} is one layer's: {answer} for all."
    template["params"]["layers"]["format"] = "int"


def halve_heads_twice(template):
    template["pitfalls"][5]["formula"] = "kv*heads/2"


def test_a_wording_edit_is_minor_over_the_whole_domain():
    old, new = parse_card(CARD), parse_card(edited(reword))
    comparison = compare_templates(old.template("kv-total"), new.template("kv-total"))
    assert comparison.minor and comparison.reasons == ()
    assert comparison.combinations == 2 * 2 * 1 * 2 * 2  # every combination of the domain
    assert list(compare_cards(old, new)) == ["kv-total"]
    assert compare_cards(old, parse_card(CARD)) == {}  # unchanged: not compared


def test_a_value_edit_is_major_and_says_which_value_changed_for_which_parameters():
    old, new = parse_card(CARD), parse_card(edited(halve_heads_twice))
    comparison = compare_templates(old.template("kv-total"), new.template("kv-total"))
    assert not comparison.minor
    assert comparison.differing == 16  # heads-twice differs everywhere, nothing else does
    first = comparison.values[0]
    assert first.choice == "heads-twice"
    assert first.params == "{layers=24, heads=16, head_dim=128, seq=2048, batch=4}"
    size = kv(24, 16, 128, 2048, 4)
    assert (first.before.en, first.after.en) == (
        f"{size * 16 / 1e9:.3g} GB",
        f"{size * 8 / 1e9:.3g} GB",
    )
    assert "heads-twice" in comparison.reasons[0].en
    assert comparison.reasons[-1].en == "and 13 other value(s)"


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        (lambda t: t["pitfalls"].reverse(), "the pitfalls' order changed"),
        (lambda t: t["pitfalls"].pop(), "pitfall(s) removed: heads-twice"),
        (lambda t: t.update(precision=4), "the significant figures changed (2 → 4)"),
        (lambda t: t.update(choices=3), "the number of choices changed (4 → 3)"),
        (lambda t: t["params"]["batch"].update(values=[4, 16]), "the parameters"),
    ],
)
def test_a_change_of_structure_is_major_whatever_the_values(change, reason):
    old, new = parse_card(CARD), parse_card(edited(change))
    comparison = compare_templates(old.template("kv-total"), new.template("kv-total"))
    assert not comparison.minor
    assert comparison.reasons[0].en.startswith(reason)


def test_a_card_file_may_revise_a_version_in_words_but_not_in_values():
    stored = [parse_card(CARD)]
    # Version 1.1 of the template: same values, accepted; its questions are version 1's.
    revised = parse_card(edited(reword, revision=1))
    check_versions(revised, stored)
    assert revised.template("kv-total").version_label == "1.1"
    # Version 1.1 that changes a value is refused, naming what changed.
    with pytest.raises(CardError, match="heads-twice.*raise the template's 'version'"):
        check_versions(parse_card(edited(halve_heads_twice, revision=1)), stored)
    # The same revision with other content is refused as before.
    with pytest.raises(CardError, match="content changed but its version is still 1"):
        check_versions(parse_card(edited(reword)), stored)
    # Against stored manifests, the stored version is compiled through ``load`` to compare.
    manifests = [manifest_of(stored[0].document)]
    check_versions(revised, manifests, load=lambda version: stored[0])
    with pytest.raises(CardError, match="cannot be compared"):
        check_versions(revised, manifests)


def test_documents_without_revisions_keep_their_digests_and_manifests():
    card = parse_card(CARD)
    assert all("revision" not in t for p in card.document["points"] for t in p["templates"])
    stored = manifest_of(card.document).to_json()
    assert all(len(entry) == 4 for entry in stored["templates"].values())
    revised = manifest_of(parse_card(edited(reword, revision=3)).document)
    again = VersionManifest.from_json("kv-cache", 2, revised.to_json())
    assert again.templates["kv-total"].revision == 3 and again == revised


def test_card_files_revised_in_words_start_up_and_keep_their_questions(tmp_path, db_url):
    """A server restarted on a card file whose template says ``revision: 1`` (a wording edit)
    stores it beside version 1: the same seed asks the same numbers under version 1, a token
    handed out before grades; a file that calls a value change a revision does not start."""
    from fastapi.testclient import TestClient

    from app.domain.cards import card_to_yaml
    from app.main import create_app
    from app.observability.health import StartupRefused
    from tests.conftest import make_settings

    def server(document, name):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "kv-cache.yaml").write_text(card_to_yaml(document), encoding="utf-8")
        return TestClient(create_app(make_settings(tmp_path, db_url, cards_dir=folder)))

    url = "/api/v1/cards/kv-cache/points/kv-bytes/question"
    with server(CARD, "v1") as client:
        before = client.get(url, params={"seed": 3}).json()
    assert before["template_version"] == 1
    with server(edited(reword, revision=1), "v2") as client:
        after = client.get(url, params={"seed": 3}).json()
        assert after["template_version"] == 1 and "What size is" in after["stem"]
        assert after["choices"] == before["choices"]
        learner = client.post("/api/v1/learners").json()["access_token"]
        params = {k: int(v) for k, v in before["params"].items()}
        scale = {"MB": 1e6, "GB": 1e9, "TB": 1e12}
        key = next(
            c["id"]
            for c in before["choices"]
            if abs(c["value"] * scale[c["unit"]] / kv(**params) - 1) < 0.03
        )
        graded = client.post(
            "/api/v1/answers",
            json={"token": before["token"], "choice_id": key, "client_answer_id": "r1"},
            headers={"Authorization": f"Bearer {learner}"},
        )
        assert graded.status_code == 200 and graded.json()["correct"] is True
    wrong = edited(halve_heads_twice, version=3, revision=2)
    with pytest.raises(
        StartupRefused, match="version 1.2 changes values of version 1.*heads-twice"
    ):
        with server(wrong, "v3"):
            pass
