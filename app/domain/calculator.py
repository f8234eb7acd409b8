"""The memory calculator of a card page: per-rank GPU memory by term for a ZeRO configuration.

Inputs: Ψ (parameters), N_d (data-parallel ranks), the GPU's memory in **decimal GB** (10⁹ bytes,
as the card and the ZeRO paper count; ``nvidia-smi`` prints MiB, DeepSpeed prints GiB under a "GB"
label), the ZeRO stage (0 = plain DDP, 1, 2, 3), offload (none / optimizer / optimizer and
parameters) and, optionally, a transformer's shape for the activations.

Where the figures come from:

* **Model states** (fp16 parameters, fp16 gradients, fp32 optimizer states) are the card's own
  named formulas, the ones its questions are generated and graded with: each term is
  ``params_fp16``, ``grads_fp16`` or ``optimizer_fp32`` evaluated by the card's formula engine,
  held whole or as a 1/N_d shard according to what the stage partitions (ZeRO-1 the optimizer
  states, ZeRO-2 also the gradients, ZeRO-3 also the parameters). The card's per-rank total beside
  it is the stage's named formula itself (``ddp``, ``zero1``, ``zero2``, ``zero3``, ``offload_gpu``
  for ZeRO-3 with optimizer offload, ``params_fp16`` for ZeRO-Offload on ZeRO-2), and the two are
  checked against each other (:attr:`Result.consistent`). Nothing here restates 16Ψ.
* **Offload** moves the fp32 optimizer states to CPU memory, with the gradient shard where the
  gradients are partitioned (stages 2 and 3: ZeRO-Offload, Ren et al. 2021, streams them to the
  CPU Adam). At stage 1 the full fp16 gradients exist on the GPU until they are reduced, so they
  stay. Offloading the parameters too (ZeRO-Infinity) needs ZeRO-3 (DeepSpeed's ``offload_param``
  is valid with stage 3 only) and leaves only the layers in flight on the GPU.
* **Activations** (the card has no formula for them) follow Korthikanti et al. 2022, "Reducing
  Activation Recomputation in Large Transformer Models" (arXiv 2205.05198), Section 4.1, without
  tensor or sequence parallelism, 16-bit activations: one transformer layer stores
  ``s·b·h·(34 + 5·a·s/h) = 34·s·b·h + 5·a·s²·b`` bytes (s sequence length, b micro-batch, h
  hidden size, a attention heads). The ``5·a·s²·b`` part is the attention scores, softmax and
  dropout; FlashAttention never stores them, so it is counted only when the number of heads is
  given. With full activation checkpointing a layer keeps only its input, ``2·s·b·h`` bytes
  (the paper's Table 2, "full recomputation": ``2·s·b·h·L`` in all), and the backward pass
  rebuilds one layer at a time, so one layer's full activations are added once. Activations are
  per rank: data parallelism splits the batch, not a micro-batch's activations. Left out, as in
  the paper: the embedding output, the logits and the loss.
* **Buffers**: the card's 16Ψ counts none (it is a floor). ZeRO-3 holds the layer it has gathered
  and that layer's gradient; this takes DeepSpeed's figure for it, 4 × the largest layer's
  parameters. Gradient buckets, the CUDA/NCCL context and fragmentation are not counted.
* **DeepSpeed's estimator**, for comparison, is ``estimate_zero2_model_states_mem_needs`` (stages
  1 and 2 share it: DeepSpeed has none for ZeRO-1 alone, and none for plain DDP) and
  ``estimate_zero3_model_states_mem_needs`` (with ``zero_init``, as ``zero.Init`` builds the
  model) from ``deepspeed/runtime/zero/stage_1_and_2.py`` and ``stage3.py``:

  ============================  =====================  =====================================
  configuration                 GPU per rank           CPU per node (× the 1.5 buffer factor)
  ============================  =====================  =====================================
  ZeRO-1/2                      2Ψ + 18Ψ/N             4Ψ · GPUs per node · 1.5
  ZeRO-1/2, optimizer offload   2Ψ                     Ψ · max(4N, 16) · 1.5
  ZeRO-3                        4L + 18Ψ/N             4L · GPUs per node · 1.5
  ZeRO-3, optimizer offload     4L + 2Ψ/N              16Ψ / nodes · 1.5
  ZeRO-3, optimizer + params    4L                     18Ψ / nodes · 1.5
  ============================  =====================  =====================================

  where 18 = 2 fp16 gradients + 4 fp32 gradients + 4 fp32 parameters + 8 Adam moments (DeepSpeed's
  comment; versions before 2024 used 4Ψ + 16Ψ/N), L is the largest layer's parameter count and N
  the number of GPUs. These are computed as DeepSpeed computes them, in floats truncated with
  ``int()``, so that they match its figures to the byte (everything else here is exact).

Everything is exact (:class:`~fractions.Fraction` bytes). Bad input raises :class:`CalculatorError`
with a message per field from the catalogs (:class:`~.messages.Message`, shown in the reader's
language); nothing else is raised for any text input.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from html import escape
from typing import Literal

from .calculator_input import MAX_TEXT as MAX_TEXT
from .calculator_input import CalculatorError as CalculatorError
from .calculator_input import FieldError as FieldError
from .calculator_input import FormReader, capacity_marker, chart_start, group_digits, listed
from .cards import Card
from .messages import Message
from .texts import Text
from .units import format_number, significant_decimals

GB = 10**9
GIB = 2**30

Offload = Literal["none", "optimizer", "optimizer_params"]
OFFLOADS: tuple[Offload, ...] = ("none", "optimizer", "optimizer_params")
STAGES = (0, 1, 2, 3)
TERMS = ("params", "grads", "optimizer", "activations", "buffers")
MODEL_STATE_TERMS = ("params", "grads", "optimizer")

# The card's named formulas for the three model-state terms (one full copy each).
TERM_FORMULAS = {"params": "params_fp16", "grads": "grads_fp16", "optimizer": "optimizer_fp32"}
# The card's per-rank formula for each configuration: their sum is the GPU's model states.
STAGE_FORMULAS: dict[tuple[int, Offload], tuple[str, ...]] = {
    (0, "none"): ("ddp",),
    (1, "none"): ("zero1",),
    (2, "none"): ("zero2",),
    (3, "none"): ("zero3",),
    (1, "optimizer"): ("params_fp16", "grads_fp16"),
    (2, "optimizer"): ("params_fp16",),
    (3, "optimizer"): ("offload_gpu",),
    (3, "optimizer_params"): (),
}
REQUIRED_FORMULAS = frozenset(TERM_FORMULAS.values()) | {
    name for names in STAGE_FORMULAS.values() for name in names
}
# Which terms each stage partitions over the N_d ranks.
SHARDED = {
    0: frozenset(),
    1: frozenset({"optimizer"}),
    2: frozenset({"optimizer", "grads"}),
    3: frozenset({"optimizer", "grads", "params"}),
}

# Input bounds.
MIN_PSI, MAX_PSI = 1, 10**14
MAX_N_D = 2**20
MAX_GPUS_PER_NODE = 64
MAX_GPU_GB = 10_000
MAX_LAYERS = 10_000
MAX_HIDDEN = 2**20
MAX_SEQ = 10 * 2**20
MAX_MICRO_BATCH = 65_536
DEFAULT_GPUS_PER_NODE = 8
# DeepSpeed's additional_buffer_factor (its default) on every CPU figure.
BUFFER_FACTOR = Fraction(3, 2)

FIELDS = (
    "psi",
    "n_d",
    "gpu_gb",
    "stage",
    "offload",
    "gpus_per_node",
    "largest_layer",
    "layers",
    "hidden",
    "seq_len",
    "micro_batch",
    "heads",
    "checkpointing",
)
ACTIVATION_FIELDS = ("layers", "hidden", "seq_len", "micro_batch")
# What a first visit shows: the card's running example, 70B on 8 GPUs of 80 GB, ZeRO-3.
DEFAULTS: dict[str, str] = {
    "psi": "70B",
    "n_d": "8",
    "gpu_gb": "80",
    "stage": "3",
    "offload": "none",
}

# --- inputs -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Activations:
    layers: int
    hidden: int
    seq_len: int
    micro_batch: int
    heads: int | None  # None: FlashAttention, no s² term
    checkpointing: bool


@dataclass(frozen=True)
class Inputs:
    psi: int
    n_d: int
    gpu_gb: Fraction
    stage: int
    offload: Offload
    gpus_per_node: int
    largest_layer: int | None  # as entered
    activations: Activations | None

    @property
    def gpu_bytes(self) -> Fraction:
        return self.gpu_gb * GB

    @property
    def nodes(self) -> int:
        return self.n_d // self.gpus_per_node

    @property
    def largest_layer_used(self) -> int:
        """L for DeepSpeed's 4L: as entered, else 4h² (a GPT block's h → 4h projection), else 0."""
        if self.largest_layer is not None:
            return self.largest_layer
        if self.activations is not None:
            return min(4 * self.activations.hidden**2, self.psi)
        return 0

    @property
    def largest_layer_source(self) -> Literal["entered", "hidden", "none"]:
        if self.largest_layer is not None:
            return "entered"
        return "hidden" if self.activations is not None else "none"

    def params(self) -> dict[str, Fraction]:
        """The card's formula parameters."""
        return {"psi": Fraction(self.psi), "n_d": Fraction(self.n_d)}


