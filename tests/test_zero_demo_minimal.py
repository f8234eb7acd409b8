"""``minimal``, the one-file ZeRO, computes what ``engine`` computes, at every stage.

Two spawned gloo ranks train a small model from the same seed on the same micro-batches with
``minimal.MinimalZeRO`` and with ``engine``'s stage, two steps each, in bf16 (the card's mixed
precision) and in fp32. After each step every rank gathers the full fp32 master weights and the
full working weights of both, with a collective written here, and the parent compares them.

Golden values are never ``minimal``'s own: they are ``engine``'s (bit for bit: both run the same
operations on the same values, one thread per rank), the single-process ``torch.optim.AdamW`` of
``reference`` (to rounding, see ``test_fp32_is_single_process_adamw_and_bf16_follows_it``), and
the card's 2 + 2 + 12 bytes per parameter, with Ψ and Ψ_padded recomputed here from the model's
unit sizes.
"""

from __future__ import annotations

import contextlib
import io
import os

import pytest

from app.zero_demo.config import DemoConfig, ModelConfig

pytestmark = pytest.mark.demo

WORLD_SIZE = 2
STAGES = (0, 1, 2, 3)
DTYPES = ("bf16", "fp32")
STEPS = 2
# Every unit of this model has an odd size (hidden 21 and 3 heads; the "tiny" preset's are all
# even), so at world size 2 every flat buffer is padded: the padding is exercised with 2 ranks.
MODEL = ModelConfig(vocab=67, hidden=21, layers=2, heads=3, seq_len=16)
UNIT_SIZES = [(67 + 16) * 21, 12 * 21**2 + 13 * 21, 12 * 21**2 + 13 * 21, 2 * 21 + 21 * 67]


def config(dtype: str) -> DemoConfig:
    # The engine as the demo runs it by default (overlap on), without its measurements.
    return DemoConfig(
        world_size=WORLD_SIZE, model=MODEL, dtype=dtype, steps=STEPS, progress=False,
        audit=False, phase_memory=False, warm_up=False,
    )  # fmt: skip


def _full(pieces: list, sharded: bool):
    """The whole model's weights from per-unit pieces: gathered if sharded, padding dropped."""
    import torch
    import torch.distributed as dist

    whole = []
    for piece, size in zip(pieces, UNIT_SIZES, strict=True):
        piece = piece.detach()
        if sharded:
            gathered = [torch.empty_like(piece) for _ in range(dist.get_world_size())]
            dist.all_gather(gathered, piece)  # the list form: not what the code under test uses
            piece = torch.cat(gathered)
        whole.append(piece[:size].clone())
    return torch.cat(whole)


def _train_minimal(cfg: DemoConfig, stage: int) -> dict:
    import torch.distributed as dist

    from app.zero_demo.minimal import DTYPES, MinimalZeRO
    from app.zero_demo.model import build_model, rank_batch

    zero = MinimalZeRO(build_model(cfg.model, cfg.seed), stage, DTYPES[cfg.dtype])
    run: dict = {"losses": [], "master": [], "working": [], "bytes": []}
    for step in range(STEPS):
        batch = rank_batch(cfg.model, cfg.seed, step, cfg.micro_batch, dist.get_rank(), WORLD_SIZE)
        run["losses"].append(zero.train_step(*batch))
        run["master"].append(_full(zero.master, sharded=stage > 0))
        run["working"].append(_full(zero.params, sharded=stage == 3))
        run["bytes"].append(zero.held)
    return run


