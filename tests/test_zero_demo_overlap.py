"""Gradient accumulation and overlap: what each stage communicates per optimizer step, and
that overlapping communication with backward changes nothing but the time.

Golden values are recomputed here from the model's layer sizes (Ψ_padded) and the per-step
rules of the card's communication (DDP's all-reduce counts 2n, ZeRO-3 gathers twice): with K
micro-batches, DDP (no_sync) and ZeRO-1 communicate once per step, ZeRO-2 reduce-scatters every
micro-batch and all-gathers once, ZeRO-3 repeats all three collectives every micro-batch.
"""

from __future__ import annotations

import pytest

from tests.test_zero_demo import CARD, padded_psi, run_demo

pytestmark = pytest.mark.demo
KS = (1, 2, 4)


def expected_elements(stage: int, k: int, psi: int, padded: int) -> dict[str, int]:
    return {
        0: {"all_reduce": 2 * psi},
        1: {"reduce_scatter": padded, "all_gather": padded},
        2: {"reduce_scatter": k * padded, "all_gather": padded},
        3: {"reduce_scatter": k * padded, "all_gather": 2 * k * padded},
    }[stage]


def assert_per_step_communication_is_the_formula(doc: dict, world_size: int, ks) -> None:
    psi, padded = doc["psi"], padded_psi(world_size)
    runs = {(r["stage"], r["grad_accum"]): r for r in doc["results"]}
    assert sorted(runs) == sorted((s, k) for s in range(4) for k in ks)
    for (stage, k), r in runs.items():
        at = psi if stage == 0 else padded
        by = {op: v["elements"] for op, v in r["comm_by_collective"].items()}
        assert by == expected_elements(stage, k, psi, padded), (stage, k)
        assert r["comm_same_every_step"]
        # The card's per-step formula, scaled the way the card's reasoning goes (see card.py).
        assert r["comm_elements_per_rank_per_step"] == r["comm_accumulated_padded_formula_elements"]
        assert r["comm_accumulated_padded_formula_elements"] == CARD.comm_accumulated(
            stage, at, world_size, k
        )
        assert r["audit"]["max_unexplained_bytes"] == 0
    # As K grows, ZeRO-1 stays at 2Ψ while ZeRO-3 grows as 3KΨ: the ratio is 1.5K.
    for k in ks:
        ratio = (
            runs[3, k]["comm_elements_per_rank_per_step"]
            / runs[1, k]["comm_elements_per_rank_per_step"]
        )
        assert ratio == pytest.approx(1.5 * k)


# Each spawned run is a few seconds of imports and start-up per rank: the overlap comparison reuses
# world size 2's accumulation run (overlap on) rather than training its own. One test per pair of
# runs, so that pytest-xdist never trains the same run on two workers.


def test_communication_per_optimizer_step_is_the_formula_for_k_micro_batches_at_world_size_3():
    doc = run_demo(world_size=3, grad_accums=KS, steps=2)
    assert_per_step_communication_is_the_formula(doc, 3, KS)
    for r in doc["results"]:
        # Accumulating K micro-batches of the global batch is AdamW on K global batches at once.
        assert r["max_loss_diff"] <= 2e-5, (r["stage"], r["grad_accum"])


def test_at_world_size_2_the_formula_for_k_and_overlap_on_and_off_train_identically():
    """K = 1, 2, 4 with overlap on; then K = 2 with overlap off, against it step for step (K = 2
    runs every overlapped path: DDP's no_sync then bucket hooks, ZeRO-2's first and accumulating
    reduce-scatters, ZeRO-3's prefetch)."""
    doc = run_demo(world_size=2, grad_accums=KS, steps=2)
    assert_per_step_communication_is_the_formula(doc, 2, KS)
    for r in doc["results"]:
        assert r["max_loss_diff"] <= 2e-5, (r["stage"], r["grad_accum"])

    off = run_demo(world_size=2, grad_accums=(2,), steps=2, overlap=False, reference=False)
    assert_per_step_communication_is_the_formula(off, 2, (2,))
    on = {(r["stage"], r["grad_accum"]): r for r in doc["results"]}
    for b in off["results"]:
        a = on[b["stage"], b["grad_accum"]]
        assert (a["overlap"], b["overlap"]) == (True, False)
        # Bit for bit: the same sums in the same order, with or without accumulation.
        assert a["losses"] == b["losses"], (a["stage"], a["grad_accum"])
        assert a["comm_by_collective"] == b["comm_by_collective"]
    # Prefetch keeps the next layer's gather in flight: two layers at once instead of one.
    off3 = next(r for r in off["results"] if r["stage"] == 3)
    assert (on[3, 2]["peak_gathered_units"], off3["peak_gathered_units"]) == (2, 1)


def test_gradient_buckets_of_several_layers_reduce_in_one_collective_each():
    """--bucket-size: DDP all-reduces and ZeRO-2 reduce-scatters consecutive layers together, in
    the order backward finishes them; the elements moved and the training do not change.

    The tiny model's units (from its shapes, hidden 22, vocab 67, 16 positions): embedding
    67*22 + 16*22 = 1826, two blocks of 12*22^2 + 13*22 = 6094, head 2*22 + 22*67 = 1518. At
    world size 3 the flat buffers pad to 1827, 6096, 6096, 1518. A bucket of at least 7000
    elements closes after head + block 2 (7614) and after block 1 + embedding (7923): two.
    """
    from tests.test_zero_demo import TINY
    from tests.test_zero_demo_phases import unit_sizes

    assert unit_sizes(TINY) == [1826, 6094, 6094, 1518]
    n_d = 3
    doc = run_demo(world_size=n_d, stages=(0, 2), bucket_size=7000, steps=2, grad_accums=(1, 2))
    psi, padded = doc["psi"], padded_psi(n_d)
    for r in doc["results"]:
        stage, k = r["stage"], r["grad_accum"]
        assert r["gradient_buckets"] == [[3, 2], [1, 0]], stage
        calls = {op: v["calls"] for op, v in r["comm_by_collective"].items()}
        by = {op: v["elements"] for op, v in r["comm_by_collective"].items()}
        assert by == expected_elements(stage, k, psi, padded), (stage, k)
        if stage == 0:
            assert calls == {"all_reduce": 2}  # one per bucket (after no_sync), not per layer
        else:
            # One reduce-scatter per bucket and micro-batch; parameters gathered layer by layer.
            assert calls == {"reduce_scatter": 2 * k, "all_gather": 4}
        assert r["max_loss_diff"] <= 2e-5, (stage, k)
        assert r["audit"]["max_unexplained_bytes"] == 0
