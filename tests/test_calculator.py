"""The card's memory calculator: golden values recomputed here from the ZeRO paper's accounting and
DeepSpeed's published estimator, the card's own formulas reused (not restated), offload, fits at
the edges, activations with and without checkpointing, validation that never raises anything
else, the SVG, and the page and JSON in both languages."""

from __future__ import annotations

import dataclasses
import html
import math
import random
import re
import time
import xml.etree.ElementTree as ET
from fractions import Fraction as F

import pytest
from conftest import CARD_ID

from app.domain import calculator as calc
from app.domain.cards import NamedFormula
from app.domain.formulas import parse_formula
from app.domain.texts import Text

PAGE = f"/cards/{CARD_ID}/calculator"
API = f"/api/v1/cards/{CARD_ID}/calculator"
GB = 10**9
B70 = 70 * 10**9


def run(card, **fields):
    values = {"psi": "70B", "n_d": "8", "gpu_gb": "80", "stage": "3", "offload": "none"}
    values.update({k: str(v) for k, v in fields.items()})
    return calc.calculate(card, calc.parse_inputs(values))


# --- the model states: the ZeRO paper's per-rank figures, restated here -----------------------


def paper(stage, psi, n_d):
    """Per-rank model states, (2 + 2 + K)Ψ with K = 12, from the ZeRO paper's Figure 1."""
    return {
        0: 16 * F(psi),
        1: 2 * F(psi) + 2 * F(psi) + 12 * F(psi) / n_d,
        2: 2 * F(psi) + (2 + 12) * F(psi) / n_d,
        3: (2 + 2 + 12) * F(psi) / n_d,
    }[stage]


# 70B: the card's running example. (The brief's 332.5 and 201.25 GB are ZeRO-1/2 at N_d = 16;
# at N_d = 8 they are 385 and 262.5 GB.)
GOLDEN_70B = [
    (8, 0, "1120"),
    (8, 1, "385"),
    (8, 2, "262.5"),
    (8, 3, "140"),
    (16, 0, "1120"),
    (16, 1, "332.5"),
    (16, 2, "201.25"),
    (16, 3, "70"),
]


@pytest.mark.parametrize(("n_d", "stage", "gb"), GOLDEN_70B)
def test_70b_per_rank_model_states_by_stage(card, n_d, stage, gb):
    assert paper(stage, B70, n_d) == F(gb) * GB  # the golden value is the paper's
    result = run(card, n_d=n_d, stage=stage)
    assert result.total == F(gb) * GB
    assert result.card_value == F(gb) * GB
    assert result.card_formulas == (("ddp", "zero1", "zero2", "zero3")[stage],)
    assert result.consistent
    assert (
        calc.format_bytes(result.total)
        == f"{int(F(gb)):,}" + (gb[gb.index(".") :] if "." in gb else "") + " GB"
    )
    assert result.term("activations").gpu == 0 and result.term("buffers").gpu == 0


def test_the_paper_75b_on_64_ranks(card):
    """Figure 1 of the ZeRO paper: 7.5B on 64 ranks, 120 → 31.4 → 16.6 → 1.88 GB."""
    shown = [
        calc.format_bytes(run(card, psi="7.5B", n_d=64, stage=stage).total, 1)
        for stage in (0, 1, 2, 3)
    ]
    assert shown == ["120 GB", "31.4 GB", "16.6 GB", "1.9 GB"]
    assert run(card, psi="7.5B", n_d=64, stage=3).total == F(1875, 1000) * GB


@pytest.mark.parametrize("psi", [1, 7, 1_300_000_000, 13 * 10**9, 175 * 10**9, 10**14])
@pytest.mark.parametrize("n_d", [1, 2, 3, 7, 64, 1000])
def test_every_term_is_the_papers_share_and_adds_up_to_the_cards_formula(card, psi, n_d):
    for stage, offload in calc.STAGE_FORMULAS:
        result = run(card, psi=psi, n_d=n_d, stage=stage, offload=offload)
        sharded = {0: set(), 1: {"optimizer"}, 2: {"optimizer", "grads"}, 3: set(calc.TERMS)}
        full = {"params": 2 * F(psi), "grads": 2 * F(psi), "optimizer": 12 * F(psi)}
        for key, value in full.items():
            share = value / n_d if key in sharded[stage] else value
            term = result.term(key)
            assert term.gpu + term.cpu == share, (stage, offload, key)
            assert (
                term.formula
                == {
                    "params": "params_fp16",
                    "grads": "grads_fp16",
                    "optimizer": "optimizer_fp32",
                }[key]
            )
        assert result.consistent, (stage, offload)
        if offload == "none":
            assert result.model_states == paper(stage, psi, n_d)


