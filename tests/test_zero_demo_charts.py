"""The SVG chart from a results document (torch-free), and the bench's command line."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SVG = "{http://www.w3.org/2000/svg}"
RECORDED = ROOT / "cards" / "demo-results" / "zero-memory-offload.json"


def doc_with(results: list[dict]) -> dict:
    return {"psi": 1000, "world_size": 2, "dtype": "bf16", "device": "CPU", "results": results}


def result(name: str, **extra) -> dict:
    return {
        "stage": 0,
        "name": name,
        "offload": "none",
        "bytes_per_rank": {"params": 2e6, "grads": 2e6, "optimizer": 12e6},
        "formula_bytes_per_rank": 16e6,
        "formula": "16Ψ",
        **extra,
    }


def titles(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return [t.text or "" for t in root.iter(f"{SVG}title")]


def test_the_chart_module_imports_without_torch():
    code = "import sys, app.zero_demo.charts; print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert out.stdout.strip() == "False", out.stderr


def test_memory_phases_and_time_are_drawn_with_their_values():
    from app.zero_demo.charts import results_svg

    r = result(
        "DDP",
        phase_peak_bytes={
            "forward": 20e6,
            "backward": 24e6,
            "optimizer": 18e6,
            "comm_buffers": 1e6,
        },
        phase_peak_kind="tracked_cpu_bytes",
        time_breakdown_s={
            "compute": 0.010,
            "comm.all_reduce": 0.004,
            "adam": 0.002,
            "total": 0.016,
        },
    )
    labels = titles(results_svg(doc_with([r])))
    for needle in (
        "DDP: params 2.00 MB (on the device)",
        "DDP: optimizer 12.00 MB (on the device)",
        "DDP: card formula 16Ψ = 16.00 MB",
        "DDP: backward 24.00 MB",
        "DDP: collective buffers 1.00 MB",
        "DDP: all-reduce 4.0 ms",
        "DDP: compute 10.0 ms",
    ):
        assert needle in labels, needle
    assert not any("total" in t for t in labels)  # the total is the stack, not a span


def test_labels_are_escaped_and_bad_documents_still_give_an_svg():
    from app.zero_demo.charts import results_svg

    svg = results_svg(
        doc_with([result("<script>alert(1)</script>", bytes_per_rank={"params": "x"})])
    )
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    ET.fromstring(svg)
    for bad in ({}, {"results": "nope"}, {"results": [None, 3]}, []):
        empty = results_svg(bad)
        assert "No results recorded." in empty
        ET.fromstring(empty)


def test_the_recorded_results_give_a_chart():
    from app.zero_demo.charts import results_svg

    doc = json.loads(RECORDED.read_text())
    labels = titles(results_svg(doc))
    assert sum("card formula" in t for t in labels) == len(doc["results"])


def test_the_chart_is_narrow_with_text_a_phone_can_read():
    """360 units wide (about 1:1 on a 390 px phone), no text under 11 units, every run's label
    on its own line (never under a neighbour's), and the recorded chart is this drawing."""
    from app.zero_demo.charts import results_svg

    doc = json.loads(RECORDED.read_text())
    svg = results_svg(doc)
    root = ET.fromstring(svg)
    assert root.get("width") == "360" and root.get("viewBox", "").startswith("0 0 360 ")
    sizes = [float(t.get("font-size", "0")) for t in root.iter(f"{SVG}text")]
    assert sizes and min(sizes) >= 11
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert texts.count("ZeRO-3 (cpu)") == 3  # one row per panel
    assert svg == RECORDED.with_suffix(".svg").read_text()


# -- the bench's command line ------------------------------------------------------------------


def bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "bench/zero_demo.py", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_bench_help_is_its_own():
    out = bench("--help")
    assert out.returncode == 0
    assert out.stdout.startswith("usage: python bench/zero_demo.py [demo options]")
    assert "with and without overlap" in out.stdout and "--world-size" in out.stdout


@pytest.mark.parametrize(
    "flag", ["--json", "--chart=x.svg", "--record", "--no-chart", "--no-overlap", "--fused-adam"]
)
def test_bench_refuses_the_flags_it_would_ignore(flag):
    out = bench(flag, *(["x.json"] if flag == "--record" else []))
    assert out.returncode == 2
    name = flag.split("=")[0]
    assert f"error: argument {name}: not taken by the bench" in out.stderr
    assert "Traceback" not in out.stderr and out.stdout == ""
