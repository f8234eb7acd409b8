"""Cards as data: read a card file, check its shape, compile its formulas and texts.

A card file is YAML (see ``cards/README.md``). Reading parses every formula through the safe
parser; any problem raises :class:`CardError` naming the card, the template and the field.
Validation over the parameter domains lives in :mod:`app.domain.validation`, and
:func:`app.domain.catalog.load_cards` does both; this module imports neither.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from . import card_calculator as calc
from .calculator_input import CalculatorError, read_number
from .card_calculator import Calculator
from .cues import Cue
from .formulas import Constraint as Constraint
from .formulas import Formula, FormulaError, is_identifier, parse_formula, parse_number
from .languages import LANGS
from .messages import Message, plural_message
from .storable import value_problem
from .texts import Text, TextTemplate, compile_text
from .units import FORMATS, UNITS, UnitError, dimension, format_value, get_unit

SLUG_PATTERN = r"^[a-z0-9]+(-[a-z0-9]+)*$"
Slug = Annotated[str, StringConstraints(pattern=SLUG_PATTERN, max_length=80)]
NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,39}$"  # a parameter's name
CHOICE_PATTERN = r"^[a-z0-9]+([-_][a-z0-9]+)*$"  # a calculator choice's value


class CardError(ValueError):
    """A card that cannot be served; the message says where and why.

    ``template_id``, ``field`` (e.g. ``answer``, ``pitfalls.x.formula``, ``stem.zh``) and
    ``position`` (the column in a formula) locate the problem for the authoring dashboard;
    ``reason`` is the problem alone (no card, template, field or column), for a page that shows
    those beside it.
    """

    def __init__(
        self,
        message: str | Text,
        *,
        template_id: str | None = None,
        field: str | None = None,
        position: int | None = None,
        reason: Text | None = None,
        cue: Cue | None = None,
    ) -> None:
        # ``text`` is the message in every language (the dashboard shows it in the page's),
        # ``str()`` the English one.
        self.text = message if isinstance(message, Text) else Text(message, message)
        super().__init__(self.text.en)
        self.template_id = template_id
        self.field = field
        self.position = position
        self.reason = reason
        self.cue = cue  # a give-away cue: its family and sample variants


# --- the file's shape -------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class _TextIn(_Strict):
    en: Annotated[str, StringConstraints(min_length=1)]
    zh: Annotated[str, StringConstraints(min_length=1)]


class _ParamIn(_Strict):
    values: Annotated[list[int | float | str], Field(min_length=1, max_length=1000)]
    format: str | None = None


class _DerivedIn(_Strict):
    """A parameter computed from the drawn ones (and derived ones before it)."""

    formula: Annotated[str, StringConstraints(min_length=1, max_length=500)]
    format: str | None = None


class _ConstraintIn(_Strict):
    """What every drawn combination satisfies: ``value`` (a formula) is a whole number, and/or
    at least / at most another formula."""

    value: Annotated[str, StringConstraints(min_length=1, max_length=500)]
    integer: bool = False
    at_least: Annotated[str, StringConstraints(min_length=1, max_length=500)] | None = None
    at_most: Annotated[str, StringConstraints(min_length=1, max_length=500)] | None = None


class _PitfallIn(_Strict):
    id: Slug
    title: _TextIn
    explanation: _TextIn
    formula: str | None = None
    statement: _TextIn | None = None
    # The convention (app.domain.conventions) under which this wrong choice would be the key.
    convention: str | None = None
    # Other wordings of the statement, of the same structure; a question shows one at random.
    phrasings: Annotated[list[_TextIn], Field(max_length=8)] = Field(default_factory=list)


class _TemplateIn(_Strict):
    id: Slug
    version: Annotated[int, Field(ge=1)]
    # A wording-only edit of version N (every key and pitfall value the same over the whole
    # domain, app.domain.versions): N.1, N.2 ... Its questions are version N's; 0 is not stored.
    revision: Annotated[int, Field(ge=0, le=1_000_000)] = 0
    kind: Literal["numeric", "statement"]
    params: dict[str, _ParamIn] = Field(default_factory=dict)
    derived: Annotated[dict[str, _DerivedIn], Field(max_length=20)] = Field(default_factory=dict)
    constraints: Annotated[list[_ConstraintIn], Field(max_length=20)] = Field(default_factory=list)
    stem: _TextIn
    answer: str | _TextIn
    unit: str | None = None
    precision: Annotated[int, Field(ge=0, le=12)] | None = None
    choices: Annotated[int, Field(ge=2, le=8)] = 4
    solution: Annotated[list[_TextIn], Field(min_length=1)]
    pitfalls: Annotated[list[_PitfallIn], Field(min_length=3)]
    # Other wordings of a statement template's answer; a question shows one at random.
    answer_phrasings: Annotated[list[_TextIn], Field(max_length=8)] = Field(default_factory=list)
    # The conventions the key depends on (app.domain.conventions): name -> value.
    conventions: Annotated[dict[str, str], Field(max_length=10)] = Field(default_factory=dict)
    # Where its facts can be checked: paper and section, or project, file and version.
    sources: Annotated[
        list[Annotated[str, StringConstraints(min_length=3, max_length=300)]],
        Field(max_length=10),
    ] = Field(default_factory=list)


class _PointIn(_Strict):
    number: Annotated[int, Field(ge=1)]
    slug: Slug
    title: _TextIn
    explanation: _TextIn
    templates: Annotated[list[_TemplateIn], Field(min_length=1)]


class _FormulaIn(_Strict):
    id: str
    title: _TextIn
    expr: str
    latex: str
    unit: str = "B"


Identifier = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]


FormulaText = Annotated[str, StringConstraints(min_length=1, max_length=500)]
ChoiceValue = Annotated[str, StringConstraints(pattern=CHOICE_PATTERN, max_length=40)]
# A number of a calculator's section: as YAML reads it, or as a form takes it ("175B", "80").
CalculatorNumber = int | float | Annotated[str, StringConstraints(min_length=1, max_length=40)]
# Which choices a case, a rule or a check applies under: choice input -> value or values.
WhenIn = Annotated[dict[str, ChoiceValue | list[ChoiceValue]], Field(max_length=8)]


class _ChoiceIn(_Strict):
    value: ChoiceValue
    label: _TextIn


class _CalculatorInputIn(_Strict):
    """A number typed in ``unit`` within ``min``..``max``, or one of ``choices``."""

    name: str
    label: _TextIn
    help: _TextIn | None = None
    default: CalculatorNumber
    unit: str = "1"
    integer: bool = False
    min: CalculatorNumber | None = None
    max: CalculatorNumber | None = None
    choices: Annotated[list[_ChoiceIn], Field(max_length=12)] = Field(default_factory=list)


class _CaseIn(_Strict):
    when: WhenIn = Field(default_factory=dict)
    formula: FormulaText
    latex: Annotated[str, StringConstraints(max_length=500)] | None = None


class _CalculatorOutputIn(_Strict):
    """One of the card's formulas (or a small formula over them), or cases by choice."""

    id: str
    label: _TextIn
    help: _TextIn | None = None
    unit: str = "1"
    figures: Annotated[int, Field(ge=1, le=12)] = 3
    formula: FormulaText | None = None
    latex: Annotated[str, StringConstraints(max_length=500)] | None = None
    cases: Annotated[list[_CaseIn], Field(max_length=24)] = Field(default_factory=list)