def test_the_calculator_evaluates_the_cards_formulas_rather_than_its_own(card):
    """Swap the card's optimizer-state formula: the term follows it, and the check against the
    card's stage formula (still 12Ψ/N_d) says they disagree."""
    eight = NamedFormula(
        "optimizer_fp32",
        Text("x", "x"),
        "8\\Psi",
        "B",
        parse_formula("8*psi", {"psi", "n_d"}),
    )
    changed = dataclasses.replace(card, formulas={**card.formulas, "optimizer_fp32": eight})
    result = run(changed, n_d=8, stage=1)
    assert result.term("optimizer").gpu == 8 * F(B70) / 8
    assert result.card_value == paper(1, B70, 8)  # zero1 itself, unchanged
    assert not result.consistent
    assert run(card, n_d=8, stage=1).consistent


def test_a_card_without_the_formulas_has_no_calculator(card):
    bare = dataclasses.replace(card, formulas={})
    assert calc.supports(card) and not calc.supports(bare)
    with pytest.raises(calc.CalculatorError) as caught:
        calc.calculate(bare, calc.parse_inputs(calc.DEFAULTS))
    assert "zero3" in caught.value.errors[0].message.en


# --- offload ----------------------------------------------------------------------------------


def test_offload_variants_70b_on_8(card):
    psi, n = F(B70), 8
    # ZeRO-3 + optimizer offload: the card's offload_gpu, 2Ψ/N_d = 17.5 GB (its definition).
    z3 = run(card, stage=3, offload="optimizer")
    assert z3.card_formulas == ("offload_gpu",)
    assert z3.total == 2 * psi / n == F("17.5") * GB
    assert z3.cpu_per_rank == (2 + 12) * psi / n == F("122.5") * GB
    assert z3.cpu_per_node == 8 * z3.cpu_per_rank
    # ZeRO-Offload on ZeRO-2: the full fp16 parameters, 2Ψ = 140 GB, stay on every GPU.
    z2 = run(card, stage=2, offload="optimizer")
    assert z2.card_formulas == ("params_fp16",)
    assert z2.total == 2 * psi == 140 * GB
    assert z2.cpu_per_rank == 14 * psi / n
    # ZeRO-1: the gradients are not partitioned, so they stay until reduced: 4Ψ on the GPU.
    z1 = run(card, stage=1, offload="optimizer")
    assert z1.total == 4 * psi == 280 * GB and z1.cpu_per_rank == 12 * psi / n
    # ZeRO-3 + optimizer + parameters (ZeRO-Infinity): no model states left on the GPU.
    inf = run(card, stage=3, offload="optimizer_params")
    assert inf.card_formulas == () and inf.model_states == 0
    assert inf.cpu_per_rank == 16 * psi / n == 140 * GB
    for result in (z3, z2, z1, inf):
        assert result.consistent


@pytest.mark.parametrize(
    ("stage", "offload"),
    [(0, "optimizer"), (0, "optimizer_params"), (1, "optimizer_params"), (2, "optimizer_params")],
)
def test_offload_the_stage_cannot_do_is_refused(card, stage, offload):
    with pytest.raises(calc.CalculatorError) as caught:
        calc.parse_inputs({**calc.DEFAULTS, "stage": str(stage), "offload": offload})
    assert [e.field for e in caught.value.errors] == ["offload"]


# --- fits or not ------------------------------------------------------------------------------


def test_fits_at_the_edges(card):
    # 16Ψ/N_d = 80 GB exactly at N_d = 14: it fits (≤), with nothing to spare.
    edge = run(card, n_d=14, stage=3)
    assert edge.total == 80 * GB and edge.fits and edge.headroom == 0
    assert not run(card, n_d=13, stage=3).fits
    below = run(card, n_d=14, stage=3, gpu_gb="79.999999999")
    assert not below.fits and below.headroom == -1  # one byte short
    assert run(card, n_d=14, stage=3, gpu_gb="80.000000001").fits
    # The card's own question: the smallest N_d for 70B on 80 GB under ZeRO-3 is ⌈1120/80⌉ = 14.
    assert run(card, n_d=8, stage=3).min_n_d == math.ceil(16 * B70 / (80 * GB)) == 14
    # ZeRO-2's unsharded 2Ψ = 140 GB never fits 80 GB, whatever N_d; on 141 GB it does.
    assert run(card, stage=2).min_n_d is None
    assert run(card, stage=2, gpu_gb=141).min_n_d == math.ceil(14 * B70 / GB)  # 2Ψ + 14Ψ/N ≤ 141
    # Plain DDP: all or nothing.
    assert run(card, psi="4B", stage=0, gpu_gb=64).min_n_d == 1
    assert not run(card, psi="4B", stage=0, gpu_gb="63.9").fits


