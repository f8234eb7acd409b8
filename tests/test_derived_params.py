"""Derived parameters and constraints in the card format: a parameter computed from the drawn
ones (the hidden size from heads and head size), and combinations that break a rule (heads not
divisible by the tensor-parallel degree) never drawn; both refused with their field and column
when wrong, and kept when a template is edited in the dashboard."""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from pathlib import Path

import pytest
from test_authoring import instructor_headers

from app.domain.cards import CardError, parse_card
from app.domain.generation import generate
from app.domain.sampling import parameter_combinations

API = "/api/v1"
BASE = json.loads((Path(__file__).parent / "cards_fixtures" / "kv_cache_card.json").read_text())

# Per tensor-parallel rank, the K and V of one token in one layer: 2 tensors x 2 bytes x the
# rank's heads (heads/tp) x head size.
SHARDED = {
    "id": "kv-per-rank",
    "version": 1,
    "kind": "numeric",
    "params": {
        "heads": {"values": [12, 16, 32, 40]},
        "head_dim": {"values": [64, 128]},
        "tp": {"values": [2, 4, 8]},
    },
    "derived": {"hidden": {"formula": "heads*head_dim", "format": "int"}},
    "constraints": [{"value": "heads/tp", "integer": True}],
    "stem": {
        "en": "A layer has hidden size {hidden} ({heads} heads of {head_dim}), split over {tp} "
        "tensor-parallel ranks. How many bytes of fp16 K and V does one rank keep per token?",
        "zh": "某层隐藏维度 {hidden}（{heads} 个头，每头 {head_dim}），按张量并行切到 {tp} 个 "
        "rank。每个 rank 每个 token 保存多少字节的 fp16 K 和 V？",
    },
    "answer": "2*2*hidden/tp",
    "unit": "B",
    "precision": 3,
    "choices": 3,
    "solution": [
        {
            "en": "Each rank holds {heads}/{tp} heads: $2 \\times 2$ bytes x {=hidden/tp} values.",
            "zh": "每个 rank 有 {heads}/{tp} 个头：$2 \\times 2$ 字节 × {=hidden/tp} 个值。",
        }
    ],
    "pitfalls": [
        {
            "id": "whole-layer",
            "title": {"en": "The whole layer on every rank", "zh": "每个 rank 存整层"},
            "formula": "2*2*hidden",
            "explanation": {"en": "{value}: ranks split the heads.", "zh": "{value}：头被切分。"},
        },
        {
            "id": "keys-only",
            "title": {"en": "Keys only", "zh": "只算键"},
            "formula": "2*hidden/tp",
            "explanation": {"en": "{value}: V is kept too.", "zh": "{value}：V 也要存。"},
        },
        {
            "id": "fp32",
            "title": {"en": "Four bytes", "zh": "按 4 字节"},
            "formula": "2*4*hidden/tp",
            "explanation": {"en": "{value}: fp16 is 2 bytes.", "zh": "{value}：fp16 是 2 字节。"},
        },
        {
            "id": "queries-too",
            "title": {"en": "Queries cached too", "zh": "把 Q 也缓存了"},
            "formula": "3*2*hidden/tp",
            "explanation": {"en": "{value}: Q is not cached.", "zh": "{value}：Q 不缓存。"},
        },
        {
            "id": "split-twice",
            "title": {"en": "Split twice", "zh": "切分了两次"},
            "formula": "2*2*hidden/(tp*tp)",
            "explanation": {"en": "{value}: one split.", "zh": "{value}：只切一次。"},
        },
        {
            "id": "times-tp",
            "title": {"en": "Multiplied by the ranks", "zh": "乘以 rank 数"},
            "formula": "2*2*hidden*tp",
            "explanation": {"en": "{value}: divide by {tp}.", "zh": "{value}：应除以 {tp}。"},
        },
        {
            "id": "values-not-bytes",
            "title": {"en": "Counted one tensor's values", "zh": "只数了一个张量的元素"},
            "formula": "hidden/tp",
            "explanation": {
                "en": "{value}: two tensors, two bytes.",
                "zh": "{value}：两个张量，每个 2 字节。",
            },
        },
        {
            "id": "one-head",
            "title": {"en": "One head only", "zh": "只算一个头"},
            "formula": "2*2*head_dim",
            "explanation": {"en": "{value}: a rank has several.", "zh": "{value}：有多个头。"},
        },
    ],
}


def card_with(template: dict) -> dict:
    document = copy.deepcopy(BASE)
    document["points"][0]["templates"].append(template)
    return document


def compiled(template: dict):
    card = parse_card(card_with(template))
    return card, next(t for t in card.templates() if t.id == template["id"])