def _train_engine(cfg: DemoConfig, stage: int) -> dict:
    import torch
    import torch.distributed as dist

    from app.zero_demo.comm import CountingComm
    from app.zero_demo.engine import ENGINES
    from app.zero_demo.model import build_model, rank_batch

    model = build_model(cfg.model, cfg.seed, materialize=False)
    engine = ENGINES[stage](model, cfg=cfg, comm=CountingComm(), device=torch.device("cpu"))
    units = engine.layout.units
    run: dict = {"losses": [], "master": [], "working": [], "bytes": [], "engine_master": []}
    for step in range(STEPS):
        batch = rank_batch(cfg.model, cfg.seed, step, cfg.micro_batch, dist.get_rank(), WORLD_SIZE)
        run["losses"].append(engine.train_step(*batch).loss)
        master = engine.optimizer.master().split([u.shard for u in units])
        run["master"].append(_full(master, sharded=stage > 0))
        if stage == 3:
            working = engine.param_shard.split([u.shard for u in units])
        else:
            working = engine.flat_params.split([u.padded for u in units])
        run["working"].append(_full(working, sharded=stage == 3))
        run["bytes"].append({k: engine.inventory[k] for k in ("params", "grads", "optimizer")})
        run["engine_master"].append(engine.full_parameters())  # the engine's own gather
    engine.close()
    return run