def test_activations_and_buffers_count_towards_fitting(card):
    base = run(card, n_d=16, stage=3)  # 70 GB of model states
    assert base.fits
    heavy = run(card, n_d=16, stage=3, layers=80, hidden=8192, seq_len=4096, micro_batch=1)
    assert heavy.total == 70 * GB + 80 * 34 * 4096 * 8192 + 4 * 4 * 8192**2
    assert not heavy.fits
    assert heavy.term("buffers").gpu == 4 * (4 * 8192**2)  # L = 4h² when not entered


# --- activations: Korthikanti et al. 2022 -----------------------------------------------------


def korthikanti(s, b, h, a, layers, checkpointing):
    per_layer = s * b * h * (34 + (F(5 * a * s, h) if a else 0))  # sbh(34 + 5as/h)
    if checkpointing:
        return 2 * s * b * h * layers + per_layer  # layer inputs + one layer rebuilt
    return layers * per_layer


ACTIVATION_CASES = [
    # (layers, hidden, seq, micro-batch, heads, checkpointing, golden bytes)
    (80, 8192, 4096, 1, 64, False, 520_764_784_640),
    (80, 8192, 4096, 1, 64, True, 11_878_268_928),
    (80, 8192, 4096, 1, None, False, 91_268_055_040),  # FlashAttention: no s² term
    (80, 8192, 4096, 1, None, True, 6_509_559_808),
    (32, 4096, 2048, 4, 32, False, 122_406_567_936),
    (96, 12288, 2048, 1, 96, True, 7_700_742_144),  # GPT-3 175B's shape
]


@pytest.mark.parametrize(("layers", "h", "s", "b", "a", "ckpt", "golden"), ACTIVATION_CASES)
def test_activation_estimate(card, layers, h, s, b, a, ckpt, golden):
    assert korthikanti(s, b, h, a, layers, ckpt) == golden
    fields = {"layers": layers, "hidden": h, "seq_len": s, "micro_batch": b}
    if a:
        fields["heads"] = a
    if ckpt:
        fields["checkpointing"] = "1"
    result = run(card, n_d=64, stage=3, largest_layer=1, **fields)
    assert result.activations == golden
    assert result.inputs.activations.checkpointing is ckpt


def test_checkpointing_keeps_less_and_more_gpus_do_not_shrink_activations(card):
    shape = {"layers": 80, "hidden": 8192, "seq_len": 4096, "micro_batch": 2, "heads": 64}
    off = run(card, **shape).activations
    on = run(card, **shape, checkpointing="on").activations
    assert on < off / 10
    assert run(card, n_d=64, **shape).activations == off  # per rank: DP splits the batch
    assert run(card, **{**shape, "micro_batch": 4}).activations == 2 * off


# --- DeepSpeed's estimator, restated from its source ------------------------------------------


def ds_zero2(total_params, num_gpus_per_node=1, num_nodes=1, cpu_offload=True, factor=1.5):
    """deepspeed/runtime/zero/stage_1_and_2.py, estimate_zero2_model_states_mem_needs."""
    total_gpus = num_nodes * num_gpus_per_node
    if cpu_offload:
        gpu_mem = 2 * total_params
        cpu_mem = total_params * max(4 * total_gpus, 16) * factor
    else:
        gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
        cpu_mem = total_params * 4 * num_gpus_per_node * factor
    return int(cpu_mem), int(gpu_mem)


def ds_zero3(total_params, largest, num_gpus_per_node=1, num_nodes=1, cpu_offload=True,
             cpu_offload_params=True, zero_init=True, factor=1.5):  # fmt: skip
    """deepspeed/runtime/zero/stage3.py, estimate_zero3_model_states_mem_needs."""
    total_gpus = num_nodes * num_gpus_per_node
    gpus_factor = 1 / num_nodes
    largest_layer_memory = 4 * largest
    if cpu_offload:
        if cpu_offload_params:
            gpu_mem = largest_layer_memory
            cpu_mem = total_params * 18 * gpus_factor * factor
        else:
            gpu_mem = largest_layer_memory + int(2 * total_params / total_gpus)
            cpu_mem = total_params * 16 * gpus_factor * factor
    else:
        gpu_mem = largest_layer_memory + int(18 * total_params / total_gpus)
        cpu_mem = largest * 4 * num_gpus_per_node * factor
    return int(cpu_mem), int(gpu_mem), largest_layer_memory