def test_only_combinations_that_satisfy_the_constraints_are_drawn_with_the_derived_values():
    card, template = compiled(SHARDED)
    # By hand: heads 12 splits over 2 and 4 (not 8); 16, 32 and 40 over 2, 4 and 8: 11 pairs,
    # times 2 head sizes.
    allowed = {
        (heads, dim, tp)
        for heads in (12, 16, 32, 40)
        for dim in (64, 128)
        for tp in (2, 4, 8)
        if heads % tp == 0
    }
    assert len(allowed) == 22 and template.domain_size() == 22
    seen = set()
    for seed in range(1500):
        variant = generate(card, template, seed)
        heads, dim, tp = (int(variant.params[n]) for n in ("heads", "head_dim", "tp"))
        assert (heads, dim, tp) in allowed
        assert int(variant.params["hidden"]) == heads * dim
        assert variant.params_display["hidden"] == str(heads * dim)
        assert f"hidden size {heads * dim} " in variant.stem.en
        assert variant.content.answer.value == Fraction(4 * heads * dim, tp)
        seen.add((heads, dim, tp))
    assert seen == allowed  # every allowed combination is drawn
    walked = list(parameter_combinations(template))
    assert {(int(v["heads"]), int(v["head_dim"]), int(v["tp"])) for v in walked} == allowed
    assert all(v["hidden"] == v["heads"] * v["head_dim"] for v in walked)


def test_a_template_without_rules_draws_its_variants_as_before():
    """Templates that declare neither keep every variant: the draw is the same stream."""
    card = parse_card(copy.deepcopy(BASE))
    template = card.templates()[0]
    assert template.allowed is None and template.derived == ()
    variant = generate(card, template, 7)
    # The fixture's first template, seed 7, as drawn before derived parameters existed.
    assert {n: str(v) for n, v in variant.params.items()} == {
        n: str(v) for n, v in generate(card, template, 7).params.items()
    }
    assert set(variant.params) == set(template.params)
    # and its stored document spells out no new field (its content digest stays as it was)
    assert all(
        "derived" not in t and "constraints" not in t
        for p in card.document["points"]
        for t in p["templates"]
    )


@pytest.mark.parametrize(
    ("change", "field", "column", "words"),
    [
        ({"derived": {"hidden": {"formula": "heads*headdim"}}}, "derived.hidden", 7, "headdim"),
        ({"derived": {"tp": {"formula": "2*heads"}}}, "derived.tp", None, "not allowed"),
        ({"constraints": [{"value": "heads/tp"}]}, "constraints.0", None, "integer"),
        (
            {"constraints": [{"value": "heads", "at_least": "100"}]},
            "constraints",
            None,
            "no combination",
        ),
        (
            {"constraints": [{"value": "heads/(tp-2)", "integer": True}]},
            "constraints.0.value",
            6,
            "tp=2",
        ),
        (
            {"constraints": [{"value": "heads", "at_most": "tp+"}]},
            "constraints.0.at_most",
            None,
            "syntax",
        ),
    ],
)
def test_a_wrong_rule_is_refused_at_its_field(change, field, column, words):
    with pytest.raises(CardError) as refused:
        compiled({**SHARDED, **change})
    error = refused.value
    assert error.field == field
    if column is not None:
        assert error.position == column
    assert words in str(error)


def test_too_many_combinations_to_check_is_a_clear_limit():
    wide = {
        **SHARDED,
        "params": {
            "heads": {"values": list(range(1, 65))},
            "head_dim": {"values": list(range(1, 65))},
            "tp": {"values": [2, 4]},
        },
    }
    with pytest.raises(CardError) as refused:
        compiled(wide)
    assert "at most 4096 combinations" in str(refused.value) and "8192" in str(refused.value)


def test_the_api_validates_and_publishes_a_card_with_rules(client, app):
    headers = instructor_headers(client, app)
    document = card_with(SHARDED)
    checked = client.post(f"{API}/instructor/cards/validate", headers=headers, json=document)
    assert checked.status_code == 200, checked.text
    errors = [p for p in checked.json()["problems"] if p["severity"] == "error"]
    assert errors == [], errors
    broken = card_with({**SHARDED, "derived": {"hidden": {"formula": "heads*headdim"}}})
    checked = client.post(f"{API}/instructor/cards/validate", headers=headers, json=broken)
    problems = checked.json()["problems"]
    assert any(p["field"] == "derived.hidden" and p["position"] == 7 for p in problems), problems


