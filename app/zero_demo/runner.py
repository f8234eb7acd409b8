"""The ranks: start them, run every stage on each, and bring the measurements back to rank 0.

Two ways in:

- ``python -m app.zero_demo --world-size N`` spawns N processes itself (``torch.multiprocessing``
  with the spawn method). They meet through a ``FileStore`` in a fresh temporary folder, so
  parallel runs (tests under ``pytest -n``) never compete for a port.
- ``torchrun --nproc-per-node N -m app.zero_demo`` starts the ranks; each joins through the
  environment (``env://``) and rank 0 reports.

Backends: gloo on the CPU, any number of ranks; NCCL with one GPU per rank (NCCL refuses two ranks
on one GPU), rank i on ``cuda:<local rank i>``.

Each rank returns plain data (lists and numbers); formulas and the report are made afterwards,
outside the ranks, by ``report``.
"""

from __future__ import annotations

import contextlib
import datetime
import gc
import json
import os
import sys
import tempfile
import time
import traceback

import torch
import torch.distributed as dist
from torch.multiprocessing import ProcessExitedException, ProcessRaisedException

from . import reference
from .audit import StorageAudit
from .comm import CountingComm, summarize
from .config import STAGE_NAMES, DemoConfig
from .engine import ENGINES, Stage3
from .inventory import PeakMemory, rss_is_per_stage
from .model import build_model, rank_batch
from .phases import PhaseMemory


