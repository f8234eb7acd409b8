"""The ZeRO card's senior questions (issue 22, section 6): peak memory under prefetch, composing
with tensor and pipeline parallelism, hybrid sharding, mixed-precision and checkpoint layouts,
gradient accumulation without sync, the overlap threshold, and offload engineering.

Golden values are worked out here by hand from the sources each template names (Megatron-LM's
distributed-optimizer table, the PyTorch FSDP2 and DCP documentation, DeepSpeed's configuration
reference and source), not from the card's formulas."""

from fractions import Fraction
from pathlib import Path

import pytest

from app.domain.cards import read_card
from app.domain.generation import candidates, generate
from app.domain.sampling import parameter_combinations

CARD_PATH = Path(__file__).resolve().parents[1] / "cards" / "zero-memory-offload.yaml"
B = 10**9  # a billion parameters
GB = 10**9  # decimal bytes
SCALE = {
    "MB": Fraction(10**6),
    "GB": Fraction(10**9),
    "TB": Fraction(10**12),
    "ms": Fraction(1, 1000),
    "s": Fraction(1),
    "1": Fraction(1),
}

SENIOR = {
    1: [
        "p1-megatron-fp32-main-grads",
        "p1-loss-scale-overflow-shards",
        "p1-dcp-checkpoint-per-rank",
    ],
    2: [
        "p2-megatron-distributed-optimizer",
        "p2-zero3-prefetch-peak",
        "p2-hsdp-per-gpu",
        "p2-oom-despite-the-estimate",
        "p2-dcp-resume-on-other-ranks",
    ],
    3: [
        "p3-no-sync-gradient-memory",
        "p3-global-norm-clipping",
        "p3-non-elementwise-optimizers",
        "p3-fsdp1-flat-vs-fsdp2-per-parameter",
    ],
    4: [
        "p4-overlap-threshold",
        "p4-pipeline-allows-only-zero1",
        "p4-zero3-divergent-hang",
        "p4-fp32-gradient-reduction-bytes",
    ],
    5: [
        "p5-cpu-adam-dram-time",
        "p5-partial-offload-ratio",
        "p5-fsdp2-cpu-offload-policy",
        "p5-nvme-bandwidth-for-optimizer",
    ],
}


@pytest.fixture(scope="module")
def card():
    return read_card(CARD_PATH)


def correct_choice(card, template_id, **params):
    """The correct choice of the first variant (seeds in order) drawn with these parameters."""
    template = card.template(template_id)
    wanted = {
        k: str(Fraction(v)) if Fraction(v).denominator != 1 else str(int(v))
        for k, v in params.items()
    }
    for seed in range(5000):
        variant = generate(card, template, seed)
        if all(variant.params[k] == v for k, v in wanted.items()):
            return variant, variant.choice(variant.correct_choice_id)
    raise AssertionError(f"no variant of {template_id} with {params}")


def assert_shows(choice, exact_base_units):
    """The correct choice shows the exact value to half its last displayed digit."""
    number = choice.text.en.split(" ")[0]
    decimals = len(number.partition(".")[2])
    expected = Fraction(exact_base_units) / SCALE[choice.unit]
    assert abs(Fraction(number) - expected) <= Fraction(1, 2) / 10**decimals, (
        choice.text.en,
        float(expected),
    )


def test_every_exam_point_gained_its_senior_questions(card):
    for number, template_ids in SENIOR.items():
        point = card.point(number)
        ids = [t.id for t in point.templates]
        # appended after the point's earlier templates, in this order
        assert ids[-len(template_ids) :] == template_ids, number
        for template_id in template_ids:
            template = card.template(template_id)
            assert len(template.pitfalls) >= 6, template_id
    assert len(card.templates()) >= 53


# --- point 1: mixed-precision layouts and checkpoints ------------------------------------------


def test_megatron_bf16_params_with_fp32_main_grads_is_18_bytes(card):
    # 2 (bf16 param) + 4 (fp32 main_grad) + 4 + 4 + 4 (fp32 master, m, v) = 18 bytes;
    # 70B: 1260 GB on every data-parallel rank, whatever N_d
    for n_d in (24, 64):
        _, choice = correct_choice(card, "p1-megatron-fp32-main-grads", psi=70 * B, n_d=n_d)
        assert choice.text.en == "1260 GB"


