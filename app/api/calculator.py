"""The card's memory calculator as JSON (public: no token needed), the same figures as its page."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Request
from pydantic import BaseModel, Field

from app.api.card_calculator import CalculatorProblemPublic, CardCalculatorPublic, evaluate
from app.api.problem_schemas import ProblemPublic
from app.deps import ApiLang, CatalogDep
from app.domain import calculator as calc
from app.domain.messages import Message
from app.practice.questions import get_card
from app.problems import InvalidInput, NotFound

router = APIRouter(tags=["calculator"])

CardId = Annotated[
    str, Path(max_length=100, description="The card's id, e.g. zero-memory-offload.")
]


def _text(description: str) -> Any:
    return Query(max_length=calc.MAX_TEXT, description=description)


class TermPublic(BaseModel):
    term: str = Field(description="params, grads, optimizer, activations or buffers.")
    gpu_bytes: float = Field(description="Bytes on each GPU.")
    cpu_bytes: float = Field(description="Bytes offloaded to CPU memory, per rank.")
    formula: str | None = Field(description="The card's named formula it is evaluated from.")
    sharded: bool = Field(description="Held as a 1/N_d shard.")


class DeepSpeedPublic(BaseModel):
    function: str
    options: str
    expression: str = Field(description="DeepSpeed's GPU figure, e.g. 2Ψ + 18Ψ/N.")
    gpu_bytes: int = Field(description="What DeepSpeed prints per GPU (it prints GiB).")
    largest_layer_bytes: int = Field(description="The 4L term (ZeRO-3), included in gpu_bytes.")
    cpu_bytes_per_node: int = Field(description="With the 1.5 buffer factor.")
    total_with_activations: int
    fits: bool


class CalculatorPublic(BaseModel):
    psi: int
    n_d: int
    gpu_memory_bytes: float = Field(description="The GPU's memory: GB × 10⁹.")
    stage: int
    offload: str
    gpus_per_node: int
    largest_layer: int = Field(description="L used for ZeRO-3's 4L term (0 when unknown).")
    terms: list[TermPublic]
    total_gpu_bytes: float
    cpu_bytes_per_rank: float
    cpu_bytes_per_node: float
    fits: bool
    headroom_bytes: float = Field(description="GPU bytes left; negative when it does not fit.")
    card_formulas: list[str] = Field(description="The card's formulas summed for the GPU.")
    card_value_bytes: float = Field(description="Their value: model states per rank.")
    consistent: bool = Field(description="The terms add up to the card's formula.")
    min_n_d: int | None = Field(description="The smallest N_d at which it fits.")
    deepspeed: DeepSpeedPublic | None = Field(description="None for plain DDP.")


PROBLEMS: dict[int | str, dict[str, Any]] = {
    400: {
        "model": CalculatorProblemPublic,
        "description": "invalid_calculator_input: an input out of range, not a number, or "
        "breaking one of the card's rules (errors: each field's message); "
        "unknown_calculator_input: a name the card's calculator does not take.",
    },
    404: {"model": ProblemPublic, "description": "Unknown card, or a card without a calculator."},
}


@router.get(
    "/cards/{card_id}/calculator",
    response_model=CalculatorPublic | CardCalculatorPublic,
    responses=PROBLEMS,
)
def calculator(
    request: Request,
    card_id: CardId,
    catalog: CatalogDep,
    lang: ApiLang,
    psi: Annotated[str | None, _text("Parameters Ψ: 70B, 7.5e9, 175000000000.")] = None,
    n_d: Annotated[str | None, _text("Data-parallel ranks N_d.")] = None,
    gpu_gb: Annotated[str | None, _text("GPU memory in decimal GB (10⁹ bytes).")] = None,
    stage: Annotated[str | None, _text("0 (plain DDP), 1, 2 or 3.")] = None,
    offload: Annotated[str | None, _text("none, optimizer or optimizer_params.")] = None,
    gpus_per_node: Annotated[
        str | None, _text("For DeepSpeed's CPU figures (default ≤ 8).")
    ] = None,
    largest_layer: Annotated[str | None, _text("Largest layer's parameters L.")] = None,
    layers: Annotated[str | None, _text("Transformer layers (activations).")] = None,
    hidden: Annotated[str | None, _text("Hidden size h (activations).")] = None,
    seq_len: Annotated[str | None, _text("Sequence length s (activations).")] = None,
    micro_batch: Annotated[str | None, _text("Micro-batch b (activations).")] = None,
    heads: Annotated[str | None, _text("Attention heads a; empty: FlashAttention.")] = None,
    checkpointing: Annotated[str | None, _text("1: full activation checkpointing.")] = None,
) -> Any:
    """A card that declares its calculator: its inputs by their names in the query (those left
    out take their defaults), its outputs, checks and memory per GPU (CardCalculatorPublic).
    Otherwise the ZeRO memory calculator (CalculatorPublic): per-rank memory by term from the
    card's formulas, DeepSpeed's estimator beside it, and whether it fits; parameters left out
    take the page's defaults (70B, 8 ranks, 80 GB, ZeRO-3)."""
    card = get_card(catalog, card_id)
    if card.calculator is not None:
        return evaluate(card, dict(request.query_params), lang)
    if not calc.supports(card):
        raise NotFound(
            Message("This card has no memory calculator."),
            code="no_calculator",
        )
    given = {
        "psi": psi,
        "n_d": n_d,
        "gpu_gb": gpu_gb,
        "stage": stage,
        "offload": offload,
        "gpus_per_node": gpus_per_node,
        "largest_layer": largest_layer,
        "layers": layers,
        "hidden": hidden,
        "seq_len": seq_len,
        "micro_batch": micro_batch,
        "heads": heads,
        "checkpointing": checkpointing,
    }
    values = {**calc.DEFAULTS, **{k: v for k, v in given.items() if v is not None}}
    try:
        result = calc.calculate(card, calc.parse_inputs(values))
    except calc.CalculatorError as exc:
        raise InvalidInput(exc.text(), code="invalid_calculator_input") from None
    return present(result)


def present(result: calc.Result) -> CalculatorPublic:
    inputs = result.inputs
    ds = result.deepspeed
    return CalculatorPublic(
        psi=inputs.psi,
        n_d=inputs.n_d,
        gpu_memory_bytes=float(inputs.gpu_bytes),
        stage=inputs.stage,
        offload=inputs.offload,
        gpus_per_node=inputs.gpus_per_node,
        largest_layer=inputs.largest_layer_used,
        terms=[
            TermPublic(
                term=term.key,
                gpu_bytes=float(term.gpu),
                cpu_bytes=float(term.cpu),
                formula=term.formula,
                sharded=term.sharded,
            )
            for term in result.terms
        ],
        total_gpu_bytes=float(result.total),
        cpu_bytes_per_rank=float(result.cpu_per_rank),
        cpu_bytes_per_node=float(result.cpu_per_node),
        fits=result.fits,
        headroom_bytes=float(result.headroom),
        card_formulas=list(result.card_formulas),
        card_value_bytes=float(result.card_value),
        consistent=result.consistent,
        min_n_d=result.min_n_d,
        deepspeed=None
        if ds is None
        else DeepSpeedPublic(
            function=ds.function,
            options=ds.options,
            expression=ds.expression,
            gpu_bytes=ds.gpu,
            largest_layer_bytes=ds.largest_layer,
            cpu_bytes_per_node=ds.cpu_per_node,
            total_with_activations=result.deepspeed_total or 0,
            fits=bool(result.deepspeed_fits),
        ),
    )