def is_submitted(query: Mapping[str, str]) -> bool:
    return any(name in query for name in FIELDS)


def form_values(query: Mapping[str, str]) -> dict[str, str]:
    """The form's values: the query's when it was submitted, else the defaults (texts, unparsed)."""
    source = query if is_submitted(query) else DEFAULTS
    return {name: str(source.get(name, ""))[: MAX_TEXT * 4] for name in FIELDS}


LABELS: dict[str, Text] = {
    "psi": Message("Parameters Ψ"),
    "n_d": Message("Data-parallel ranks N_d"),
    "gpu_gb": Message("GPU memory"),
    "stage": Message("ZeRO stage"),
    "offload": Message("Offload"),
    "gpus_per_node": Message("GPUs per node"),
    "largest_layer": Message("Largest layer's parameters"),
    "layers": Message("Layers"),
    "hidden": Message("Hidden size"),
    "seq_len": Message("Sequence length"),
    "micro_batch": Message("Micro-batch"),
    "heads": Message("Attention heads"),
    "checkpointing": Message("Activation checkpointing"),
}


class _LowerCase(Text):
    """A label as the middle of a sentence shows it: in lower case, where its language has case."""

    def __init__(self, label: Text) -> None:
        object.__setattr__(self, "label", label)

    @property
    def en(self) -> str:
        return self.get("en")

    @property
    def zh(self) -> str:
        return self.get("zh")

    def get(self, lang: str) -> str:
        label: Text = self.__dict__["label"]
        return label.get(lang).lower()