def test_fsdp2_dcp_checkpoint_writes_12_bytes_a_parameter_over_n_d(card):
    # fp32 sharded parameters (they are the master weights) 4 + AdamW m, v 8 = 12 bytes;
    # 70B over 8 ranks: 840 GB / 8 = 105 GB a rank; 13B over 16: 156 GB / 16 = 9.75 GB
    _, choice = correct_choice(card, "p1-dcp-checkpoint-per-rank", psi=70 * B, n_d=8)
    assert choice.text.en == "105 GB"
    _, choice = correct_choice(card, "p1-dcp-checkpoint-per-rank", psi=13 * B, n_d=16)
    assert choice.text.en == "9.75 GB"


def test_loss_scale_overflow_is_decided_by_all_ranks(card):
    template = card.template("p1-loss-scale-overflow-shards")
    key = template.answer_statement.en
    assert "max all-reduce" in key and "the job skips or takes that step together" in key
    assert {p.id for p in template.pitfalls} >= {"each-rank-decides-alone", "reduction-dilutes-inf"}


# --- point 2: per-rank memory when composed with other parallelism -----------------------------


def test_megatron_distributed_optimizer_is_6_plus_12_over_d(card):
    # 340B, t = 8, p = 4: 10.625B parameters a GPU; d = 16: 6 + 12/16 = 6.75 bytes each
    # = 71.72 GB
    _, choice = correct_choice(
        card, "p2-megatron-distributed-optimizer", psi=340 * B, tp=8, pp=4, dp=16
    )
    assert_shows(choice, Fraction(27, 4) * Fraction(340 * B, 32))
    assert choice.text.en == "71.7 GB"
    # 70B, t = 4, p = 2, d = 4: (6 + 3) × 8.75B = 78.75 GB
    _, choice = correct_choice(
        card, "p2-megatron-distributed-optimizer", psi=70 * B, tp=4, pp=2, dp=4
    )
    assert_shows(choice, Fraction(7875, 100) * GB)


def test_megatron_distributed_optimizer_layouts_fit_an_80_gb_gpu(card):
    # a layout whose model states alone exceed an 80 GB GPU could not start (405B at t = 8,
    # p = 4, d = 16 would need 85.4 GB; 70B at t = p = 2, d = 4, 157.5 GB)
    template = card.template("p2-megatron-distributed-optimizer")
    for values in parameter_combinations(template):
        per_gpu = (6 + Fraction(12) / values["dp"]) * values["psi"] / (values["tp"] * values["pp"])
        assert per_gpu <= 80 * GB, values


def test_zero3_forward_peak_holds_two_gathered_blocks(card):
    # 175B, 80 blocks, 64 ranks: 16 × 175 / 64 = 43.75 GB of shards + 2 blocks × 2.1875B × 2 bytes
    # = 8.75 GB → 52.5 GB
    _, choice = correct_choice(card, "p2-zero3-prefetch-peak", psi=175 * B, layers=80, n_d=64)
    assert choice.text.en == "52.5 GB"
    # 7B, 32 blocks, 48 ranks: 2.3333 GB + 0.875 GB = 3.2083 GB
    _, choice = correct_choice(card, "p2-zero3-prefetch-peak", psi=7 * B, layers=32, n_d=48)
    assert_shows(choice, Fraction(16 * 7 * B, 48) + Fraction(4 * 7 * B, 32))
    assert choice.text.en == "3.21 GB"