class _ConditionIn(_Strict):
    value: FormulaText
    integer: bool = False
    at_least: FormulaText | None = None
    at_most: FormulaText | None = None
    when: WhenIn = Field(default_factory=dict)


class _RuleIn(_ConditionIn):
    """What the inputs must satisfy together; ``message`` is shown at ``field`` otherwise."""

    field: str
    message: _TextIn


class _CheckIn(_ConditionIn):
    """A verdict shown with the results."""

    id: Slug
    label: _TextIn
    failed: _TextIn | None = None


class _MemoryBarIn(_Strict):
    label: _TextIn
    terms: Annotated[list[str], Field(min_length=1, max_length=8)]


class _MemoryIn(_Strict):
    title: _TextIn
    capacity: str
    bars: Annotated[list[_MemoryBarIn], Field(min_length=1, max_length=4)]


class _CalculatorIn(_Strict):
    """The card's calculator (app.domain.card_calculator)."""

    title: _TextIn
    intro: _TextIn | None = None
    inputs: Annotated[list[_CalculatorInputIn], Field(min_length=1, max_length=30)]
    outputs: Annotated[list[_CalculatorOutputIn], Field(min_length=1, max_length=40)]
    rules: Annotated[list[_RuleIn], Field(max_length=20)] = Field(default_factory=list)
    checks: Annotated[list[_CheckIn], Field(max_length=20)] = Field(default_factory=list)
    memory: _MemoryIn | None = None
    sources: Annotated[
        list[Annotated[str, StringConstraints(min_length=3, max_length=300)]],
        Field(max_length=10),
    ] = Field(default_factory=list)


class _CardIn(_Strict):
    id: Slug
    version: Annotated[int, Field(ge=1)]
    # The parameters the card's named formulas are written in (``psi``, ``n_d`` ...).
    params: Annotated[list[Identifier], Field(max_length=20)] = Field(default_factory=list)
    # Attachments shown beside the card: "demo" links the reference demo's page.
    attachments: Annotated[list[Literal["demo"]], Field(max_length=5)] = Field(default_factory=list)
    # The stream its templates' variants are drawn from (app.domain.generation.GENERATORS): 1 when
    # the file does not say, as every card written before generator 2 was.
    generator: Literal[1, 2] = 1
    # The cards a learner meets before this one: the deck's learning order (app.domain.catalog).
    prerequisites: Annotated[list[Slug], Field(max_length=20)] = Field(default_factory=list)
    title: _TextIn
    definition: _TextIn
    use_cases: _TextIn
    problems_solved: _TextIn
    formulas: list[_FormulaIn] = Field(default_factory=list)
    points: Annotated[list[_PointIn], Field(min_length=1)]
    # Its calculator page: inputs, outputs from its formulas, rules, checks, memory per GPU.
    calculator: _CalculatorIn | None = None


# --- the loaded card --------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class NamedFormula:
    """A formula of the card (``zero1``, ``ddp`` ...), shown on the card page and used by the demo."""

    id: str
    title: Text
    latex: str
    unit: str
    formula: Formula

    @property
    def expr_text(self) -> str:
        return self.formula.text

    def evaluate(self, params: Mapping[str, int | Fraction]) -> Fraction:
        return self.formula.evaluate(params)


@dataclass(frozen=True, eq=False)
class Param:
    name: str
    values: tuple[Fraction, ...]
    format: str | None

    def display(self, value: Fraction) -> str:
        return format_value(value, self.format)


@dataclass(frozen=True, eq=False)
class Derived:
    """A parameter computed from the drawn ones: shown and used in formulas like them."""

    name: str
    formula: Formula
    format: str | None

    def display(self, value: Fraction) -> str:
        return format_value(value, self.format)


class RuleError(FormulaError):
    """A derived parameter's or a constraint's formula that cannot be evaluated at ``values``
    (the drawn ones and the derived ones computed before it): ``what`` names the rule, ``field``
    (``derived.<name>``, ``constraints.<n>.value``) and ``formula`` locate it for the dashboard.
    """

    def __init__(
        self,
        error: FormulaError,
        *,
        what: Text,
        field: str,
        formula: Formula,
        values: Mapping[str, Fraction],
    ) -> None:
        super().__init__(error.message, text=error.shown, column=error.column)
        self.what = what
        self.field = field
        self.formula = formula
        self.values = dict(values)

    def refusal(self, template_id: str, where: Text, shown: str) -> CardError:
        """The template's refusal at the rule's field and column, ``shown``: the values."""
        return CardError(
            Message(
                "%(where)s, %(what)s, at %(values)s: %(error)s",
                where=where,
                what=self.what,
                values=shown,
                error=self.localized,
            ),
            template_id=template_id,
            field=self.field,
            position=self.column if self.shown == self.formula.text else None,
            reason=Message(
                "%(what)s, with the parameters %(values)s: %(error)s",
                what=self.what,
                values=shown,
                error=self.message,
            ),
        )


def derive(derived: Sequence[Derived], drawn: Mapping[str, Fraction]) -> dict[str, Fraction]:
    """The drawn values with ``derived`` computed from them in turn (a :class:`RuleError`)."""
    values = dict(drawn)
    for item in derived:
        try:
            values[item.name] = item.formula.evaluate(values)
        except FormulaError as exc:
            raise RuleError(
                exc,
                what=Message("derived parameter %(name)s", name=repr(item.name)),
                field=f"derived.{item.name}",
                formula=item.formula,
                values=values,
            ) from None
    return values


def satisfied(constraints: Sequence[Constraint], values: Mapping[str, Fraction]) -> bool:
    """Whether ``values`` satisfy every constraint (numbered from 1), each checked in turn until
    one does not hold (a :class:`RuleError` when one of its formulas cannot be evaluated)."""
    for number, constraint in enumerate(constraints, start=1):
        try:
            if not constraint.holds(values):
                return False
        except FormulaError as exc:
            parts = (
                ("value", constraint.value),
                ("at_least", constraint.at_least),
                ("at_most", constraint.at_most),
            )
            part, formula = next(
                ((name, f) for name, f in parts if f is not None and _fails(f, values)),
                ("value", constraint.value),
            )
            raise RuleError(
                exc,
                what=Message("constraint %(number)s", number=number),
                field=f"constraints.{number - 1}.{part}",  # indexed from 0, as lists are
                formula=formula,
                values=values,
            ) from None
    return True


def _fails(formula: Formula, values: Mapping[str, Fraction]) -> bool:
    try:
        formula.evaluate(values)
    except FormulaError:
        return True
    return False


@dataclass(frozen=True, eq=False)
class Pitfall:
    """A named misconception: how a learner gets a wrong choice, and why that reasoning fails."""

    id: str
    title: Text
    explanation: Text
    explanation_template: TextTemplate
    formula: Formula | None = None
    statement: Text | None = None
    convention: str | None = None  # the convention under which it would be the key
    phrasings: tuple[Text, ...] = ()  # other wordings of the statement


