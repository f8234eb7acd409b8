"""How the dashboard words two kinds of refusal: a count in good grammar ("1 item", "2 items",
"takes 1 argument"; zh has one form), and an id, a slug or a name that breaks its pattern said in
words with an example, never as the raw regular expression ("must match ^[a-z0-9]+...$").

Golden values: the wordings are written here; the examples are ids the cards use."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from test_authoring_forms import field_problems
from test_authoring_web import csrf, log_in
from test_card_editing import posted

from app.domain.authoring import compile_document

ROOT = Path(__file__).resolve().parents[1]
MEGATRON = yaml.safe_load((ROOT / "cards" / "megatron-3d-pipeline.yaml").read_text("utf-8"))
WORDS = "lower-case letters and digits, words joined by single hyphens"
WORDS_ZH = "由小写字母和数字组成，单词之间用单个连字符连接"


def first_template(document: dict) -> dict:
    return document["points"][0]["templates"][0]


def no_templates(document):
    document["points"][0]["templates"] = []


def two_pitfalls(document):
    del first_template(document)["pitfalls"][2:]


def bad_template_id(document):
    first_template(document)["id"] = "P1_DDP"


def bad_pitfall_id(document):
    first_template(document)["pitfalls"][0]["id"] = "Ideal time"


def bad_card_id(document):
    document["id"] = "Megatron 3D"


def bad_slug(document):
    document["points"][0]["slug"] = "step_time"


def bad_parameter_name(document):
    document["params"] = ["1psi"]


@pytest.mark.parametrize(
    ("change", "field", "en", "zh"),
    [
        (no_templates, "points.0.templates", "needs at least 1 item", "至少需要 1 项"),
        (two_pitfalls, "pitfalls", "needs at least 3 items", "至少需要 3 项"),
        (
            bad_template_id,
            "id",
            f"must be {WORDS} (e.g. p1-ddp-per-rank)",
            f"须{WORDS_ZH}（例如 p1-ddp-per-rank）",
        ),
        (
            bad_pitfall_id,
            "pitfalls.0.id",
            f"must be {WORDS} (e.g. ideal-time)",
            f"须{WORDS_ZH}（例如 ideal-time）",
        ),
        (bad_card_id, "id", f"must be {WORDS} (e.g. kv-cache)", f"须{WORDS_ZH}（例如 kv-cache）"),
        (
            bad_slug,
            "points.0.slug",
            f"must be {WORDS} (e.g. per-layer-formula)",
            f"须{WORDS_ZH}（例如 per-layer-formula）",
        ),
        (
            bad_parameter_name,
            "params.0",
            "must be a name of at most 40 letters, digits and underscores, not starting with a "
            "digit (e.g. n_d)",
            "须为不超过 40 个字符的名称，由字母、数字和下划线组成，不能以数字开头（例如 n_d）",
        ),
    ],
)
def test_a_shape_refusal_reads_well(change, field, en, zh):
    document = copy.deepcopy(MEGATRON)
    change(document)
    problems = [p for p in compile_document(document).problems if p.field == field]
    assert [(p.text.get("en"), p.text.get("zh")) for p in problems] == [(en, zh)]


TEMPLATE = "/instructor/cards/megatron-3d-pipeline/templates/p1-step-time"


def test_the_template_editor_says_what_an_id_must_be(client, app):
    log_in(client, app)
    form = posted(client.get(TEMPLATE).text) | {"kind": "numeric", "id": "P1 Step"}
    page = client.post(TEMPLATE, data=form)
    assert field_problems(page.text, "f-id") == [f"must be {WORDS} (e.g. p1-ddp-per-rank)"]
    page = client.post(TEMPLATE + "?lang=zh", data=form)
    assert field_problems(page.text, "f-id") == [f"须{WORDS_ZH}（例如 p1-ddp-per-rank）"]


def test_a_new_card_with_a_bad_id_is_told_what_an_id_is(client, app):
    log_in(client, app)
    page = client.get("/instructor")
    refused = client.post(
        "/instructor/cards?lang=zh",
        data={
            "csrf_token": csrf(page.text),
            "card_id": "KV Cache",
            "title_en": "KV cache size",
            "title_zh": "KV 缓存大小",
        },
    )
    assert "卡片 id 由小写字母和数字组成，单词之间用单个连字符连接（例如 kv-cache）" in refused.text
    assert "a-z0-9" not in refused.text.replace('pattern="[a-z0-9]+(-[a-z0-9]+)*"', "")