def test_deepspeed_golden_figures(card):
    # growth.md: 70B on 8 GPUs, ZeRO-2 without offload prints 277.07 "GB" (GiB).
    z2 = run(card, stage=2).deepspeed
    assert z2.gpu == 2 * B70 + 18 * B70 // 8 == 297_500_000_000
    assert calc.format_gib(z2.gpu) == "277.07 GiB"
    assert z2.function == "estimate_zero2_model_states_mem_needs" and z2.expression == "2Ψ + 18Ψ/N"
    assert z2.cpu_per_node == B70 * 4 * 8 * 3 // 2
    off = run(card, stage=2, offload="optimizer", n_d=16, gpus_per_node=8).deepspeed
    assert (off.gpu, off.cpu_per_node) == (2 * B70, B70 * 64 * 3 // 2)  # Ψ·max(4·16, 16)·1.5
    # ZeRO-3 with L = 1e9; on 2 nodes the optimizer-offload host budget is the card's own
    # question: 16Ψ × 1.5 / 2 = 840 GB per node.
    z3 = run(card, stage=3, largest_layer="1e9").deepspeed
    assert (z3.gpu, z3.largest_layer) == (4 * 10**9 + 18 * B70 // 8, 4 * 10**9)
    assert z3.cpu_per_node == 10**9 * 4 * 8 * 3 // 2
    z3o = run(card, stage=3, offload="optimizer", n_d=16, largest_layer="1e9").deepspeed
    assert z3o.gpu == 4 * 10**9 + 2 * B70 // 16 and z3o.cpu_per_node == 840 * GB
    z3p = run(card, stage=3, offload="optimizer_params", n_d=16, largest_layer="1e9").deepspeed
    assert z3p.gpu == 4 * 10**9 and z3p.cpu_per_node == 945 * GB  # 18Ψ × 1.5 / 2
    assert run(card, stage=0).deepspeed is None
    # Beside the card: DeepSpeed's 18Ψ of sharded states is more than the card's 14Ψ.
    result = run(card, stage=2)
    assert result.deepspeed.gpu - result.card_value == 4 * B70 // 8


@pytest.mark.parametrize("psi", [10**6 + 1, 1_300_000_001, 7 * 10**9, 70 * 10**9, 175 * 10**9])
@pytest.mark.parametrize(("n_d", "per_node"), [(1, 1), (3, 3), (8, 8), (16, 8), (24, 8), (64, 4)])
def test_deepspeed_matches_its_published_formula(card, psi, n_d, per_node):
    nodes = n_d // per_node
    largest = psi // 50 + 1
    for stage, offload in calc.STAGE_FORMULAS:
        if stage == 0:
            continue
        ds = run(
            card, psi=psi, n_d=n_d, gpus_per_node=per_node, stage=stage, offload=offload,
            largest_layer=largest,
        ).deepspeed  # fmt: skip
        if stage in (1, 2):
            cpu, gpu = ds_zero2(psi, per_node, nodes, cpu_offload=offload == "optimizer")
        else:
            cpu, gpu, _ = ds_zero3(
                psi, largest, per_node, nodes, cpu_offload=True,
                cpu_offload_params=offload == "optimizer_params",
            ) if offload != "none" else ds_zero3(psi, largest, per_node, nodes, cpu_offload=False)  # fmt: skip
        assert (ds.cpu_per_node, ds.gpu) == (cpu, gpu), (stage, offload)


def test_against_the_real_deepspeed_when_it_is_installed(card):
    """Skipped unless DeepSpeed imports (``DS_BUILD_OPS=0 pip install deepspeed``: its estimators
    run on the CPU)."""
    stage_1_and_2 = pytest.importorskip("deepspeed.runtime.zero.stage_1_and_2")
    stage3 = pytest.importorskip("deepspeed.runtime.zero.stage3")
    for psi, n_d, per_node in [
        (B70, 8, 8),
        (7 * 10**9, 16, 8),
        (13 * 10**9, 3, 3),
        (10**6 + 1, 24, 8),
    ]:
        nodes = n_d // per_node
        for stage, offload in calc.STAGE_FORMULAS:
            if stage == 0:
                continue
            ours = run(
                card, psi=psi, n_d=n_d, gpus_per_node=per_node, stage=stage, offload=offload,
                largest_layer=10**5,
            ).deepspeed  # fmt: skip
            if stage in (1, 2):
                theirs = stage_1_and_2.estimate_zero2_model_states_mem_needs(
                    psi, per_node, nodes, cpu_offload=offload == "optimizer"
                )
            else:
                theirs = stage3.estimate_zero3_model_states_mem_needs(
                    psi, 10**5, per_node, nodes, cpu_offload=offload != "none",
                    cpu_offload_params=offload == "optimizer_params", zero_init=True,
                )[:2]  # fmt: skip
            assert (ours.cpu_per_node, ours.gpu) == tuple(theirs), (psi, n_d, stage, offload)


# --- validation -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [("70B", B70), ("70b", B70), ("7.5B", 7_500_000_000), ("1.3e9", 1_300_000_000),
     ("175000000000", 175 * 10**9), ("1,500,000", 1_500_000), ("350M", 350 * 10**6),
     ("1T", 10**12), (" 13B ", 13 * 10**9), ("2_000", 2000)],
)  # fmt: skip
def test_parameter_counts_are_read_as_people_write_them(text, value):
    assert calc.parse_inputs({**calc.DEFAULTS, "psi": text}).psi == value