def parse_inputs(values: Mapping[str, str]) -> Inputs:
    """Validated inputs from the form's texts; :class:`CalculatorError` lists every problem."""
    read = FormReader(values)
    psi = read.bounded("psi", LABELS["psi"], MIN_PSI, MAX_PSI, required=True)
    n_d = read.bounded("n_d", LABELS["n_d"], 1, MAX_N_D, required=True)

    gpu_gb = read.number("gpu_gb", LABELS["gpu_gb"], whole=False)
    if gpu_gb is None:
        if not read.text("gpu_gb"):
            read.fail("gpu_gb", Message("%(label)s: required.", label=LABELS["gpu_gb"]))
    elif not 0 < gpu_gb <= MAX_GPU_GB:
        read.fail(
            "gpu_gb",
            Message("GPU memory: more than 0 and at most %(limit)s GB.", limit=f"{MAX_GPU_GB:,}"),
        )
        gpu_gb = None

    stage_text = read.text("stage")
    stage: int | None = None
    if stage_text in {"0", "1", "2", "3"}:
        stage = int(stage_text)
    else:
        read.fail("stage", Message("ZeRO stage: 0 (plain DDP), 1, 2 or 3."))

    offload_text = read.text("offload") or "none"
    offload: Offload | None = None
    for known in OFFLOADS:
        if offload_text == known:
            offload = known
    if offload is None:
        read.fail("offload", Message("Offload: none, optimizer, or optimizer and parameters."))
    elif stage is not None:
        if offload != "none" and stage == 0:
            read.fail(
                "offload",
                Message("Offload needs ZeRO (stage 1, 2 or 3): plain DDP has no offload."),
            )
        elif offload == "optimizer_params" and stage != 3:
            read.fail(
                "offload",
                Message(
                    "Offloading the parameters needs ZeRO-3 (DeepSpeed's offload_param works "
                    "with stage 3 only)."
                ),
            )

    gpus_per_node: int | None = None
    if read.text("gpus_per_node"):
        gpus_per_node = read.bounded(
            "gpus_per_node", LABELS["gpus_per_node"], 1, MAX_GPUS_PER_NODE, required=False
        )
        if gpus_per_node is not None and n_d is not None and n_d % gpus_per_node:
            read.fail(
                "gpus_per_node",
                Message(
                    "GPUs per node: %(gpus)s does not divide N_d = %(n_d)s.",
                    gpus=gpus_per_node,
                    n_d=n_d,
                ),
            )
            gpus_per_node = None
    elif n_d is not None:
        gpus_per_node = max(d for d in range(1, DEFAULT_GPUS_PER_NODE + 1) if n_d % d == 0)

    largest_layer: int | None = None
    if read.text("largest_layer"):
        largest_layer = read.bounded(
            "largest_layer", LABELS["largest_layer"], 1, MAX_PSI, required=False
        )
        if largest_layer is not None and psi is not None and largest_layer > psi:
            read.fail("largest_layer", Message("Largest layer's parameters: at most Ψ."))
            largest_layer = None

    activations = _read_activations(read)
    if read.errors:
        raise CalculatorError(read.errors)
    assert psi is not None and n_d is not None and gpu_gb is not None
    assert stage is not None and offload is not None and gpus_per_node is not None
    return Inputs(
        psi=psi,
        n_d=n_d,
        gpu_gb=gpu_gb,
        stage=stage,
        offload=offload,
        gpus_per_node=gpus_per_node,
        largest_layer=largest_layer,
        activations=activations,
    )


