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
from app.domain.texts import Text
from app.practice.questions import get_card
from app.problems import NotFound
from app.web.templating import render_page
from app.web.ui import UI

router = APIRouter(include_in_schema=False)


def chart_labels(lang: str) -> dict[str, str]:
    ui = UI[lang]
    labels = {key: ui[f"calc_term_{key}"] for key in calc.TERMS}
    labels.update(
        card=ui["calc_card_bar"],
        deepspeed=ui["calc_ds_bar"],
        deepspeed_states=ui["calc_deepspeed_states"],
        gpu=ui["calc_gpu"],
        title=ui["calc_chart"],
    )
    return labels


@router.get("/cards/{card_id}/calculator")
def calculator_page(
    request: Request, card_id: str, catalog: CatalogDep, visitor: VisitorDep
) -> Response:
    """Ψ, N_d, GPU memory, stage, offload, optional activations → per-rank memory by term."""
    card = get_card(catalog, card_id)
    if not calc.supports(card):
        raise NotFound(
            Text("This card has no memory calculator.", "这张卡片没有显存计算器。"),
            code="no_calculator",
        )
    query = {key: request.query_params.get(key, "") for key in request.query_params}
    values = calc.form_values(query)
    result = None
    errors: dict[str, str] = {}
    try:
        result = calc.calculate(card, calc.parse_inputs(values))
    except calc.CalculatorError as exc:
        for error in exc.errors:
            message = error.message.get(visitor.lang)
            errors[error.field] = (
                f"{errors[error.field]} {message}" if error.field in errors else message
            )
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
