"""A calculator a card declares: its ``calculator:`` section (cards/README.md), compiled with the
rest of the card by :mod:`app.domain.cards`, run here on a form's values.

The card says everything: its **inputs** (a name its formulas use, a label and help in both
languages, a default, whole or not, bounds, the unit a number is typed in, or a list of choices),
its **outputs** (each one of the card's named formulas or a small formula over them, the inputs
and the outputs before it; an output may hold *cases*, the formula that applies under some
choices), its **rules** (what the inputs must satisfy together, e.g. t·p divides the GPU count:
a broken rule is a message on its field, like a number out of range), its **checks** (verdicts
shown with the results, e.g. m ≥ p) and its **memory** bars (outputs stacked per GPU against a
GPU-memory input: fits or not). Nothing here knows any card.

Safety: the formulas are card data, compiled by the safe formula engine when the card loads.
What a person types is read as a number only (:func:`~app.domain.calculator_input.read_number`)
and bounded by the card's limits before any formula sees it; every failure is a
:class:`~app.domain.calculator_input.CalculatorError` with a message per field.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from html import escape

from .bilingual import Text
from .calculator_input import (
    MAX_TEXT,
    CalculatorError,
    FieldError,
    FormReader,
    capacity_marker,
    chart_start,
    listed,
)
from .formulas import Constraint, Formula, FormulaError
from .messages import Message
from .units import format_readable, get_unit

# What the form of the page and the query of the API never use as an input's name.
RESERVED_NAMES = frozenset({"lang"})
# Each output's cases are checked over every combination of the choices they name.
MAX_CASE_COMBINATIONS = 4096


# --- the calculator as the card declares it ---------------------------------------------------


@dataclass(frozen=True, eq=False)
class Choice:
    value: str  # what the form and the API send: none, selective, full ...
    label: Text


@dataclass(frozen=True, eq=False)
class Input:
    """A number typed in ``unit`` (``1``: a plain number) within ``low``..``high``, or one of
    ``choices``."""

    name: str
    label: Text
    help: Text | None
    default: str  # the text the form shows first
    unit: str = "1"
    integer: bool = False
    low: Fraction = Fraction(0)
    high: Fraction = Fraction(0)
    choices: tuple[Choice, ...] = ()

    @property
    def is_choice(self) -> bool:
        return bool(self.choices)

    def choice(self, value: str) -> Choice | None:
        return next((c for c in self.choices if c.value == value), None)


When = Mapping[str, frozenset[str]]


def applies(when: When, chosen: Mapping[str, str]) -> bool:
    """Whether every choice input named in ``when`` has one of its listed values."""
    return all(chosen.get(name) in values for name, values in when.items())


@dataclass(frozen=True, eq=False)
class Case:
    """One formula of an output and the choices under which it applies (none: always)."""

    formula: Formula
    when: When = dataclasses.field(default_factory=dict)
    card_formula: str | None = None  # the card's named formula it is, when it is one alone
    latex: str | None = None  # how the card writes it, when it is not one of its formulas


@dataclass(frozen=True, eq=False)
class Output:
    id: str
    label: Text
    help: Text | None
    unit: str
    figures: int
    cases: tuple[Case, ...]  # the first that applies is used

    def case(self, chosen: Mapping[str, str]) -> Case:
        return next(c for c in self.cases if applies(c.when, chosen))


@dataclass(frozen=True, eq=False)
class Rule:
    """What the inputs must satisfy together; broken, ``message`` is shown at ``field``."""

    field: str
    condition: Constraint
    message: Text
    when: When = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class Check:
    """A verdict shown with the results; ``failed`` says what it means when it does not hold."""

    id: str
    label: Text
    condition: Constraint
    failed: Text | None = None
    when: When = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class MemoryBar:
    label: Text
    terms: tuple[str, ...]  # output ids, in bytes, stacked


@dataclass(frozen=True, eq=False)
class Memory:
    """Memory per GPU: each bar's terms stacked against the GPU's memory (an input)."""

    title: Text
    capacity: str  # the input holding the GPU's memory
    bars: tuple[MemoryBar, ...]


@dataclass(frozen=True, eq=False)
class Calculator:
    title: Text
    intro: Text | None
    inputs: tuple[Input, ...]
    outputs: tuple[Output, ...]
    rules: tuple[Rule, ...] = ()
    checks: tuple[Check, ...] = ()
    memory: Memory | None = None
    sources: tuple[str, ...] = ()

    def input(self, name: str) -> Input | None:
        return next((i for i in self.inputs if i.name == name), None)

    def output(self, output_id: str) -> Output | None:
        return next((o for o in self.outputs if o.id == output_id), None)

    @property
    def names(self) -> tuple[str, ...]:
        """Every input's name: the form's fields and the API's query parameters."""
        return tuple(i.name for i in self.inputs)