def _read_activations(read: FormReader) -> Activations | None:
    given = [name for name in (*ACTIVATION_FIELDS, "heads") if read.text(name)]
    checkpointing = read.text("checkpointing").lower() in {"1", "on", "true", "yes"}
    if not given:
        return None
    missing = [name for name in ACTIVATION_FIELDS if not read.text(name)]
    if missing:
        read.fail(
            missing[0],
            Message(
                "Activations need the layers, hidden size, sequence length and micro-batch: "
                "%(missing)s missing (or leave all four empty).",
                missing=listed([_LowerCase(LABELS[name]) for name in missing]),
            ),
        )
    layers = read.bounded("layers", LABELS["layers"], 1, MAX_LAYERS, required=False)
    hidden = read.bounded("hidden", LABELS["hidden"], 1, MAX_HIDDEN, required=False)
    seq_len = read.bounded("seq_len", LABELS["seq_len"], 1, MAX_SEQ, required=False)
    micro_batch = read.bounded(
        "micro_batch", LABELS["micro_batch"], 1, MAX_MICRO_BATCH, required=False
    )
    heads: int | None = None
    if read.text("heads"):
        heads = read.bounded("heads", LABELS["heads"], 1, MAX_HIDDEN, required=False)
        if heads is not None and hidden is not None and heads > hidden:
            read.fail("heads", Message("Attention heads: at most the hidden size."))
            heads = None
    if None in (layers, hidden, seq_len, micro_batch):
        return None
    assert layers and hidden and seq_len and micro_batch
    return Activations(layers, hidden, seq_len, micro_batch, heads, checkpointing)


