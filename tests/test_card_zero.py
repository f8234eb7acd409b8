"""The ZeRO card: golden values from the card itself, computed through the engine."""

import re
from fractions import Fraction
from pathlib import Path

import pytest

from app.domain.cards import read_card
from app.domain.generation import generate
from app.domain.units import format_quantity

CARD_PATH = Path(__file__).resolve().parents[1] / "cards" / "zero-memory-offload.yaml"
B = 10**9
GB = Fraction(10**9)


@pytest.fixture(scope="module")
def card():
    return read_card(CARD_PATH)


def f(card, name, psi, n_d=1):
    return card.formulas[name].evaluate({"psi": psi, "n_d": n_d})


def test_16_psi_for_70b_is_1120_gb(card):
    assert f(card, "ddp", 70 * B) == 1120 * GB
    assert (
        f(card, "params_fp16", 70 * B)
        + f(card, "grads_fp16", 70 * B)
        + f(card, "optimizer_fp32", 70 * B)
        == 1120 * GB
    )
    assert format_quantity(f(card, "ddp", 70 * B), "GiB", 1) == "1043.1 GiB"


def test_zero_stages_at_70b_on_16_ranks(card):
    assert f(card, "zero1", 70 * B, 16) == Fraction("332.5") * GB
    assert f(card, "zero2", 70 * B, 16) == Fraction("201.25") * GB
    assert f(card, "zero3", 70 * B, 16) == 70 * GB
    assert f(card, "zero1", 70 * B, 16) - f(card, "zero2", 70 * B, 16) == Fraction("131.25") * GB


def test_zero3_communicates_one_and_a_half_times_ddp(card):
    for psi in (7 * B, 70 * B):
        assert f(card, "comm_zero3", psi) / f(card, "comm_ddp", psi) == Fraction(3, 2)
        assert f(card, "comm_zero12", psi) == f(card, "comm_ddp", psi)


def test_offload_keeps_17_5_gb_per_gpu_for_70b_on_8(card):
    assert f(card, "offload_gpu", 70 * B, 8) == Fraction("17.5") * GB


def test_paper_figures_for_7_5b_on_64_ranks(card):
    psi = Fraction(75, 10) * B
    shown = [
        format_quantity(f(card, "ddp", psi, 64), "GB", 1),
        format_quantity(f(card, "zero1", psi, 64), "GB", 1),
        format_quantity(f(card, "zero2", psi, 64), "GB", 1),
        format_quantity(f(card, "zero3", psi, 64), "GB", 2),
    ]
    assert shown == ["120 GB", "31.4 GB", "16.6 GB", "1.88 GB"]


def test_templates_answer_1120_gb_for_70b(card):
    """Some template of point 1 asks for the 16Ψ total and a 70B variant shows 1120 GB as correct."""
    point = card.point(1)
    found = False
    for template in point.templates:
        if template.kind != "numeric" or "psi" not in template.params:
            continue
        for seed in range(400):
            variant = generate(card, template, seed)
            if variant.params["psi"] == str(70 * B):
                correct = variant.choice(variant.correct_choice_id)
                if correct.text.en == "1120 GB":
                    found = True
                    break
    assert found


def test_five_points_each_with_three_templates_and_pitfalls(card):
    assert [p.number for p in card.points] == [1, 2, 3, 4, 5]
    kinds = set()
    for point in card.points:
        assert len(point.templates) >= 3, point.number
        for template in point.templates:
            kinds.add(template.kind)
            assert len(template.pitfalls) >= 3, template.id
            for name in template.params:
                assert name not in {"n", "N", "nd", "params", "model_size"}, template.id
    assert kinds == {"numeric", "statement"}


def test_texts_are_bilingual(card):
    cjk = re.compile(r"[\u4e00-\u9fff]")
    texts = [card.title, card.definition, card.use_cases, card.problems_solved]
    for point in card.points:
        texts += [point.title, point.explanation]
        for template in point.templates:
            texts.append(template.stem.source)
            texts += [p.title for p in template.pitfalls] + [
                p.explanation for p in template.pitfalls
            ]
    for text in texts:
        assert text.en.strip() and text.zh.strip()
        assert cjk.search(text.zh), text.zh


def test_every_template_gives_one_correct_and_distinct_choices(card):
    for template in card.templates():
        for seed in range(300):
            variant = generate(card, template, seed)
            assert len(variant.choices) == template.choices
            assert sum(c.pitfall is None for c in variant.choices) == 1
            texts = [c.text.en for c in variant.choices]
            assert len(set(texts)) == len(texts), (template.id, seed, texts)
            pitfall_ids = [c.pitfall_id for c in variant.choices if c.pitfall_id]
            assert len(set(pitfall_ids)) == len(pitfall_ids)


def test_the_correct_letter_is_spread_evenly(card):
    """No position gives the answer away: over many variants each letter is right about 1/4 of the time."""
    from collections import Counter

    letters = Counter()
    for template in card.templates():
        for seed in range(200):
            letters[generate(card, template, seed).correct_choice_id] += 1
    total = sum(letters.values())
    assert set(letters) == {"a", "b", "c", "d"}
    for letter, count in letters.items():
        assert 0.2 < count / total < 0.3, (letter, count / total)