def test_the_editor_reads_and_shows_rules_and_keeps_fields_it_has_no_field_for():
    from app.web.authoring.template_form import (
        constraints_text,
        derived_text,
        parse_constraints,
        parse_derived,
        template_from_form,
    )

    constraints = [
        {"value": "heads/tp", "integer": True},
        {"value": "tp*pp", "at_most": "64", "at_least": "2"},
    ]
    assert parse_constraints(constraints_text(constraints)) == constraints
    assert parse_derived(derived_text(SHARDED["derived"])) == SHARDED["derived"]
    assert parse_derived("hidden = heads*head_dim | int") == SHARDED["derived"]

    existing = {
        **SHARDED,
        "conventions": {"units": "decimal"},
        "sources": ["Megatron-LM paper, section 3"],
        "pitfalls": [{**SHARDED["pitfalls"][0], "convention": "units"}, *SHARDED["pitfalls"][1:]],
    }
    form = {
        "id": "kv-per-rank",
        "kind": "numeric",
        "params": "heads = 16, 32\nhead_dim = 128\ntp = 2, 4",
        "derived": "hidden = heads*head_dim | int",
        "constraints": "heads/tp integer",
        "stem_en": "new wording {hidden}",
        "stem_zh": "新的措辞 {hidden}",
        "answer": "2*2*hidden/tp",
        "unit": "B",
        "precision": "0",
        "solution_en": "step",
        "solution_zh": "步骤",
    }
    for i, pitfall in enumerate(SHARDED["pitfalls"]):
        form |= {
            f"pitfall{i}_id": pitfall["id"],
            f"pitfall{i}_title_en": pitfall["title"]["en"],
            f"pitfall{i}_title_zh": pitfall["title"]["zh"],
            f"pitfall{i}_formula": pitfall["formula"],
            f"pitfall{i}_explanation_en": pitfall["explanation"]["en"],
            f"pitfall{i}_explanation_zh": pitfall["explanation"]["zh"],
        }
    template = template_from_form(form, existing)
    assert template["derived"] == SHARDED["derived"]
    assert template["constraints"] == [{"value": "heads/tp", "integer": True}]
    assert template["conventions"] == {"units": "decimal"}
    assert template["sources"] == ["Megatron-LM paper, section 3"]
    assert template["pitfalls"][0]["convention"] == "units"
    assert template["stem"]["en"] == "new wording {hidden}"


def editor_form(page: str) -> dict[str, str]:
    """What the template editor's form submits as the page shows it (nothing changed)."""
    import html5lib

    tree = html5lib.parse(page, namespaceHTMLElements=False)
    form = tree.find(".//form[@class='template-form']")
    fields: dict[str, str] = {}
    for element in form.iter():
        name = element.get("name")
        if not name:
            continue
        if element.tag == "input":
            fields[name] = element.get("value") or ""
        elif element.tag == "textarea":
            fields[name] = element.text or ""
        elif element.tag == "select":
            chosen = element.find("option[@selected]")
            fields[name] = (chosen if chosen is not None else element.find("option")).get("value")
    return fields


def test_editing_a_shipped_template_in_the_dashboard_keeps_its_conventions_and_sources(client, app):
    """The dashboard's form has no field for conventions, sources or other wordings: saving a
    shipped template through it keeps them."""
    from test_authoring_web import log_in

    from app.authoring import service

    log_in(client, app)
    card_id = "zero-memory-offload"
    with app.state.sessionmaker() as db:
        before = service.get_draft(db=db, card_id=card_id).document
    chosen = [
        t
        for p in before["points"]
        for t in p["templates"]
        if t.get("conventions") and t.get("sources")
    ]
    statement = next(
        t for p in before["points"] for t in p["templates"] if t.get("answer_phrasings")
    )
    for template in (chosen[0], statement):
        page = client.get(f"/instructor/cards/{card_id}/templates/{template['id']}")
        saved = client.post(
            f"/instructor/cards/{card_id}/templates/{template['id']}", data=editor_form(page.text)
        )
        assert saved.status_code == 200, saved.text[:300]
        with app.state.sessionmaker() as db:
            after = service.get_draft(db=db, card_id=card_id).document
        kept = next(t for p in after["points"] for t in p["templates"] if t["id"] == template["id"])
        assert set(kept) == set(template), set(template) ^ set(kept)
        for key in template:
            if key != "pitfalls":
                assert kept[key] == template[key], key
        for a, b in zip(kept["pitfalls"], template["pitfalls"], strict=True):
            assert set(a) == set(b), (a["id"], set(a) ^ set(b))
            for key in b:
                assert a[key] == b[key], (a["id"], key, a[key], b[key])


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("$1 + \\frac{p - 1}{p}$", "$1 + \\frac{p - 1}{p}$"),  # a LaTeX argument: the letter
        ("$x^{p}$ and $y_{p}$", "$x^{p}$ and $y_{p}$"),
        ("$\\sqrt{p}$", "$\\sqrt{p}$"),
        ("$\\frac{1}{{nodes}}$ of it", "$\\frac{1}{32}$ of it"),  # braced once more: the value
        ("$34 \\times {p} \\times {nodes}$", "$34 \\times 16 \\times 32$"),
        ("{p} stages on {nodes} nodes", "16 stages on 32 nodes"),
    ],
)
def test_a_parameter_in_a_latex_argument_is_the_letter_unless_braced_once_more(source, shown):
    from app.domain.texts import Text, compile_text

    names = frozenset({"p", "nodes"})
    template = compile_text(Text(source, source), names, names, {})
    values = {"p": Fraction(16), "nodes": Fraction(32)}
    text = template.bind(values, {"p": "16", "nodes": "32"}, frozenset()).fill({})
    assert text.en == shown
