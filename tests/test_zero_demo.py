"""The ZeRO demo trains for real (gloo on the CPU) and its figures are the card's formulas.

Golden values come from the card: every expected byte and element count below is the card's
formula (``cards/zero-memory-offload.yaml``, evaluated by ``app.domain``) at the run's Ψ, or at
Ψ_padded where the flat buffers are padded to a multiple of N_d. Ψ_padded itself is recomputed
here from the model's layer sizes.

One spawn per world size runs every stage; the "tiny" model's layers divide by neither 3 nor 4,
so world sizes 3 and 4 exercise uneven, padded shards: fp32 at world sizes 1, 2 and 3 (parity with
AdamW to rounding), bf16 at world size 4 (the card's 2 + 2 + 12 bytes, term by term).
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest

from app.zero_demo.card import CardFormulas
from app.zero_demo.config import MODEL_PRESETS, DemoConfig

pytestmark = pytest.mark.demo

ROOT = Path(__file__).resolve().parents[1]
CARD = CardFormulas(ROOT / "cards" / "zero-memory-offload.yaml")
TINY = MODEL_PRESETS["tiny"]
STAGES = (0, 1, 2, 3)


def run_demo(**overrides) -> dict:
    """Train the tiny model on spawned gloo ranks; the document ``--json`` would print."""
    from app.zero_demo.report import build_document
    from app.zero_demo.runner import launch

    # One thread per rank: the suite runs with pytest -n 2, and oversubscribed cores make torch's
    # OpenMP threads spin against each other.
    settings = {
        "model": TINY,
        "dtype": "fp32",
        "steps": 5,
        "progress": False,
        "compare": False,
        "timeout_s": 120,
        "threads": 1,
        # The per-phase profiler and the warm-up step cost time; test_zero_demo_phases measures
        # the phases (and warms up); nothing here measures a peak.
        "phase_memory": False,
        "warm_up": False,
    }
    cfg = DemoConfig(**{**settings, **overrides})
    return build_document(launch(cfg), cfg, CARD)


def padded_psi(world_size: int) -> int:
    """Ψ_padded of the tiny model: each layer's flat buffer rounded up to a multiple of N_d."""
    from app.zero_demo.model import build_model

    sizes = [sum(p.numel() for p in unit.parameters()) for unit in build_model(TINY, seed=0).units]
    return sum(-(-n // world_size) * world_size for n in sizes)


def by_run(doc: dict) -> dict[tuple[int, str], dict]:
    return {(r["stage"], r["offload"]): r for r in doc["results"]}


def assert_inventory_is_the_formula(r: dict, psi: int, n_d: int, element: int) -> None:
    """Each term equals the card's term at Ψ_padded; the total misses the formula at Ψ by the padding alone."""
    stage = r["stage"]
    padded = psi if stage == 0 else padded_psi(n_d)
    assert r["padded_psi"] == padded, f"stage {stage}: Ψ_padded"
    expected = CARD.term_bytes(stage, padded, n_d, element)
    for term, value in expected.items():
        assert r["bytes_per_rank"][term] == value, (
            f"stage {stage} {term}: {r['bytes_per_rank'][term]} != {value}"
        )
    textbook = sum(CARD.term_bytes(stage, psi, n_d, element).values())
    padding = sum(CARD.term_bytes(stage, padded - psi, n_d, element).values())
    assert r["bytes_per_rank"]["total"] - textbook == padding
    # The document's figures (JSON numbers: floats where Ψ/N_d is not whole).
    assert r["padding_bytes_per_rank"] == pytest.approx(float(padding), abs=1e-6)
    assert r["formula_bytes_per_rank"] == pytest.approx(float(textbook), rel=1e-15)
    assert r["matches_formula_with_padding"]


def assert_comm_is_the_formula(r: dict, psi: int, n_d: int) -> None:
    stage = r["stage"]
    padded = r["padded_psi"]
    assert r["comm_elements_per_rank_per_step"] == CARD.comm_elements(stage, padded, n_d)
    by = {op: v["elements"] for op, v in r["comm_by_collective"].items()}
    expected = {
        0: {"all_reduce": 2 * psi},
        1: {"reduce_scatter": padded, "all_gather": padded},
        2: {"reduce_scatter": padded, "all_gather": padded},
        # ZeRO-3 gathers every layer twice: for its forward and for its backward.
        3: {"reduce_scatter": padded, "all_gather": 2 * padded},
    }[stage]
    assert by == expected, f"stage {stage}"
    assert r["comm_same_every_step"]
    ring = Fraction(r["comm_elements_per_rank_per_step"] * (n_d - 1), n_d)
    assert r["comm_ring_elements_per_rank_per_step"] == pytest.approx(float(ring))


def assert_trains_like_adamw(r: dict, tolerance: float, steps: int = 5) -> None:
    assert len(r["losses"]) == len(r["reference_losses"]) == steps
    for step, (got, want) in enumerate(zip(r["losses"], r["reference_losses"], strict=True), 1):
        assert abs(got - want) <= tolerance, (
            f"stage {r['stage']} {r['offload']} step {step}: {got} vs {want}"
        )


@pytest.mark.parametrize("world_size", [1, 2, 3])
def test_every_stage_matches_the_card_and_single_process_adamw(world_size, tmp_path):
    offloads = ("none", "cpu", "disk") if world_size == 2 else ("none",)
    states = tmp_path / "states"
    # Three steps: enough for the losses to follow AdamW's (the first step's loss is before any
    # update) and for every step's collectives to be compared with the first's.
    doc = run_demo(
        world_size=world_size,
        offloads=offloads,
        offload_dir=str(states),
        compare=world_size == 2,
        steps=3,
    )
    psi, runs = doc["psi"], by_run(doc)
    assert sorted(runs) == sorted((s, o) for s in STAGES for o in offloads)
    if world_size == 3:
        assert padded_psi(world_size) > psi, "the tiny model must force uneven shards"

    for r in doc["results"]:
        # fp32 run: 4-byte parameters and gradients.
        assert_inventory_is_the_formula(r, psi, world_size, element=4)
        assert_comm_is_the_formula(r, psi, world_size)
        assert_trains_like_adamw(r, tolerance=2e-5, steps=3)
        assert r["param_max_diff"] < 1e-4
        # The storage walk after backward and after every step found nothing unexplained.
        assert r["audit"] == {"checks": 2 * 3, "max_unexplained_bytes": 0}

    # ZeRO-3 moves 1.5x DDP's elements; only the padding keeps the ratio off 1.5.
    ratio = Fraction(
        runs[3, "none"]["comm_elements_per_rank_per_step"],
        runs[0, "none"]["comm_elements_per_rank_per_step"],
    )
    assert ratio == Fraction(3, 2) * Fraction(padded_psi(world_size), psi)
    assert (
        abs(ratio - Fraction(3, 2)) <= Fraction(3, 2) * Fraction(TINY.layers + 2, psi) * world_size
    )

    # ZeRO-3 releases each layer after use: never more than two gathered at once.
    assert 1 <= runs[3, "none"]["peak_gathered_units"] <= 2

    if world_size == 2:
        assert_offload_moves_exactly_the_states(runs, world_size)
        assert not list(states.rglob("*.bin")), "optimizer files are removed after the run"
        for name in ("fsdp2", "zero_redundancy_optimizer"):
            theirs = doc["comparisons"][name]
            assert theirs["max_loss_diff"] <= 2e-5, name
            for r in doc["results"]:
                assert (
                    max(abs(a - b) for a, b in zip(r["losses"], theirs["losses"], strict=True))
                    <= 2e-5
                )


def assert_offload_moves_exactly_the_states(
    runs: dict, n_d: int, kinds=("cpu", "disk"), element: int = 4
) -> None:
    for stage in STAGES:
        kept = runs[stage, "none"]
        moved_terms = ("optimizer", "grads") if stage >= 2 else ("optimizer",)
        moved = sum(kept["bytes_per_rank"][t] for t in moved_terms)
        for kind in kinds:
            off = runs[stage, kind]
            for term in ("params", "grads", "optimizer", "total"):
                assert off["bytes_per_rank"][term] == kept["bytes_per_rank"][term], (
                    stage,
                    kind,
                    term,
                )
            assert off["bytes_per_rank"]["offloaded"] == moved, (stage, kind)
            assert (
                off["bytes_per_rank"]["resident"] == kept["bytes_per_rank"]["resident"] - moved
            ), (stage, kind)
            # The optimizer states go to the offload tier; ZeRO-2/3's gradient shard to CPU RAM.
            where = Counter({kind: kept["bytes_per_rank"]["optimizer"]})
            if stage >= 2:
                where["cpu"] += kept["bytes_per_rank"]["grads"]
            assert off["offloaded_to"] == dict(where), (stage, kind)
            assert off["losses"] == pytest.approx(kept["losses"], abs=1e-7)
        if stage == 3:
            # The card: under ZeRO-3 + offload the device keeps the parameter shard, 2Ψ/N_d
            # (the card's 2-byte parameters; fp32 runs: x2).
            gpu = CARD.value("offload_gpu", runs[3, "none"]["padded_psi"], n_d) * element // 2
            assert runs[3, "cpu"]["bytes_per_rank"]["resident"] == gpu


def test_bf16_holds_the_cards_16_psi_totals_at_world_size_4(tmp_path):
    """Mixed precision as the card counts it: bf16 params and grads (2 + 2), fp32 master, m, v (12);
    at world size 4, where the tiny model's layers need padding."""
    n_d = 4
    doc = run_demo(world_size=n_d, dtype="bf16", offloads=("none", "cpu"), steps=2)
    psi, padded = doc["psi"], padded_psi(n_d)
    assert padded > psi, "the tiny model must force uneven shards"
    for r in doc["results"]:
        stage = r["stage"]
        at = psi if stage == 0 else padded
        assert r["bytes_per_rank"]["total"] == CARD.card_formula_bytes(stage, at, n_d)
        assert r["formula_bytes_per_rank"] == pytest.approx(
            float(CARD.card_formula_bytes(stage, psi, n_d))
        )
        if r["offload"] == "none":
            assert_inventory_is_the_formula(r, psi, n_d, element=2)
        assert_comm_is_the_formula(r, psi, n_d)
        assert_trains_like_adamw(r, tolerance=2e-2, steps=2)
        assert r["audit"] == {"checks": 2 * 2, "max_unexplained_bytes": 0}
    runs = by_run(doc)
    assert_offload_moves_exactly_the_states(runs, n_d, kinds=("cpu",), element=2)
    assert runs[3, "cpu"]["bytes_per_rank"]["resident"] == CARD.value("offload_gpu", padded, n_d)
    assert doc["bytes_per_element"] == {"params": 2, "grads": 2, "optimizer": 12}


def test_fp16_trains_with_dynamic_loss_scaling():
    doc = run_demo(world_size=2, dtype="fp16", stages=(0, 3), steps=2)
    for r in doc["results"]:
        assert_trains_like_adamw(r, tolerance=2e-2, steps=2)
        assert r["bytes_per_rank"]["params"] == 2 * (
            r["padded_psi"] if r["stage"] == 0 else r["padded_psi"] // 2
        )


# -- the command line --------------------------------------------------------------------------


def run_cli(*args: str, timeout: int = 150) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "app.zero_demo", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture
def a_file(tmp_path) -> Path:
    path = tmp_path / "a-file"
    path.write_text("not a folder")
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--world-size", "0"], "argument --world-size: must be at least 1, got 0"),
        (["--world-size", "-2"], "argument --world-size: must be at least 1, got -2"),
        (["--stages", "0,5"], "argument --stages: unknown stage '5' (choose from 0, 1, 2, 3)"),
        (["--stages", "zero"], "argument --stages: unknown stage 'zero'"),
        (["--offload", "gpu"], "argument --offload: unknown kind 'gpu'"),
        (["--offload", "disk"], "argument --offload: disk needs a folder: --offload disk DIR"),
        (
            ["--offload", "disk", "{file}/states"],
            "argument --offload: cannot write offload files in",
        ),
        (["--offload", "cpu", "--offload-dir", "{file}"], None),  # a folder is only needed for disk
        (["--dtype", "fp8"], "argument --dtype: invalid choice: 'fp8'"),
        (["--steps", "0"], "argument --steps: must be at least 1"),
        (["--lr", "inf"], "argument --lr: must be positive and finite, got inf"),
        (["--seed", str(2**64)], "argument --seed: must be between 0 and 4294967295"),
        (["--chart", "{file}.txt"], "argument --chart: '{file}.txt' must end in .png or .svg"),
        (["--record", "{folder}"], "argument --record: cannot write '{folder}': it is a folder"),
        (["--grad-accum", "0"], "argument --grad-accum: '0' is not a whole number of at least 1"),
        (["--grad-accum", "1,x"], "argument --grad-accum: 'x' is not a whole number of at least 1"),
        (["--sub-group-size", "0"], "argument --sub-group-size: must be at least 1, got 0"),
        (["--bucket-size", "-1"], "argument --bucket-size: must be 0 or more, got -1"),
    ],
)
def test_bad_arguments_end_with_a_message_and_exit_2(args, message, a_file):
    args = [a.format(file=a_file, folder=a_file.parent) for a in args]
    if message is None:
        from app.zero_demo.cli import parse_config

        _, cfg = parse_config([*args, "--backend", "gloo"])
        assert cfg.offloads == ("cpu",)
        return
    result = run_cli(*args)
    assert result.returncode == 2
    assert result.stderr.startswith("usage: python -m app.zero_demo")
    assert message.format(file=a_file, folder=a_file.parent) in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_unwritable_offload_folder_is_refused(tmp_path):
    import os

    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        if os.access(folder, os.W_OK):
            pytest.skip("running as root: permissions do not stop writes")
        result = run_cli("--offload", "disk", str(folder))
        assert result.returncode == 2
        assert "cannot write offload files" in result.stderr and "Traceback" not in result.stderr
    finally:
        folder.chmod(0o700)


