"""What the demo is checked against: one process with AdamW, and PyTorch's own ZeRO engines.

- ``single_process``: ``torch.optim.AdamW`` on one process, in fp32, over the whole global batch.
  Data parallelism with averaged gradients must reproduce it: in fp32 to rounding (about 1e-6),
  in bf16/fp16 within the low precision's rounding.
- ``fsdp2``: PyTorch's ``fully_shard`` (FSDP2) on every unit and the root, which is ZeRO-3;
  in bf16 with ``MixedPrecisionPolicy`` (bf16 compute and reduction, fp32 sharded parameters as
  the master copy), as the demo does.
- ``zero_redundancy_optimizer``: DDP with ``ZeroRedundancyOptimizer`` around AdamW, which is
  ZeRO-1 with whole parameters per rank; in bf16 under ``torch.autocast``.

fp16 has no loss scaler in PyTorch's engines here, so in fp16 mode they run in fp32.
"""

from __future__ import annotations

import gc
import time

import torch
import torch.distributed as dist

from .config import DemoConfig
from .inventory import PeakMemory
from .model import build_model, global_batch, loss_fn, rank_batch


def _adamw(cfg: DemoConfig, params) -> torch.optim.Optimizer:
    o = cfg.optim
    return torch.optim.AdamW(
        params,
        lr=o.lr,
        betas=(o.beta1, o.beta2),
        eps=o.eps,
        weight_decay=o.weight_decay,
        foreach=False,
    )


def single_process(
    cfg: DemoConfig, device: torch.device, on_step=None, grad_accum: int = 1
) -> dict:
    """Losses of fp32 AdamW on one process, and its final parameters (flat, in model order, CPU).

    With ``grad_accum`` K, step s trains on the K global batches ``s*K ... s*K + K - 1`` at once:
    the mean of their losses (each batch is the same size), one AdamW step.
    """
    model = build_model(cfg.model, cfg.seed).to(device)
    optimizer = _adamw(cfg, model.parameters())
    losses = []
    for step in range(cfg.steps):
        total = 0.0
        for k in range(grad_accum):
            batch = global_batch(cfg.model, cfg.seed, step * grad_accum + k, cfg.global_batch)
            tokens, targets = batch
            loss = loss_fn(model(tokens.to(device)), targets.to(device)) / grad_accum
            loss.backward()
            total += loss.item()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(total)
        if on_step:
            on_step()
    params = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).cpu()
    return {"losses": losses, "params": params}


def _train_distributed(
    cfg: DemoConfig, model, optimizer, device, peak, on_step, autocast_dtype=None
) -> dict:
    """The shared loop: this rank's micro-batch, one step, the global mean loss."""
    rank, world_size = dist.get_rank(), dist.get_world_size()
    losses, times = [], []
    gc.collect()
    peak.reset_peak()
    for step in range(cfg.steps):
        tokens, targets = rank_batch(cfg.model, cfg.seed, step, cfg.micro_batch, rank, world_size)
        tokens, targets = tokens.to(device), targets.to(device)
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=autocast_dtype, enabled=autocast_dtype is not None):
            logits = model(tokens)
        loss = loss_fn(logits, targets)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
        mean = loss.detach().clone()
        dist.all_reduce(mean)
        losses.append(mean.item() / world_size)
        if on_step:
            on_step()
    return {"losses": losses, "step_times": times, "peak_memory": peak.read()}


def fsdp2(cfg: DemoConfig, device: torch.device, on_step=None) -> dict:
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mesh = init_device_mesh(device.type, (dist.get_world_size(),))
    if cfg.dtype == "bf16":
        policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.bfloat16)
    else:
        policy = MixedPrecisionPolicy()
    gc.collect()
    peak = PeakMemory(device)  # before the model exists: the baseline
    model = build_model(cfg.model, cfg.seed).to(device)
    for unit in model.units:
        fully_shard(unit, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    result = _train_distributed(cfg, model, _adamw(cfg, model.parameters()), device, peak, on_step)
    result["dtype"] = "bf16" if cfg.dtype == "bf16" else "fp32"
    return result


def zero_redundancy_optimizer(cfg: DemoConfig, device: torch.device, on_step=None) -> dict:
    from torch.distributed.optim import ZeroRedundancyOptimizer
    from torch.nn.parallel import DistributedDataParallel

    gc.collect()
    peak = PeakMemory(device)
    model = build_model(cfg.model, cfg.seed).to(device)
    ddp = DistributedDataParallel(
        model, device_ids=[device.index] if device.type == "cuda" else None
    )
    o = cfg.optim
    optimizer = ZeroRedundancyOptimizer(
        ddp.parameters(),
        optimizer_class=torch.optim.AdamW,
        lr=o.lr,
        betas=(o.beta1, o.beta2),
        eps=o.eps,
        weight_decay=o.weight_decay,
        foreach=False,
    )
    autocast = torch.bfloat16 if cfg.dtype == "bf16" else None
    result = _train_distributed(cfg, ddp, optimizer, device, peak, on_step, autocast)
    result["dtype"] = "bf16 autocast" if autocast else "fp32"
    return result
