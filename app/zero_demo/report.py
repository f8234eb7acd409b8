"""From the ranks' raw measurements to what the learner sees: the document, the table, the chart.

``build_document`` puts each measured figure beside the card's formula, evaluated for the same
Ψ and N_d, and explains the difference: flat buffers are padded to a multiple of N_d, so a sharded
run holds Ψ_padded elements; the formula evaluated at Ψ_padded must equal the inventory exactly.
The document is what ``--json`` prints and what ``--record`` saves for the card page.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict
from fractions import Fraction
from pathlib import Path

from .card import STAGE_COMM, STAGE_TOTAL, CardFormulas
from .charts import results_svg
from .config import OPTIMIZER_BYTES, STAGE_NAMES, STAGE_SHARDS, DemoConfig

BYTE_KEYS = ("params", "grads", "optimizer", "resident", "offloaded", "total")
_COMPARISON_NAMES = {"fsdp2": "PyTorch FSDP2", "zero_redundancy_optimizer": "PyTorch ZeRO-1"}


def _num(value: Fraction | int | float) -> int | float:
    """A JSON number: exact integers stay integers."""
    if isinstance(value, Fraction):
        return value.numerator if value.denominator == 1 else float(value)
    return value


def _max_diff(losses: list[float], reference: list[float] | None) -> float | None:
    if not reference:
        return None
    return max(abs(a - b) for a, b in zip(losses, reference, strict=True))


def median_step_time(times: list[float]) -> float:
    """Median step time, the first step (warm-up) left out when there are others."""
    return statistics.median(times[1:] if len(times) > 1 else times)


def mean_breakdown(breakdowns: list[dict[str, float]]) -> dict[str, float]:
    """Seconds per span, the mean over the steps after the first (the measured, observed one)."""
    steps = breakdowns[1:] if len(breakdowns) > 1 else breakdowns
    keys = sorted({k for b in steps for k in b}, key=_span_order)
    return {k: sum(b.get(k, 0.0) for b in steps) / len(steps) for k in keys}


_SPAN_ORDER = ("compute", "comm.all_reduce", "comm.reduce_scatter", "comm.all_gather",
               "comm.control", "adam", "copies", "disk", "total")  # fmt: skip


def _span_order(key: str) -> tuple[int, str]:
    return (_SPAN_ORDER.index(key) if key in _SPAN_ORDER else len(_SPAN_ORDER), key)


def build_document(raw: dict, cfg: DemoConfig, card: CardFormulas) -> dict:
    """The demo's results, with the card's formulas beside every measured figure."""
    n_d = raw["world_size"]
    element = cfg.param_bytes
    reference = raw["reference_losses"]
    psi = raw["runs"][0]["psi"]
    results = []
    for run in raw["runs"]:
        stage, padded = run["stage"], run["padded_psi"]
        inventory = run["inventory"]
        formula = card.term_bytes(stage, psi, n_d, element)
        formula_padded = card.term_bytes(stage, padded, n_d, element)
        measured = {k: inventory[k] for k in BYTE_KEYS}
        comm = run["comm"]
        run_reference = run.get("reference_losses")
        k = run["grad_accum"]
        result = {
            "stage": stage,
            "offload": run["offload"],
            "grad_accum": k,
            "overlap": run["overlap"],
            "gradient_buckets": run.get("buckets"),
            "checkpoint_activations": run.get("checkpoint_activations", False),
            "bytes_per_rank": measured,
            "formula_bytes_per_rank": _num(sum(formula.values())),
            "comm_elements_per_rank_per_step": comm["elements"],
            "losses": run["losses"],
            "reference_losses": run_reference,
            # What follows explains the figures above.
            "name": STAGE_NAMES[stage],
            "sharded": STAGE_SHARDS[stage],
            "formula": card.text(STAGE_TOTAL[stage]),
            "card_formula_bytes_per_rank": _num(card.card_formula_bytes(stage, psi, n_d)),
            "formula_terms_bytes_per_rank": {k: _num(v) for k, v in formula.items()},
            "padded_psi": padded,
            "padding_bytes_per_rank": _num(sum(formula_padded.values()) - sum(formula.values())),
            "matches_formula_with_padding": all(
                measured[k] == formula_padded[k] for k in formula_padded
            ),
            "formula_resident_bytes_per_rank": _num(
                card.resident_bytes(stage, psi, n_d, run["offload"], element)
            ),
            "offloaded_to": {
                t: inventory[f"offloaded_{t}"]
                for t in ("cpu", "disk")
                if inventory[f"offloaded_{t}"]
            },
            "inventory_items": inventory["items"],
            "comm_formula": card.text(STAGE_COMM[stage]),
            "comm_formula_elements_per_rank_per_step": _num(card.comm_elements(stage, psi, n_d)),
            "comm_padded_formula_elements_per_rank_per_step": _num(
                card.comm_elements(stage, padded, n_d)
            ),
            # Per optimizer step over K micro-batches (the same as above when K = 1).
            "comm_accumulated_formula": card.comm_accumulated_text(stage, k),
            "comm_accumulated_formula_elements": _num(card.comm_accumulated(stage, psi, n_d, k)),
            "comm_accumulated_padded_formula_elements": _num(
                card.comm_accumulated(stage, padded, n_d, k)
            ),
            "comm_bytes_per_rank_per_step": comm["bytes"],
            "comm_ring_elements_per_rank_per_step": comm["ring_elements"],
            "comm_by_collective": comm["by_collective"],
            "comm_same_every_step": run["comm_same_every_step"],
            "max_loss_diff": _max_diff(run["losses"], run_reference),
            "param_max_diff": run.get("param_max_diff"),
            "skipped_steps": run["skipped_steps"],
            "peak_memory": run["peak_memory"],
            "step_time_s": median_step_time(run["step_times"]),
            # Peaks of one step by phase: GPU max allocated, or tracked CPU storage bytes.
            "phase_peak_bytes": run["phase_peaks"],
            "phase_peak_kind": run["phase_peak_kind"],
            "paged_in_optimizer_peak_bytes": run["paged_in_optimizer_peak_bytes"],
            "sub_group_size": run["sub_group_size"],
            "time_breakdown_s": mean_breakdown(run["time_breakdowns"]),
            "audit": run["audit"],
            "loss_scale": run["loss_scale"],
        }
        if "peak_gathered_units" in run:
            result["peak_gathered_units"] = run["peak_gathered_units"]
            result["peak_gathered_bytes"] = run["peak_gathered_bytes"]
        results.append(result)
    comparisons = {
        name: {
            "dtype": c["dtype"],
            "losses": c["losses"],
            "max_loss_diff": _max_diff(c["losses"], reference),
            "peak_memory": c["peak_memory"],
            "step_time_s": median_step_time(c["step_times"]),
        }
        for name, c in raw["comparisons"].items()
    }
    return {
        "psi": psi,
        "world_size": n_d,
        "dtype": cfg.dtype,
        "results": results,
        "backend": raw["backend"],
        "device": raw["device"],
        "torch": raw["torch"],
        "model": asdict(cfg.model),
        "steps": cfg.steps,
        "global_batch": cfg.global_batch,
        "bytes_per_element": {"params": element, "grads": element, "optimizer": OPTIMIZER_BYTES},
        "card": _relative(card.path),
        "reference": {"name": "single-process AdamW, fp32", "losses": reference},
        "comparisons": comparisons,
        "peak_rss_per_stage": raw["peak_rss_per_stage"],
    }


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


# -- text --------------------------------------------------------------------------------------


def _table(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Columns padded to their widest cell; the first two columns left-aligned, numbers right."""
    widths = [max(len(str(c)) for c in col) for col in zip(headers, *rows, strict=True)]

    def line(cells: list[str]) -> str:
        out = []
        for i, (cell, width) in enumerate(zip(cells, widths, strict=True)):
            out.append(str(cell).ljust(width) if i < 2 else str(cell).rjust(width))
        return "  ".join(out).rstrip()

    return [line(headers), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def _b(n: int | float) -> str:
    return f"{n:,.0f}" if float(n).is_integer() else f"{n:,.2f}"


def _mb(n: float) -> str:
    return f"{n / 1e6:,.2f} MB"


def _stage_label(r: dict) -> list[str]:
    k = r.get("grad_accum", 1)
    return [r["name"] + (f" K={k}" if k != 1 else ""), r["offload"]]


def render_text(doc: dict, chart: str | None = None) -> str:
    """The report a learner reads: memory, communication, peak memory, losses."""
    n_d, psi, dtype = doc["world_size"], doc["psi"], doc["dtype"]
    e = doc["bytes_per_element"]
    results = doc["results"]
    out = [
        f"ZeRO demo: Ψ = {psi:,} parameters, N_d = {n_d} rank(s), {doc['backend']} on {doc['device']}, "
        f"{dtype} training, {doc['steps']} steps of {doc['global_batch']} sequences",
        f"Model-state bytes per parameter: {dtype} params {e['params']} + {dtype} grads {e['grads']} + "
        f"fp32 master, m, v {e['optimizer']} = {sum(e.values())}.  Formulas: {doc['card']}",
    ]
    if dtype == "fp32":
        out.append(
            "fp32 mode: parameters and gradients take 4 bytes, so the card's 2Ψ terms are scaled to 4Ψ "
            "(20Ψ in all instead of 16Ψ); run --dtype bf16 for the card's 16Ψ accounting."
        )

    out += ["", "Memory per rank: model states by exact inventory (bytes, the largest rank)"]
    rows = []
    for r in results:
        b = r["bytes_per_rank"]
        delta = b["total"] - r["formula_bytes_per_rank"]
        why = (
            "exact"
            if delta == 0
            else ("padding" if r["matches_formula_with_padding"] else "UNEXPLAINED")
        )
        rows.append(
            [
                *_stage_label(r),
                _b(b["params"]),
                _b(b["grads"]),
                _b(b["optimizer"]),
                _b(b["total"]),
                r["formula"],
                _b(r["formula_bytes_per_rank"]),
                f"{_b(delta)} ({why})",
            ]
        )
    out += _table(
        [
            "stage",
            "offload",
            f"params ({dtype})",
            f"grads ({dtype})",
            "optimizer (fp32)",
            "total",
            "card formula" if dtype != "fp32" else "card formula (its 2Ψ terms as 4Ψ)",
            "= bytes",
            "Δ",
        ],
        rows,
    )
    padded = [r for r in results if r["padded_psi"] != psi]
    if padded:
        p = padded[0]
        out.append(
            f"Δ: each layer's flat buffer is padded to a multiple of N_d = {n_d}: Ψ_padded = {p['padded_psi']:,} "
            f"({p['padded_psi'] - psi} zeros). The formula at Ψ_padded equals the inventory exactly."
        )
    else:
        out.append(f"Δ = 0: every layer's size divides by N_d = {n_d}, so no padding is needed.")
    out.append(
        "Model states only: activations and short-lived buffers (a layer gathered by ZeRO-3, one layer's "
        "gradient bucket, fp32 copies in the optimizer step) come on top; see the peak memory below."
    )

    offloaded = [r for r in results if r["offload"] != "none"]
    if offloaded:
        out += ["", "Offload: what stays on the training device and what moves (bytes per rank)"]
        rows = []
        for r in offloaded:
            b = r["bytes_per_rank"]
            rows.append(
                [
                    *_stage_label(r),
                    _b(b["resident"]),
                    _b(r["formula_resident_bytes_per_rank"]),
                    _b(b["offloaded"]),
                    " + ".join(f"{_b(n)} {tier}" for tier, n in r["offloaded_to"].items()),
                ]
            )
        out += _table(["stage", "offload", "resident", "formula", "offloaded", "where"], rows)
        out.append(
            "Offload moves the fp32 optimizer states (and, from ZeRO-2 on, the gradient shard, kept in CPU RAM "
            "even with disk) off the device; under ZeRO-3 the device keeps only the parameter shard, the card's "
            "offload_gpu = 2Ψ/N_d."
        )
        if doc["device"].startswith("CPU"):
            out.append(
                "On a CPU-only run the training device is the CPU itself: offload cpu moves the bytes to another "
                "pool of the same RAM (the inventory shows what a GPU would keep); offload disk really frees them."
            )

    out += [
        "",
        "Communication per rank per optimizer step (elements, counted from each collective's arguments; "
        "K micro-batches per step where K is shown)",
    ]
    rows = []
    for r in results:
        by = r["comm_by_collective"]
        rows.append(
            [
                *_stage_label(r),
                *(
                    _b(by[op]["elements"]) if op in by else "-"
                    for op in ("all_reduce", "reduce_scatter", "all_gather")
                ),
                _b(r["comm_elements_per_rank_per_step"]),
                r["comm_accumulated_formula"],
                _b(r["comm_accumulated_formula_elements"]),
                _b(r["comm_elements_per_rank_per_step"] - r["comm_accumulated_formula_elements"]),
                _b(r["comm_ring_elements_per_rank_per_step"]),
                _mb(r["comm_bytes_per_rank_per_step"]),
            ]
        )
    out += _table(
        [
            "stage",
            "offload",
            "all-reduce",
            "reduce-scatter",
            "all-gather",
            "total",
            "card",
            "= elements",
            "Δ",
            f"ring ×{n_d - 1}/{n_d}",
            "bytes",
        ],
        rows,
    )
    out.append(
        "An all-reduce of n elements counts 2n (reduce-scatter + all-gather, as a ring does it). gloo emulates "
        "reduce-scatter with an all-reduce, so the wire is not the measure. Δ is padding, as above."
    )
    if any(r.get("checkpoint_activations") for r in results):
        out.append(
            "Activation checkpointing is on: each transformer block runs its forward again in backward, "
            "so ZeRO-3 all-gathers every block a third time per micro-batch (Δ above: the blocks' Ψ on "
            "top of padding); the other stages keep their parameters and gather nothing more."
        )
    buckets = next((r["gradient_buckets"] for r in results if r.get("gradient_buckets")), None)
    if buckets and any(len(b) > 1 for b in buckets):
        out.append(
            f"Gradient buckets (--bucket-size): {len(buckets)} for DDP and ZeRO-2, layers "
            + ", ".join("+".join(str(u) for u in b) for b in buckets)
            + " in backward order; one collective each, the same elements."
        )
    if any(r.get("grad_accum", 1) != 1 for r in results):
        out.append(
            "With K micro-batches per step, DDP (no_sync) and ZeRO-1 still reduce once per step; ZeRO-2 "
            "reduce-scatters every micro-batch, (K+1)Ψ; ZeRO-3 gathers twice and reduce-scatters every "
            "micro-batch, 3KΨ: why pipeline and Megatron setups that accumulate pair with ZeRO-1."
        )
    ddp = next((r for r in results if r["stage"] == 0 and r["offload"] == "none"), None)
    zero3 = next((r for r in results if r["stage"] == 3 and r["offload"] == "none"), None)
    if ddp and zero3:
        ratio = zero3["comm_elements_per_rank_per_step"] / ddp["comm_elements_per_rank_per_step"]
        out.append(
            f"ZeRO-3 / DDP = {ratio:.4f} (card: 3Ψ / 2Ψ = 1.5): all-gather before forward, again before backward, "
            "and a reduce-scatter, against DDP's all-reduce. The ring factor (N_d − 1)/N_d cancels in the ratio."
        )

    kind = results[0]["peak_memory"]["kind"]
    peak_label = "GPU max allocated" if kind == "cuda_max_memory_allocated" else "peak RSS"
    out += ["", f"Peak memory per rank ({peak_label}) and step time"]
    rows = []
    for r in results:
        pm, b = r["peak_memory"], r["bytes_per_rank"]
        # In this memory: on a GPU the resident states; on a CPU, whatever is not on disk.
        states = (
            b["resident"]
            if kind == "cuda_max_memory_allocated"
            else b["total"] - r["offloaded_to"].get("disk", 0)
        )
        extra = ""
        if "peak_gathered_units" in r:
            extra = f"{r['peak_gathered_units']} layer(s) gathered at a time, {_mb(r['peak_gathered_bytes'])}"
        rows.append(
            [
                *_stage_label(r),
                _mb(states),
                _mb(pm["above_baseline"]),
                _mb(pm["above_baseline"] - states),
                _mb(pm["peak"]),
                f"{r['step_time_s'] * 1000:,.0f} ms",
                extra,
            ]
        )
    for name, c in doc["comparisons"].items():
        pm = c["peak_memory"]
        rows.append(
            [
                _COMPARISON_NAMES[name],
                c["dtype"],
                "-",
                _mb(pm["above_baseline"]),
                "-",
                _mb(pm["peak"]),
                f"{c['step_time_s'] * 1000:,.0f} ms",
                "",
            ]
        )
    out += _table(
        ["stage", "offload", "model states", "peak", "other", peak_label, "step", ""], rows
    )
    what = (
        "allocated by torch on the GPU"
        if kind == "cuda_max_memory_allocated"
        else "resident in RAM (peak RSS)"
    )
    out.append(
        f"peak: the most memory {what} while training, above what the process used before the stage built its "
        "model; other = peak − model states: activations and buffers, and under offload disk the optimizer "
        "sub-group paged in for the step (see the phases below)."
    )
    if kind == "peak_rss" and not doc["peak_rss_per_stage"]:
        out.append(
            "(This system cannot reset the peak RSS: each figure is the process's peak so far.)"
        )

    out += _phase_tables(doc)

    out += [
        "",
        "Loss per step (mean over the global batch), against single-process AdamW on the same batches",
    ]
    ref = doc["reference"]["losses"]
    steps = len(ref) if ref else len(results[0]["losses"])
    shown = list(range(steps)) if steps <= 6 else [0, 1, 2, steps - 3, steps - 2, steps - 1]
    rows = []

    def loss_row(label: list[str], losses: list[float], diff: float | None) -> list[str]:
        return [
            *label,
            *(f"{losses[i]:.5f}" for i in shown),
            "-" if diff is None else f"{diff:.1e}",
        ]

    if ref:
        rows.append(loss_row(["AdamW, 1 process", "fp32"], ref, None))
    for r in results:
        rows.append(loss_row(_stage_label(r), r["losses"], r["max_loss_diff"]))
    for name, c in doc["comparisons"].items():
        rows.append(
            loss_row([_COMPARISON_NAMES[name], c["dtype"]], c["losses"], c["max_loss_diff"])
        )
    out += _table(["run", "", *(f"step {i + 1}" for i in shown), "max |Δ|"], rows)
    if dtype == "fp32":
        out.append(
            "fp32: every stage reproduces single-process AdamW to rounding (the tests require 2e-5)."
        )
    else:
        digits = {"bf16": "about 3", "fp16": "about 4"}[dtype]
        theirs = (
            "PyTorch's engines, in bf16 too, differ from it alike."
            if dtype == "bf16"
            else "PyTorch's engines run in fp32 here (they have no loss scaler in this comparison)."
        )
        out.append(
            f"{dtype}: parameters and gradients are rounded to {dtype} ({digits} significant digits), so the "
            f"losses differ from the fp32 reference in the 3rd to 5th decimal; {theirs}"
        )
    if any(r["skipped_steps"] for r in results):
        out.append(
            "fp16: steps whose gradients overflowed were skipped and the loss scale halved (dynamic loss scaling)."
        )
    if chart:
        out += ["", f"Chart of memory per stage: {chart}"]
    return "\n".join(out)


def _phase_tables(doc: dict) -> list[str]:
    """Peak memory by phase, and where a step's time goes."""
    results = doc["results"]
    kind = results[0]["phase_peak_kind"]
    label = "GPU max allocated" if kind == "cuda_max_memory_allocated" else "tracked CPU bytes"
    out = ["", f"Peak memory per rank by phase of one step ({label}, the largest rank)"]
    rows = []
    for r in results:
        p = r["phase_peak_bytes"]
        note = ""
        if r["offload"] == "disk":
            note = (
                f"optimizer peak holds {_mb(r['paged_in_optimizer_peak_bytes'])} of optimizer states "
                f"paged in from disk (sub-groups of {r['sub_group_size']:,} elements)"
            )
        rows.append(
            [
                *_stage_label(r),
                *(_mb(p[k]) if k in p else "-" for k in ("forward", "backward", "optimizer")),
                _mb(p.get("comm_buffers", 0)),
                note,
            ]
        )
    out += _table(
        ["stage", "offload", "forward", "backward", "optimizer step", "comm buffers", ""], rows
    )
    if kind == "cuda_max_memory_allocated":
        out.append(
            "Each phase: torch.cuda.max_memory_allocated with the peak reset at the phase's start, "
            "above what was allocated before the stage built its model."
        )
    else:
        out.append(
            "Each phase: the bytes of live tensors at the step's start (a walk of the storages) plus "
            "the highest point of the CPU allocator's running total within the phase (the profiler's "
            "record of every allocation and free). comm buffers: the most bytes of collective "
            "buffers alive at once (gathered layers, reduce-scatter and all-gather buffers)."
        )
    out += ["", "Time per step by span (ms, mean of the steps after the first, the slowest rank)"]
    spans = [
        k for k in _SPAN_ORDER if k != "total" and any(k in r["time_breakdown_s"] for r in results)
    ]
    rows = []
    for r in results:
        t = r["time_breakdown_s"]
        rows.append(
            [
                *_stage_label(r),
                *(f"{t[k] * 1e3:,.1f}" if k in t else "-" for k in spans),
                f"{t['total'] * 1e3:,.1f}",
            ]
        )
    out += _table(["stage", "offload", *[_SPAN_NAMES.get(k, k) for k in spans], "step"], rows)
    out.append(
        "compute: forward and backward arithmetic and the Python around them (the step minus the "
        "spans); comm: the time the rank waits in each kind of collective (control: the loss and "
        "fp16's overflow flag); adam: the optimizer's arithmetic (on the CPU when offloaded); "
        "copies: host-device copies; disk: paging the optimizer states."
    )
    audits = [r["audit"] for r in results if r.get("audit")]
    if audits:
        checks = sum(a["checks"] for a in audits)
        worst = max(a["max_unexplained_bytes"] for a in audits)
        out.append(
            f"Inventory audit: {checks} walks of the live storages (after backward and after each "
            f"step), {worst:,} bytes unexplained at most: the inventory is all the rank holds."
        )
    return out


_SPAN_NAMES = {
    "comm.all_reduce": "all-reduce",
    "comm.reduce_scatter": "reduce-scatter",
    "comm.all_gather": "all-gather",
    "comm.control": "control",
}


# -- chart -------------------------------------------------------------------------------------

TERM_COLORS = {"params": "#4C72B0", "grads": "#DD8452", "optimizer": "#55A868"}


def write_chart(doc: dict, path: str | Path) -> Path:
    """The chart, by the file's suffix: SVG, the three panels of ``charts.results_svg`` (memory by
    term against the card's formula, peaks by phase, time by span); PNG (matplotlib), bars per stage
    stacked by term, the offloaded part hatched, a black tick at the card's formula."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".svg":  # all three panels, without matplotlib (see ``charts``)
        path.write_text(results_svg(doc), encoding="utf-8")
        return path
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    results = doc["results"]
    fig, ax = plt.subplots(figsize=(1.4 * len(results) + 3, 4.8))
    labels = []
    for x, r in enumerate(results):
        bottom = 0.0
        offloaded_terms = {
            item["term"] for item in r["inventory_items"] if item["tier"] != "device"
        }
        for term, color in TERM_COLORS.items():
            value = r["bytes_per_rank"][term] / 1e6
            off = term in offloaded_terms
            ax.bar(
                x,
                value,
                bottom=bottom,
                color=color,
                alpha=0.45 if off else 1.0,
                hatch="//" if off else None,
                edgecolor="white",
                label=term if x == 0 else None,
            )
            bottom += value
        ax.plot(
            [x - 0.4, x + 0.4],
            [r["formula_bytes_per_rank"] / 1e6] * 2,
            color="black",
            lw=2,
            label="card formula" if x == 0 else None,
        )
        labels.append(r["name"] + ("" if r["offload"] == "none" else f"\noffload {r['offload']}"))
    ax.set_xticks(range(len(results)), labels)
    ax.set_ylabel("model-state MB per rank")
    ax.set_title(
        f"ZeRO: memory per rank, Ψ = {doc['psi']:,}, N_d = {doc['world_size']}, {doc['dtype']}"
        "\n(hatched: offloaded off the device)",
        fontsize=10,
    )
    ax.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path
