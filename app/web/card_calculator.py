"""The calculator page of a card that declares one (app.domain.card_calculator): a GET form whose
fields are the card's inputs, the results rendered on the server.

It works without JavaScript; ``static/calculator.js`` only re-submits the form as inputs change.
Bad input is the same page with the form kept and a plain message per field, status 400.
"""

from __future__ import annotations

from fractions import Fraction

from fastapi import Request
from markupsafe import Markup
from starlette.responses import Response

from app.domain import card_calculator as calc
from app.domain.calculator_input import CalculatorError
from app.domain.cards import Card
from app.domain.messages import Message
from app.domain.units import format_readable
from app.web.templating import render_page

CHART_LABELS = {
    "title": Message("Memory per GPU, by term"),
    "gpu": Message("GPU"),
    # Translators: between a label and its value ("First stage: 77.9 GB").
    "colon": Message(": "),
}


def field_errors(exc: CalculatorError, lang: str) -> dict[str, str]:
    """Each field's messages, one after another, in ``lang``."""
    errors: dict[str, str] = {}
    for error in exc.errors:
        message = error.message.get(lang)
        errors[error.field] = (
            f"{errors[error.field]} {message}" if error.field in errors else message
        )
    return errors


def card_calculator_page(request: Request, card: Card, lang: str) -> Response:
    """The card's inputs → its outputs, checks and memory per GPU."""
    calculator = card.calculator
    assert calculator is not None
    query = {key: request.query_params.get(key, "") for key in request.query_params}
    values = calc.form_values(calculator, query)
    result = None
    errors: dict[str, str] = {}
    try:
        result = calc.calculate(calculator, values)
    except CalculatorError as exc:
        errors = field_errors(exc, lang)
    labels = {key: label.get(lang) for key, label in CHART_LABELS.items()}
    context = {
        "card": card,
        "calculator": calculator,
        "values": values,
        "errors": errors,
        "result": result,
        "chart": Markup(calc.memory_chart_svg(result, lang, labels)) if result else None,
        "colours": calc.term_colours(calculator.memory) if calculator.memory else {},
        "fmt_bytes": lambda value: format_readable(Fraction(value), "B", 3, lang),
    }
    return render_page(
        request,
        "card_calculator.html",
        context,
        lang=lang,
        status_code=400 if errors else 200,
    )
