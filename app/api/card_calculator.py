"""The calculator a card declares, as JSON: the same figures as its page (app.domain.card_calculator).

Inputs are the query's parameters by the card's names (``?s=4096&t=8&sp=on``); a name the card does
not declare is refused, a name left out takes its default. Bad input is a 400 problem document
listing a message per field (``errors``), in the requested language.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, Field

from app.api.problem_schemas import ProblemPublic
from app.domain import card_calculator as calc
from app.domain.calculator_input import CalculatorError, listed
from app.domain.cards import Card
from app.domain.messages import Message
from app.domain.texts import Text
from app.problems import InvalidInput


class CalculatorFieldProblemPublic(BaseModel):
    field: str = Field(description="The input at fault (its query parameter), or card.")
    detail: str = Field(description="What is wrong with it, in the requested language.")


class CalculatorProblemPublic(ProblemPublic):
    """A calculator's refused input: every message, and (a card's own calculator) each field's."""

    errors: list[CalculatorFieldProblemPublic] | None = Field(
        default=None, description="A card's own calculator: one entry per field at fault."
    )


class CalculatorChoicePublic(BaseModel):
    value: str = Field(description="What the query sends.")
    label: str


class CalculatorInputPublic(BaseModel):
    name: str = Field(description="Its query parameter.")
    label: str
    help: str | None
    kind: Literal["number", "choice"]
    text: str = Field(description="The value used, as sent (or the default).")
    value: float | None = Field(description="A number in base units (bytes for GB); null: choice.")
    unit: str = Field(description="The unit a number is typed in ('1': a plain number).")
    integer: bool
    minimum: float | None = Field(description="In the input's unit.")
    maximum: float | None = Field(description="In the input's unit.")
    choices: list[CalculatorChoicePublic]


class CalculatorOutputPublic(BaseModel):
    id: str
    label: str
    help: str | None
    value: float = Field(description="In base units: bytes, a plain ratio (0.109 for 10.9%).")
    exact: str = Field(description="The exact value, e.g. 7/64.")
    shown: str = Field(description="As the page shows it, in the requested language: 579 MB.")
    unit: str = Field(description="Its display unit: B (shown in a readable unit), %, x, 1 ...")
    formula: str = Field(description="The formula that applied, over the card's formulas.")
    card_formula: str | None = Field(description="The card's named formula it is, when one.")
    latex: str | None = Field(description="How the card writes that formula.")


class CalculatorCheckPublic(BaseModel):
    id: str
    label: str
    holds: bool
    note: str | None = Field(description="What it means when it does not hold.")


class CalculatorTermPublic(BaseModel):
    id: str = Field(description="The output stacked here.")
    label: str
    bytes: float


class CalculatorBarPublic(BaseModel):
    label: str
    terms: list[CalculatorTermPublic]
    total_bytes: float
    capacity_bytes: float = Field(description="The GPU's memory.")
    fits: bool
    headroom_bytes: float = Field(description="Bytes left; negative when it does not fit.")


class CardCalculatorPublic(BaseModel):
    """The calculator a card declares, evaluated."""

    card_id: str
    title: str
    intro: str | None
    inputs: list[CalculatorInputPublic]
    outputs: list[CalculatorOutputPublic]
    checks: list[CalculatorCheckPublic]
    memory_title: str | None
    memory: list[CalculatorBarPublic] = Field(description="Per GPU, against its memory.")


def refused(exc: CalculatorError, lang: str) -> InvalidInput:
    return InvalidInput(
        exc.text(),
        code="invalid_calculator_input",
        members={"errors": [{"field": e.field, "detail": e.message.get(lang)} for e in exc.errors]},
    )


def evaluate(card: Card, query: Mapping[str, str], lang: str) -> CardCalculatorPublic:
    """The card's calculator on ``query`` (names left out take their defaults)."""
    calculator = card.calculator
    assert calculator is not None
    unknown = calc.unknown_names(calculator, query)
    if unknown:
        raise InvalidInput(
            Message(
                "Unknown input %(names)s: this calculator takes %(known)s.",
                names=", ".join(unknown[:5]),
                known=listed([Text.verbatim(name) for name in calculator.names]),
            ),
            code="unknown_calculator_input",
        )
    values = calc.form_values(calculator, query)
    try:
        result = calc.calculate(calculator, values)
    except CalculatorError as exc:
        raise refused(exc, lang) from None
    return present(card, result, values, lang)


def present(
    card: Card, result: calc.Result, values: Mapping[str, str], lang: str
) -> CardCalculatorPublic:
    calculator = result.calculator

    def text(value: Text | None) -> str | None:
        return value.get(lang) if value is not None else None

    def latex(case: calc.Case) -> str | None:
        if case.card_formula is not None:
            return card.formulas[case.card_formula].latex
        return case.latex

    return CardCalculatorPublic(
        card_id=card.id,
        title=calculator.title.get(lang),
        intro=text(calculator.intro),
        inputs=[
            CalculatorInputPublic(
                name=spec.name,
                label=spec.label.get(lang),
                help=text(spec.help),
                kind="choice" if spec.is_choice else "number",
                text=values[spec.name],
                value=None if spec.is_choice else float(result.inputs.numbers[spec.name]),
                unit=spec.unit,
                integer=spec.integer,
                minimum=None if spec.is_choice else float(spec.low),
                maximum=None if spec.is_choice else float(spec.high),
                choices=[
                    CalculatorChoicePublic(value=c.value, label=c.label.get(lang))
                    for c in spec.choices
                ],
            )
            for spec in calculator.inputs
        ],
        outputs=[
            CalculatorOutputPublic(
                id=item.output.id,
                label=item.output.label.get(lang),
                help=text(item.output.help),
                value=float(item.value),
                exact=str(item.value),
                shown=item.shown(lang),
                unit=item.output.unit,
                formula=item.case.formula.text,
                card_formula=item.case.card_formula,
                latex=latex(item.case),
            )
            for item in result.outputs
        ],
        checks=[
            CalculatorCheckPublic(
                id=item.check.id,
                label=item.check.label.get(lang),
                holds=item.holds,
                note=None if item.holds else text(item.check.failed),
            )
            for item in result.checks
        ],
        memory_title=text(calculator.memory.title) if calculator.memory else None,
        memory=[
            CalculatorBarPublic(
                label=bar.bar.label.get(lang),
                terms=[
                    CalculatorTermPublic(
                        id=term.output.id,
                        label=term.output.label.get(lang),
                        bytes=float(term.value),
                    )
                    for term in bar.terms
                ],
                total_bytes=float(bar.total),
                capacity_bytes=float(bar.capacity),
                fits=bar.fits,
                headroom_bytes=float(bar.headroom),
            )
            for bar in result.bars
        ],
    )
