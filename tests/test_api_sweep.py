"""Through the API, for every exam point and 1,000 seeds: exactly one correct choice, distinct
choices, and the correct value equal to an independent plain-Python computation.

The oracle below is written from the card's text (the ZeRO paper's accounting), not from the
engine or the card file's formulas: a numeric template without an oracle entry fails the sweep.
"""

import math
from fractions import Fraction as F

import pytest

SEEDS = range(1_000)

# Display units, restated here rather than imported. A question shows its choices in one unit
# of the template unit's family (MB, GB or TB; µs, ms or s), read from every choice's `unit`.
SCALE = {
    "B": F(1),
    "KB": F(10**3),
    "MB": F(10**6),
    "GB": F(10**9),
    "TB": F(10**12),
    "PB": F(10**15),
    "KiB": F(2**10),
    "MiB": F(2**20),
    "GiB": F(2**30),
    "TiB": F(2**40),
    "s": F(1),
    "ms": F(1, 1000),
    "us": F(1, 10**6),
    "x": F(1),
    "%": F(1, 100),
    "GPUs": F(1),
    "1": F(1),
}
FAMILY = {
    **{u: "bytes" for u in ("B", "KB", "MB", "GB", "TB", "PB")},
    **{u: "binary" for u in ("KiB", "MiB", "GiB", "TiB")},
    **{u: "seconds" for u in ("us", "ms", "s")},
}


def zero1(psi, n_d):
    return 2 * psi + 2 * psi + 12 * psi / n_d


def zero2(psi, n_d):
    return 2 * psi + (2 * psi + 12 * psi) / n_d


ORACLE = {
    # point 1: 16Ψ = 2Ψ fp16 params + 2Ψ fp16 grads + 12Ψ fp32 master/m/v
    "p1-total-16psi": lambda p: 16 * p["psi"],
    "p1-optimizer-states": lambda p: 12 * p["psi"],
    "p1-ddp-per-rank": lambda p: 16 * p["psi"],
    "p1-ddp-cluster-total": lambda p: 16 * p["psi"] * p["n_d"],
    "p1-gb-vs-gib": lambda p: 16 * p["psi"],
    # point 2: per-rank memory of the three stages
    "p2-zero1-per-rank": lambda p: zero1(p["psi"], p["n_d"]),
    "p2-zero2-per-rank": lambda p: zero2(p["psi"], p["n_d"]),
    "p2-zero3-per-rank": lambda p: 16 * p["psi"] / p["n_d"],
    # point 3: ZeRO-2 over ZeRO-1
    "p3-zero2-saving": lambda p: 2 * p["psi"] * (1 - F(1) / p["n_d"]),
    "p3-gradient-shard-after-rs": lambda p: 2 * p["psi"] / p["n_d"],
    "p3-zero2-comm-bytes": lambda p: 2 * p["psi"] * 2,  # 2Ψ elements of 2 bytes
    # point 4: communication
    # ZeRO-3 gathers twice and reduce-scatters on each of k micro-batches (3kΨ); DDP under
    # no_sync all-reduces once per optimizer step (2Ψ)
    "p4-comm-ratio": lambda p: 3 * p["k"] / F(2),
    "p4-zero3-comm-time": lambda p: 3 * p["psi"] * 2 / p["bw"],
    "p4-min-gpus-zero3": lambda p: math.ceil(16 * p["psi"] / p["gpu_mem"]),
    # point 5: offload
    "p5-offload-gpu-memory": lambda p: 2 * p["psi"] / p["n_d"],
    # DeepSpeed's estimator, optimizer offload under zero.Init: (12Ψ states + 4Ψ fp32 gradient
    # copy) × 1.5 buffer factor, split over the nodes
    "p5-host-ram-per-node": lambda p: 16 * p["psi"] * F(3, 2) / p["nodes"],
    "p5-pcie-time": lambda p: (2 * p["psi"] / p["n_d"] + 2 * p["psi"] / p["n_d"]) / p["pcie_bw"],
}


def decimals_of(text):
    number = text.split(" ")[0].rstrip("×%")
    return len(number.partition(".")[2])


def matches(exact, choice):
    """The displayed number is the exact value in the choice's unit, to half its last digit."""
    expected = F(exact) / SCALE[choice["unit"]]
    half = F(1, 2) / 10 ** decimals_of(choice["text"])
    return abs(F(choice["value"]).limit_denominator(10**12) - expected) <= half * F(1001, 1000)


@pytest.mark.parametrize("point", [1, 2, 3, 4, 5])
def test_every_point_over_a_thousand_seeds(client, card, point):
    auth = {"Authorization": f"Bearer {client.post('/api/v1/learners').json()['token']}"}
    slug = card.point(point).slug
    templates = {t.id: t for t in card.point(point).templates}
    seen_templates = set()
    for seed in SEEDS:
        response = client.get(
            f"/api/v1/cards/{card.id}/points/{point}/question", params={"seed": seed}
        )
        assert response.status_code == 200, response.text
        question = response.json()
        assert question["seed"] == seed and question["point"] == slug
        template = templates[question["template_id"]]
        seen_templates.add(template.id)
        choices = question["choices"]
        texts = [c["text"] for c in choices]
        ids = [c["id"] for c in choices]
        assert len(set(texts)) == len(texts) == len(set(ids)) == template.choices

        graded = client.post(
            "/api/v1/answers",
            json={
                "token": question["token"],
                "choice_id": ids[0],
                "client_answer_id": f"sweep-{point}-{seed}",
            },
            headers=auth,
        )
        assert graded.status_code == 200, graded.text
        correct_id = graded.json()["correct_choice_id"]
        assert correct_id in ids
        assert graded.json()["correct"] == (ids[0] == correct_id)

        if template.kind == "statement":
            assert all(c["value"] is None and c["unit"] is None for c in choices)
            continue
        assert template.id in ORACLE, f"no independent oracle for numeric template {template.id}"
        params = {name: F(value) for name, value in question["params"].items()}
        exact = ORACLE[template.id](params)
        units = {c["unit"] for c in choices}
        assert len(units) == 1, choices  # one unit per question
        unit = units.pop()
        assert unit == template.unit or FAMILY.get(unit, unit) == FAMILY.get(template.unit)
        values = [c["value"] for c in choices]
        correct = next(c for c in choices if c["id"] == correct_id)
        assert matches(exact, correct), (template.id, params, correct, float(exact))
        assert sum(matches(exact, c) for c in choices) == 1
        assert len(set(values)) == len(values)
    assert seen_templates == set(templates)