# --- the activation estimate and DeepSpeed's estimator (no card formula for them) -------------


def layer_activation_bytes(act: Activations) -> int:
    """One transformer layer's stored activations (Korthikanti et al. 2022, Section 4.1):
    ``34·s·b·h`` plus ``5·a·s²·b`` when the attention scores are stored (heads given)."""
    s, b, h = act.seq_len, act.micro_batch, act.hidden
    scores = 5 * act.heads * s * s * b if act.heads is not None else 0
    return 34 * s * b * h + scores


def activation_bytes(act: Activations) -> int:
    """Per rank: L layers' activations, or with full checkpointing the L layer inputs (2·s·b·h
    each, the paper's Table 2) plus the one layer whose activations backward rebuilds."""
    if act.checkpointing:
        return 2 * act.seq_len * act.micro_batch * act.hidden * act.layers + layer_activation_bytes(
            act
        )
    return act.layers * layer_activation_bytes(act)


@dataclass(frozen=True)
class DeepSpeedEstimate:
    function: str  # DeepSpeed's function
    options: str  # its options, as its table prints them
    expression: str  # the GPU figure's formula
    model_states: int  # GPU bytes per rank without the largest-layer term
    largest_layer: int  # the 4L term (ZeRO-3), bytes
    cpu_per_node: int  # CPU bytes per node, with the 1.5 buffer factor

    @property
    def gpu(self) -> int:
        """What DeepSpeed prints "per GPU" (model states and 4L)."""
        return self.model_states + self.largest_layer


def deepspeed_estimate(inputs: Inputs) -> DeepSpeedEstimate | None:
    """DeepSpeed's own figures for this configuration (None for plain DDP: it has none).

    Computed the way DeepSpeed computes them, term by term in the same order, in floats and
    truncated with ``int()``, so that they are DeepSpeed's to the byte (its ``1 / num_nodes`` is
    a float: 16 × 1,000,001 × (1/3) × 1.5 gives 8,000,007, not 8,000,008).
    """
    total_params, per_node, num_nodes = inputs.psi, inputs.gpus_per_node, inputs.nodes
    total_gpus = num_nodes * per_node
    factor = float(BUFFER_FACTOR)
    if inputs.stage == 0:
        return None
    if inputs.stage in (1, 2):
        function = "estimate_zero2_model_states_mem_needs"
        if inputs.offload == "optimizer":
            cpu_mem = total_params * max(4 * total_gpus, 16) * factor
            return DeepSpeedEstimate(
                function, "offload_optimizer=cpu", "2Ψ", 2 * total_params, 0, int(cpu_mem)
            )
        gpu_mem = 2 * total_params + int(18 * total_params / total_gpus)
        cpu_mem = total_params * 4 * per_node * factor
        return DeepSpeedEstimate(
            function, "offload_optimizer=none", "2Ψ + 18Ψ/N", gpu_mem, 0, int(cpu_mem)
        )
    function = "estimate_zero3_model_states_mem_needs"
    largest = inputs.largest_layer_used
    largest_layer_memory = 4 * largest
    gpus_factor = 1 / num_nodes
    if inputs.offload == "optimizer_params":
        cpu_mem = total_params * 18 * gpus_factor * factor
        options = "offload_param=cpu, offload_optimizer=cpu, zero_init=1"
        return DeepSpeedEstimate(function, options, "4L", 0, largest_layer_memory, int(cpu_mem))
    if inputs.offload == "optimizer":
        cpu_mem = total_params * 16 * gpus_factor * factor
        options = "offload_param=none, offload_optimizer=cpu, zero_init=1"
        states = int(2 * total_params / total_gpus)
        return DeepSpeedEstimate(
            function, options, "4L + 2Ψ/N", states, largest_layer_memory, int(cpu_mem)
        )
    cpu_mem = largest * 4 * per_node * factor
    options = "offload_param=none, offload_optimizer=none, zero_init=1"
    states = int(18 * total_params / total_gpus)
    return DeepSpeedEstimate(
        function, options, "4L + 18Ψ/N", states, largest_layer_memory, int(cpu_mem)
    )