@pytest.mark.parametrize(
    ("fields", "field"),
    [
        ({"psi": "abc"}, "psi"),
        ({"psi": ""}, "psi"),
        ({"psi": "0"}, "psi"),
        ({"psi": "1.5"}, "psi"),
        ({"psi": "1,5"}, "psi"),
        ({"psi": "1e99999999"}, "psi"),
        ({"psi": "1e31"}, "psi"),
        ({"psi": "1000T"}, "psi"),
        ({"psi": "9" * 41}, "psi"),
        ({"n_d": "0"}, "n_d"),
        ({"n_d": "2.5"}, "n_d"),
        ({"n_d": "-8"}, "n_d"),
        ({"n_d": "1048577"}, "n_d"),
        ({"gpu_gb": "0"}, "gpu_gb"),
        ({"gpu_gb": "-80"}, "gpu_gb"),
        ({"gpu_gb": "10001"}, "gpu_gb"),
        ({"gpu_gb": "eighty"}, "gpu_gb"),
        ({"stage": "4"}, "stage"),
        ({"stage": ""}, "stage"),
        ({"offload": "nvme"}, "offload"),
        ({"gpus_per_node": "3"}, "gpus_per_node"),  # does not divide 8
        ({"gpus_per_node": "0"}, "gpus_per_node"),
        ({"largest_layer": "71B"}, "largest_layer"),
        ({"layers": "80"}, "hidden"),  # the first missing shape field
        ({"layers": "80", "hidden": "8192", "seq_len": "4096", "micro_batch": "0"}, "micro_batch"),
        (
            {"layers": "8", "hidden": "64", "seq_len": "4", "micro_batch": "1", "heads": "65"},
            "heads",
        ),
    ],
)
def test_bad_input_is_a_message_for_its_field_in_both_languages(fields, field):
    started = time.perf_counter()
    with pytest.raises(calc.CalculatorError) as caught:
        calc.parse_inputs({**calc.DEFAULTS, **fields})
    assert time.perf_counter() - started < 0.1
    errors = caught.value.errors
    assert field in [e.field for e in errors]
    for error in errors:
        assert error.message.en and error.message.zh and error.message.en != error.message.zh


def test_every_problem_is_listed_not_only_the_first():
    with pytest.raises(calc.CalculatorError) as caught:
        calc.parse_inputs({"psi": "x", "n_d": "0", "gpu_gb": "", "stage": "9", "offload": "?"})
    assert {e.field for e in caught.value.errors} == {"psi", "n_d", "gpu_gb", "stage", "offload"}


def test_no_text_input_raises_anything_but_a_calculator_error(card):
    nasty = [
        "",
        " ",
        "0",
        "-0",
        "1",
        "8",
        "3",
        "2",
        "1e9",
        "1e-9",
        "1e400",
        "1e99999999",
        "NaN",
        "inf",
        "-inf",
        "0x10",
        "1_0",
        "1__0",
        "1,00",
        ",",
        ".",
        "1.",
        ".5",
        "5B",
        "9" * 39,
        "9" * 400,
        "\x00",
        "½",
        "١٢",
        "８",
        "<script>",
        "' OR 1=1",
        "None",
        "optimizer",
        "optimizer_params",
        "none",
        "on",
        "1e+30",
        "7e-1T",
    ]
    rng = random.Random(8)
    for _ in range(1500):
        values = {name: rng.choice(nasty) for name in calc.FIELDS if rng.random() < 0.9}
        try:
            result = calc.calculate(card, calc.parse_inputs(values))
        except calc.CalculatorError as exc:
            assert exc.errors
        else:
            assert result.total >= 0 and result.consistent
            ET.fromstring(calc.stacked_bar_svg(result, LABELS))


# --- display ----------------------------------------------------------------------------------