@dataclass(frozen=True, eq=False)
class Template:
    id: str
    version: int  # what questions are generated and graded under (QuestionId.template_version)
    kind: Literal["numeric", "statement"]
    point: str  # the exam point's slug
    params: dict[str, Param]
    stem: TextTemplate
    solution: tuple[TextTemplate, ...]
    pitfalls: tuple[Pitfall, ...]
    choices: int
    answer_formula: Formula | None = None
    answer_statement: Text | None = None
    unit: str | None = None
    precision: int = 2
    generator: int = 1  # the card's: app.domain.generation.seeded
    conventions: Mapping[str, str] = field(default_factory=dict)  # app.domain.conventions
    sources: tuple[str, ...] = ()
    answer_phrasings: tuple[Text, ...] = ()  # other wordings of a statement answer
    derived: tuple[Derived, ...] = ()  # computed from the drawn parameters, in order
    constraints: tuple[Constraint, ...] = ()
    # With constraints: the combinations of drawn values that satisfy them, in the order of the
    # parameters' product (a variant draws one of them); None: every combination.
    allowed: tuple[tuple[Fraction, ...], ...] | None = None
    revision: int = 0  # wording-only edits of ``version`` (app.domain.versions)

    def complete(self, drawn: Mapping[str, Fraction]) -> dict[str, Fraction]:
        """The drawn values with the derived parameters computed from them (a
        :class:`RuleError` when a derived formula cannot be evaluated at them)."""
        return derive(self.derived, drawn)

    def display(self, name: str, value: Fraction) -> str:
        """A drawn or derived parameter's value as texts show it."""
        param = self.params.get(name)
        if param is not None:
            return param.display(value)
        return next(d for d in self.derived if d.name == name).display(value)

    @property
    def version_label(self) -> str:
        """``3`` or, after wording-only edits, ``3.2``."""
        return version_label(self.version, self.revision)

    @cached_property
    def phrased(self) -> bool:
        """Whether some statement of the template has other wordings."""
        return bool(self.answer_phrasings) or any(p.phrasings for p in self.pitfalls)

    def domain_size(self) -> int:
        if self.allowed is not None:
            return len(self.allowed)
        size = 1
        for param in self.params.values():
            size *= len(param.values)
        return size


@dataclass(frozen=True, eq=False)
class ExamPoint:
    """An exam point. ``slug`` is its stable identity (stored with attempts and reviews);
    ``number`` is only its position on the card, for display and old URLs."""

    slug: str
    number: int
    title: Text
    explanation: Text
    templates: tuple[Template, ...]


@dataclass(frozen=True, eq=False)
class Card:
    id: str
    version: int
    title: Text
    definition: Text
    use_cases: Text
    problems_solved: Text
    formulas: dict[str, NamedFormula]
    points: tuple[ExamPoint, ...]
    params: tuple[str, ...] = ()
    attachments: tuple[str, ...] = ()
    prerequisites: tuple[str, ...] = ()  # the cards to meet before this one
    calculator: Calculator | None = None  # the calculator it declares (app.domain.card_calculator)
    source: Path | None = field(default=None)
    # The card file's data as loaded (plain JSON types): what the catalog stores per version.
    document: Mapping[str, object] = field(default_factory=dict, repr=False)

    def point(self, number: int) -> ExamPoint | None:
        for point in self.points:
            if point.number == number:
                return point
        return None

    def point_by_slug(self, slug: str) -> ExamPoint | None:
        for point in self.points:
            if point.slug == slug:
                return point
        return None

    def templates(self) -> list[Template]:
        return [t for p in self.points for t in p.templates]

    def template(self, template_id: str) -> Template | None:
        for point in self.points:
            for template in point.templates:
                if template.id == template_id:
                    return template
        return None

    def templates_offering(self, pitfall_id: str) -> Mapping[str, str]:
        """The templates that offer ``pitfall_id`` as a wrong choice: template id -> exam point."""
        return self._offering.get(pitfall_id, {})

    def renumbered(self, document: Mapping[str, Any]) -> Card:
        """This card with the card and template versions (and revisions) of ``document``, the
        same card otherwise (what publishing decides after compiling: nothing compiles again)."""
        numbers = {
            str(t["id"]): (int(t["version"]), int(t.get("revision") or 0))
            for _, t in document_templates(document)
        }
        points = tuple(
            replace(
                point,
                templates=tuple(
                    replace(t, version=numbers[t.id][0], revision=numbers[t.id][1])
                    for t in point.templates
                ),
            )
            for point in self.points
        )
        version = document.get("version")
        assert isinstance(version, int)
        return replace(self, version=version, points=points, document=document)

    @cached_property
    def _offering(self) -> dict[str, dict[str, str]]:
        offering: dict[str, dict[str, str]] = {}
        for template in self.templates():
            for pitfall in template.pitfalls:
                offering.setdefault(pitfall.id, {})[template.id] = template.point
        return offering


# --- loading ----------------------------------------------------------------------------------


def read_cards(directory: Path) -> dict[str, Card]:
    """Every ``*.yaml`` card in ``directory``, by id, compiled but not validated over its
    domains (:func:`app.domain.catalog.load_cards` does both)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise CardError(
            Message("cards folder %(folder)s does not exist", folder=repr(str(directory)))
        )
    cards: dict[str, Card] = {}
    for path in sorted(directory.glob("*.yaml")):
        card = read_card(path)
        cards[card.id] = card
    if not cards:
        raise CardError(
            Message("no card files (*.yaml) in %(folder)s", folder=repr(str(directory)))
        )
    return cards


def yaml_error(exc: yaml.YAMLError) -> str:
    """The YAML reader's complaint on one line, with where it is."""
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem:
        mark = exc.problem_mark
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark is not None else ""
        return f"{exc.problem}{where}"
    return " ".join(str(exc).split())


def too_deep(name: str) -> Message:
    return Message(
        "%(file)s: nested too deeply (lists or mappings inside each other hundreds of levels "
        "deep): a card is a few levels deep",
        file=name,
    )


# libyaml's reader when PyYAML was built with it (its wheels are): a tenth of the pure-Python
# reader's time, most of a start-up that finds its cards validated (app.catalog.validated).
_FAST_LOADER = getattr(yaml, "CSafeLoader", None)


class YamlAliases(ValueError):
    """A YAML document with an anchor or an alias (``&name``, ``*name``), refused before it is
    built: nine levels of ``&a [*a, *a, ...]`` are a few hundred bytes that read as a billion
    values (an "alias bomb"), and a card never needs them."""

    def __init__(self, line: int) -> None:
        super().__init__(f"YAML anchor or alias at line {line}")
        self.line = line


def _refuse_aliases(text: str) -> None:
    """YamlAliases at the first anchor or alias of ``text``. The reader's events are read, never
    the values they would build; a text the reader refuses is left to the loader to report."""
    for loader in (_FAST_LOADER, yaml.SafeLoader):
        if loader is None:
            continue
        try:
            for event in yaml.parse(text, Loader=loader):
                if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                    mark = event.start_mark
                    raise YamlAliases(mark.line + 1 if mark is not None else 0)
        except yaml.YAMLError:
            continue
        return