# --- the result -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Term:
    key: str  # one of TERMS
    gpu: Fraction  # bytes on each GPU
    cpu: Fraction  # bytes in CPU memory per rank (offloaded)
    formula: str | None  # the card's named formula it comes from, when it does
    sharded: bool = False  # held as a 1/N_d shard


@dataclass(frozen=True)
class Result:
    inputs: Inputs
    terms: tuple[Term, ...]
    card_formulas: tuple[str, ...]  # the card's named formulas summed for the GPU model states
    card_value: Fraction  # their value: the card's per-rank model states
    deepspeed: DeepSpeedEstimate | None
    min_n_d: int | None  # the smallest N_d at which this configuration fits, None if none does

    def term(self, key: str) -> Term:
        return next(term for term in self.terms if term.key == key)

    @property
    def model_states(self) -> Fraction:
        return sum((self.term(key).gpu for key in MODEL_STATE_TERMS), Fraction(0))

    @property
    def consistent(self) -> bool:
        """The terms add up to the card's own per-rank formula."""
        return self.model_states == self.card_value

    @property
    def activations(self) -> Fraction:
        return self.term("activations").gpu

    @property
    def total(self) -> Fraction:
        return sum((term.gpu for term in self.terms), Fraction(0))

    @property
    def cpu_per_rank(self) -> Fraction:
        return sum((term.cpu for term in self.terms), Fraction(0))

    @property
    def cpu_per_node(self) -> Fraction:
        return self.cpu_per_rank * self.inputs.gpus_per_node

    @property
    def fits(self) -> bool:
        return self.total <= self.inputs.gpu_bytes

    @property
    def headroom(self) -> Fraction:
        """GPU bytes left (negative: missing)."""
        return self.inputs.gpu_bytes - self.total

    @property
    def deepspeed_total(self) -> int | None:
        """DeepSpeed's GPU figure plus the same activations."""
        if self.deepspeed is None:
            return None
        return self.deepspeed.gpu + int(self.activations)

    @property
    def deepspeed_fits(self) -> bool | None:
        total = self.deepspeed_total
        return None if total is None else total <= self.inputs.gpu_bytes


def supports(card: Card) -> bool:
    """Whether the card has the named formulas the calculator evaluates."""
    return REQUIRED_FORMULAS <= set(card.formulas)


def has_calculator(card: Card) -> bool:
    """Whether the card has a calculator page: the one it declares, or this memory calculator."""
    return card.calculator is not None or supports(card)


