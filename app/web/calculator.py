"""The memory calculator page of a card: a GET form, the results rendered on the server.

It works without JavaScript; ``static/calculator.js`` only re-submits the form as inputs change.
Bad input is the same page with the form kept and a plain message per field, status 400.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from markupsafe import Markup
from starlette.responses import Response

from app.deps import CatalogDep, VisitorDep
from app.domain import calculator as calc
from app.domain.messages import Message
from app.practice.questions import get_card
from app.problems import NotFound
from app.web.card_calculator import card_calculator_page, field_errors
from app.web.templating import render_page

router = APIRouter(include_in_schema=False)


TERM_LABELS = {
    "params": Message("fp16 parameters"),
    "grads": Message("fp16 gradients"),
    "optimizer": Message("fp32 optimizer states"),
    "activations": Message("Activations"),
    "buffers": Message("Buffers"),
}
CHART_LABELS = {
    "card": Message("Card's formulas"),
    "deepspeed": Message("DeepSpeed"),
    "deepspeed_states": Message("model states (DeepSpeed)"),
    "gpu": Message("GPU"),
    "title": Message("Memory per GPU, by term"),
}


def chart_labels(lang: str) -> dict[str, str]:
    return {key: TERM_LABELS[key].get(lang) for key in calc.TERMS} | {
        key: label.get(lang) for key, label in CHART_LABELS.items()
    }


@router.get("/cards/{card_id}/calculator")
def calculator_page(
    request: Request, card_id: str, catalog: CatalogDep, visitor: VisitorDep
) -> Response:
    """The calculator the card declares, else (a card with the ZeRO formulas) the memory
    calculator: Ψ, N_d, GPU memory, stage, offload, optional activations → memory by term."""
    card = get_card(catalog, card_id)
    if card.calculator is not None:  # the card declares its calculator
        return card_calculator_page(request, card, visitor.lang)
    if not calc.supports(card):
        raise NotFound(
            Message("This card has no memory calculator."),
            code="no_calculator",
        )
    query = {key: request.query_params.get(key, "") for key in request.query_params}
    values = calc.form_values(query)
    result = None
    errors: dict[str, str] = {}
    try:
        result = calc.calculate(card, calc.parse_inputs(values))
    except calc.CalculatorError as exc:
        errors = field_errors(exc, visitor.lang)
    context = {
        "card": card,
        "values": values,
        "errors": errors,
        "result": result,
        "chart": Markup(calc.stacked_bar_svg(result, chart_labels(visitor.lang)))
        if result is not None
        else None,
        "fmt_bytes": calc.format_bytes,
        "fmt_gib": calc.format_gib,
        "stages": calc.STAGES,
        "offloads": calc.OFFLOADS,
        "terms": calc.TERMS,
    }
    return render_page(
        request,
        "calculator.html",
        context,
        lang=visitor.lang,
        status_code=400 if errors else 200,
    )
