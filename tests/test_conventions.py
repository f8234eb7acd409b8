"""A key that depends on a convention (decimal GB or binary GiB, fp16 or fp32 gradients, the
master-copy or the autocast layout, the ring's (N-1)/N, activations) is defensible only when
the stem states the convention: validation refuses a template whose pitfall is the key under
another convention unless the template declares its own, and a template whose stem does not say
each convention it declares in both languages."""

import copy
from pathlib import Path

import pytest

from app.domain.cards import CardError, parse_card, read_card, read_cards
from app.domain.conventions import stated
from app.domain.generation import candidates, figures_of
from app.domain.sampling import parameter_combinations
from app.domain.units import readable_unit
from app.domain.validation import validate_card


def t(text, zh=None):
    return {"en": text, "zh": zh if zh is not None else text + "（中文）"}


def pitfall(pid, formula, **extra):
    return {"id": pid, "title": t(pid), "formula": formula, "explanation": t("{value}"), **extra}


TEMPLATE = {
    "id": "zero1-per-rank",
    "version": 1,
    "kind": "numeric",
    "params": {
        "psi": {"values": ["7e9", "70e9"], "format": "count"},
        "n_d": {"values": [8, 16]},
    },
    "stem": t("ZeRO-1, {psi} parameters, {n_d} ranks: memory per rank?"),
    "answer": "2*psi + 2*psi + 12*psi/n_d",
    "unit": "GB",
    "precision": 3,
    "solution": [t("{answer}")],
    "pitfalls": [
        # 1 GB = 10**9 bytes; the same bytes are 10**9/2**30 = 0.931 as many GiB: 7% below
        pitfall("gib-for-gb", "(2*psi + 2*psi + 12*psi/n_d)*10**9/2**30"),
        pitfall("optimizer-shard-only", "12*psi/n_d"),
        pitfall("shards-everything", "16*psi/n_d"),
        pitfall("ddp", "16*psi"),
        pitfall("cluster", "(2*psi + 2*psi + 12*psi/n_d)*n_d"),
        pitfall("twice", "(2*psi + 2*psi + 12*psi/n_d)*2"),
    ],
}

CARD = {
    "id": "mini",
    "version": 1,
    "params": ["psi", "n_d"],
    "title": t("Mini"),
    "definition": t("d"),
    "use_cases": t("u"),
    "problems_solved": t("p"),
    "points": [
        {
            "number": 1,
            "slug": "the-point",
            "title": t("Point"),
            "explanation": t("e"),
            "templates": [TEMPLATE],
        }
    ],
}


def card_with(**changes):
    data = copy.deepcopy(CARD)
    template = data["points"][0]["templates"][0]
    pitfalls = changes.pop("pitfalls", None)
    template.update(changes)
    if pitfalls:
        for item in template["pitfalls"]:
            item.update(pitfalls.get(item["id"], {}))
    return parse_card(data)


DECIMAL_STEM = t(
    "ZeRO-1, {psi} parameters, {n_d} ranks: memory per rank, in decimal units "
    "(1 GB = $10^9$ bytes)?",
    "ZeRO-1，{psi} 参数，{n_d} 个 rank：每 rank 多少内存（十进制单位，1 GB = $10^9$ 字节）？",
)


def test_a_gib_figure_under_a_gb_label_must_be_marked_as_a_units_pitfall():
    with pytest.raises(CardError, match="other unit system"):
        validate_card(card_with())


def test_a_pitfall_convention_needs_the_template_to_declare_its_own():
    with pytest.raises(CardError, match="must declare its own"):
        card_with(pitfalls={"gib-for-gb": {"convention": "units"}})
    with pytest.raises(CardError, match="unknown convention"):
        card_with(conventions={"units": "metric"})


def test_the_stem_must_state_the_convention_in_every_language():
    marked = {"gib-for-gb": {"convention": "units"}}
    with pytest.raises(CardError, match=r"stem \(en\)"):
        validate_card(card_with(conventions={"units": "decimal"}, pitfalls=marked))
    english_only = t(DECIMAL_STEM["en"], "ZeRO-1，{psi} 参数，{n_d} 个 rank：每 rank 多少内存？")
    with pytest.raises(CardError, match=r"stem \(zh\)"):
        validate_card(
            card_with(conventions={"units": "decimal"}, pitfalls=marked, stem=english_only)
        )
    validate_card(card_with(conventions={"units": "decimal"}, pitfalls=marked, stem=DECIMAL_STEM))


