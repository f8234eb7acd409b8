"""A card's own calculator (its ``calculator:`` section, app.domain.card_calculator): golden values
worked out by hand from the papers' accounting for the Activation Memory and Megatron 3D cards,
the choices that pick a formula, the rules that refuse a layout, the checks and memory bars, the
card format's refusals, and reading what people type as numbers only."""

from __future__ import annotations

import copy
from fractions import Fraction as F
from pathlib import Path

import pytest
import yaml

from app.domain import card_calculator as calc
from app.domain import formulas
from app.domain.calculator_input import CalculatorError
from app.domain.cards import CardError, card_to_yaml, parse_card, read_card

ROOT = Path(__file__).resolve().parents[1]
GB = 10**9


@pytest.fixture(scope="module")
def activation():
    return read_card(ROOT / "cards" / "activation-memory.yaml")


@pytest.fixture(scope="module")
def megatron():
    return read_card(ROOT / "cards" / "megatron-3d-pipeline.yaml")


def run(card, **fields):
    return calc.calculate(card.calculator, calc.form_values(card.calculator, fields))


def refused(card, **fields) -> dict[str, str]:
    with pytest.raises(CalculatorError) as caught:
        run(card, **fields)
    return {e.field: e.message.en for e in caught.value.errors}


# --- Activation Memory: GPT-3 175B (s = 2048, b = 1, h = 12288, a = 96, L = 96), t = p = 8 --------
#
# Korthikanti et al. 2022, section 4: one layer keeps s·b·h·(34 + 5·a·s/h) bytes.
#   s·b·h = 2048 · 1 · 12288 = 25,165,824;  5·a·s/h = 5 · 96 · 2048 / 12288 = 80.
SBH = 25_165_824
LAYER = 114 * SBH  # 34 + 80 = 114: 2,868,903,936 B, the card's "2.87 GB per layer"
ATTENTION = 11 * SBH + 5 * 96 * 2048**2  # 276,824,064 + 2,013,265,920 = 2,290,089,984
# Tensor parallelism t = 8, no sequence parallelism: s·b·h·(10 + 24/8 + 80/8) = 23·s·b·h.
TP = 23 * SBH  # 578,813,952
TP_SP = F(114, 8) * SBH  # everything over t: 14.25·s·b·h = 358,612,992
SELECTIVE_SP = F(34, 8) * SBH  # the 5as²b tensors dropped, the rest over t: 106,954,752
SELECTIVE = 13 * SBH  # without SP: 10 + 24/8 = 13 → 327,155,712
FULL = 2 * SBH  # each layer's input only: 50,331,648
# Model states 16Ψ with Ψ ≈ 12·L·h² = 12 · 96 · 12288² = 173,946,175,488 → 2,783,138,807,808 B,
# over t·p = 64 GPUs: 43,486,543,872 B.
STATES = 2_783_138_807_808 // 64


def test_the_numbers_written_out_by_hand():
    assert SBH == 2048 * 12288 and 5 * 96 * 2048 // 12288 == 80
    assert LAYER == 2_868_903_936 and ATTENTION == 2_290_089_984
    assert (TP, TP_SP, SELECTIVE_SP, SELECTIVE, FULL) == (
        578_813_952,
        358_612_992,
        106_954_752,
        327_155_712,
        50_331_648,
    )
    assert 16 * 12 * 96 * 12288**2 == 2_783_138_807_808 and STATES == 43_486_543_872


def test_one_layer_by_part_adds_up_to_the_cards_34_plus_5as_over_h(activation):
    result = run(activation)
    assert result.value("attention_part") == ATTENTION
    assert result.value("scores_part") == 2_013_265_920  # 5·a·s²·b
    assert result.value("mlp_part") == 19 * SBH and result.value("norms_part") == 4 * SBH
    parts = sum(result.value(p) for p in ("attention_part", "mlp_part", "norms_part"))
    assert parts == result.value("layer_plain") == LAYER
    assert result.output("layer_plain").shown("en") == "2.87 GB"  # as the card's text says
    assert result.output("mlp_part").shown("en") == "478 MB"


