"""The ZeRO card's corrected facts (../shared/research/zero.md), pinned with golden values
computed here from the sources, not from the card's formulas."""

from fractions import Fraction
from pathlib import Path

import pytest

from app.domain.cards import read_card
from app.domain.generation import generate

CARD_PATH = Path(__file__).resolve().parents[1] / "cards" / "zero-memory-offload.yaml"
B = 10**9


@pytest.fixture(scope="module")
def card():
    return read_card(CARD_PATH)


def variants(card, template_id, seeds=range(400)):
    template = card.template(template_id)
    return [generate(card, template, seed) for seed in seeds]


def pitfall_value(card, template_id, pitfall_id, **params):
    template = card.template(template_id)
    pitfall = next(p for p in template.pitfalls if p.id == pitfall_id)
    return pitfall.formula.evaluate({k: Fraction(v) for k, v in params.items()})


def answer_value(card, template_id, **params):
    template = card.template(template_id)
    return template.answer_formula.evaluate({k: Fraction(v) for k, v in params.items()})


def test_zero_offload_as_published_keeps_the_full_fp16_parameters(card):
    # ZeRO-Offload (Ren et al. 2021) is built on ZeRO-2: every GPU keeps 2Ψ of fp16 weights.
    template = card.template("p5-what-offload-moves")
    assert "ZeRO-2" in template.stem.source.en and "ZeRO-2" in template.stem.source.zh
    assert "each GPU keeps the full fp16 parameters" in template.answer_statement.en
    assert "每张 GPU 保留完整的 fp16 参数" in template.answer_statement.zh
    # the 2Ψ they take is in the solution (the key alone carrying a formula gave it away)
    assert "full fp16 parameters, $2\\Psi$" in template.solution[1].source.en
    shard = next(p for p in template.pitfalls if p.id == "keeps-a-parameter-shard")
    assert "ZeRO-3 with offload" in shard.explanation.en
    # 70B under ZeRO-2 + offload: 140 GB of fp16 weights on each GPU
    assert (
        pitfall_value(card, "p5-offload-gpu-memory", "params-not-sharded", psi=70 * B, n_d=8)
        == 140 * B
    )


def test_zero3_offload_keeps_the_parameter_shard(card):
    # the seed's 70B on 8 GPUs: 140 GB / 8 = 17.5 GB
    assert answer_value(card, "p5-offload-gpu-memory", psi=70 * B, n_d=8) == Fraction(175, 10) * B
    for variant in variants(card, "p5-offload-gpu-memory"):
        if variant.params == {"psi": str(70 * B), "n_d": "8"}:
            correct = variant.choice(variant.correct_choice_id)
            assert correct.value == 17.5
            break
    else:
        pytest.fail("no 70B / 8 GPU variant in 400 seeds")


def test_deepspeed_budgets_16_psi_times_1_5_of_host_ram(card):
    # estimate_zero3_model_states_mem_needs, offload_optimizer with zero.Init:
    # cpu = total_params * 16 * (1 / num_nodes) * 1.5
    for psi in (7 * B, 70 * B):
        for nodes in (2, 4, 16, 32):
            expected = Fraction(psi * 16 * 3, 2 * nodes)
            assert answer_value(card, "p5-host-ram-per-node", psi=psi, nodes=nodes) == expected
    # 70B on 2 nodes: 70e9 × 16 × 1.5 / 2 = 840 GB per node
    assert answer_value(card, "p5-host-ram-per-node", psi=70 * B, nodes=2) == 840 * B
    # the 14Ψ of fp16 gradients + states is a pitfall now, and the parameter-offload
    # distractor is DeepSpeed's 18Ψ budget with offload_param, not its optimizer-offload figure
    assert (
        pitfall_value(card, "p5-host-ram-per-node", "fp16-gradients-offloaded", psi=70 * B, nodes=2)
        == 735 * B
    )
    assert (
        pitfall_value(card, "p5-host-ram-per-node", "params-offloaded-too", psi=70 * B, nodes=2)
        == 945 * B
    )
    assert card.template("p5-cpu-ram-per-rank") is None


def test_deepspeed_is_not_credited_with_the_delayed_update(card):
    template = card.template("p5-what-offload-moves")
    solution = " ".join(step.source.en for step in template.solution)
    assert "delayed update is not in DeepSpeed" in solution
    pitfall = next(p for p in template.pitfalls if p.id == "delayed-update-hides-cpu")
    assert "never merged" in pitfall.explanation.en
    point = card.point_by_slug("offload")
    assert "delaying the parameter update" not in point.explanation.en


def test_zero3_communication_under_gradient_accumulation(card):
    # per optimizer step: ZeRO-3 3kΨ (two gathers + reduce-scatter per micro-batch), DDP with
    # no_sync 2Ψ, so the ratio is 1.5k and changes with k
    shown = set()
    for variant in variants(card, "p4-comm-ratio"):
        k = int(variant.params["k"])
        correct = variant.choice(variant.correct_choice_id)
        assert correct.value == 3 * k / 2
        shown.add(correct.value)
    assert shown == {6.0, 12.0, 24.0, 48.0}
    template = card.template("p4-is-zero3-worth-it")
    assert "fixed 1.5×" not in " ".join(s.source.en for s in template.solution)


def test_point_3_does_not_say_zero1_all_reduces(card):
    template = card.template("p3-gradient-shard-after-rs")
    pitfall = next(p for p in template.pitfalls if p.id == "allreduce-result")
    assert "DDP and ZeRO-1 keep after an all-reduce" not in pitfall.explanation.en
    assert "bucket by bucket" in pitfall.explanation.en


def test_units_are_stated_in_the_stems(card):
    assert "decimal GB" in card.template("p4-min-gpus-zero3").stem.source.en
    assert "十进制 GB" in card.template("p4-min-gpus-zero3").stem.source.zh
    # the choices may read MB, GB or TB (one readable unit a question), so the stem names the
    # unit system and what a GB is
    assert "decimal units (1 GB = $10^9$ bytes)" in card.template("p1-total-16psi").stem.source.en
    assert "十进制单位，1 GB = $10^9$ 字节" in card.template("p1-total-16psi").stem.source.zh


def test_zero_infinity_names_what_it_added(card):
    answer = card.template("p5-zero-infinity").answer_statement
    for phrase in (
        "parameters too",
        "bandwidth-centric partitioning",
        "overlap engine",
        "memory-centric tiling",
    ):
        assert phrase in answer.en
    for phrase in ("参数", "以带宽为中心的切分", "重叠引擎", "以内存为中心的分块"):
        assert phrase in answer.zh


def test_near_identical_choices_are_gone(card):
    # p3-zero2-saving at N_d = 64 showed 14.766 beside 15 GB; every shown pair is now >= 5% apart
    for template_id in ("p3-zero2-saving", "p1-gb-vs-gib", "p4-zero3-comm-time"):
        for variant in variants(card, template_id, range(300)):
            values = sorted(c.value for c in variant.choices)
            for low, high in zip(values, values[1:], strict=False):
                assert (high - low) / high >= 0.049, (template_id, values)