LABELS = {
    "card": "Card's <formulas> & co",
    "deepspeed": 'Deep"Speed',
    "deepspeed_states": "states",
    "gpu": "GPU",
    "title": "<script>alert(1)</script>",
    **{key: key.title() for key in calc.TERMS},
}


def test_format_bytes_in_decimal_units():
    assert calc.format_bytes(1120 * GB) == "1,120 GB"
    assert calc.format_bytes(F("201.25") * GB) == "201.25 GB"
    assert calc.format_bytes(2 * F(13 * 10**8) / 64) == "40.62 MB"  # 40.625, half to even
    assert calc.format_bytes(0) == "0 B"
    assert calc.format_bytes(-60 * GB) == "-60 GB"
    assert calc.format_gib(1120 * GB) == "1,043.08 GiB"


def test_the_pages_format_bytes_with_the_calculator_s_one_function():
    """One byte formatter in the app (the calculator's, in the domain): the pages' ``bytes``
    filter (the demo's results, the import limit) is it at 3 significant figures, so a size at a
    unit's edge reads as the calculator writes it, never in scientific notation, GB at most."""
    import ast
    from pathlib import Path

    from app.web.templating import make_pages

    root = Path(__file__).resolve().parents[1] / "app"
    defined = sorted(
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.FunctionDef) and node.name == "format_bytes"
    )
    assert defined == ["domain/calculator.py"]
    shown = make_pages().env.filters["bytes"]
    # What the pages showed before, kept: 3 significant figures, trailing zeros dropped.
    assert [shown(v) for v in (55_009_280, 7e6, 4.5e6, 2_000_000, 12_345_678, 999, 0)] == [
        "55 MB",
        "7 MB",
        "4.5 MB",
        "2 MB",
        "12.3 MB",
        "999 B",
        "0 B",
    ]
    assert shown(None) == "—" and shown(float("nan")) == "—"
    assert shown(999_999) == "1,000 KB"  # was "1e+03 KB"
    assert shown(1_500 * GB) == calc.format_bytes(1_500 * GB) == "1,500 GB"  # was "1.5 TB"
    assert calc.format_bytes(55_009_280, figures=3) == "55 MB"
    assert calc.format_bytes(55_009_280) == "55.01 MB"  # the calculator's 2 decimals


def test_the_svg_is_escaped_well_formed_and_labelled(card):
    result = run(card, stage=3, n_d=16, layers=80, hidden=8192, seq_len=4096, micro_batch=1)
    svg = calc.stacked_bar_svg(result, LABELS)
    root = ET.fromstring(svg)
    assert (
        "<script" not in svg
        and "style=" not in svg
        and " on" not in svg.lower().replace(" one", "")
    )
    assert (
        "&lt;script&gt;" in svg and "&lt;formulas&gt; &amp; co" in svg and "Deep&quot;Speed" in svg
    )
    ns = "{http://www.w3.org/2000/svg}"
    titles = [el.text for el in root.iter(f"{ns}title")]
    assert "Params: 8.75 GB" in titles and "Optimizer: 52.5 GB" in titles
    assert any(t.startswith("Activations: ") for t in titles)
    # Two bars (the card's, DeepSpeed's) and the GPU's capacity line.
    assert len(root.findall(f"{ns}line")) == 1
    assert {el.get("class") for el in root.iter(f"{ns}rect")} >= {
        "calc-params", "calc-grads", "calc-optimizer", "calc-activations", "calc-buffers",
        "calc-deepspeed",
    }  # fmt: skip
    ddp = calc.stacked_bar_svg(run(card, stage=0), LABELS)
    assert "calc-deepspeed" not in ddp  # no DeepSpeed estimator for plain DDP


# --- the page ---------------------------------------------------------------------------------