@pytest.mark.parametrize(
    ("choices", "per_layer", "formula"),
    [
        ({}, TP, "act_tp"),
        ({"sp": "on"}, TP_SP, "act_tp_sp"),
        ({"sp": "on", "recompute": "selective"}, SELECTIVE_SP, "act_selective"),
        ({"sp": "on", "attention": "flash"}, SELECTIVE_SP, "act_selective"),
        ({"recompute": "selective"}, SELECTIVE, "act_tp_selective"),
        ({"attention": "flash"}, SELECTIVE, "act_tp_selective"),
        ({"recompute": "full"}, FULL, "act_full"),
        ({"recompute": "full", "sp": "on", "attention": "flash"}, FULL, "act_full"),
    ],
)
def test_the_choices_pick_the_cards_formula_for_one_layer(activation, choices, per_layer, formula):
    result = run(activation, **choices)
    assert result.value("per_layer") == per_layer
    assert result.output("per_layer").case.card_formula == formula
    # The first stage under 1F1B: L/p = 12 layers for each of min(p, m) = 8 micro-batches,
    # L layers' worth in all, whatever p is (the card's act_first_stage with TP + SP).
    assert result.value("in_flight") == 8
    assert result.value("act_gpu") == 96 * per_layer == result.value("whole_model")


def test_flashattention_drops_exactly_the_5as2b_term(activation):
    for sp in ("off", "on"):
        standard = run(activation, sp=sp).value("per_layer")
        flash = run(activation, sp=sp, attention="flash").value("per_layer")
        assert standard - flash == F(5 * 96 * 2048**2, 8)  # 5·a·s²·b over t


def test_the_first_stage_matches_the_cards_own_formula_with_tp_and_sp(activation):
    result = run(activation, sp="on")
    params = {"s": 2048, "b": 1, "h": 12288, "a": 96, "t": 8, "n_l": 96, "p": 8}
    assert result.value("act_gpu") == activation.formulas["act_first_stage"].evaluate(params)


def test_fewer_micro_batches_than_stages_keep_fewer_in_flight(activation):
    result = run(activation, n_m=4)
    assert result.value("in_flight") == 4
    assert result.value("act_gpu") == TP * 12 * 4  # 12 layers × 4 micro-batches


def test_against_the_model_states_and_the_gpu(activation):
    plain = run(activation)
    assert plain.value("states_gpu") == STATES
    assert plain.value("act_vs_states") == F(96 * TP, STATES)  # 55.6 GB against 43.5 GB
    [bar] = plain.bars
    assert bar.total == 96 * TP + STATES == 99_052_683_264
    assert not bar.fits and bar.headroom == 80 * GB - 99_052_683_264
    with_sp = run(activation, sp="on")
    [bar] = with_sp.bars
    assert bar.total == 96 * TP_SP + STATES == 77_913_391_104 and bar.fits
    assert run(activation, sp="on", gpu_mem="77.9").bars[0].fits is False
    assert run(activation, sp="on", gpu_mem="77.92").bars[0].fits is True


def test_the_layout_rules_refuse_at_their_field(activation):
    assert refused(activation, t="5") == {
        "t": "Tensor-parallel size: t must divide the attention heads a, so that every GPU "
        "holds whole heads."
    }
    assert set(refused(activation, p="7")) == {"p"}
    assert set(refused(activation, a="80")) == {"a"}  # 12288 / 80 = 153.6: no head size
    # Sequence parallelism splits the sequence over t: s must divide.
    assert set(refused(activation, sp="on", s="2047")) == {"t"}
    run(activation, sp="off", s="2047")  # without it, any s


# --- Megatron 3D: GPT-3 175B on N = 1536 GPUs, t = 8, p = 8, B = 1536, b = 1 ----------------------
#
# d = N/(t·p) = 1536/64 = 24; m = B/(b·d) = 1536/24 = 64 micro-batches per step.
# GPipe/1F1B bubble (p − 1)/m = 7/64 = 10.9375 %, of the step's time (p − 1)/(m + p − 1) = 7/71.
# Interleaved with v = 2: 7/(2·64) = 7/128; of the step's time 7/128 / (1 + 7/128) = 7/135.
# Model states: 16Ψ/(t·p) = 16 · 175e9 / 64 = 43.75 GB; distributed optimizer
# (6 + 12/d)·Ψ/(t·p) = 6.5 · 175e9 / 64 = 17,773,437,500 B.


def test_megatron_layout_from_the_gpu_count(megatron):
    result = run(megatron)
    assert result.value("n_d") == 24 and result.value("n_m") == 64
    assert result.value("layers_per_stage") == 12 and result.value("heads_per_gpu") == 12
    assert result.value("bubble") == F(7, 64) and result.output("bubble").shown("en") == "10.9%"
    assert result.value("bubble_share") == F(7, 71)
    assert result.output("bubble").case.card_formula == "bubble_ideal"
    assert result.output("bubble_share").case.card_formula == "bubble_total"
    assert result.value("states_whole") == 43_750_000_000
    assert result.value("states_sharded") == 17_773_437_500
    assert [b.fits for b in result.bars] == [True, True]
    assert [(c.check.id, c.holds) for c in result.checks] == [
        ("pipeline-fills", True),
        ("tensor-parallel-in-a-node", True),
    ]