def test_hybrid_sharding_divides_by_the_shard_group_only(card):
    # 70B on 16 × 4 GPUs: 1120 GB / 16 = 70 GB (not / 64); 175B in groups of 64: 2800 GB / 64 =
    # 43.75 GB, shown at three figures as 43.8 GB (the tie goes to the even neighbour)
    _, choice = correct_choice(card, "p2-hsdp-per-gpu", psi=70 * B, shard=16, replicas=4)
    assert choice.text.en == "70.0 GB"
    _, choice = correct_choice(card, "p2-hsdp-per-gpu", psi=175 * B, shard=64, replicas=2)
    assert_shows(choice, Fraction(4375, 100) * GB)
    assert choice.text.en == "43.8 GB"
    # The group is sized so that the states fit an 80 GB GPU: 70B in groups of 8 (140 GB) and
    # 175B in groups of 8, 16 or 32 (350, 175, 87.5 GB) are not drawn; 16 of 64 combinations.
    template = card.template("p2-hsdp-per-gpu")
    combinations = list(parameter_combinations(template))
    assert len(combinations) == 48
    for values in combinations:
        assert candidates(template, values)[0].value <= 80 * GB, values


def test_oom_with_reserved_memory_is_fragmentation_and_dcp_reshards_on_load(card):
    oom = card.template("p2-oom-despite-the-estimate").answer_statement
    assert "expandable_segments:True" in oom.en and "expandable_segments:True" in oom.zh
    resume = card.template("p2-dcp-resume-on-other-ranks").answer_statement.en
    assert "global shape" in resume and "slices" in resume


# --- point 3: gradients -------------------------------------------------------------------------


def test_no_sync_holds_the_unsharded_gradient(card):
    # 70B, 16 ranks, bf16: 140 GB unsharded against an 8.75 GB shard: 131.25 GB more,
    # whatever the number of micro-batches
    for k in (2, 4):
        _, choice = correct_choice(card, "p3-no-sync-gradient-memory", psi=70 * B, n_d=16, k=k)
        assert choice.text.en == "131 GB"
    _, choice = correct_choice(card, "p3-no-sync-gradient-memory", psi=7 * B, n_d=8, k=2)
    assert_shows(choice, Fraction(1225, 100) * GB)  # 14 GB − 1.75 GB


def test_clipping_and_optimizer_keys_name_the_mechanism(card):
    clipping = card.template("p3-global-norm-clipping").answer_statement.en
    assert "squared entries" in clipping and "single scalar all-reduce" in clipping
    optimizers = card.template("p3-non-elementwise-optimizers").answer_statement.en
    assert "only that entry's gradient and moments" in optimizers
    assert "needs the whole two-dimensional weight" in optimizers


def test_fsdp1_flattens_and_fsdp2_shards_each_parameter_by_rows(card):
    key = card.template("p3-fsdp1-flat-vs-fsdp2-per-parameter").answer_statement.en
    assert "one padded flat buffer" in key and "shards each tensor on its own, row-wise" in key


# --- point 4: overlap, pipelines, hangs --------------------------------------------------------


def test_overlap_threshold_is_compute_over_effective_bandwidth(card):
    # 6TP FLOPs against 3 × 2P bytes: T = F / (0.8 B); P cancels
    # 300 TFLOP/s over 80 GB/s = 3750 tokens; 600 TFLOP/s over 20 GB/s = 30000 tokens
    # (the question asks in thousands)
    _, choice = correct_choice(card, "p4-overlap-threshold", tflops=300, bw=100 * GB)
    assert choice.text.en == "3.75"
    _, choice = correct_choice(card, "p4-overlap-threshold", tflops=600, bw=25 * GB)
    assert_shows(choice, 30)


def test_pipeline_and_hang_keys(card):
    pipeline = card.template("p4-pipeline-allows-only-zero1").answer_statement.en
    assert "reduces once" in pipeline and "per micro-batch" in pipeline
    hang = card.template("p4-zero3-divergent-hang").answer_statement.en
    assert "in lockstep" in hang


def test_fp32_gradient_reduction_costs_a_third_more(card):
    # bf16 all-gathers 2Ψ + 2Ψ, fp32 reduce-scatter 4Ψ: 8Ψ; 70B: 560 GB (all-bf16: 420 GB)
    _, choice = correct_choice(card, "p4-fp32-gradient-reduction-bytes", psi=70 * B)
    assert choice.text.en == "560 GB"
    _, choice = correct_choice(card, "p4-fp32-gradient-reduction-bytes", psi=13 * B)
    assert choice.text.en == "104 GB"


# --- point 5: offload engineering -------------------------------------------------------------


