"""What the dashboard says about a draft's validation is true: a draft whose structure is wrong
was not validated template by template, and no page says its templates passed; the count of
templates validated is the card's; a problem of a template's unit, a parameter's format or a
pitfall's value is shown at its field.

Golden values come from the fixture card (tests/cards_fixtures/kv_cache_card.json) and the
changes made to it here."""

from __future__ import annotations

import copy
import html
import json
import re
from pathlib import Path
from typing import Any

import pytest
from test_authoring import instructor_headers
from test_authoring_web import log_in

from app.domain.authoring import check_document

API = "/api/v1"
CARD = json.loads((Path(__file__).parent / "cards_fixtures" / "kv_cache_card.json").read_text())
KV_TOTAL = CARD["points"][0]["templates"][0]
STOPPED = {
    "en": "Validation stopped before the templates: fix these errors first; no template was "
    "checked.",
    "zh": "校验在检查模板之前就停止了：请先改正这些错误；没有检查任何模板。",
}
NOT_CHECKED = {
    "en": "Validation stopped before the templates: fix the errors on the card's page first; "
    "this template was not checked.",
    "zh": "校验在检查模板之前就停止了：请先改正卡片页面上的错误；这个模板没有检查。",
}
NO_PROBLEMS = {
    "en": "No problems: every variant of every template passed validation.",
    "zh": "没有问题：每个模板的每个变体都通过了校验。",
}


def template(template_id: str, **changes: Any) -> dict[str, Any]:
    """The fixture's template under another id, with ``changes``."""
    out = copy.deepcopy(KV_TOTAL)
    out["id"] = template_id
    out.update(changes)
    return out


def real_problems() -> list[dict[str, Any]]:
    """Templates that compile or not, each with one real problem."""
    clash = template("clash")
    clash["pitfalls"][0]["formula"] = "kv*1"  # the answer's value
    bogus = template("bogus-format")
    bogus["params"] = {**bogus["params"], "layers": {"values": [24, 32], "format": "bogus"}}
    parsecs = template("parsecs", unit="parsecs")
    nope = template("nope", stem={"en": KV_TOTAL["stem"]["en"] + " {nope}", "zh": "{layers} 层"})
    return [clash, bogus, parsecs, nope]


def schema_broken() -> list[dict[str, Any]]:
    return [
        template("empty-zh", stem={"en": "A stem.", "zh": ""}),
        template("forty", choices=40),
        template("Bad Id!"),
    ]


def card(templates: list[dict[str, Any]], card_id: str = "qa-test") -> dict[str, Any]:
    document = copy.deepcopy(CARD)
    document["id"] = card_id
    document["points"][0]["templates"] = templates
    return document


def test_a_wrong_structure_halts_validation_and_the_real_problems_are_at_their_fields():
    stopped = check_document(card(real_problems() + schema_broken()))
    assert stopped.stopped
    assert {(p.template_id, p.field) for p in stopped.problems} == {
        ("empty-zh", "stem.zh"),
        ("forty", "choices"),
        ("Bad Id!", "id"),
    }
    checked = check_document(card(real_problems()))
    assert not checked.stopped
    assert {(p.template_id, p.field) for p in checked.errors} == {
        ("clash", "pitfalls.only-keys.formula"),
        ("bogus-format", "params.layers"),
        ("parsecs", "unit"),
        ("nope", "stem.en"),
    }
    reasons = {p.template_id: p.reason.en for p in checked.errors}
    assert reasons["parsecs"].startswith("unknown unit 'parsecs' (known: B, KB, MB, GB,")
    assert reasons["bogus-format"].startswith(
        "parameter 'layers' has unknown format 'bogus' (known: count, int, B,"
    )
    assert reasons["clash"] == (
        "with the parameters {layers=24, heads=16, head_dim=128, seq=2048, batch=4} it shows "
        "1.61 GB, which clashes with the answer 1.61 GB"
    )


def page_text(response) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", response.text)).split())


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_page_says_no_problems_when_validation_stopped_at_the_structure(client, app, lang):
    prof = instructor_headers(client, app)
    created = client.post(
        f"{API}/instructor/cards", json=card(real_problems() + schema_broken()), headers=prof
    )
    assert created.status_code == 201, created.text
    log_in(client, app, email="web-prof@example.com")
    page = client.get(f"/instructor/cards/qa-test?lang={lang}")
    assert page.status_code == 200
    shown = page_text(page)
    assert STOPPED[lang] in shown
    assert NO_PROBLEMS[lang] not in shown
    assert "templates validated in" not in shown and "个模板" not in shown
    for template_id in ("clash", "parsecs"):
        editor = client.get(f"/instructor/cards/qa-test/templates/{template_id}?lang={lang}")
        assert editor.status_code == 200
        shown = page_text(editor)
        assert NOT_CHECKED[lang] in shown and NO_PROBLEMS[lang] not in shown


def test_the_count_of_templates_validated_is_the_cards_and_problems_are_at_their_fields(
    client, app
):
    prof = instructor_headers(client, app)
    templates = [template("fine"), *real_problems()[2:]]  # one validates, two do not compile
    created = client.post(f"{API}/instructor/cards", json=card(templates), headers=prof)
    assert created.status_code == 201, created.text
    log_in(client, app, email="web-prof@example.com")
    page = client.get("/instructor/cards/qa-test")
    for _ in range(200):
        if "data-validation=" not in page.text:
            break
        page = client.get("/instructor/cards/qa-test")
    shown = page_text(page)
    assert re.search(r"\b3 templates validated in [\d.]+ s\.", shown), shown
    assert NO_PROBLEMS["en"] not in shown and STOPPED["en"] not in shown
    editor = client.get("/instructor/cards/qa-test/templates/parsecs")
    unit = re.search(r'id="f-unit"[^>]*>((?:<p class="field-problem[^>]*>.*?</p>)*)', editor.text)
    assert unit is not None and "unknown unit &#39;parsecs&#39;" in unit[1]


def test_the_card_page_renders_exam_point_titles_as_learner_pages_do(client, app):
    prof = instructor_headers(client, app)
    document = card([template("fine")])
    document["points"][0]["title"]["en"] = r"The $16\Psi$ bill"
    created = client.post(f"{API}/instructor/cards", json=document, headers=prof)
    assert created.status_code == 201, created.text
    log_in(client, app, email="web-prof@example.com")
    page = client.get("/instructor/cards/qa-test").text
    heading = re.search(r"<h3>1\. (.*?) <span", page)
    assert heading is not None and heading[1].startswith('The <math aria-label="16 Psi"')
    assert r"$16\Psi$" not in page
    option = re.search(r'<option value="kv-bytes">(.*?)</option>', page)
    assert option is not None and option[1] == "1. The 16Ψ bill"


def test_the_api_says_which_problems_stopped_validation(client, app):
    """An app or script validating through the API could not tell a structure error that kept
    every template unchecked from a problem of one template: ``halts`` says so."""
    prof = instructor_headers(client, app)
    stopped = client.post(
        f"{API}/instructor/cards/validate",
        json=card(real_problems() + schema_broken()),
        headers=prof,
    )
    assert stopped.status_code == 200, stopped.text
    problems = stopped.json()["problems"]
    assert problems and all(p["halts"] for p in problems if p["severity"] == "error")
    checked = client.post(
        f"{API}/instructor/cards/validate", json=card(real_problems()), headers=prof
    )
    problems = checked.json()["problems"]
    assert any(p["template_id"] == "parsecs" for p in problems)
    assert not any(p["halts"] for p in problems)