def test_megatron_interleaved_schedule(megatron):
    result = run(megatron, schedule="interleaved")
    assert result.value("bubble") == F(7, 128)
    assert result.output("bubble").case.card_formula == "bubble_interleaved"
    assert result.value("bubble_share") == F(7, 135)
    assert result.output("bubble_share").shown("zh") == "5.19%"
    run(megatron, schedule="interleaved", n_v="4")  # 96 layers over 8·4 chunks: 3 each
    assert set(refused(megatron, schedule="interleaved", n_v="5")) == {"n_v"}
    # B = 1560: m = 65 micro-batches, fine for 1F1B, not a multiple of p = 8 for interleaving.
    assert run(megatron, global_batch="1560").value("bubble") == F(7, 65)
    assert set(refused(megatron, schedule="interleaved", global_batch="1560")) == {"global_batch"}


def test_megatron_rules_and_checks(megatron):
    assert set(refused(megatron, gpus="1000")) == {"gpus", "global_batch"}  # 1000 / 64
    assert set(refused(megatron, tp="5", gpus="1280")) == {"tp"}  # 96 heads over 5
    assert set(refused(megatron, pp="5", gpus="1280")) == {"pp"}  # 96 layers over 5
    wide = run(megatron, tp="16", gpus="3072")  # 96/16 = 6 heads each, d = 24
    assert wide.value("n_d") == 24 and wide.value("states_whole") == 16 * 175 * GB / 128
    checks = {c.check.id: c.holds for c in wide.checks}
    assert checks["tensor-parallel-in-a-node"] is False
    small = run(megatron, global_batch="96")  # m = 96/24 = 4 < p = 8
    assert {c.check.id: c.holds for c in small.checks}["pipeline-fills"] is False
    big = run(megatron, psi="1T", tp="8", pp="8", gpus="512")  # 16 TB of states over 64
    assert big.value("states_whole") == 250 * GB and not big.bars[0].fits
    assert big.bars[1].total == (6 + F(12, 8)) * 10**12 / 64  # d = 8: 7.5 bytes a parameter


# --- reading the form: numbers only, every field's message ------------------------------------


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("abc", "'abc' is not a number."),
        ("2**11", "'2**11' is not a number."),
        ("__import__('os')", "is not a number."),
        ("1.5", "a whole number, please."),
        ("0", "from 1 to 1,048,576."),
        ("", "required."),
        ("9" * 41, "at most 40 characters."),
        ("1e999", "is not a number."),
    ],
)
def test_bad_numbers_are_a_message_at_their_field(activation, text, problem):
    errors = refused(activation, s=text)
    assert list(errors) == ["s"] and errors["s"].startswith("Sequence length s: ")
    assert errors["s"].endswith(problem)


def test_numbers_are_read_as_people_write_them(megatron, activation):
    assert run(megatron, psi="1.3e9").inputs.numbers["psi"] == 1_300_000_000
    assert run(megatron, psi="70,000,000,000").inputs.numbers["psi"] == 70 * 10**9
    assert run(activation, gpu_mem="141").inputs.numbers["gpu_mem"] == 141 * GB  # typed in GB


def test_a_choice_outside_its_list_is_refused(activation):
    errors = refused(activation, recompute="some")
    assert errors == {"recompute": "Activation recomputation: one of none, selective, full."}


def test_every_problem_is_listed(activation):
    assert set(refused(activation, s="x", b="0", sp="maybe", gpu_mem="-1", t="5")) == {
        "s",
        "b",
        "sp",
        "gpu_mem",
        "t",  # a rule over fields that read well is checked with the others
    }