def text_of(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_the_page_without_a_query_shows_the_form_and_the_default_result(client):
    response = client.get(PAGE)
    assert response.status_code == 200
    page = response.text
    assert '<form id="calc-form"' in page and 'method="get"' in page
    assert 'name="psi"' in page and 'value="70B"' in page
    assert '<svg xmlns="http://www.w3.org/2000/svg"' in page
    words = " ".join(text_of(page).split())
    assert "Does not fit: 140 GB of 80 GB (60 GB short)" in words
    assert "Nd = 14" in words
    assert re.findall(r"<script[^>]*>", page) == [
        '<script src="/static/timezone.js" defer>',
        '<script src="/static/calculator.js" defer>',
    ]
    assert not re.search(r'(src|href)="(https?:)?//', page)  # no external assets
    assert "style=" not in page
    assert "script-src 'self'" in response.headers["content-security-policy"]


@pytest.mark.parametrize(("n_d", "stage", "gb"), GOLDEN_70B)
def test_the_page_shows_the_golden_values(client, n_d, stage, gb):
    page = client.get(PAGE, params={"psi": "70B", "n_d": n_d, "gpu_gb": 80, "stage": stage})
    assert page.status_code == 200
    shown = f"{int(F(gb)):,}" + (gb[gb.index(".") :] if "." in gb else "") + " GB"
    assert f"<strong>{shown}</strong>" in page.text
    verdict = "Fits" if F(gb) <= 80 else "Does not fit"
    assert f"<strong>{verdict}</strong>" in page.text


def test_the_page_in_chinese_keeps_the_language_in_the_form(client):
    page = client.get(
        PAGE,
        params={"lang": "zh", "psi": "70B", "n_d": 16, "gpu_gb": 80, "stage": 3,
                "offload": "optimizer", "layers": 80, "hidden": 8192, "seq_len": 4096,
                "micro_batch": 1, "checkpointing": "1"},
    )  # fmt: skip
    assert page.status_code == 200
    assert '<html lang="zh-Hans">' in page.text and "显存计算器" in page.text
    assert "<strong>放得下</strong>" in page.text
    assert '<input type="hidden" name="lang" value="zh">' in page.text
    assert '<option value="1" selected>' in page.text  # checkpointing on
    assert "offload_gpu" in page.text and "DeepSpeed" in page.text


def test_checkpointing_is_off_unless_asked_for(client):
    shape = {"psi": "7B", "n_d": 8, "gpu_gb": 80, "stage": 3, "layers": 32, "hidden": 4096,
             "seq_len": 4096, "micro_batch": 1}  # fmt: skip
    off = client.get(PAGE, params=shape).text
    on = client.get(PAGE, params={**shape, "checkpointing": "1"}).text
    assert '<option value="1" selected>' not in off and '<option value="1" selected>' in on
    assert "2·s·b·h per layer kept" in on and "2·s·b·h per layer kept" not in off


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_bad_input_is_a_400_page_with_a_plain_message(client, lang):
    response = client.get(
        PAGE,
        params={"lang": lang, "psi": "abc", "n_d": "0", "gpu_gb": "80", "stage": "1",
                "offload": "optimizer_params"},
    )  # fmt: skip
    assert response.status_code == 400
    page = response.text
    assert 'role="alert"' in page and "Traceback" not in page
    words = text_of(page)
    if lang == "en":
        assert "Parameters Ψ: 'abc' is not a number." in words
        assert "Offloading the parameters needs ZeRO-3" in words
    else:
        assert "参数量 Ψ：'abc' 不是数字。" in words and "卸载参数需要 ZeRO-3" in words
    assert 'value="abc"' in page and 'aria-invalid="true"' in page  # the form keeps the input
    assert "<svg" not in page  # no result for bad input


def test_hostile_and_huge_input_is_escaped_and_quick(client):
    started = time.perf_counter()
    response = client.get(PAGE, params={"psi": '"><script>alert(1)</script>', "n_d": "1e99999999"})
    assert time.perf_counter() - started < 2
    assert response.status_code == 400
    assert "<script>alert" not in response.text and "&lt;script&gt;" in response.text
    assert client.get(PAGE, params={"psi": "9" * 5000}).status_code == 400


def test_unknown_card_is_a_404_page(client):
    assert client.get("/cards/no-such-card/calculator").status_code == 404


def test_the_card_page_links_to_the_calculator(client):
    assert f'href="{PAGE}"' in client.get(f"/cards/{CARD_ID}").text
    assert f'href="{PAGE}?lang=zh"' in client.get(f"/cards/{CARD_ID}", params={"lang": "zh"}).text


def test_the_script_is_served_from_static(client):
    script = client.get("/static/calculator.js")
    assert script.status_code == 200 and "calc-form" in script.text
    assert "fetch(" not in script.text  # the CSP allows no connections: it re-submits the form


# --- the JSON ---------------------------------------------------------------------------------


def test_the_json_matches_the_golden_values(client):
    body = client.get(API, params={"psi": "70B", "n_d": 16, "stage": 2}).json()
    assert body["total_gpu_bytes"] == 201.25 * GB and body["card_formulas"] == ["zero2"]
    assert body["consistent"] and not body["fits"] and body["min_n_d"] is None
    terms = {t["term"]: t for t in body["terms"]}
    assert terms["grads"]["gpu_bytes"] == 2 * B70 / 16 and terms["grads"]["sharded"]
    assert body["deepspeed"]["gpu_bytes"] == 2 * B70 + 18 * B70 // 16
    default = client.get(API).json()  # the page's defaults: 70B, 8 ranks, 80 GB, ZeRO-3
    assert default["total_gpu_bytes"] == 140 * GB and default["min_n_d"] == 14


@pytest.mark.parametrize(("lang", "detail"), [("en", "not a number"), ("zh", "不是数字")])
def test_bad_json_input_is_a_problem_document(client, lang, detail):
    response = client.get(API, params={"psi": "seventy", "lang": lang})
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] == "invalid_calculator_input" and detail in body["detail"]
    assert client.get(API.replace(CARD_ID, "nope")).status_code == 404