def _rank(rank: int, tmp: str) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)  # the suite shares few cores
    store = dist.FileStore(os.path.join(tmp, "store"), WORLD_SIZE)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=WORLD_SIZE)
    runs = {}
    for dtype in DTYPES:
        for stage in STAGES:
            runs["minimal", dtype, stage] = _train_minimal(config(dtype), stage)
            runs["engine", dtype, stage] = _train_engine(config(dtype), stage)
    # What the command prints, from the same ranks (a spawn of its own would cost seconds).
    from app.zero_demo.minimal import demo, parse_args

    args = ["--world-size", "2", "--stage", "3", "--model-size", "tiny", "--steps", "2"]
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        demo(parse_args(args))
    runs["printed"] = printed.getvalue()
    torch.save(runs, os.path.join(tmp, f"rank{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks(tmp_path_factory) -> list[dict]:
    """Each rank's runs, by (code, dtype, stage): one spawn for the whole module."""
    import torch

    tmp = str(tmp_path_factory.mktemp("minimal"))
    torch.multiprocessing.start_processes(
        _rank, args=(tmp,), nprocs=WORLD_SIZE, start_method="spawn"
    )
    return [torch.load(os.path.join(tmp, f"rank{r}.pt")) for r in range(WORLD_SIZE)]


def test_the_model_pads_every_unit_at_world_size_2():
    from app.zero_demo.model import build_model

    units = build_model(MODEL, seed=0).units
    assert [sum(p.numel() for p in u.parameters()) for u in units] == UNIT_SIZES
    assert all(size % WORLD_SIZE for size in UNIT_SIZES)


def test_minimal_is_the_engine_bit_for_bit(ranks):
    import torch

    for rank, runs in enumerate(ranks):
        for dtype in DTYPES:
            for stage in STAGES:
                mine, theirs = runs["minimal", dtype, stage], runs["engine", dtype, stage]
                where = f"rank {rank}, {dtype}, stage {stage}"
                assert mine["losses"] == theirs["losses"], where
                assert mine["bytes"] == theirs["bytes"], where
                for step in range(STEPS):
                    for what in ("master", "working"):
                        a, b = mine[what][step], theirs[what][step]
                        assert a.dtype == b.dtype and torch.equal(a, b), (where, what, step)
                    assert torch.equal(mine["master"][step], theirs["engine_master"][step]), where


def test_every_stage_computes_the_same_numbers(ranks):
    """ZeRO changes where the numbers are kept, not the numbers: with 2 ranks every sum of
    gradients has two terms, which add up the same whichever collective adds them."""
    import torch

    for runs in ranks:
        for dtype in DTYPES:
            ddp = runs["minimal", dtype, 0]
            for stage in STAGES[1:]:
                run = runs["minimal", dtype, stage]
                assert run["losses"] == ddp["losses"], (dtype, stage)
                for what in ("master", "working"):
                    for a, b in zip(run[what], ddp[what], strict=True):
                        assert torch.equal(a, b), (dtype, stage, what)
    # And every rank ends with the same model.
    for dtype in DTYPES:
        first = ranks[0]["minimal", dtype, 0]["master"][-1]
        assert all(torch.equal(runs["minimal", dtype, 0]["master"][-1], first) for runs in ranks)


def test_fp32_is_single_process_adamw_and_bf16_follows_it(ranks):
    """Against ``torch.optim.AdamW`` on one process over the whole global batch, after each step.

    In fp32 only the order of the sums differs (two half-batch means averaged, against one mean
    over the batch). The losses agree within 1e-6 (about two fp32 ulps at a loss of 4; they came
    out equal). A weight agrees within 1e-5, 1% of one step: Adam moves each weight by about lr = 1e-3
    per step and divides by √v + eps, so where a gradient is tiny its rounding shifts the step by
    a visible fraction of lr (the largest difference seen was 6.4e-7). bf16 computes with weights
    rounded to 8 significant bits (2^-9 relative, about 2e-3): its losses agree within 2e-3 (the
    largest difference seen was 1.2e-4).
    """
    import dataclasses

    import torch

    from app.zero_demo.reference import single_process

    cfg, cpu = config("fp32"), torch.device("cpu")
    refs = [single_process(dataclasses.replace(cfg, steps=k), cpu) for k in range(1, STEPS + 1)]
    losses = refs[-1]["losses"]
    for stage in STAGES:
        run = ranks[0]["minimal", "fp32", stage]
        assert run["losses"] == pytest.approx(losses, abs=1e-6, rel=0), stage
        for step, ref in enumerate(refs):
            assert ref["params"].numel() == sum(UNIT_SIZES)
            diff = (run["master"][step] - ref["params"]).abs().max().item()
            assert diff < 1e-5, (stage, step, diff)
        bf16 = ranks[0]["minimal", "bf16", stage]
        assert bf16["losses"] == pytest.approx(losses, abs=2e-3, rel=0), stage


def test_bytes_held_shrink_as_the_card_says(ranks):
    """2Ψ + 2Ψ + 12Ψ in bf16 (4 + 4 + 12 in fp32); each stage divides one more term by N_d, and
    the sharded terms count the padding: Ψ_padded = each unit rounded up to a multiple of N_d."""
    psi = sum(UNIT_SIZES)
    padded = sum(-(-n // WORLD_SIZE) * WORLD_SIZE for n in UNIT_SIZES)
    assert padded > psi
    for dtype, element in (("bf16", 2), ("fp32", 4)):
        for stage in STAGES:
            at = psi if stage == 0 else padded
            expected = {
                "params": element * at // (WORLD_SIZE if stage >= 3 else 1),
                "grads": element * at // (WORLD_SIZE if stage >= 2 else 1),
                "optimizer": 12 * at // (WORLD_SIZE if stage >= 1 else 1),
            }
            for runs in ranks:
                assert runs["minimal", dtype, stage]["bytes"] == [expected] * STEPS, (dtype, stage)


def test_the_command_prints_each_ranks_bytes_and_the_loss(ranks):
    """``--world-size 2 --stage 3 --model-size tiny --steps 2``, as rank 0 prints it."""
    assert ranks[1]["printed"] == ""
    lines = ranks[0]["printed"].splitlines()
    assert lines[0] == "ZeRO-3 on 2 ranks: optimizer states + gradients + parameters sharded"
    # The tiny model: Ψ = 15,532, even in every unit, so no padding at 2 ranks: 16Ψ/2 bytes each.
    psi = 15_532
    for rank in (0, 1):
        cells = [f"{b:,}" for b in (psi, psi, 6 * psi, 8 * psi)]
        assert lines[2 + rank].split() == [str(rank), *cells]
    assert lines[4] == f"  DDP holds {16 * psi:,} bytes per rank for Ψ = {psi:,}: this is 50% of it"
    assert lines[5].startswith("  loss per step: ") and len(lines[5].split()) == 5
    assert len(lines) == 6


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--world-size", "0"], "argument --world-size: must be at least 1, got 0"),
        (["--stage", "4"], "argument --stage: invalid choice: 4 (choose from 0, 1, 2, 3)"),
        (["--dtype", "fp16"], "argument --dtype: invalid choice: 'fp16'"),
        (["--steps", "x"], "argument --steps: invalid int value: 'x'"),
    ],
)
def test_bad_arguments_end_with_a_message_and_exit_2(args, message, capsys):
    from app.zero_demo.minimal import main

    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m app.zero_demo.minimal")
    assert message in err