def choice_combinations(
    inputs: Sequence[Input], names: Sequence[str]
) -> list[dict[str, str]] | None:
    """Every combination of the choices of the named choice inputs (None: too many to list)."""
    lists = []
    size = 1
    for name in names:
        found = next(i for i in inputs if i.name == name)
        lists.append([c.value for c in found.choices])
        size *= len(found.choices)
    if size > MAX_CASE_COMBINATIONS:
        return None
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*lists)]


# --- reading the form -------------------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    numbers: Mapping[str, Fraction]  # in base units (a GB input's 80 is 80·10⁹ bytes)
    chosen: Mapping[str, str]  # choice input -> the value chosen


def form_values(calculator: Calculator, query: Mapping[str, str]) -> dict[str, str]:
    """The form's texts: the query's where it gives a field, else the field's default."""
    return {
        i.name: str(query[i.name])[: MAX_TEXT * 4] if i.name in query else i.default
        for i in calculator.inputs
    }


def unknown_names(calculator: Calculator, query: Mapping[str, str]) -> list[str]:
    """The names in ``query`` that are no input of the calculator (``lang`` aside)."""
    known = set(calculator.names) | RESERVED_NAMES
    return [name for name in query if name not in known]


def read_inputs(calculator: Calculator, values: Mapping[str, str]) -> Inputs:
    """The form's texts as numbers and choices; :class:`CalculatorError` lists every problem."""
    inputs, errors = _read(calculator, values)
    if errors:
        raise CalculatorError(errors)
    return inputs


def _read(calculator: Calculator, values: Mapping[str, str]) -> tuple[Inputs, list[FieldError]]:
    """The fields that read well, and a message for each of the others."""
    read = FormReader(values)
    numbers: dict[str, Fraction] = {}
    chosen: dict[str, str] = {}
    for spec in calculator.inputs:
        if spec.is_choice:
            text = read.text(spec.name)
            if spec.choice(text) is None:
                read.fail(
                    spec.name,
                    Message(
                        "%(label)s: one of %(choices)s.",
                        label=spec.label,
                        choices=listed([Text.verbatim(c.value) for c in spec.choices]),
                    ),
                )
            else:
                chosen[spec.name] = text
            continue
        value = read.within(
            spec.name, spec.label, spec.low, spec.high, whole=spec.integer, required=True
        )
        if value is not None:
            numbers[spec.name] = value * get_unit(spec.unit).scale
    return Inputs(numbers, chosen), read.errors


# --- the results ------------------------------------------------------------------------------


@dataclass(frozen=True)
class OutputValue:
    output: Output
    case: Case  # the formula that applied
    value: Fraction  # exact, in base units

    def shown(self, lang: str) -> str:
        """'2.42 GB', '10.9%', '24' in the output's unit family, at its figures."""
        return format_readable(self.value, self.output.unit, self.output.figures, lang)


@dataclass(frozen=True)
class CheckResult:
    check: Check
    holds: bool


@dataclass(frozen=True)
class BarResult:
    bar: MemoryBar
    terms: tuple[OutputValue, ...]
    capacity: Fraction  # bytes

    @property
    def total(self) -> Fraction:
        return sum((t.value for t in self.terms), Fraction(0))

    @property
    def fits(self) -> bool:
        return self.total <= self.capacity

    @property
    def headroom(self) -> Fraction:
        """Bytes left (negative: missing)."""
        return self.capacity - self.total


@dataclass(frozen=True)
class Result:
    calculator: Calculator
    inputs: Inputs
    outputs: tuple[OutputValue, ...]
    checks: tuple[CheckResult, ...]
    bars: tuple[BarResult, ...]

    def output(self, output_id: str) -> OutputValue:
        return next(o for o in self.outputs if o.output.id == output_id)

    def value(self, output_id: str) -> Fraction:
        return self.output(output_id).value