# --- the messages, from the catalogs ----------------------------------------------------------

ALL_WRONG = {
    "psi": "1.5",
    "n_d": "0",
    "gpu_gb": "",
    "stage": "0",
    "offload": "optimizer",
    "layers": "80",
    "heads": "x",
}
MESSAGES = {
    "en": [
        "Parameters Ψ: a whole number, please.",
        "Data-parallel ranks N_d: from 1 to 1,048,576.",
        "GPU memory: required.",
        "Offload needs ZeRO (stage 1, 2 or 3): plain DDP has no offload.",
        "Activations need the layers, hidden size, sequence length and micro-batch: hidden size, "
        "sequence length, micro-batch missing (or leave all four empty).",
        "Attention heads: 'x' is not a number.",
    ],
    "zh": [
        "参数量 Ψ：请输入整数。",
        "数据并行 rank 数 N_d：应在 1 到 1,048,576 之间。",
        "GPU 显存：必填。",
        "卸载需要 ZeRO（阶段 1、2 或 3）：朴素 DDP 没有卸载。",
        "估算激活值需要层数、隐藏维度、序列长度和微批次大小：缺少隐藏维度、序列长度、微批次大小"
        "（或四项都留空）。",
        "注意力头数：'x' 不是数字。",
    ],
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_message_reads_in_the_readers_language_on_the_page_and_in_the_json(client, lang):
    page = client.get(PAGE, params={"lang": lang, **ALL_WRONG})
    assert page.status_code == 400
    words = text_of(page.text)
    for message in MESSAGES[lang]:
        assert message in words
    body = client.get(API, params={"lang": lang, **ALL_WRONG}).json()
    # The JSON's detail is every message, sentence after sentence (no space between in Chinese).
    assert body["detail"] == (" " if lang == "en" else "").join(MESSAGES[lang])


@pytest.mark.parametrize(
    ("fields", "en", "zh"),
    [
        ({"psi": "9" * 41}, "Parameters Ψ: at most 40 characters.", "参数量 Ψ：最多 40 个字符。"),
        ({"gpu_gb": "10001"}, "GPU memory: more than 0 and at most 10,000 GB.", "GPU 显存：应大于 0 且不超过 10,000 GB。"),
        ({"stage": "4"}, "ZeRO stage: 0 (plain DDP), 1, 2 or 3.", "ZeRO 阶段：0（朴素 DDP）、1、2 或 3。"),
        ({"offload": "nvme"}, "Offload: none, optimizer, or optimizer and parameters.", "卸载：不卸载、卸载优化器，或卸载优化器和参数。"),
        ({"stage": "2", "offload": "optimizer_params"}, "Offloading the parameters needs ZeRO-3 (DeepSpeed's offload_param works with stage 3 only).", "卸载参数需要 ZeRO-3（DeepSpeed 的 offload_param 只能用于阶段 3）。"),
        ({"gpus_per_node": "3"}, "GPUs per node: 3 does not divide N_d = 8.", "每节点 GPU 数：3 不能整除 N_d = 8。"),
        ({"largest_layer": "71B"}, "Largest layer's parameters: at most Ψ.", "最大层的参数量：不能超过 Ψ。"),
        ({"seq_len": "80"}, "Activations need the layers, hidden size, sequence length and micro-batch: layers, hidden size, micro-batch missing (or leave all four empty).", "估算激活值需要层数、隐藏维度、序列长度和微批次大小：缺少层数、隐藏维度、微批次大小（或四项都留空）。"),
        ({"layers": "8", "hidden": "64", "seq_len": "4", "micro_batch": "1", "heads": "65"}, "Attention heads: at most the hidden size.", "注意力头数：不能超过隐藏维度。"),
    ],
)  # fmt: skip
def test_each_refusal_in_both_languages(fields, en, zh):
    with pytest.raises(calc.CalculatorError) as caught:
        calc.parse_inputs({**calc.DEFAULTS, **fields})
    [error] = caught.value.errors
    assert (error.message.get("en"), error.message.get("zh")) == (en, zh)
    assert str(caught.value).endswith(en)  # logs read the English text