def _card_terms(card: Card, inputs: Inputs, n_d: int) -> tuple[tuple[Term, ...], Fraction]:
    params = {"psi": Fraction(inputs.psi), "n_d": Fraction(n_d)}
    sharded = SHARDED[inputs.stage]
    offloaded = set()
    if inputs.offload != "none":
        offloaded.add("optimizer")
        if inputs.stage >= 2:
            offloaded.add("grads")
    if inputs.offload == "optimizer_params":
        offloaded.add("params")
    terms = []
    for key in MODEL_STATE_TERMS:
        name = TERM_FORMULAS[key]
        value = card.formulas[name].evaluate(params)
        if key in sharded:
            value = value / n_d
        on_gpu = key not in offloaded
        terms.append(
            Term(
                key,
                value if on_gpu else Fraction(0),
                Fraction(0) if on_gpu else value,
                name,
                key in sharded,
            )
        )
    acts = Fraction(activation_bytes(inputs.activations)) if inputs.activations else Fraction(0)
    terms.append(Term("activations", acts, Fraction(0), None))
    buffers = Fraction(4 * inputs.largest_layer_used) if inputs.stage == 3 else Fraction(0)
    terms.append(Term("buffers", buffers, Fraction(0), None))
    card_value = sum(
        (
            card.formulas[name].evaluate(params)
            for name in STAGE_FORMULAS[(inputs.stage, inputs.offload)]
        ),
        Fraction(0),
    )
    return tuple(terms), card_value


def _min_n_d(card: Card, inputs: Inputs) -> int | None:
    """The smallest N_d (up to MAX_N_D) at which the card's total fits; the total never grows with
    N_d, so a binary search over the same evaluation finds it."""

    def fits(n_d: int) -> bool:
        terms, _ = _card_terms(card, inputs, n_d)
        return sum((t.gpu for t in terms), Fraction(0)) <= inputs.gpu_bytes

    if not fits(MAX_N_D):
        return None
    low, high = 1, MAX_N_D
    while low < high:
        middle = (low + high) // 2
        if fits(middle):
            high = middle
        else:
            low = middle + 1
    return low


def calculate(card: Card, inputs: Inputs) -> Result:
    """Per-rank memory by term from the card's formulas, DeepSpeed's figure, fits or not."""
    if not supports(card):
        missing = ", ".join(sorted(REQUIRED_FORMULAS - set(card.formulas)))
        raise CalculatorError(
            [
                FieldError(
                    "card",
                    Message(
                        "This card has no memory calculator (it lacks %(formulas)s).",
                        formulas=missing,
                    ),
                )
            ]
        )
    terms, card_value = _card_terms(card, inputs, inputs.n_d)
    return Result(
        inputs=inputs,
        terms=terms,
        card_formulas=STAGE_FORMULAS[(inputs.stage, inputs.offload)],
        card_value=card_value,
        deepspeed=deepspeed_estimate(inputs),
        min_n_d=_min_n_d(card, inputs),
    )


# --- display ----------------------------------------------------------------------------------


def format_bytes(
    value: Fraction | int | float, decimals: int = 2, *, figures: int | None = None
) -> str:
    """Bytes in decimal units, GB at most (the card's unit, 10^9 bytes), the one byte formatter
    of the app: to ``decimals`` places ('1,120 GB', '201.25 GB', '40.62 MB': the calculator), or
    to ``figures`` significant figures when given ('55 MB', '4.5 MB': the pages' ``bytes``
    filter); rounded exactly, half to even, trailing zeros dropped, thousands grouped; whole
    bytes below 1 KB ('0 B', '512 B'). Binary limits ('4 MiB') are app.errors.binary_size's."""
    value = Fraction(value)
    for unit, scale in (("GB", GB), ("MB", 10**6), ("KB", 10**3)):
        if abs(value) >= scale:
            scaled = value / scale
            places = decimals if figures is None else significant_decimals(scaled, figures)
            return f"{group_digits(format_number(scaled, places))} {unit}"
    return f"{group_digits(format_number(value, 0))} B"


def format_gib(value: Fraction | int) -> str:
    """Binary GiB to two decimals, as DeepSpeed prints them (under a "GB" label)."""
    return f"{group_digits(format_number(Fraction(value) / GIB, 2))} GiB"


SVG_COLOURS = {
    "params": "#1f5fbf",
    "grads": "#8a5cc7",
    "optimizer": "#d9822b",
    "activations": "#2f9e5b",
    "buffers": "#8a8f96",
    "deepspeed": "#2a8c9c",
}


