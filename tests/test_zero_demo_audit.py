"""The inventory audits itself, and fp16's dynamic loss scaling skips and halves.

These tests build one engine in this process, on a one-rank gloo group, and drive its training
step directly: a planted hidden copy of the parameters must stop the step, and a forced gradient
overflow must skip the update and halve the scale.
"""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
import torch.distributed as dist  # noqa: E402

from app.zero_demo.audit import InventoryMismatch, StorageAudit  # noqa: E402
from app.zero_demo.comm import CountingComm  # noqa: E402
from app.zero_demo.config import MODEL_PRESETS, DemoConfig  # noqa: E402
from app.zero_demo.engine import ENGINES, Stage1, Stage3  # noqa: E402
from app.zero_demo.model import build_model, rank_batch  # noqa: E402

pytestmark = pytest.mark.demo
TINY = MODEL_PRESETS["tiny"]


@pytest.fixture
def one_rank(tmp_path):
    """A gloo process group of one rank in this process."""
    torch.set_num_threads(1)
    store = dist.FileStore(os.fspath(tmp_path / "store"), 1)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    try:
        yield CountingComm()
    finally:
        dist.destroy_process_group()


def make_engine(cls, comm, *, dtype="fp32", audit=True, **cfg):
    config = DemoConfig(world_size=1, model=TINY, dtype=dtype, progress=False, **cfg)
    if not audit:  # no baseline to take: its walk of every live object costs seconds in a suite
        engine = cls(build_model(TINY, 0), cfg=config, comm=comm, device=torch.device("cpu"))
        engine.audit = None
        return engine
    # Patience (how long unexplained memory may take to be let go) short: the planted copies stay.
    auditor = StorageAudit(torch.device("cpu"), patience_s=0.3)
    engine = cls(build_model(TINY, 0), cfg=config, comm=comm, device=torch.device("cpu"))
    engine.audit = auditor
    return engine


def batch(step=0):
    return rank_batch(TINY, 0, step, 2, 0, 1)


@pytest.mark.parametrize("stage", [0, 1, 2, 3])
def test_an_honest_engine_passes_the_audit_with_nothing_unexplained(one_rank, stage):
    engine = make_engine(ENGINES[stage], one_rank)
    for step in range(2):
        engine.train_step(*batch(step))
    assert engine.audit.checks == 4  # after backward and after the step, each step
    assert engine.audit.max_unexplained == 0
    engine.close()


class HiddenCopyStage1(Stage1):
    """ZeRO-1 that secretly keeps a full copy of its parameters, the audit's target."""

    def _build(self, model):
        super()._build(model)
        self._copy = self.flat_params.detach().clone()


class HiddenGatherStage3(Stage3):
    """ZeRO-3 that keeps a copy of every gathered layer in a closure: the full parameters again.

    (Keeping the gathered tensors themselves would cost nothing: their storage is released by
    resizing it to 0, whoever still refers to them.)"""

    def _build(self, model):
        super()._build(model)
        kept = []
        self._keep = kept.append
        self._kept = lambda: kept

    def _all_gather_unit(self, u, shard):
        full = super()._all_gather_unit(u, shard)
        self._keep(full.detach().clone())
        return full


def test_a_planted_full_copy_of_the_parameters_is_caught(one_rank):
    engine = make_engine(HiddenCopyStage1, one_rank)
    hidden = engine._copy.untyped_storage().nbytes()
    # The inventory alone cannot tell: it lists only what held() says.
    with pytest.raises(InventoryMismatch) as caught:
        engine.train_step(*batch())
    assert engine.inventory["params"] == hidden  # the real parameters, counted once
    message = str(caught.value)
    assert message.startswith("ZeRO-1: after backward: ")
    assert f"{hidden:,} bytes of live memory are not in the engine's inventory" in message
    assert f"float32[{hidden // 4}]" in message
    engine.close()


def test_gathered_layers_kept_alive_are_caught(one_rank):
    engine = make_engine(HiddenGatherStage3, one_rank)
    with pytest.raises(InventoryMismatch, match="ZeRO-3: after backward"):
        engine.train_step(*batch())
    engine.close()


def test_without_the_audit_the_planted_copy_goes_unnoticed(one_rank):
    """What the audit adds: the same engine trains and reports the card's numbers without it."""
    engine = make_engine(HiddenCopyStage1, one_rank, audit=False)
    engine.train_step(*batch())
    assert engine.inventory["params"] == 4 * engine.layout.psi
    engine.close()