def calculate(calculator: Calculator, values: Mapping[str, str]) -> Result:
    """The form's texts read and every output, rule, check and memory bar evaluated exactly.

    A broken rule is its message at its field, listed with the fields that do not read as
    numbers (a rule over fields that all read is checked even when others do not); an output the
    card's formulas cannot compute for these inputs (a division by zero the card's rules did not
    exclude) is one message naming it.
    """
    inputs, errors = _read(calculator, values)
    known: dict[str, Fraction] = dict(inputs.numbers)
    outputs: list[OutputValue] = []
    broken: FieldError | None = None
    for output in calculator.outputs if not errors else ():
        case = output.case(inputs.chosen)
        try:
            value = case.formula.evaluate(known)
        except FormulaError as exc:
            broken = FieldError(
                "card",
                Message(
                    "%(output)s cannot be computed for these inputs: %(reason)s.",
                    output=output.label,
                    reason=exc.message,
                ),
            )
            break
        known[output.id] = value
        outputs.append(OutputValue(output, case, value))
    errors += [
        FieldError(rule.field, rule.message)
        for rule in calculator.rules
        if applies(rule.when, inputs.chosen) and _holds(rule.condition, known) is False
    ]
    if errors:
        raise CalculatorError(errors)
    if broken is not None:
        raise CalculatorError([broken])
    checks = []
    for check in calculator.checks:
        if applies(check.when, inputs.chosen):
            checks.append(CheckResult(check, bool(_holds(check.condition, known))))
    bars: list[BarResult] = []
    if calculator.memory is not None:
        capacity = inputs.numbers[calculator.memory.capacity]
        by_id = {o.output.id: o for o in outputs}
        for bar in calculator.memory.bars:
            bars.append(BarResult(bar, tuple(by_id[term] for term in bar.terms), capacity))
    return Result(calculator, inputs, tuple(outputs), tuple(checks), tuple(bars))


def _holds(condition: Constraint, known: Mapping[str, Fraction]) -> bool | None:
    """Whether the condition holds (one its formulas cannot evaluate for these values does not);
    None when it uses an output that could not be computed."""
    names = condition.value.names
    for bound in (condition.at_least, condition.at_most):
        if bound is not None:
            names = names | bound.names
    if not names <= known.keys():
        return None
    try:
        return condition.holds(known)
    except FormulaError:
        return False


# --- the chart --------------------------------------------------------------------------------

# Term colours, by the term's place among the bars' terms (colour-blind safe, Okabe-Ito).
PALETTE = ("#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#8a8f96", "#b59b00")


def term_colours(memory: Memory) -> dict[str, int]:
    """Each term's colour index: the order in which the bars first show it."""
    order: dict[str, int] = {}
    for bar in memory.bars:
        for term in bar.terms:
            order.setdefault(term, len(order) % len(PALETTE))
    return order


def memory_chart_svg(result: Result, lang: str, labels: Mapping[str, str]) -> str:
    """The memory bars stacked by term, the GPU's memory as a dashed line; each term is named by
    its own ``<title>`` and by the table of terms beside the chart, in the same colours (term
    labels are too long for a legend in the picture). ``labels``: ``title``, ``gpu`` and ``colon``
    in the page's language. Every text is escaped; no script, no style attribute."""
    memory = result.calculator.memory
    if memory is None or not result.bars:
        return ""
    colours = term_colours(memory)
    width, left, right = 480, 10, 20
    label_h, bar_h, gap, top = 20, 30, 16, 30
    capacity = result.bars[0].capacity
    largest = max([capacity, *(bar.total for bar in result.bars)])
    scale = Fraction(width - left - right) / (largest * Fraction(21, 20) or 1)
    row_h = label_h + bar_h + gap
    height = top + len(result.bars) * row_h + 6
    title = labels["title"]
    out = [chart_start(width, height, title)]
    for index, bar in enumerate(result.bars):
        y = top + index * row_h
        total = format_readable(bar.total, "B", 3, lang)
        out.append(
            f'<text x="{left}" y="{y + 14}" font-size="14" fill="currentColor">'
            f"{escape(bar.bar.label.get(lang))}{escape(labels['colon'])}"
            f'<tspan font-weight="700">{escape(total)}</tspan></text>'
        )
        offset = Fraction(0)
        for term in bar.terms:
            if term.value <= 0:
                continue
            shown = f"{term.output.label.get(lang)}{labels['colon']}{term.shown(lang)}"
            out.append(
                f'<rect x="{float(left + offset * scale):.2f}" y="{y + label_h}" '
                f'width="{float(term.value * scale):.2f}" height="{bar_h}" '
                f'fill="{PALETTE[colours[term.output.id]]}" '
                f'class="calc-term-{colours[term.output.id]}"><title>{escape(shown)}</title></rect>'
            )
            offset += term.value
    line_x = float(left + capacity * scale)
    bottom = top + len(result.bars) * row_h - gap + 6
    gpu = f"{labels['gpu']} {format_readable(capacity, 'B', 3, lang)}"
    out.append(capacity_marker(line_x, top - 12, bottom, top - 14, width, gpu))
    out.append("</svg>")
    return "".join(out)