def stacked_bar_svg(result: Result, labels: Mapping[str, str]) -> str:
    """Stacked horizontal bars of the per-rank GPU memory, the card's count and DeepSpeed's, with
    the GPU's capacity as a dashed line. ``labels``: ``card``, ``deepspeed``, ``gpu``, ``title``,
    ``deepspeed_states`` and one per term. Every text is escaped; no script, no style attribute.
    """
    width, left, right = 640, 170, 20
    bar_h, gap, top = 34, 18, 34
    rows: list[tuple[str, list[tuple[str, Fraction]]]] = [
        (labels["card"], [(term.key, term.gpu) for term in result.terms])
    ]
    ds = result.deepspeed
    if ds is not None:
        rows.append(
            (
                labels["deepspeed"],
                [
                    ("deepspeed", Fraction(ds.model_states)),
                    ("activations", result.activations),
                    ("buffers", Fraction(ds.largest_layer)),
                ],
            )
        )
    capacity = result.inputs.gpu_bytes
    largest = max([capacity, *(sum((v for _, v in parts), Fraction(0)) for _, parts in rows)])
    scale = Fraction(width - left - right) / (largest * Fraction(21, 20))
    shown = {key for _, parts in rows for key, value in parts if value > 0}
    legend_keys = [key for key in (*TERMS, "deepspeed") if key in shown]
    legend_rows = (len(legend_keys) + 2) // 3
    height = top + len(rows) * (bar_h + gap) + 10 + legend_rows * 24 + 8

    def x(value: Fraction) -> str:
        return f"{float(value * scale):.2f}"

    title = labels["title"]
    out = [chart_start(width, height, title)]
    for index, (name, parts) in enumerate(rows):
        y = top + index * (bar_h + gap)
        total = sum((v for _, v in parts), Fraction(0))
        # The row's name and its total at the left, clear of the bars and the capacity line.
        out.append(
            f'<text x="{left - 8}" y="{y + bar_h / 2 - 3:.0f}" text-anchor="end" '
            f'class="calc-label" fill="currentColor" font-size="15">{escape(name)}</text>'
            f'<text x="{left - 8}" y="{y + bar_h / 2 + 13:.0f}" text-anchor="end" '
            f'fill="currentColor" font-size="15" font-weight="700">'
            f"{escape(format_bytes(total))}</text>"
        )
        offset = Fraction(0)
        for key, value in parts:
            if value <= 0:
                continue
            label = labels.get("deepspeed_states" if key == "deepspeed" else key, key)
            out.append(
                f'<rect x="{float(left + offset * scale):.2f}" y="{y}" width="{x(value)}" '
                f'height="{bar_h}" fill="{SVG_COLOURS[key]}" class="calc-{key}">'
                f"<title>{escape(label)}: {escape(format_bytes(value))}</title></rect>"
            )
            offset += value
    line_x = float(left + capacity * scale)
    bottom = top + len(rows) * (bar_h + gap) - gap + 8
    gpu = f"{labels['gpu']} {format_bytes(capacity)}"
    out.append(capacity_marker(line_x, top - 22, bottom, top - 20, width, gpu))
    legend_top = bottom + 14
    for index, key in enumerate(legend_keys):
        column, row = index % 3, index // 3
        lx, ly = 10 + column * 210, legend_top + row * 24
        label = labels.get("deepspeed_states" if key == "deepspeed" else key, key)
        out.append(
            f'<rect x="{lx}" y="{ly}" width="14" height="14" fill="{SVG_COLOURS[key]}" '
            f'class="calc-{key}"/>'
            f'<text x="{lx + 20}" y="{ly + 12}" font-size="14" fill="currentColor">'
            f"{escape(label)}</text>"
        )
    out.append("</svg>")
    return "".join(out)