# -- dynamic loss scaling (fp16) ---------------------------------------------------------------


@pytest.mark.parametrize("stage", [0, 3])
def test_an_overflow_skips_the_step_and_halves_the_scale(one_rank, stage):
    # No audit: the copies this test keeps to compare would be unexplained live memory.
    engine = make_engine(ENGINES[stage], one_rank, dtype="fp16", audit=False)
    assert engine.scaler is not None, "fp16 trains with a dynamic loss scaler"
    engine.scaler.growth_interval = 2
    first = engine.train_step(*batch(0))
    assert not first.skipped and engine.optimizer.step_count == 1
    before = engine.optimizer.master().clone()
    params_before = engine.full_parameters()
    # 2^100 times the loss still fits fp32 (the loss is computed in fp32), but its gradients
    # overflow fp16's range (65504): every gradient is inf or nan.
    engine.scaler.scale = 2.0**100
    result = engine.train_step(*batch(1))
    assert result.skipped
    assert engine.scaler.scale == 2.0**99
    assert engine.scaler.skipped == 1
    assert engine.optimizer.step_count == 1, "no optimizer step on an overflow"
    assert torch.equal(engine.optimizer.master(), before), "master weights untouched"
    assert torch.equal(engine.full_parameters(), params_before)
    # Back to a sane scale: the next steps update, and after growth_interval good steps it doubles.
    engine.scaler.scale = 2.0**10
    assert not engine.train_step(*batch(2)).skipped
    assert engine.scaler.scale == 2.0**10
    assert not engine.train_step(*batch(3)).skipped
    assert engine.scaler.scale == 2.0**11
    assert engine.optimizer.step_count == 3
    assert not torch.equal(engine.optimizer.master(), before)
    engine.close()


# -- construction from the meta device -----------------------------------------------------------


@pytest.mark.parametrize("stage", [0, 3])
def test_an_engine_built_from_the_meta_device_holds_the_same_weights(one_rank, stage):
    """The runner builds each engine from a model without weights: its units are initialised one
    at a time and partitioned as they are, to exactly the values of the materialised model."""
    config = DemoConfig(world_size=1, model=TINY, dtype="fp32", progress=False)
    whole = build_model(TINY, 0)
    expected = torch.cat([p.detach().reshape(-1) for p in whole.parameters()])
    meta = build_model(TINY, 0, materialize=False)
    assert all(p.is_meta for p in meta.parameters())
    engine = ENGINES[stage](meta, cfg=config, comm=one_rank, device=torch.device("cpu"))
    assert torch.equal(engine.full_parameters(), expected)
    assert all(p.is_meta for p in meta.parameters()), "no unit keeps its fp32 weights"
    engine.close()


# -- gradient accumulation in low precision -------------------------------------------------------


@pytest.mark.parametrize("stage", [0, 1])
def test_bf16_micro_batches_accumulate_in_fp32_and_round_once(one_rank, stage):
    """DDP and ZeRO-1 with K = 4 in bf16: the gradient the optimizer gets is the fp32 sum of the
    four micro-batches' bf16 gradients, rounded to bf16 once (not four bf16 additions)."""
    k = 4
    micro = [batch(step) for step in range(k)]

    def captured(engine, batches):
        grads = []

        def capture(inv_scale):
            grads.append([leaf.grad.clone() for leaf in engine.leaves])

        engine._step = capture  # the gradients as the optimizer step would get them, no update
        engine.accumulation_step(batches)
        return grads

    engine = make_engine(ENGINES[stage], one_rank, dtype="bf16", audit=False)
    (got,) = captured(engine, micro)
    # Each micro-batch alone (same weights: no update above); its loss scaled by 1/K is exact
    # in binary floating point, so each term is the bf16 gradient divided by 4.
    alone = [captured(make_engine(ENGINES[stage], one_rank, dtype="bf16", audit=False), [m])[0]
             for m in micro]  # fmt: skip
    chained_differs = False
    for u, g in enumerate(got):
        terms = [a[u].float() / k for a in alone]
        assert torch.equal(g, sum(terms).to(torch.bfloat16)), u
        chained = terms[0].to(torch.bfloat16)
        for t in terms[1:]:
            chained = chained + t.to(torch.bfloat16)
        chained_differs |= not torch.equal(chained, g)
    assert chained_differs, "bf16 additions would have given the same gradients: no test"