def test_a_declared_convention_is_stated_even_when_no_pitfall_needs_it():
    """The key depends on every convention the template declares: a learner holding the other
    one must be told, whether or not a pitfall happens to be that other answer."""
    with pytest.raises(CardError, match=r"depends on the 'units' convention.*stem \(en\)"):
        validate_card(card_with(conventions={"units": "decimal"}))


def test_phrases_that_state_a_convention():
    assert stated("units", "decimal", "in decimal units (1 GB = $10^9$ bytes)", "en")
    assert not stated("units", "decimal", "How much memory, in GB?", "en")
    assert stated("gradients", "fp16", "按 ZeRO 论文的口径梯度为 fp16", "zh")
    assert stated("gradients", "fp16", "梯度为 2 字节（bf16）", "zh")
    assert stated("gradients", "fp32", "and an fp32 copy of the gradients in host memory", "en")
    assert stated("ring", "ignored", "ignoring the $(N_d - 1)/N_d$ factor", "en")
    assert stated("layout", "master-copy", "keeps an fp32 master copy of the weights", "en")
    assert not stated("layout", "master-copy", "Mixed-precision Adam training", "en")


CARD_PATH = Path(__file__).resolve().parents[1] / "cards" / "zero-memory-offload.yaml"


def test_the_zero_card_fixes_every_convention_its_keys_depend_on():
    """The questions a second convention would answer differently: each says which it uses."""
    card = read_card(CARD_PATH)
    templates = {template.id: template for template in card.templates()}
    expected = {
        "p1-name-the-terms": {"layout": "master-copy"},  # autocast/FSDP2: fp32 params, no master
        "p4-min-gpus-zero3": {"gradients": "fp16"},  # DeepSpeed's count: fp32 gradients, 18Ψ
        "p1-ddp-cluster-total": {"gradients": "fp16"},
        "p3-zero2-saving": {"units": "decimal"},  # 97.8 GB vs 105 "GB" (GiB)
        "p3-gradient-shard-after-rs": {"units": "decimal"},
        "p3-exact-ring-bytes": {"units": "decimal", "ring": "counted"},
        "p5-offload-gpu-memory": {"units": "decimal"},
        # under autocast the optimizer state is m and v alone (8Ψ) and ZeRO-1 keeps the fp32
        # parameters and gradients whole (8Ψ + 8Ψ/N_d): the stems name the master-copy layout
        "p1-optimizer-states": {"layout": "master-copy"},
        "p2-zero1-per-rank": {"layout": "master-copy"},
        "p2-zero2-per-rank": {"layout": "master-copy"},
    }
    for template_id, conventions in expected.items():
        template = templates[template_id]
        for name, value in conventions.items():
            assert template.conventions.get(name) == value, (template_id, name)
            for lang in ("en", "zh"):
                assert stated(name, value, template.stem.source.get(lang), lang), (
                    template_id,
                    name,
                    lang,
                )


def test_a_gib_figure_read_as_gb_is_shown_in_gb_everywhere_on_the_shipped_cards():
    """A 'units' pitfall of a GB template is the GiB figure under a GB label. Shown in MB (a
    value under 0.1 GB) it would no longer be that slip, MiB read as MB being another factor, and
    its explanation ('0.09766 GiB ... labelled GB that reads 97.7 MB') would contradict itself;
    the key could be the only choice in GB. The cards keep such values in GB by their domains."""
    cards = read_cards(CARD_PATH.parent)
    checked = 0
    for card in cards.values():
        for template in card.templates():
            if template.kind != "numeric" or template.unit not in ("GB", "GB/s"):
                continue
            if not any(p.convention == "units" for p in template.pitfalls):
                continue
            for values in parameter_combinations(template):
                _answer, pitfalls = candidates(template, values)
                for c in pitfalls:
                    if c.pitfall is None or c.pitfall.convention != "units":
                        continue
                    shown = readable_unit([c.value], template.unit, figures_of(template))
                    assert shown == template.unit, (card.id, template.id, c.pitfall.id, values)
                    checked += 1
    assert checked > 500