def test_cpu_adam_streams_28_bytes_a_parameter(card):
    # read g, w, m, v (16 bytes), write w, m, v (12 bytes)
    # 13B on 3 nodes at 150 GB/s: 121.3 GB / 150 GB/s = 0.809 s
    _, choice = correct_choice(card, "p5-cpu-adam-dram-time", psi=13 * B, nodes=3, bw=150 * GB)
    assert choice.text.en == "0.809 s"
    # 175B on 24 nodes at 300 GB/s: 204.2 GB / 300 GB/s = 0.681 s
    _, choice = correct_choice(card, "p5-cpu-adam-dram-time", psi=175 * B, nodes=24, bw=300 * GB)
    assert_shows(choice, Fraction(28 * 175 * B, 24 * 300 * GB))


def test_partial_offload_ratio_is_the_share_sent_to_the_cpu(card):
    # DeepSpeed ZeRO-3 with offload_optimizer (stage3.py): the fp16 parameter shard stays on the
    # GPU, reduced gradient partitions go to a host buffer, and the share 1 - ratio updated on the
    # GPU keeps master weights, m, v and an fp32 gradient there, 4 + 4 + 4 + 4 = 16 bytes.
    # 70B on 16 GPUs, ratio 0.7: 140 GB / 16 = 8.75 GB + 0.3 × 1120 GB / 16 = 21 GB → 29.75 GB,
    # shown at three figures as 29.8 GB (the tie goes to the even neighbour)
    _, choice = correct_choice(
        card, "p5-partial-offload-ratio", psi=70 * B, n_d=16, ratio=Fraction(7, 10)
    )
    assert_shows(choice, Fraction(2975, 100) * GB)
    assert choice.text.en == "29.8 GB"
    # 7B on 4 GPUs, ratio 0.3: 14 GB / 4 = 3.5 GB + 0.7 × 112 GB / 4 = 19.6 GB → 23.1 GB
    _, choice = correct_choice(
        card, "p5-partial-offload-ratio", psi=7 * B, n_d=4, ratio=Fraction(3, 10)
    )
    assert choice.text.en == "23.1 GB"
    # The states fit an 80 GB GPU in every variant: 70B on 4 GPUs at ratio 0.3 (231 GB) or 0.7
    # (119 GB) and on 8 at 0.3 (115.5 GB) are not drawn; 70B on 4 at 0.9 (63 GB) is.
    template = card.template("p5-partial-offload-ratio")
    combinations = list(parameter_combinations(template))
    assert len(combinations) == 24
    for values in combinations:
        assert candidates(template, values)[0].value <= 80 * GB, values
    _, choice = correct_choice(
        card, "p5-partial-offload-ratio", psi=70 * B, n_d=4, ratio=Fraction(9, 10)
    )
    assert choice.text.en == "63.0 GB"


def test_fsdp2_cpu_offload_moves_the_parameters_too(card):
    key = card.template("p5-fsdp2-cpu-offload-policy").answer_statement.en
    assert "Weights, gradients and optimizer states live sharded in CPU RAM" in key
    assert "the CPU itself computes the update" in key


def test_nvme_swaps_the_optimizer_states_in_and_out(card):
    # 12Ψ of fp32 states read and written each step, split over the nodes
    # 70B on 4 nodes in 30 s: 2 × 840 GB / 4 / 30 s = 14 GB/s
    _, choice = correct_choice(card, "p5-nvme-bandwidth-for-optimizer", psi=70 * B, nodes=4, t=30)
    assert choice.text.en == "14.0 GB/s"
    # 1T on 16 nodes in 60 s: 24 TB / 16 / 60 s = 25 GB/s
    _, choice = correct_choice(
        card, "p5-nvme-bandwidth-for-optimizer", psi=1000 * B, nodes=16, t=60
    )
    assert choice.text.en == "25.0 GB/s"
    # A node's drives sustain tens of GB/s: no key asks for more than 50 GB/s (1T on 2 nodes in
    # 10 s would ask for 1.2 TB/s).
    template = card.template("p5-nvme-bandwidth-for-optimizer")
    for values in parameter_combinations(template):
        assert candidates(template, values)[0].value <= 50 * GB, values