def test_what_people_type_never_reaches_the_formula_parser(activation, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a formula was parsed while calculating")

    monkeypatch.setattr(formulas, "parse_formula", refuse)
    monkeypatch.setattr("app.domain.cards.parse_formula", refuse)
    for hostile in ("s*s", "__import__('os').system('x')", "lambda: 1", "1e9999", "\x00"):
        with pytest.raises(CalculatorError):
            run(activation, s=hostile)
    run(activation, s="4096")


def test_unknown_names_in_a_query(activation):
    assert calc.unknown_names(activation.calculator, {"s": "1", "lang": "zh", "psi": "7"}) == [
        "psi"
    ]


def test_the_svg_is_escaped_and_names_its_terms(activation):
    result = run(activation)
    svg = calc.memory_chart_svg(result, "zh", {"title": "<标题>", "gpu": "GPU", "colon": "："})
    assert svg.startswith("<svg") and "&lt;标题&gt;" in svg and "<script" not in svg
    assert "第一个阶段：" in svg and "99.1 GB" in svg and "80 GB" in svg
    assert 'class="calc-term-0"' in svg and 'class="calc-term-1"' in svg


# --- the card format --------------------------------------------------------------------------


def with_calculator(card, change) -> dict:
    document = copy.deepcopy(dict(card.document))
    change(document["calculator"])
    return document


def problem(card, change) -> CardError:
    with pytest.raises(CardError) as caught:
        parse_card(with_calculator(card, change))
    return caught.value


def output(section, output_id):
    return next(o for o in section["outputs"] if o["id"] == output_id)


def test_a_card_without_the_section_has_no_calculator():
    zero = read_card(ROOT / "cards" / "zero-memory-offload.yaml")
    assert zero.calculator is None and "calculator" not in zero.document


def test_the_section_round_trips_through_the_stored_document_and_yaml(activation):
    again = parse_card(copy.deepcopy(dict(activation.document)))
    assert again.calculator is not None and again.document == activation.document
    assert again.calculator.names == activation.calculator.names
    exported = parse_card(yaml.safe_load(card_to_yaml(activation.document)))  # export-card
    assert exported.document == activation.document


def test_a_formula_must_get_every_parameter_from_an_input(activation):
    def drop_heads(section):
        section["inputs"] = [i for i in section["inputs"] if i["name"] != "a"]
        section["rules"] = [r for r in section["rules"] if r["field"] != "a"]

    error = problem(activation, drop_heads)
    assert "output 'attention_part': it uses a, which no input or output before it gives" in str(
        error
    )
    assert error.field == "calculator.outputs.attention_part.formula"


def test_an_unknown_name_is_refused_at_its_column(activation):
    error = problem(activation, lambda s: output(s, "whole_model").update(formula="per_layer*L"))
    assert error.field == "calculator.outputs.whole_model.formula" and error.position == 11


def test_cases_must_cover_every_choice(activation):
    error = problem(activation, lambda s: output(s, "per_layer")["cases"].pop())
    assert "no case applies when sp = off, recompute = none, attention = standard" in str(error)


def test_a_case_after_the_default_never_applies(activation):
    def late(section):
        output(section, "per_layer")["cases"].append({"formula": "act_full"})

    assert "case 8 never applies" in str(problem(activation, late))


def test_a_when_names_a_choice_input_and_its_values(activation):
    def bad_value(section):
        output(section, "per_layer")["cases"][0]["when"] = {"recompute": "partial"}

    assert "'partial' is not a choice of 'recompute'" in str(problem(activation, bad_value))

    def not_choice(section):
        output(section, "per_layer")["cases"][0]["when"] = {"t": "8"}

    assert "'t' is no choice input" in str(problem(activation, not_choice))


def test_names_are_free(activation):
    def clash(section):
        output(section, "whole_model")["id"] = "act_layer"

    assert "is not free" in str(problem(activation, clash))
    assert "is not free" in str(problem(activation, lambda s: s["inputs"][0].update(name="lang")))


def test_number_inputs_are_bounded_and_their_default_fits(activation):
    assert "needs min and max" in str(
        problem(activation, lambda s: s["inputs"][0].update(max=None))
    )
    assert "the default is not a value the input accepts" in str(
        problem(activation, lambda s: s["inputs"][0].update(default=0))
    )
    assert "the default is not a value the input accepts" in str(
        problem(activation, lambda s: s["inputs"][0].update(default="1.5"))
    )


def test_the_defaults_must_compute(activation):
    def five(section):
        next(i for i in section["inputs"] if i["name"] == "t")["default"] = 5

    error = problem(activation, five)
    assert "defaults: they do not compute" in str(error) and "t must divide" in str(error)


def test_labels_are_plain_text(activation):
    def math(section):
        section["outputs"][0]["label"]["en"] = "Attention $11sbh$"

    assert "a label is plain text" in str(problem(activation, math))


def test_memory_is_in_bytes(activation):
    def in_layers(section):
        section["memory"]["capacity"] = "n_l"

    assert "the GPU's memory is a number input in bytes" in str(problem(activation, in_layers))

    def ratio(section):
        section["memory"]["bars"][0]["terms"] = ["act_vs_states"]

    assert "'act_vs_states' is no output in bytes" in str(problem(activation, ratio))


def test_a_rule_names_an_input(activation):
    def unknown(section):
        section["rules"][0]["field"] = "heads"

    assert "'heads' is no input" in str(problem(activation, unknown))


def test_the_draft_size_counts_the_calculators_formulas(activation):
    from app.domain.authoring import draft_size

    with_section = draft_size(dict(activation.document)).formulas
    without = dict(activation.document)
    without.pop("calculator")
    # 11 outputs (10 formulas, and per_layer's 7 cases) and 4 rules.
    assert with_section - draft_size(without).formulas == 10 + 7 + 4