def test_nccl_without_gpus_is_refused():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has GPUs")
    result = run_cli("--backend", "nccl")
    assert result.returncode == 2
    assert "nccl needs CUDA GPUs" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize(
    ("backend", "world_size", "gpus", "expected"),
    [
        ("auto", None, 0, (4, "gloo", "cpu")),
        ("auto", None, 8, (8, "nccl", "cuda")),  # one rank per GPU
        ("auto", 4, 8, (4, "nccl", "cuda")),
        ("auto", 1, 1, (1, "nccl", "cuda")),  # a single GPU: world size 1, offload still shows
        ("auto", 4, 1, (4, "gloo", "cpu")),  # too few GPUs: the CPU, with a note
        ("gloo", None, 8, (4, "gloo", "cpu")),
        ("nccl", 2, 2, (2, "nccl", "cuda")),
        ("nccl", 4, 2, "nccl needs one GPU per rank"),
        ("nccl", None, 0, "nccl needs CUDA GPUs"),
    ],
)
def test_backend_and_world_size_follow_the_gpus(
    backend, world_size, gpus, expected, monkeypatch, capsys
):
    """The GPU decisions, checked on any machine by pretending to have ``gpus`` GPUs."""
    import torch
    import torch.distributed as dist

    from app.zero_demo.cli import _resolve_ranks, build_parser

    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpus > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: gpus)
    monkeypatch.setattr(dist, "is_nccl_available", lambda: True)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    monkeypatch.delenv("RANK", raising=False)
    if isinstance(expected, str):
        with pytest.raises(SystemExit) as exit_info:
            _resolve_ranks(build_parser(), backend, world_size)
        assert exit_info.value.code == 2
        assert expected in capsys.readouterr().err
    else:
        assert _resolve_ranks(build_parser(), backend, world_size) == expected