def launch(cfg: DemoConfig) -> dict | None:
    """Run the demo on ``cfg.world_size`` ranks; the raw measurements (None on ranks other than 0)."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # started by torchrun
        return _torchrun_rank(cfg)
    with tempfile.TemporaryDirectory(prefix="zero-demo-") as tmp, _allocator_env(cfg):
        store, out = os.path.join(tmp, "store"), os.path.join(tmp, "result.json")
        try:
            torch.multiprocessing.start_processes(
                _spawned_rank, args=(cfg, store, out), nprocs=cfg.world_size, start_method="spawn"
            )
        except (ProcessRaisedException, ProcessExitedException) as exc:
            # The first rank to die is not always the one that failed: when a rank raises and
            # leaves, gloo can abort its peers ("terminate called without an active exception",
            # SIGABRT), and that exit may be noticed first. Report the rank's own error.
            causes = _rank_errors(out, cfg.world_size)
            if causes:
                raise RankFailed(causes) from exc
            raise
        with open(out) as f:
            return json.load(f)


class RankFailed(RuntimeError):
    """A rank raised; the message is its traceback (and any other rank's)."""


def _rank_errors(out_path: str, world_size: int) -> str:
    found = []
    for rank in range(world_size):
        path = f"{out_path}.rank{rank}.error"
        if os.path.exists(path):
            with open(path) as f:
                found.append(f"rank {rank} failed:\n{f.read()}")
    return "\n".join(found)


def _spawned_rank(rank: int, cfg: DemoConfig, store_path: str, out_path: str) -> None:
    store = dist.FileStore(store_path, cfg.world_size)
    _init(cfg, rank=rank, local_rank=rank, store=store)
    try:
        raw = run_rank(cfg, rank, cfg.world_size, local_rank=rank)
        if rank == 0:
            with open(out_path, "w") as f:
                json.dump(raw, f)
        dist.barrier()  # leave together: a rank that exits early can abort a peer's gloo thread
    except BaseException:
        # Written before the group goes: the peers may be aborted as it does (see ``launch``).
        with open(f"{out_path}.rank{rank}.error", "w") as f:
            f.write(traceback.format_exc())
        raise
    finally:
        dist.destroy_process_group()
    # The work is done, written and agreed on (the barrier). Leave without the interpreter's
    # teardown: a C++ thread still joinable when its owner is destroyed at exit (a profiler or
    # gloo helper) makes std::terminate abort the process ("terminate called without an active
    # exception"), which turned finished runs into failures now and then.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _torchrun_rank(cfg: DemoConfig) -> dict | None:
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", 0))
    _init(cfg, rank=rank, local_rank=local_rank, store=None)
    try:
        raw = run_rank(cfg, rank, dist.get_world_size(), local_rank=local_rank)
        dist.barrier()
        return raw
    finally:
        dist.destroy_process_group()


def _init(cfg: DemoConfig, *, rank: int, local_rank: int, store) -> None:
    if cfg.device == "cuda":
        torch.cuda.set_device(local_rank)
    # Ranks share the cores (the CPU runs the model, or the offloaded Adam step): without this,
    # N ranks each start one thread per core and thrash.
    local_ranks = int(os.environ.get("LOCAL_WORLD_SIZE", cfg.world_size))
    torch.set_num_threads(cfg.threads or max(1, (os.cpu_count() or 1) // local_ranks))
    kwargs = {"store": store, "rank": rank, "world_size": cfg.world_size} if store else {}
    if cfg.device == "cuda":
        kwargs["device_id"] = torch.device("cuda", local_rank)
    dist.init_process_group(
        cfg.backend, timeout=datetime.timedelta(seconds=cfg.timeout_s), **kwargs
    )


@contextlib.contextmanager
def _allocator_env(cfg: DemoConfig):
    """Let glibc give large freed blocks back to the OS at once, so peak RSS tracks live tensors.

    By default glibc raises its mmap threshold after large frees and keeps freed memory around,
    which would make the CPU peak of one stage depend on the stage before it. The spawned ranks
    inherit these variables; this process's environment is restored afterwards.
    """
    wanted = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}
    wanted = wanted if cfg.device == "cpu" else {}
    saved = {k: os.environ.get(k) for k in wanted}
    os.environ.update({k: v for k, v in wanted.items() if saved[k] is None})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)


class _Progress:
    """A tqdm bar on rank 0 (stderr), nothing elsewhere."""

    def __init__(self, cfg: DemoConfig, rank: int) -> None:
        total = cfg.steps * (
            len(cfg.stages) * len(cfg.offloads)
            + (1 if cfg.reference else 0)
            + (2 if cfg.compare else 0)
        )
        self.bar = None
        if cfg.progress and rank == 0:
            from tqdm import tqdm

            self.bar = tqdm(
                total=total, unit="step", file=sys.stderr, leave=False, dynamic_ncols=True
            )

    def stage(self, text: str) -> None:
        if self.bar is not None:
            self.bar.set_description(text)

    def step(self) -> None:
        if self.bar is not None:
            self.bar.update()

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def run_rank(cfg: DemoConfig, rank: int, world_size: int, *, local_rank: int) -> dict | None:
    """Everything one rank does; rank 0 returns the merged measurements of all ranks."""
    device = torch.device("cuda", local_rank) if cfg.device == "cuda" else torch.device("cpu")
    progress = _Progress(cfg, rank)
    refs: dict[int, dict] = {}
    if cfg.reference and rank == 0:
        progress.stage("single-process AdamW")
        # One reference per K (each trains on other batches); K = 1 for PyTorch's engines.
        for k in sorted({*cfg.grad_accums, *((1,) if cfg.compare else ())}):
            refs[k] = reference.single_process(cfg, device, progress.step, grad_accum=k)
    comm = CountingComm()
    if cfg.warm_up:
        _warm_up(cfg, comm, device)
    # Everything alive now (torch, the reference, the interpreter) out of the collector's sight
    # until the stages are done: each stage's storage audit then walks only what was made since
    # (see ``audit``), and its baseline walk is short too. Unfrozen below.
    gc.collect()
    gc.freeze()
    try:
        runs = _run_stages(cfg, comm, device, progress, refs)
    finally:
        gc.unfreeze()
    ref = refs.get(1) or (refs[cfg.grad_accums[0]] if refs else None)
    comparisons = {}
    if cfg.compare:
        for name, fn in (
            ("fsdp2", reference.fsdp2),
            ("zero_redundancy_optimizer", reference.zero_redundancy_optimizer),
        ):
            progress.stage(name)
            comparisons[name] = fn(cfg, device, progress.step)
    progress.close()
    # Bring every rank's figures to rank 0 (after all measurements: this traffic is not counted).
    everything: list = [None] * world_size
    dist.all_gather_object(everything, {"runs": runs, "comparisons": comparisons})
    if rank != 0:
        return None
    return _merge(world_size, everything, ref, device)


def _run_stages(cfg: DemoConfig, comm: CountingComm, device, progress, refs) -> list[dict]:
    runs = []
    for k in cfg.grad_accums:
        for offload in cfg.offloads:
            for stage in cfg.stages:
                progress.stage(
                    f"{STAGE_NAMES[stage]}"
                    + ("" if offload == "none" else f" offload {offload}")
                    + ("" if k == 1 else f" K={k}")
                )
                runs.append(_run_stage(cfg, stage, offload, comm, device, progress, refs.get(k), k))
    return runs


def _warm_up(cfg: DemoConfig, comm: CountingComm, device: torch.device) -> None:
    """One step of each stage, at the real size, unmeasured: one-time costs (lazy imports, thread
    pools, the allocator's first blocks of each size, the profiler's start-up) must not land on
    whichever stage runs first. A warm-up on a smaller model left the first measured stage with a
    one-time excess (the allocator had no blocks of the real sizes yet)."""
    for stage in cfg.stages:
        model = build_model(cfg.model, cfg.seed, materialize=False)
        engine = ENGINES[stage](model, cfg=cfg, comm=comm, device=device)
        engine.phases = PhaseMemory(device)
        with engine.phases.step(cfg.phase_memory, start_bytes=0):
            engine.train_step(
                *rank_batch(cfg.model, cfg.seed, 0, cfg.micro_batch, comm.rank, comm.world_size)
            )
        engine.close()
        del engine
        gc.collect()
    comm.take()


def _run_stage(
    cfg: DemoConfig,
    stage: int,
    offload: str,
    comm: CountingComm,
    device: torch.device,
    progress: _Progress,
    ref: dict | None,
    grad_accum: int = 1,
) -> dict:
    """Train one engine for ``cfg.steps`` steps; its inventory, counts, losses, memory, times."""
    rank, world_size = comm.rank, comm.world_size
    gc.collect()
    peak = PeakMemory(device)
    # What is alive before the engine is not the engine's; the rank unfreezes (see run_rank).
    audit = StorageAudit(device, keep_frozen=True)
    engine = ENGINES[stage](
        build_model(cfg.model, cfg.seed, materialize=False),  # partitioned as materialised
        cfg=cfg,
        comm=comm,
        device=device,
        offload=offload,
        offload_dir=cfg.offload_dir,
    )
    gc.collect()
    engine.audit = audit if cfg.audit else None
    engine.phases = phases = PhaseMemory(device)
    peak.reset_peak()
    comm.take()
    losses, skipped, steps_comm, times, breakdowns = [], [], [], [], []
    for step in range(cfg.steps):
        micro_batches = [
            rank_batch(
                cfg.model, cfg.seed, step * grad_accum + k, cfg.micro_batch, rank, world_size
            )
            for k in range(grad_accum)
        ]
        # The first step (left out of the step time) is the measured one: per-phase peaks, and
        # on a GPU a synchronized time breakdown. The others run unobserved.
        measured = step == 0 and cfg.phase_memory
        start_bytes = audit.engine_bytes() if measured else 0
        start = time.perf_counter()
        engine.clock.begin(sync=measured and device.type == "cuda")
        with phases.step(measured, start_bytes=start_bytes, baseline=audit.baseline_bytes):
            result = engine.accumulation_step(micro_batches)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        breakdown = engine.clock.end()
        breakdowns.append(breakdown)
        # The audit's storage walks are checks, not training: not in the step time.
        times.append(time.perf_counter() - start - breakdown.get("excluded.audit", 0.0))
        steps_comm.append(summarize(comm.take(), world_size))
        losses.append(result.loss)
        skipped.append(result.skipped)
        progress.step()
    memory = peak.read()
    phase_peaks = dict(phases.peaks)
    phase_peaks["comm_buffers"] = engine.peak_comm_buffer_bytes
    run = {
        "stage": stage,
        "offload": offload,
        "grad_accum": grad_accum,
        "overlap": cfg.overlap,
        "checkpoint_activations": cfg.checkpoint_activations,
        "buckets": [list(b) for b in engine.buckets] if stage in (0, 2) else None,
        "reference_losses": ref["losses"] if ref is not None else None,
        "psi": engine.layout.psi,
        "padded_psi": engine.layout.padded_psi,
        "shards": engine.layout.shards,
        "units": [{"numel": u.numel, "padded": u.padded} for u in engine.layout.units],
        "inventory": engine.inventory,
        "comm": steps_comm[-1],
        "comm_same_every_step": all(s == steps_comm[0] for s in steps_comm),
        "losses": losses,
        "skipped_steps": sum(skipped),
        "peak_memory": memory,
        "phase_peaks": phase_peaks,
        "phase_peak_kind": phases.kind,
        "paged_in_optimizer_peak_bytes": engine.optimizer.peak_paged_bytes,
        "sub_group_size": engine.optimizer.sub_group_size,
        "audit": (
            {"checks": audit.checks, "max_unexplained_bytes": audit.max_unexplained}
            if cfg.audit
            else None
        ),
        "step_times": times,
        "time_breakdowns": breakdowns,
        "loss_scale": engine.scaler.scale if engine.scaler else None,
    }
    if isinstance(engine, Stage3):
        run["peak_gathered_units"] = engine.peak_gathered_units
        run["peak_gathered_bytes"] = engine.peak_gathered_bytes
    if cfg.reference:
        params = engine.full_parameters()  # a collective: every rank takes part
        if ref is not None:
            run["param_max_diff"] = (params - ref["params"]).abs().max().item()
    engine.close()
    audit.close()
    del engine
    gc.collect()
    return run


def _merge(world_size: int, everything: list[dict], ref: dict | None, device: torch.device) -> dict:
    """One record per (offload, stage): the largest rank's bytes and peak, the slowest rank's
    step times; counts and losses are rank 0's (the same on every rank)."""

    def across_ranks(per_rank: list[dict]) -> dict:
        merged = {
            "peak_memory": max(
                (r["peak_memory"] for r in per_rank), key=lambda m: m["above_baseline"]
            ),
            "step_times": [
                max(ts) for ts in zip(*(r["step_times"] for r in per_rank), strict=True)
            ],
        }
        if "phase_peaks" in per_rank[0]:
            merged["phase_peaks"] = {
                k: max(r["phase_peaks"].get(k, 0) for r in per_rank)
                for k in per_rank[0]["phase_peaks"]
            }
            # The slowest rank's breakdown, step by step.
            merged["time_breakdowns"] = [
                max(steps, key=lambda b: b["total"])
                for steps in zip(*(r["time_breakdowns"] for r in per_rank), strict=True)
            ]
        return merged

    runs = []
    for i, run in enumerate(everything[0]["runs"]):
        per_rank = [e["runs"][i] for e in everything]
        largest = max(per_rank, key=lambda r: r["inventory"]["total"])
        runs.append({**run, **across_ranks(per_rank), "inventory": largest["inventory"]})
    comparisons = {
        name: {**result, **across_ranks([e["comparisons"][name] for e in everything])}
        for name, result in everything[0]["comparisons"].items()
    }
    return {
        "world_size": world_size,
        "backend": dist.get_backend(),
        "device": _device_name(device),
        "torch": torch.__version__,
        "peak_rss_per_stage": device.type == "cuda" or rss_is_per_stage(),
        "reference_losses": ref["losses"] if ref else None,
        "runs": runs,
        "comparisons": comparisons,
    }


def _device_name(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    import platform

    return f"CPU ({platform.machine()}, {os.cpu_count()} cores)"
