"""Peaks by phase and the time breakdown: measured on gloo ranks, checked against the card.

The model here is cut so that model states dominate (wide layers, 8 tokens, one sequence per
rank): what ZeRO-2 and ZeRO-3 save, 2Ψ(1 - 1/N_d) each, is several layers' worth of bytes, so the
backward peaks must fall stage by stage. Golden values: the card's term formulas at Ψ_padded
(``CARD.term_bytes``) and layer sizes recomputed here from the model's shapes.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from app.zero_demo.config import DemoConfig, ModelConfig
from tests.test_zero_demo import CARD

pytestmark = pytest.mark.demo

# 12 blocks of 48: each block about 28k parameters, the model about 352k.
WIDE = ModelConfig(vocab=128, hidden=48, layers=12, heads=2, seq_len=8)
N_D = 2


def unit_sizes(model: ModelConfig) -> list[int]:
    """Parameters of each unit (embedding, blocks, head), from the shapes of the layers."""
    h, v, t = model.hidden, model.vocab, model.seq_len
    block = 2 * (2 * h) + (h * 3 * h + 3 * h) + (h * h + h) + (h * 4 * h + 4 * h) + (4 * h * h + h)
    return [v * h + t * h, *([block] * model.layers), 2 * h + h * v]


def padded(model: ModelConfig, n_d: int) -> int:
    return sum(-(-n // n_d) * n_d for n in unit_sizes(model))


def run(**overrides) -> dict:
    from app.zero_demo.report import build_document
    from app.zero_demo.runner import launch

    settings = {
        "world_size": N_D,
        "model": WIDE,
        "dtype": "fp32",
        "steps": 2,
        "micro_batch": 1,
        "progress": False,
        "compare": False,
        "reference": False,
        "timeout_s": 120,
        "threads": 1,
    }
    cfg = DemoConfig(**{**settings, **overrides})
    return build_document(launch(cfg), cfg, CARD)


def test_peaks_by_phase_collective_buffers_and_the_time_breakdown():
    """One run of the four stages, three sets of checks (one test: under pytest-xdist a shared
    module fixture would train the same run once on each worker)."""
    doc = run()
    check_backward_peaks_fall_from_ddp_to_zero3(doc)
    check_collective_buffers_are_two_layers_under_zero3_and_one_shard_under_zero12(doc)
    check_the_time_breakdown_adds_up_and_names_each_stages_collectives(doc)


def check_backward_peaks_fall_from_ddp_to_zero3(stages_doc):
    runs = {r["stage"]: r for r in stages_doc["results"]}
    assert stages_doc["psi"] == sum(unit_sizes(WIDE))
    backward = [runs[s]["phase_peak_bytes"]["backward"] for s in (0, 1, 2, 3)]
    # ZeRO-2's buckets (one layer each) are far smaller than the model: its backward peak is
    # below ZeRO-1's; ZeRO-3 releases every layer after use: below ZeRO-2's.
    assert backward[0] > backward[1] > backward[2] > backward[3], backward
    for s, r in runs.items():
        assert r["phase_peak_kind"] == "tracked_cpu_bytes"
        at = stages_doc["psi"] if s == 0 else padded(WIDE, N_D)
        assert r["padded_psi"] == at
        terms = CARD.term_bytes(s, at, N_D, element_bytes=4)
        # Floors from the card: before backward the gradients do not exist yet under DDP and
        # ZeRO-1 (they are freed after every step); ZeRO-2 and ZeRO-3 keep their shard.
        resident = terms["params"] + terms["optimizer"] + (terms["grads"] if s >= 2 else 0)
        peaks = r["phase_peak_bytes"]
        assert peaks["forward"] > resident, s
        # At the end of backward all three terms exist: the card's whole total.
        assert peaks["backward"] > sum(terms.values()), s
        assert r["bytes_per_rank"]["total"] == sum(terms.values())
        assert r["audit"] == {"checks": 4, "max_unexplained_bytes": 0}


def check_collective_buffers_are_two_layers_under_zero3_and_one_shard_under_zero12(stages_doc):
    runs = {r["stage"]: r for r in stages_doc["results"]}
    largest = max(-(-n // N_D) * N_D for n in unit_sizes(WIDE))
    # ZeRO-3 (prefetch on) holds the layer that computes and the next one's gather in flight;
    # each is released after use: never three at once.
    assert runs[3]["overlap"]
    assert runs[3]["phase_peak_bytes"]["comm_buffers"] == 2 * 4 * largest
    assert runs[3]["peak_gathered_units"] == 2
    # ZeRO-1/2: the updated shard waiting for its all-gather, Ψ_padded / N_d elements.
    for s in (1, 2):
        assert runs[s]["phase_peak_bytes"]["comm_buffers"] == 4 * padded(WIDE, N_D) // N_D
    assert runs[0]["phase_peak_bytes"]["comm_buffers"] == 0  # DDP all-reduces in place


def check_the_time_breakdown_adds_up_and_names_each_stages_collectives(stages_doc):
    for r in stages_doc["results"]:
        t = r["time_breakdown_s"]
        parts = sum(v for k, v in t.items() if k != "total" and not k.startswith("excluded."))
        assert parts == pytest.approx(t["total"], rel=1e-9, abs=1e-9)
        assert t["compute"] > 0 and t["adam"] > 0
        comm = {k.removeprefix("comm.") for k in t if k.startswith("comm.") and k != "comm.control"}
        expected = {"all_reduce"} if r["stage"] == 0 else {"reduce_scatter", "all_gather"}
        assert comm == expected, r["stage"]
        assert "copies" not in t and "disk" not in t  # nothing offloaded
        assert t["excluded.audit"] > 0  # the audit ran, and is not in the step's total
        assert r["step_time_s"] > 0


def test_disk_offload_pages_one_sub_group_and_the_peak_drops_by_the_rest(tmp_path):
    sub_group = 4096
    doc = run(
        stages=(0, 3),
        offloads=("none", "disk"),
        offload_dir=str(tmp_path),
        sub_group_size=sub_group,
        steps=1,
    )
    runs = {(r["stage"], r["offload"]): r for r in doc["results"]}
    for stage in (0, 3):
        shard = doc["psi"] if stage == 0 else padded(WIDE, N_D) // N_D
        disk, kept = runs[stage, "disk"], runs[stage, "none"]
        assert disk["paged_in_optimizer_peak_bytes"] == 12 * sub_group
        assert kept["paged_in_optimizer_peak_bytes"] == 0
        drop = kept["phase_peak_bytes"]["optimizer"] - disk["phase_peak_bytes"]["optimizer"]
        # The optimizer step holds one sub-group of the three fp32 states instead of the shard.
        # Exact under DDP. Under ZeRO-3 the phase also starts with whatever gloo's worker thread
        # still holds of the last reduce-scatters (released asynchronously, up to a few layers'
        # gradients, varying from run to run): within one fp32 gradient shard.
        if stage == 0:
            assert drop == 12 * (shard - sub_group)
        else:
            assert abs(drop - 12 * (shard - sub_group)) < 4 * shard
        assert disk["losses"] == kept["losses"]
    assert Fraction(runs[0, "disk"]["bytes_per_rank"]["offloaded"]) == 12 * doc["psi"]


# Activations dominate here: 64 tokens, 4 sequences per rank, narrow layers.
LONG = ModelConfig(vocab=64, hidden=32, layers=4, heads=2, seq_len=64)


def test_checkpointing_lowers_activation_memory_and_adds_one_gather_per_layer_under_zero3():
    """--checkpoint-activations: each block keeps only its input (Korthikanti et al. 2022, full
    recomputation: s·b·h elements per layer, fp32 here) and runs again in backward; under ZeRO-3
    that recomputation all-gathers the block once more. Training is unchanged."""
    micro_batch = 4
    kept, checkpointed = (
        run(model=LONG, micro_batch=micro_batch, stages=(0, 3), checkpoint_activations=ck)
        for ck in (False, True)
    )
    block = unit_sizes(LONG)[1]
    assert -(-block // N_D) * N_D == block  # even: no padding in the figures below
    inputs = LONG.layers * LONG.seq_len * micro_batch * LONG.hidden * 4
    for a, b in zip(kept["results"], checkpointed["results"], strict=True):
        s = a["stage"]
        assert (s, a["checkpoint_activations"], b["checkpoint_activations"]) == (s, False, True)
        terms = CARD.term_bytes(s, a["padded_psi"], N_D, element_bytes=4)
        floor = terms["params"] + terms["optimizer"] + (terms["grads"] if s >= 2 else 0)
        activations = {
            name: r["phase_peak_bytes"]["forward"] - floor for name, r in (("kept", a), ("ck", b))
        }
        # The block inputs stay; everything else the blocks saved for backward is gone.
        assert inputs <= activations["ck"] <= activations["kept"] / 2, (s, activations, inputs)
        assert b["phase_peak_bytes"]["backward"] < a["phase_peak_bytes"]["backward"], s
        assert a["losses"] == b["losses"], s  # the recomputation is the same arithmetic
        gathers = {
            name: r["comm_by_collective"].get("all_gather", {"elements": 0, "calls": 0})
            for name, r in (("kept", a), ("ck", b))
        }
        if s == 3:
            assert gathers["ck"]["calls"] - gathers["kept"]["calls"] == LONG.layers
            assert gathers["ck"]["elements"] - gathers["kept"]["elements"] == LONG.layers * block
        else:
            assert gathers["ck"] == gathers["kept"]  # DDP gathers nothing, with or without
        assert b["comm_by_collective"].keys() == a["comm_by_collective"].keys()
