"""What one demo run is: the model, the stages, the precision, the offload tier, the ranks.

Plain dataclasses without torch, so that the command line can validate its arguments (and fail
fast, with a clear message) before any process is spawned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

STAGES = (0, 1, 2, 3)
STAGE_NAMES = {0: "DDP", 1: "ZeRO-1", 2: "ZeRO-2", 3: "ZeRO-3"}
STAGE_SHARDS = {
    0: "nothing",
    1: "optimizer states",
    2: "optimizer states + gradients",
    3: "optimizer states + gradients + parameters",
}
OFFLOADS = ("none", "cpu", "disk")
DTYPES = ("bf16", "fp16", "fp32")
BACKENDS = ("auto", "gloo", "nccl")

# Bytes per element of the low-precision parameters and gradients, by training dtype. The optimizer
# always keeps fp32 master weights and both Adam moments: 4 + 4 + 4 = 12 bytes per parameter.
PARAM_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}
OPTIMIZER_BYTES = 12
# Elements of a sub-group of the optimizer step (12 bytes each when paged in from disk).
DEFAULT_SUB_GROUP_SIZE = 1 << 20


@dataclass(frozen=True)
class ModelConfig:
    """A small GPT-like model: token + position embedding, ``layers`` blocks, a final head."""

    vocab: int
    hidden: int
    layers: int
    heads: int
    seq_len: int

    def __post_init__(self) -> None:
        if min(self.vocab, self.hidden, self.layers, self.heads, self.seq_len) < 1:
            raise ValueError("model sizes must be positive")
        if self.hidden % self.heads:
            raise ValueError(f"hidden size {self.hidden} is not a multiple of {self.heads} heads")


# Presets. "tiny" has odd sizes on purpose: its layers do not divide by 3 or 4, so world sizes 3
# and 4 need padding, which the tests check. "small" is the default of the command: large enough
# that model states stand out, small enough to train in seconds on a laptop CPU.
MODEL_PRESETS = {
    "tiny": ModelConfig(vocab=67, hidden=22, layers=2, heads=2, seq_len=16),
    "small": ModelConfig(vocab=512, hidden=256, layers=4, heads=4, seq_len=64),
    "base": ModelConfig(vocab=2048, hidden=512, layers=8, heads=8, seq_len=128),
    # About 1.07B parameters: for a single large GPU, where the 16Ψ bill is measured in GB.
    "1b": ModelConfig(vocab=32000, hidden=2048, layers=20, heads=16, seq_len=512),
}


@dataclass(frozen=True)
class OptimConfig:
    """AdamW hyper-parameters, the same for the demo, the reference and PyTorch's engines."""

    lr: float = 1e-3
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.01


@dataclass(frozen=True)
class DemoConfig:
    """One run of the demo, as validated by the command line. Picklable: it travels to the ranks."""

    world_size: int
    stages: tuple[int, ...] = STAGES
    offloads: tuple[str, ...] = ("none",)
    offload_dir: str | None = None
    dtype: str = "bf16"
    steps: int = 5
    # Sequences per rank per step; the global batch is micro_batch * world_size.
    micro_batch: int = 2
    model: ModelConfig = MODEL_PRESETS["small"]
    optim: OptimConfig = field(default_factory=OptimConfig)
    backend: str = "gloo"  # resolved: "gloo" or "nccl"
    device: str = "cpu"  # "cpu" or "cuda" (one GPU per rank, the rank's local index)
    seed: int = 0
    reference: bool = True  # single-process AdamW on the same global batch
    compare: bool = True  # PyTorch's FSDP2 (fully_shard) and ZeroRedundancyOptimizer
    progress: bool = True
    timeout_s: int = 600  # how long a rank waits for the others in a collective
    threads: int | None = None  # torch threads per rank; None: the machine's cores / local ranks
    # The optimizer steps through its shard in sub-groups of this many elements (DeepSpeed's
    # sub_group_size); with --offload disk, one sub-group of states is paged in at a time.
    sub_group_size: int = DEFAULT_SUB_GROUP_SIZE
    fused_adam: bool = False  # torch's fused AdamW kernel instead of the op-by-op update
    audit: bool = True  # walk the live storages after every step (see ``audit``)
    # Overlap communication with backward (DDP's bucketed all-reduce, ZeRO-2's reduce-scatters)
    # and prefetch ZeRO-3's next all-gather; off: every collective runs when it is reached.
    overlap: bool = True
    # Gradient buckets of DDP and ZeRO-2, in elements: consecutive layers (in backward order) are
    # reduced together once they hold at least this many; 0: each layer is its own bucket.
    bucket_size: int = 0
    # Activation checkpointing of the transformer blocks: each keeps its input only, and runs
    # its forward again in backward (under ZeRO-3, with one more all-gather of its parameters).
    checkpoint_activations: bool = False
    # Micro-batches per optimizer step (gradient accumulation); each value runs every stage.
    grad_accums: tuple[int, ...] = (1,)
    phase_memory: bool = True  # measure the per-phase peaks on the first step of each stage
    # One unmeasured step of every stage first, so that one-time costs do not land on the first
    # measured stage's peak and time (off: faster, for checks that measure neither).
    warm_up: bool = True
    card_path: str = str(Path(__file__).resolve().parents[2] / "cards" / "zero-memory-offload.yaml")

    @property
    def global_batch(self) -> int:
        return self.micro_batch * self.world_size

    @property
    def param_bytes(self) -> int:
        return PARAM_BYTES[self.dtype]