def test_the_command_prints_json_records_it_and_draws_the_chart(tmp_path):
    record, chart = tmp_path / "results.json", tmp_path / "memory.svg"
    result = run_cli(
        "--world-size", "2", "--model-size", "tiny", "--steps", "2", "--stages", "0,3", "--offload", "none,cpu",
        "--no-compare", "--no-progress", "--threads", "1", "--json", "--record", str(record), "--chart", str(chart),
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert {"psi", "world_size", "dtype", "results"} <= doc.keys()
    assert (doc["world_size"], doc["dtype"]) == (2, "bf16")
    assert [(r["stage"], r["offload"]) for r in doc["results"]] == [
        (0, "none"),
        (3, "none"),
        (0, "cpu"),
        (3, "cpu"),
    ]
    for r in doc["results"]:
        assert {"stage", "offload", "bytes_per_rank", "formula_bytes_per_rank", "comm_elements_per_rank_per_step",
                "losses", "reference_losses"} <= r.keys()  # fmt: skip
        assert set(r["bytes_per_rank"]) == {
            "params",
            "grads",
            "optimizer",
            "resident",
            "offloaded",
            "total",
        }
        assert len(r["losses"]) == len(r["reference_losses"]) == 2

    saved = json.loads(record.read_text())
    assert {"backend", "device", "command", "recorded_at"} <= saved.keys()
    assert saved["backend"] == "gloo" and saved["command"].startswith(
        "python -m app.zero_demo --world-size 2"
    )
    assert {k: v for k, v in saved.items() if k not in ("command", "recorded_at")} == doc
    assert chart.read_text().startswith("<svg xmlns=")
    # The record's chart beside it, for the web page: the same SVG as charts.results_svg(record).
    from app.zero_demo.charts import results_svg

    assert record.with_suffix(".svg").read_text() == results_svg(saved)
    for r in doc["results"]:
        assert {
            "phase_peak_bytes",
            "time_breakdown_s",
            "audit",
            "grad_accum",
            "overlap",
        } <= r.keys()
        assert {"forward", "backward", "optimizer", "comm_buffers"} <= r["phase_peak_bytes"].keys()

    from app.zero_demo.report import render_text

    text = render_text(doc, str(chart))
    for needle in (
        "16Ψ",
        "16Ψ/N_d",
        "3Ψ",
        "ZeRO-3 / DDP = ",
        "offload_gpu",
        "Loss per step",
        str(chart),
    ):
        assert needle in text


# -- the recorded results on the card page, and the web server's isolation ---------------------

RECORDED = ROOT / "cards" / "demo-results" / "zero-memory-offload.json"


def test_recorded_results_are_the_demos_json_and_agree_with_the_card():
    doc = json.loads(RECORDED.read_text())
    assert {
        "psi",
        "world_size",
        "dtype",
        "results",
        "backend",
        "device",
        "command",
        "recorded_at",
    } <= doc.keys()
    assert doc["command"].startswith("python -m app.zero_demo")
    psi, n_d = doc["psi"], doc["world_size"]
    assert doc["dtype"] in ("bf16", "fp16")  # the card's own 2 + 2 + 12 accounting
    assert {r["stage"] for r in doc["results"]} == set(STAGES)
    for r in doc["results"]:
        stage = r["stage"]
        assert r["formula_bytes_per_rank"] == pytest.approx(
            float(CARD.card_formula_bytes(stage, psi, n_d))
        )
        at = psi if stage == 0 else r["padded_psi"]
        assert r["bytes_per_rank"]["total"] == CARD.card_formula_bytes(stage, at, n_d)
        assert r["comm_elements_per_rank_per_step"] == CARD.comm_elements(stage, at, n_d)
        assert (
            r["bytes_per_rank"]["resident"] + r["bytes_per_rank"]["offloaded"]
            == r["bytes_per_rank"]["total"]
        )
        assert len(r["losses"]) == len(r["reference_losses"]) == doc["steps"]


def test_importing_the_demo_package_does_not_import_torch():
    code = "import sys, app.zero_demo, app.zero_demo.cli, app.zero_demo.card; print('torch' in sys.modules)"
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip() == "False", result.stderr


def test_a_failing_rank_reports_its_own_error(tmp_path):
    """When a rank raises, the run ends with that rank's traceback (RankFailed), not with the
    signal of a peer that gloo aborted as the failing rank left ('terminate called without an
    active exception', SIGABRT)."""
    from app.zero_demo.runner import RankFailed

    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")  # the ranks cannot make their offload folders in it
    with pytest.raises(RankFailed) as failed:
        run_demo(
            world_size=2, stages=(0,), steps=1, reference=False, offloads=("disk",),
            offload_dir=str(blocked),
        )  # fmt: skip
    message = str(failed.value)
    assert message.startswith("rank ")
    assert "NotADirectoryError" in message or "FileExistsError" in message, message