def load_yaml(text: str) -> Any:
    """``yaml.safe_load(text)``, refusing anchors and aliases (:class:`YamlAliases`). libyaml
    reads it when it can; a document it refuses (it also stops at 1,000 levels of nesting) is
    read again by the pure-Python reader, whose result or complaint (with its line and column)
    is the answer."""
    _refuse_aliases(text)
    if _FAST_LOADER is not None:
        try:
            return yaml.load(text, Loader=_FAST_LOADER)  # noqa: S506 (a safe loader)
        except yaml.YAMLError:
            pass
    return yaml.safe_load(text)


def read_card(path: Path) -> Card:
    """One card file, compiled (formulas parsed, shape checked), not validated over its domains."""
    path = Path(path)
    try:
        raw = load_yaml(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise CardError(
            Message("%(file)s: cannot read: %(error)s", file=path.name, error=exc.strerror)
        ) from None
    except yaml.YAMLError as exc:
        raise CardError(
            Message("%(file)s: not valid YAML: %(error)s", file=path.name, error=yaml_error(exc))
        ) from None
    except YamlAliases as exc:
        raise CardError(
            Message(
                "%(file)s: line %(line)s: YAML anchors and aliases are not allowed "
                "in a card file: write each value out",
                file=path.name,
                line=exc.line,
            )
        ) from None
    except RecursionError:  # the YAML reader recurses once per level of nesting
        raise CardError(too_deep(path.name)) from None
    try:
        card = parse_card(raw, source=path)
    except RecursionError:
        raise CardError(too_deep(path.name)) from None
    if card.id != path.stem:
        raise CardError(
            Message(
                "%(file)s: card id %(card)s must match the file name",
                file=path.name,
                card=repr(card.id),
            )
        )
    return card


def parse_card(
    raw: object, *, source: Path | None = None, problems: list[CardError] | None = None
) -> Card:
    """Build a :class:`Card` from already-parsed YAML data (no domain validation).

    With ``problems``, a template that does not compile is left out and its error appended
    (the dashboard lists every problem); without it the first problem raises.
    """
    label: str | Text = source.name if source is not None else Message("card")
    unstorable = value_problem(raw)
    if unstorable is not None:  # a NUL, a lone surrogate, NaN: no database can store it
        raise CardError(Message("%(where)s: %(problems)s", where=label, problems=unstorable))
    try:
        data = _CardIn.model_validate(raw)
    except ValidationError as exc:
        raise CardError(
            Message("%(where)s: %(problems)s", where=label, problems=_pydantic_message(exc))
        ) from None
    where = Message("card %(card)s", card=repr(data.id))
    formulas = _compile_formulas(data.formulas, frozenset(data.params), where)
    definitions = {name: f.formula for name, f in formulas.items()}

    numbers = [p.number for p in data.points]
    if numbers != list(range(1, len(numbers) + 1)):
        raise CardError(
            Message(
                "%(where)s: exam points must be numbered 1..%(count)s, got %(numbers)s",
                where=where,
                count=len(numbers),
                numbers=str(numbers),
            )
        )
    slugs = [p.slug for p in data.points]
    if len(set(slugs)) != len(slugs):
        raise CardError(
            Message(
                "%(where)s: exam point slugs must be unique, got %(slugs)s",
                where=where,
                slugs=str(slugs),
            )
        )
    seen: set[str] = set()
    points = []
    for point in data.points:
        templates = []
        for raw_template in point.templates:
            if raw_template.id in seen:
                raise CardError(
                    Message(
                        "%(where)s: template id %(template)s is used twice",
                        where=where,
                        template=repr(raw_template.id),
                    )
                )
            seen.add(raw_template.id)
            try:
                compiled = _compile_template(
                    raw_template,
                    point.slug,
                    definitions,
                    Message(
                        "%(where)s, template %(template)s",
                        where=where,
                        template=repr(raw_template.id),
                    ),
                    data.generator,
                )
            except CardError as exc:
                if exc.template_id is None:
                    exc.template_id = raw_template.id
                if problems is None:
                    raise
                problems.append(exc)
                continue
            templates.append(compiled)
        points.append(
            ExamPoint(
                point.slug,
                point.number,
                _text(point.title),
                _text(point.explanation),
                tuple(templates),
            )
        )
    calculator = (
        _compile_calculator(data.calculator, definitions, where)
        if data.calculator is not None
        else None
    )
    return Card(
        document=stored_document(data),
        id=data.id,
        version=data.version,
        title=_text(data.title),
        definition=_text(data.definition),
        use_cases=_text(data.use_cases),
        problems_solved=_text(data.problems_solved),
        formulas=formulas,
        points=tuple(points),
        params=tuple(data.params),
        attachments=tuple(data.attachments),
        prerequisites=tuple(p for p in data.prerequisites if p != data.id),
        calculator=calculator,
        source=source,
    )


# Template fields added after cards were first stored: spelled out only when used, so that a
# stored document (and each template's content digest, app.domain.manifests) stays as it was.
_LATER_FIELDS = ("derived", "constraints", "revision")
_LATER_CARD_FIELDS = ("prerequisites", "calculator")


def stored_document(data: _CardIn) -> dict[str, Any]:
    """The card as stored: every field spelled out (defaults included) but the later ones."""
    document: dict[str, Any] = data.model_dump(mode="json", exclude_defaults=False)
    for name in _LATER_CARD_FIELDS:
        if not document.get(name):
            document.pop(name, None)
    for point in document["points"]:
        for template in point["templates"]:
            for name in _LATER_FIELDS:
                if not template.get(name):
                    template.pop(name, None)
    return document


def _compile_formulas(
    raw: list[_FormulaIn], params: frozenset[str], where: Text
) -> dict[str, NamedFormula]:
    formulas: dict[str, NamedFormula] = {}
    # Each formula may use the earlier ones: one mapping, grown as they compile (rebuilding it
    # per formula made a card's compilation quadratic in its formulas).
    definitions: dict[str, Formula] = {}
    for item in raw:
        if not is_identifier(item.id) or item.id in params:
            raise CardError(
                Message(
                    "%(where)s: formula id %(formula)s is not a valid name",
                    where=where,
                    formula=repr(item.id),
                )
            )
        if item.id in formulas:
            raise CardError(
                Message(
                    "%(where)s: formula %(formula)s is declared twice",
                    where=where,
                    formula=repr(item.id),
                )
            )
        _check_unit(
            item.unit,
            Message("%(where)s, formula %(formula)s", where=where, formula=repr(item.id)),
        )
        try:
            formula = parse_formula(item.expr, params, definitions)
        except FormulaError as exc:
            raise CardError(
                Message(
                    "%(where)s, formula %(formula)s: %(error)s",
                    where=where,
                    formula=repr(item.id),
                    error=exc.localized,
                ),
                field=f"formulas.{item.id}.expr",
                position=exc.column,
                reason=exc.message,
            ) from None
        formulas[item.id] = NamedFormula(item.id, _text(item.title), item.latex, item.unit, formula)
        definitions[item.id] = formula
    return formulas


def _compile_template(
    raw: _TemplateIn,
    point: str,
    definitions: Mapping[str, Formula],
    where: Text,
    generator: int,
) -> Template:
    params: dict[str, Param] = {}
    for name, spec in raw.params.items():
        field = f"params.{name}"
        if not is_identifier(name) or name == "answer" or name == "value":
            raise CardError(
                Message(
                    "%(where)s: parameter name %(name)s is not allowed",
                    where=where,
                    name=repr(name),
                ),
                template_id=raw.id,
                field=field,
            )
        _check_shown_parameter(
            name, spec.format, definitions, where, template_id=raw.id, field=field
        )
        try:
            values = tuple(parse_number(v) for v in spec.values)
        except FormulaError as exc:
            raise CardError(
                Message(
                    "%(where)s: parameter %(name)s: %(error)s",
                    where=where,
                    name=repr(name),
                    error=exc.localized,
                ),
                template_id=raw.id,
                field=field,
            ) from None
        if len(set(values)) != len(values):
            raise CardError(
                Message(
                    "%(where)s: parameter %(name)s lists a value twice",
                    where=where,
                    name=repr(name),
                ),
                template_id=raw.id,
                field=field,
            )
        params[name] = Param(name, values, spec.format)

    derived, constraints, allowed = _compile_derived(raw, params, definitions, where)
    names = frozenset(params) | {d.name for d in derived}
    named = names | {"answer"}

    def formula(text: str, what: Text, field: str) -> Formula:
        try:
            return parse_formula(text, names, definitions)
        except FormulaError as exc:
            raise CardError(
                Message(
                    "%(where)s, %(what)s: %(error)s", where=where, what=what, error=exc.localized
                ),
                template_id=raw.id,
                field=field,
                position=exc.column,
                reason=exc.message,
            ) from None

    def text(
        value: _TextIn, what: Text, field: str, extra: frozenset[str] = frozenset()
    ) -> TextTemplate:
        for lang in LANGS:
            try:
                compile_text(
                    Text(getattr(value, lang), getattr(value, lang)),
                    names,
                    named | extra,
                    definitions,
                )
            except (FormulaError, UnitError) as exc:
                column = getattr(exc, "column", None)
                error = exc.localized if isinstance(exc, FormulaError) else exc.message
                raise CardError(
                    Message("%(where)s, %(what)s: %(error)s", where=where, what=what, error=error),
                    template_id=raw.id,
                    field=f"{field}.{lang}",
                    position=column,
                    reason=exc.message,
                ) from None
        return compile_text(_text(value), names, named | extra, definitions)

    answer_formula: Formula | None = None
    answer_statement: Text | None = None
    if raw.kind == "numeric":
        if not isinstance(raw.answer, str):
            raise CardError(
                Message("%(where)s: a numeric template's answer must be a formula", where=where)
            )
        if raw.unit is None or raw.precision is None:
            raise CardError(
                Message("%(where)s: a numeric template needs 'unit' and 'precision'", where=where)
            )
        _check_unit(raw.unit, where, field="unit")
        answer_formula = formula(raw.answer, Message("answer"), "answer")
    else:
        if isinstance(raw.answer, str):
            raise CardError(
                Message(
                    "%(where)s: a statement template's answer must be a text {en, zh}", where=where
                )
            )
        if raw.unit is not None or raw.precision is not None:
            raise CardError(
                Message(
                    "%(where)s: a statement template takes no 'unit' or 'precision'", where=where
                )
            )
        answer_statement = _text(raw.answer)

    if raw.choices - 1 > len(raw.pitfalls):
        raise CardError(
            plural_message(
                "%(where)s: %(choices)s choices need at least %(num)s pitfall",
                "%(where)s: %(choices)s choices need at least %(num)s pitfalls",
                raw.choices - 1,
                where=where,
                choices=raw.choices,
            )
        )
    pitfalls: list[Pitfall] = []
    for item in raw.pitfalls:
        what = Message("pitfall %(pitfall)s", pitfall=repr(item.id))
        if any(p.id == item.id for p in pitfalls):
            raise CardError(
                Message(
                    "%(where)s: pitfall id %(pitfall)s is used twice",
                    where=where,
                    pitfall=repr(item.id),
                )
            )
        if raw.kind == "numeric" and (item.formula is None or item.statement is not None):
            raise CardError(
                Message(
                    "%(where)s, %(what)s: a numeric template's pitfall needs a formula",
                    where=where,
                    what=what,
                )
            )
        if raw.kind == "statement" and (item.statement is None or item.formula is not None):
            raise CardError(
                Message(
                    "%(where)s, %(what)s: a statement template's pitfall needs a statement",
                    where=where,
                    what=what,
                )
            )
        pitfalls.append(
            Pitfall(
                id=item.id,
                title=_text(item.title),
                explanation=_text(item.explanation),
                explanation_template=text(
                    item.explanation,
                    Message("%(what)s explanation", what=what),
                    f"pitfalls.{item.id}.explanation",
                    frozenset({"value"}),
                ),
                formula=formula(item.formula, what, f"pitfalls.{item.id}.formula")
                if item.formula is not None
                else None,
                statement=_text(item.statement) if item.statement is not None else None,
                convention=item.convention,
                phrasings=tuple(_text(t) for t in item.phrasings),
            )
        )
    _check_conventions(raw, where)
    if raw.kind == "numeric" and (raw.answer_phrasings or any(p.phrasings for p in raw.pitfalls)):
        raise CardError(
            Message("%(where)s: only a statement template's choices have phrasings", where=where)
        )

    return Template(
        id=raw.id,
        version=raw.version,
        revision=raw.revision,
        kind=raw.kind,
        point=point,
        params=params,
        stem=text(raw.stem, Message("stem"), "stem"),
        solution=tuple(
            text(step, Message("solution step %(number)s", number=i + 1), f"solution.{i + 1}")
            for i, step in enumerate(raw.solution)
        ),
        pitfalls=tuple(pitfalls),
        choices=raw.choices,
        answer_formula=answer_formula,
        answer_statement=answer_statement,
        unit=raw.unit,
        precision=raw.precision if raw.precision is not None else 2,
        generator=generator,
        conventions=dict(raw.conventions),
        sources=tuple(raw.sources),
        answer_phrasings=tuple(_text(t) for t in raw.answer_phrasings),
        derived=derived,
        constraints=constraints,
        allowed=allowed,
    )


# A template with constraints has its drawable combinations listed when it compiles: at most
# this many combinations of its drawn parameters are looked at.
MAX_CONSTRAINED_DOMAIN = 4096


def _check_shown_parameter(
    name: str,
    fmt: str | None,
    definitions: Mapping[str, Formula],
    where: Text,
    template_id: str | None = None,
    field: str | None = None,
) -> None:
    """A drawn or derived parameter neither shadows a card formula nor has an unknown format
    (``template_id`` and ``field``: where the error points, when known)."""
    if name in definitions:
        raise CardError(
            Message(
                "%(where)s: parameter %(name)s shadows the card formula of that name",
                where=where,
                name=repr(name),
            ),
            template_id=template_id,
            field=field,
        )
    if fmt is not None and fmt not in FORMATS and fmt not in UNITS:
        reason = Message(
            "parameter %(name)s has unknown format %(format)s (known: %(known)s)",
            name=repr(name),
            format=repr(fmt),
            known=", ".join((*FORMATS, *UNITS)),
        )
        raise CardError(
            Message("%(where)s: %(error)s", where=where, error=reason),
            template_id=template_id,
            field=field,
            reason=reason,
        )


def _compile_derived(
    raw: _TemplateIn, params: Mapping[str, Param], definitions: Mapping[str, Formula], where: Text
) -> tuple[tuple[Derived, ...], tuple[Constraint, ...], tuple[tuple[Fraction, ...], ...] | None]:
    """The template's derived parameters, its constraints and (with constraints) the
    combinations they allow: each derived formula may use the drawn parameters and the derived
    ones before it; a constraint may use all of them."""
    derived: list[Derived] = []
    for name, spec in raw.derived.items():
        field = f"derived.{name}"
        if not is_identifier(name) or name in ("answer", "value") or name in params:
            raise CardError(
                Message(
                    "%(where)s: derived parameter name %(name)s is not allowed (a parameter "
                    "or a reserved name)",
                    where=where,
                    name=repr(name),
                ),
                template_id=raw.id,
                field=field,
            )
        _check_shown_parameter(
            name, spec.format, definitions, where, template_id=raw.id, field=field
        )
        known = frozenset(params) | {d.name for d in derived}
        what = Message("derived parameter %(name)s", name=repr(name))
        rule = _rule_formula(raw, spec.formula, known, definitions, where, what, field)
        derived.append(Derived(name, rule, spec.format))
    names = frozenset(params) | {d.name for d in derived}
    constraints = tuple(
        _constraint(raw, item, i, names, definitions, where)
        for i, item in enumerate(raw.constraints, start=1)
    )
    if not constraints:
        return tuple(derived), (), None
    size = 1
    for param in params.values():
        size *= len(param.values)
    if size > MAX_CONSTRAINED_DOMAIN:
        raise CardError(
            Message(
                "%(where)s: a template with constraints may have at most %(limit)s "
                "combinations of parameter values (this one has %(size)s)",
                where=where,
                limit=MAX_CONSTRAINED_DOMAIN,
                size=size,
            ),
            template_id=raw.id,
            field="constraints",
        )
    template_names = list(params)
    allowed: list[tuple[Fraction, ...]] = []
    shown: dict[str, Param | Derived] = {**params, **{d.name: d for d in derived}}
    for combo in itertools.product(*(params[n].values for n in template_names)):
        try:
            if satisfied(
                constraints, derive(derived, dict(zip(template_names, combo, strict=True)))
            ):
                allowed.append(combo)
        except RuleError as exc:
            values = ", ".join(f"{n}={shown[n].display(v)}" for n, v in exc.values.items())
            raise exc.refusal(raw.id, where, "{" + values + "}") from None
    if not allowed:
        raise CardError(
            Message(
                "%(where)s: no combination of parameter values satisfies the constraints",
                where=where,
            ),
            template_id=raw.id,
            field="constraints",
        )
    return tuple(derived), constraints, tuple(allowed)


def _constraint(
    raw: _TemplateIn,
    item: _ConstraintIn,
    number: int,
    names: frozenset[str],
    definitions: Mapping[str, Formula],
    where: Text,
) -> Constraint:
    what = Message("constraint %(number)s", number=number)
    field = f"constraints.{number - 1}"  # indexed from 0 like every list (pages show it from 1)

    def bound(text: str | None, name: str) -> Formula | None:
        if text is None:
            return None
        return _rule_formula(raw, text, names, definitions, where, what, f"{field}.{name}")

    if not item.integer and item.at_least is None and item.at_most is None:
        raise CardError(
            Message(
                "%(where)s, %(what)s: say what the value must be (integer, at_least or at_most)",
                where=where,
                what=what,
            ),
            template_id=raw.id,
            field=field,
        )
    return Constraint(
        value=_rule_formula(raw, item.value, names, definitions, where, what, f"{field}.value"),
        integer=item.integer,
        at_least=bound(item.at_least, "at_least"),
        at_most=bound(item.at_most, "at_most"),
    )


def _rule_formula(
    raw: _TemplateIn,
    text: str,
    names: frozenset[str],
    definitions: Mapping[str, Formula],
    where: Text,
    what: Text,
    field: str,
) -> Formula:
    """A derived parameter's or a constraint's formula, refused at its column like the rest."""
    try:
        return parse_formula(text, names, definitions)
    except FormulaError as exc:
        raise CardError(
            Message("%(where)s, %(what)s: %(error)s", where=where, what=what, error=exc.localized),
            template_id=raw.id,
            field=field,
            position=exc.column,
            reason=exc.message,
        ) from None


def _check_conventions(raw: _TemplateIn, where: Text) -> None:
    """Known conventions and values; a pitfall's convention is one the template declares."""
    from .conventions import PHRASES, known

    for name, value in raw.conventions.items():
        if not known(name, value):
            raise CardError(
                Message(
                    "%(where)s: unknown convention %(name)s: %(value)s (known: %(known)s)",
                    where=where,
                    name=repr(name),
                    value=repr(value),
                    known=", ".join(f"{n}: {'/'.join(v)}" for n, v in PHRASES.items()),
                )
            )
    for item in raw.pitfalls:
        if item.convention is not None and item.convention not in raw.conventions:
            raise CardError(
                Message(
                    "%(where)s, pitfall %(pitfall)s: it is the key under another %(name)s "
                    "convention, so the template must declare its own under 'conventions'",
                    where=where,
                    pitfall=repr(item.id),
                    name=repr(item.convention),
                )
            )


def _check_unit(unit: str, where: Text, *, field: str | None = None) -> None:
    """A known display unit (``field``: where the error points)."""
    try:
        get_unit(unit)
    except UnitError as exc:
        raise CardError(
            Message("%(where)s: %(error)s", where=where, error=exc.message),
            field=field,
            reason=exc.message,
        ) from None


# --- the calculator section -------------------------------------------------------------------


class _Section:
    """Where a problem of the calculator section is: its message names the card, the section and
    the part (``input 's'``), and ``field`` locates it for the dashboard."""

    def __init__(self, where: Text) -> None:
        self.where = Message("%(where)s, calculator", where=where)

    def error(
        self,
        what: Text,
        field: str,
        problem: Text,
        position: int | None = None,
        reason: Text | None = None,
    ) -> CardError:
        return CardError(
            Message("%(where)s, %(what)s: %(error)s", where=self.where, what=what, error=problem),
            field=field,
            position=position,
            reason=reason or problem,
        )


def _compile_calculator(
    raw: _CalculatorIn, definitions: Mapping[str, Formula], where: Text
) -> Calculator:
    """The card's ``calculator:`` section compiled (cards/README.md, "Calculator"): every name
    unique, every number input bounded, every formula parsed against the inputs, the outputs
    before it and the card's formulas, every case reachable and every choice covered, and the
    defaults computed."""
    section = _Section(where)
    _check_plain_labels(raw, section)
    taken: set[str] = set(definitions) | set(calc.RESERVED_NAMES)
    inputs: list[calc.Input] = []
    for item in raw.inputs:
        inputs.append(_calculator_input(item, taken, section))
        taken.add(item.name)
    numbers = frozenset(i.name for i in inputs if not i.is_choice)
    outputs: list[calc.Output] = []
    for out in raw.outputs:
        what = Message("output %(name)s", name=repr(out.id))
        field = f"calculator.outputs.{out.id}"
        _check_calculator_name(out.id, taken, section, what, field)
        taken.add(out.id)
        names = numbers | {o.id for o in outputs}
        outputs.append(_calculator_output(out, inputs, names, definitions, section, what, field))
    every = numbers | {o.id for o in outputs}
    rules = []
    for number, rule in enumerate(raw.rules, start=1):
        what = Message("rule %(number)s", number=number)
        field = f"calculator.rules.{number}"
        if rule.field not in {i.name for i in inputs}:
            raise section.error(what, field, Message("%(name)s is no input", name=repr(rule.field)))
        condition = _calculator_condition(rule, every, definitions, section, what, field)
        when = _calculator_when(rule.when, inputs, section, what, field)
        rules.append(calc.Rule(rule.field, condition, _text(rule.message), when))
    checks: list[calc.Check] = []
    for check in raw.checks:
        what = Message("check %(name)s", name=repr(check.id))
        field = f"calculator.checks.{check.id}"
        if any(c.id == check.id for c in checks):
            raise section.error(what, field, Message("the id is used twice"))
        checks.append(
            calc.Check(
                check.id,
                _text(check.label),
                _calculator_condition(check, every, definitions, section, what, field),
                _text(check.failed) if check.failed is not None else None,
                _calculator_when(check.when, inputs, section, what, field),
            )
        )
    calculator = calc.Calculator(
        title=_text(raw.title),
        intro=_text(raw.intro) if raw.intro is not None else None,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        rules=tuple(rules),
        checks=tuple(checks),
        memory=_calculator_memory(raw.memory, inputs, outputs, section)
        if raw.memory is not None
        else None,
        sources=tuple(raw.sources),
    )
    try:
        calc.calculate(calculator, calc.form_values(calculator, {}))
    except CalculatorError as exc:
        raise section.error(
            Message("defaults"),
            "calculator.inputs",
            Message("they do not compute: %(problems)s", problems=exc.text()),
        ) from None
    return calculator


def _check_plain_labels(raw: _CalculatorIn, section: _Section) -> None:
    """Labels show in menus, tables and charts: plain text, no $...$."""
    labels: list[tuple[str, _TextIn]] = [("calculator.title", raw.title)]
    for item in raw.inputs:
        labels.append((f"calculator.inputs.{item.name}.label", item.label))
        labels += [(f"calculator.inputs.{item.name}.choices", c.label) for c in item.choices]
    labels += [(f"calculator.outputs.{o.id}.label", o.label) for o in raw.outputs]
    labels += [(f"calculator.checks.{c.id}.label", c.label) for c in raw.checks]
    if raw.memory is not None:
        labels.append(("calculator.memory.title", raw.memory.title))
        labels += [("calculator.memory.bars", bar.label) for bar in raw.memory.bars]
    for located, label in labels:
        if "$" in label.en or "$" in label.zh:
            raise section.error(
                Message("label %(label)s", label=repr(label.en)),
                located,
                Message("a label is plain text, without $...$ (menus and charts show it)"),
            )


def _check_calculator_name(
    name: str, taken: set[str], section: _Section, what: Text, field: str
) -> None:
    if not is_identifier(name) or name in taken:
        raise section.error(
            what,
            field,
            Message(
                "the name %(name)s is not free (a formula's name: lower-case letters, digits "
                "and _, not an input, an output, a card formula or lang)",
                name=repr(name),
            ),
        )


def _calculator_number(
    value: int | float | str, section: _Section, what: Text, field: str
) -> Fraction:
    if isinstance(value, str):
        number = read_number(value)
        if number is None:
            raise section.error(
                what, field, Message("%(value)s is not a number", value=repr(value))
            )
        return number
    try:
        return parse_number(value)
    except FormulaError as exc:
        raise section.error(what, field, exc.message) from None


def _calculator_input(item: _CalculatorInputIn, taken: set[str], section: _Section) -> calc.Input:
    what = Message("input %(name)s", name=repr(item.name))
    field = f"calculator.inputs.{item.name}"
    _check_calculator_name(item.name, taken, section, what, field)
    label = _text(item.label)
    help_text = _text(item.help) if item.help is not None else None
    if item.choices:
        if item.min is not None or item.max is not None or item.integer or item.unit != "1":
            raise section.error(
                what, field, Message("a choice input takes no unit, integer, min or max")
            )
        values = [c.value for c in item.choices]
        if len(values) < 2 or len(set(values)) != len(values):
            raise section.error(
                what, field, Message("a choice input offers two choices or more, each once")
            )
        if str(item.default) not in values:
            raise section.error(
                what, f"{field}.default", Message("the default must be one of the choices")
            )
        choices = tuple(calc.Choice(c.value, _text(c.label)) for c in item.choices)
        return calc.Input(item.name, label, help_text, str(item.default), choices=choices)
    try:
        get_unit(item.unit)
    except UnitError as exc:
        raise section.error(what, f"{field}.unit", exc.message) from None
    if item.min is None or item.max is None:
        raise section.error(
            what, field, Message("a number input needs min and max (what a form accepts)")
        )
    low = _calculator_number(item.min, section, what, f"{field}.min")
    high = _calculator_number(item.max, section, what, f"{field}.max")
    default = _calculator_number(item.default, section, what, f"{field}.default")
    if low > high:
        raise section.error(what, f"{field}.min", Message("min is above max"))
    if not low <= default <= high or (item.integer and default.denominator != 1):
        raise section.error(
            what,
            f"{field}.default",
            Message("the default is not a value the input accepts (min, max, integer)"),
        )
    if isinstance(item.default, float):
        shown = str(int(item.default)) if item.default.is_integer() else repr(item.default)
    else:
        shown = str(item.default)
    return calc.Input(item.name, label, help_text, shown, item.unit, item.integer, low, high)


def _calculator_formula(
    text: str,
    names: frozenset[str],
    definitions: Mapping[str, Formula],
    section: _Section,
    what: Text,
    field: str,
) -> Formula:
    """A formula of the section, over ``names`` and the card's formulas (whose parameters must
    be among ``names`` too)."""
    try:
        formula = parse_formula(text, names, definitions)
    except FormulaError as exc:
        raise section.error(what, field, exc.localized, exc.column, exc.message) from None
    missing = sorted(formula.names - names)
    if missing:
        raise section.error(
            what,
            field,
            Message(
                "it uses %(names)s, which no input or output before it gives",
                names=", ".join(missing),
            ),
        )
    return formula


def _calculator_when(
    raw: Mapping[str, str | list[str]],
    inputs: Sequence[calc.Input],
    section: _Section,
    what: Text,
    field: str,
) -> dict[str, frozenset[str]]:
    when: dict[str, frozenset[str]] = {}
    for name, wanted in raw.items():
        found = next((i for i in inputs if i.name == name and i.is_choice), None)
        if found is None:
            raise section.error(
                what, f"{field}.when", Message("%(name)s is no choice input", name=repr(name))
            )
        values = frozenset([wanted] if isinstance(wanted, str) else wanted)
        for value in sorted(values):
            if found.choice(value) is None:
                raise section.error(
                    what,
                    f"{field}.when",
                    Message(
                        "%(value)s is not a choice of %(name)s", value=repr(value), name=repr(name)
                    ),
                )
        when[name] = values
    return when


def _calculator_output(
    raw: _CalculatorOutputIn,
    inputs: Sequence[calc.Input],
    names: frozenset[str],
    definitions: Mapping[str, Formula],
    section: _Section,
    what: Text,
    field: str,
) -> calc.Output:
    try:
        get_unit(raw.unit)
    except UnitError as exc:
        raise section.error(what, f"{field}.unit", exc.message) from None
    if (raw.formula is None) == (not raw.cases):
        raise section.error(what, field, Message("give a formula or cases, one of the two"))
    given = (
        [_CaseIn(formula=raw.formula, latex=raw.latex)] if raw.formula is not None else raw.cases
    )
    cases = []
    for number, item in enumerate(given, start=1):
        where = f"{field}.formula" if raw.formula is not None else f"{field}.cases.{number}"
        formula = _calculator_formula(item.formula, names, definitions, section, what, where)
        bare = item.formula.strip()
        cases.append(
            calc.Case(
                formula,
                _calculator_when(item.when, inputs, section, what, where),
                bare if bare in definitions else None,
                item.latex,
            )
        )
    _check_cases(cases, inputs, section, what, field)
    return calc.Output(
        raw.id,
        _text(raw.label),
        _text(raw.help) if raw.help is not None else None,
        raw.unit,
        raw.figures,
        tuple(cases),
    )


def _check_cases(
    cases: Sequence[calc.Case],
    inputs: Sequence[calc.Input],
    section: _Section,
    what: Text,
    field: str,
) -> None:
    """Some case applies under every combination of the choices the cases name, and every case
    is the first to apply under one of them."""
    named = [i.name for i in inputs if any(i.name in case.when for case in cases)]
    combinations = calc.choice_combinations(inputs, named)
    if combinations is None:
        raise section.error(
            what,
            f"{field}.cases",
            Message(
                "its cases name choices with more than %(limit)s combinations",
                limit=calc.MAX_CASE_COMBINATIONS,
            ),
        )
    used: set[int] = set()
    for chosen in combinations:
        first = next((n for n, c in enumerate(cases) if calc.applies(c.when, chosen)), None)
        if first is None:
            shown = ", ".join(f"{name} = {value}" for name, value in chosen.items())
            raise section.error(
                what, f"{field}.cases", Message("no case applies when %(choices)s", choices=shown)
            )
        used.add(first)
    for number in range(len(cases)):
        if number not in used:
            raise section.error(
                what,
                f"{field}.cases.{number + 1}",
                Message(
                    "case %(number)s never applies: the cases before it cover it", number=number + 1
                ),
            )


def _calculator_condition(
    raw: _ConditionIn,
    names: frozenset[str],
    definitions: Mapping[str, Formula],
    section: _Section,
    what: Text,
    field: str,
) -> Constraint:
    if not raw.integer and raw.at_least is None and raw.at_most is None:
        raise section.error(
            what, field, Message("say what the value must be (integer, at_least or at_most)")
        )

    def formula(text: str | None, part: str) -> Formula | None:
        if text is None:
            return None
        return _calculator_formula(text, names, definitions, section, what, f"{field}.{part}")

    value = formula(raw.value, "value")
    assert value is not None
    return Constraint(
        value, raw.integer, formula(raw.at_least, "at_least"), formula(raw.at_most, "at_most")
    )


def _calculator_memory(
    raw: _MemoryIn,
    inputs: Sequence[calc.Input],
    outputs: Sequence[calc.Output],
    section: _Section,
) -> calc.Memory:
    what = Message("memory")
    capacity = next((i for i in inputs if i.name == raw.capacity and not i.is_choice), None)
    if capacity is None or "B" not in dimension(capacity.unit) or capacity.low <= 0:
        raise section.error(
            what,
            "calculator.memory.capacity",
            Message("the GPU's memory is a number input in bytes (a unit such as GB) above 0"),
        )
    for bar in raw.bars:
        for term in bar.terms:
            output = next((o for o in outputs if o.id == term), None)
            if output is None or "B" not in dimension(output.unit):
                raise section.error(
                    what,
                    "calculator.memory.bars",
                    Message("%(term)s is no output in bytes", term=repr(term)),
                )
    return calc.Memory(
        _text(raw.title),
        raw.capacity,
        tuple(calc.MemoryBar(_text(bar.label), tuple(bar.terms)) for bar in raw.bars),
    )


def _text(value: _TextIn) -> Text:
    return Text(en=value.en.strip(), zh=value.zh.strip())


def _pydantic_message(exc: ValidationError) -> str:
    problems = []
    for error in exc.errors()[:5]:
        location = ".".join(str(part) for part in error["loc"])
        location = re.sub(r"\.(\d+)", r"[\1]", location)
        problems.append(f"{location}: {error['msg']}")
    more = len(exc.errors()) - len(problems)
    return "; ".join(problems) + (f" (and {more} more)" if more > 0 else "")


def card_definitions(document: Mapping[str, object]) -> dict[str, Formula]:
    """The named formulas of a card document, compiled (for checking one formula as it is typed).

    Raises :class:`CardError` when the card's own formulas do not compile.
    """
    raw_formulas = document.get("formulas") or []
    params = document.get("params") or []
    if not isinstance(raw_formulas, list) or not isinstance(params, list):
        raise CardError(Message("the card's formulas or params are malformed"))
    try:
        formulas = [_FormulaIn.model_validate(item) for item in raw_formulas]
    except ValidationError as exc:
        raise CardError(_pydantic_message(exc)) from None
    names = frozenset(str(p) for p in params)
    return {n: f.formula for n, f in _compile_formulas(formulas, names, Message("card")).items()}


def card_to_yaml(document: Mapping[str, object]) -> str:
    """A card document as card-file YAML (unset optional fields left out).

    Reading the result back gives the same document: export → import → export is identical.
    """

    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if v is not None}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    text: str = yaml.safe_dump(
        strip(dict(document)), allow_unicode=True, sort_keys=False, width=100
    )
    return text


def version_label(version: int, revision: int = 0) -> str:
    """A template version as people read it: ``3``, or ``3.2`` after two wording-only edits."""
    return f"{version}.{revision}" if revision else str(version)


def document_templates(
    document: Mapping[str, object],
) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    """Every (exam point, template) of a card document, in order; malformed parts are skipped."""
    points = document.get("points")
    for point in points if isinstance(points, list) else []:
        if not isinstance(point, dict):
            continue
        templates = point.get("templates")
        for template in templates if isinstance(templates, list) else []:
            if isinstance(template, dict):
                yield point, template


def find_template_document(
    document: Mapping[str, object], template_id: str
) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The (exam point, template) documents of ``template_id``, or None."""
    return next(
        ((p, t) for p, t in document_templates(document) if t.get("id") == template_id), None
    )
