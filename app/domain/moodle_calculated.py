"""Numeric templates as Moodle *calculated multichoice* questions, where Moodle can compute them.

A calculated multichoice question (``qtype_calculatedmulti``) carries formulas instead of numbers:
its text and its answers hold ``{=...}`` expressions over wildcards ``{name}``, and Moodle draws
one *dataset item* per attempt, the item-th value of every wildcard, then computes. This module
decides, template by template, whether Moodle can ask what the service asks, and if so writes
the questions as plain data (:class:`TemplateExport`); :mod:`app.authoring.moodle` lays them out
as XML. A template Moodle cannot ask is exported as fixed variants, as before, with the reason.

How a template becomes calculated questions:

- **Dataset items are the parameter combinations.** Every combination the service draws from (the
  domain, or the combinations its constraints allow) is one item, with every drawn and derived
  parameter a private wildcard holding that item's value, so Moodle draws exactly the template's
  combinations and derived values and constraints hold as they do here. Moodle edits at most
  :data:`MAX_DATASET_ITEMS` items: a larger domain lists that many, spread evenly over it.
- **Formulas are translated** from the engine's compiled form (:mod:`app.domain.moodle_formulas`)
  and computed at every item as Moodle computes them, in doubles: a formula whose value there is
  not the exact one (a ``ceil`` of a quotient that lands a hair above a whole number) is not
  used. ``pow2ceil`` and anything else Moodle lacks is not translated.
- **One question per position of the key.** The service puts the key at a uniformly drawn rank
  among the shown values; a Moodle question shows the same answers at every item, so the key's
  rank is fixed by which pitfalls it shows. So a template becomes up to ``choices`` questions,
  the key the smallest in the first, the second smallest in the next ... each with pitfalls that
  sit on their side of the key, never clash with it or with each other (the service's rule: not
  the same shown value, at least 5% apart) at every item. A quiz draws one of them at random
  (the template's category holds them alone). A template where too few positions can be filled
  (a guesser picking by size would win more than ``1/choices`` plus the validation margin) stays
  fixed.
- **Texts** map ``{name}`` to the wildcard (``{psi}``; a count or a quantity as an expression,
  ``{=round({psi}/1000000000,2)}B``) and ``{=formula:UNIT}`` to an expression rounded to its
  significant figures in one unit for all items (the service picks the unit per value), and
  keep LaTeX's own braces out of Moodle's way (``\\frac{1}{ p}``).

What Moodle shows differs from the service in small ways: one unit per question for all items, its
own significant-figure rounding of choices (``2410`` where the service shows ``2412``, trailing
zeros kept: ``6.00×``), halves rounded away from zero, and numbers in feedback shown with the
answer's figures.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

from .cards import Card, Pitfall, Template
from .export_plan import mathjax_delimiters
from .generation import Candidate, candidates, clash, figures_of, side
from .giveaways import GIVEAWAY_MARGIN
from .languages import Lang
from .messages import Message, plural_message
from .moodle_formulas import (
    MoodleExpr,
    Untranslatable,
    Wildcard,
    agrees,
    approximate,
    in_text,
    rounded,
    rounded_to,
    scaled,
    translate,
)
from .texts import COUNT, Text, TextTemplate
from .units import format_number, get_unit, readable_unit, significant_decimals

NumericExport = Literal["fixed", "calculated"]
NUMERIC_EXPORTS: tuple[NumericExport, ...] = ("fixed", "calculated")

# Moodle's own limit on a wildcard's items (qtype_calculated::MAX_DATASET_ITEMS).
MAX_DATASET_ITEMS = 100
# Nodes a search for one position's pitfalls may visit before giving that position up.
_SEARCH_LIMIT = 20_000

_COUNT_SUFFIXES = ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K"))
_COUNT_WORDS = {
    "en": ((10**12, "trillion"), (10**9, "billion"), (10**6, "million")),
    "zh": ((10**12, "万亿"), (10**8, "亿"), (10**4, "万")),
}
# Moodle's answer formats (correctanswerformat).
DECIMALS, SIGNIFICANT_FIGURES = 1, 2


@dataclass(frozen=True)
class Dataset:
    """A wildcard and its value at each item (item ``i`` is ``values[i - 1]``)."""

    name: str
    values: tuple[Fraction, ...]

    @property
    def texts(self) -> tuple[str, ...]:
        return tuple(decimal_text(v) for v in self.values)

    @property
    def decimals(self) -> int:
        return max((len(t.partition(".")[2]) for t in self.texts), default=0)


@dataclass(frozen=True)
class CalculatedAnswer:
    """One answer: Moodle text with a ``{=...}`` expression (:attr:`value` in the question's
    unit), how Moodle shows it, and for a pitfall its title and explanation (Moodle texts)."""

    text: str
    correct: bool
    pitfall: Pitfall | None
    value: MoodleExpr
    answer_format: int  # DECIMALS or SIGNIFICANT_FIGURES
    length: int  # decimals or significant figures
    shown: str = ""  # the value as a text shows it ({value} of the explanation)
    title: str = ""
    explanation: str = ""

    @property
    def explained_here(self) -> bool:
        """Whether the explanation is the answer's own feedback. Moodle shows every number of
        an answer's feedback as it shows the answer: with significant figures that reads as
        the service writes it, with a fixed number of decimals (whole counts: none) it would
        not (``1.46 GB`` as ``1 GB``), so such an answer's feedback is the pitfall's title and
        its explanation goes to the general feedback, shown as computed."""
        return self.answer_format == SIGNIFICANT_FIGURES

    @property
    def feedback(self) -> str:
        if self.correct:
            return ""  # the worked solution is the general feedback
        return self.explanation if self.explained_here else self.title


@dataclass(frozen=True)
class CalculatedQuestion:
    position: int  # the key's place among the answers by value: 0 the smallest
    unit: str
    stem: str
    solution: tuple[str, ...]
    answers: tuple[CalculatedAnswer, ...]  # by value, smallest first


@dataclass(frozen=True)
class TemplateExport:
    """How one template goes to Moodle: calculated questions, or fixed variants and why."""

    template: Template
    point_number: int
    combinations: int  # in the template's domain
    reason: Text | None = None  # why fixed variants; None: calculated
    datasets: tuple[Dataset, ...] = ()
    questions: tuple[CalculatedQuestion, ...] = field(default=())

    @property
    def calculated(self) -> bool:
        return self.reason is None

    @property
    def items(self) -> int:
        return len(self.datasets[0].values) if self.datasets else 0

    @property
    def detail(self) -> Text:
        """Why fixed variants, or what Moodle gets."""
        if self.reason is not None:
            return self.reason
        if self.items < self.combinations:
            return plural_message(
                "%(num)s question, one per position of the key by value, over %(items)s of its "
                "%(combinations)s parameter combinations (Moodle lists at most %(limit)s)",
                "%(num)s questions, one per position of the key by value, over %(items)s of its "
                "%(combinations)s parameter combinations (Moodle lists at most %(limit)s)",
                len(self.questions),
                items=self.items,
                combinations=self.combinations,
                limit=MAX_DATASET_ITEMS,
            )
        return plural_message(
            "%(num)s question, one per position of the key by value, over all %(items)s "
            "parameter combinations",
            "%(num)s questions, one per position of the key by value, over all %(items)s "
            "parameter combinations",
            len(self.questions),
            items=self.items,
        )

    @property
    def summary(self) -> Text:
        """What the export does with the template, in a line."""
        if self.reason is not None:
            return Message("fixed variants: %(reason)s", reason=self.reason)
        return Message("calculated: %(detail)s", detail=self.detail)


def plan_calculated(card: Card, lang: Lang) -> tuple[TemplateExport, ...]:
    """Every template of ``card`` (exam point order), each calculated where Moodle can ask it."""
    return tuple(
        export_template(template, point.number, lang)
        for point in card.points
        for template in point.templates
    )


def decimal_text(value: Fraction) -> str:
    """A dataset value as Moodle reads it: the exact decimal when there is one (``1300000000``,
    ``0.125``), else the double nearest to it."""
    denominator = value.denominator
    for prime in (2, 5):
        while denominator % prime == 0:
            denominator //= prime
    if denominator != 1:
        return repr(float(value))
    places = 0
    while (value * 10**places).denominator != 1:
        places += 1
    return format_number(value, places)


def export_template(template: Template, point_number: int, lang: Lang) -> TemplateExport:
    """One template's way to Moodle (see the module docstring)."""
    if template.kind != "numeric":
        return TemplateExport(
            template,
            point_number,
            template.domain_size(),
            Message("a statement template: its choices are sentences, not computed values"),
        )
    try:
        return _Planner(template, point_number, lang).plan()
    except _Fixed as fixed:
        return TemplateExport(template, point_number, template.domain_size(), fixed.reason)


class _Fixed(Exception):
    def __init__(self, reason: Text) -> None:
        super().__init__(reason.en)
        self.reason = reason


def _items(template: Template) -> list[dict[str, Fraction]]:
    """The parameter combinations Moodle draws from, derived parameters computed."""
    names = list(template.params)
    if template.allowed is not None:
        combinations = list(template.allowed)
    else:
        combinations = list(itertools.product(*(p.values for p in template.params.values())))
    if len(combinations) > MAX_DATASET_ITEMS:
        count = len(combinations)
        combinations = [
            combinations[i * count // MAX_DATASET_ITEMS] for i in range(MAX_DATASET_ITEMS)
        ]
    return [template.complete(dict(zip(names, c, strict=True))) for c in combinations]


def _where(template: Template, values: Mapping[str, Fraction]) -> str:
    return ", ".join(f"{n} = {template.display(n, values[n])}" for n in template.params)


@dataclass
class _Pitfall:
    pitfall: Pitfall
    expr: MoodleExpr | None  # None: Moodle cannot compute it (or its explanation) exactly
    side: int  # -1 below the key at every item, 1 above, 0 neither throughout
    usable: bool


class _Planner:
    def __init__(self, template: Template, point_number: int, lang: Lang) -> None:
        self.template = template
        self.point_number = point_number
        self.lang = lang
        self.items = _items(template)
        self.floats = [{n: float(v) for n, v in item.items()} for item in self.items]
        self.names = [*template.params, *(d.name for d in template.derived)]
        self.figures = figures_of(template)
        self.computed: dict[int, tuple[MoodleExpr, list[Fraction]]] = {}

    def checked(self, formula_expr: MoodleExpr, exact: Sequence[Fraction]) -> int | None:
        """The first item where Moodle's double is not the exact value, or None."""
        for index, (values, value) in enumerate(zip(self.floats, exact, strict=True)):
            if not agrees(approximate(formula_expr, values), value):
                return index
        return None

    def plan(self) -> TemplateExport:
        template = self.template
        assert template.answer_formula is not None and template.unit is not None
        try:
            key = translate(template.answer_formula)
        except Untranslatable as exc:
            raise _Fixed(Message("its answer: %(reason)s", reason=exc.reason)) from None
        made = [candidates(template, values) for values in self.items]
        answers = [answer for answer, _ in made]
        bad = self.checked(key, [a.value for a in answers if a.value is not None])
        if bad is not None:
            raise _Fixed(
                Message(
                    "Moodle's arithmetic (in doubles) does not give its answer exactly at %(where)s",
                    where=_where(template, self.items[bad]),
                )
            )
        for text in (template.stem, *template.solution):
            self.check_text(text, Message("its stem or worked solution"))
        pitfalls = [self.pitfall(i, p, made) for i, p in enumerate(template.pitfalls)]
        clashing = self.clashes(made, pitfalls)
        chosen = self.positions(pitfalls, clashing)
        chance = Fraction(1, template.choices) + GIVEAWAY_MARGIN
        if not chosen or Fraction(1, len(chosen)) > chance:
            raise _Fixed(
                Message(
                    "with the same pitfalls at every parameter combination, the key could take "
                    "only %(count)s of the %(choices)s positions by value (a learner could pick "
                    "it by its size)",
                    count=len(chosen),
                    choices=template.choices,
                )
            )
        datasets = tuple(
            Dataset(name, tuple(item[name] for item in self.items)) for name in self.names
        )
        questions = tuple(
            self.question(position, key, answers, [pitfalls[i] for i in picked], made, picked)
            for position, picked in chosen
        )
        return TemplateExport(
            template, self.point_number, template.domain_size(), None, datasets, questions
        )

    # --- pitfalls and positions ---------------------------------------------------------------

    def pitfall(
        self, index: int, pitfall: Pitfall, made: list[tuple[Candidate, list[Candidate]]]
    ) -> _Pitfall:
        assert pitfall.formula is not None
        sides = {side(answer, shown[index]) for answer, shown in made}
        try:
            expr = translate(pitfall.formula)
            values = [shown[index].value for _, shown in made]
            usable = self.checked(expr, [v for v in values if v is not None]) is None
            self.check_text(pitfall.explanation_template, Text.verbatim(pitfall.id))
        except (Untranslatable, _Fixed):
            return _Pitfall(pitfall, None, 0, False)
        only = sides.pop() if len(sides) == 1 else 0
        return _Pitfall(pitfall, expr, only, usable and only != 0)

    def clashes(
        self, made: list[tuple[Candidate, list[Candidate]]], pitfalls: list[_Pitfall]
    ) -> list[set[int]]:
        """For each usable pitfall, the pitfalls it clashes with at some item; a pitfall that
        clashes with the key somewhere is made unusable."""
        count = len(pitfalls)
        clashing: list[set[int]] = [set() for _ in range(count)]
        for answer, shown in made:
            for i in range(count):
                if not pitfalls[i].usable:
                    continue
                if clash(answer, shown[i]):
                    pitfalls[i].usable = False
                    continue
                for j in range(i + 1, count):
                    if pitfalls[j].usable and clash(shown[i], shown[j]):
                        clashing[i].add(j)
                        clashing[j].add(i)
        return clashing

    def positions(
        self, pitfalls: list[_Pitfall], clashing: list[set[int]]
    ) -> list[tuple[int, list[int]]]:
        """For each position of the key that some pitfalls can fill at every item: the position
        and those pitfalls (each search prefers pitfalls used least so far, then card order)."""
        wanted = self.template.choices - 1
        used = [0] * len(pitfalls)
        found: list[tuple[int, list[int]]] = []
        for position in range(wanted + 1):
            order = sorted(
                (i for i, p in enumerate(pitfalls) if p.usable), key=lambda i: (used[i], i)
            )
            picked = _pick(order, pitfalls, clashing, below=position, above=wanted - position)
            if picked is not None:
                found.append((position, picked))
                for i in picked:
                    used[i] += 1
        return found

    # --- texts --------------------------------------------------------------------------------

    def check_text(self, text: TextTemplate, where: Text) -> None:
        """Every computed value of ``text`` (both languages) translated and exact at every item;
        ``_Fixed`` naming ``where`` otherwise."""
        for segment in (*text.en, *text.zh):
            if isinstance(segment, str | tuple) or id(segment) in self.computed:
                continue
            try:
                expr = translate(segment.formula)
            except Untranslatable as exc:
                raise _Fixed(
                    Message("%(where)s: %(reason)s", where=where, reason=exc.reason)
                ) from None
            exact = [segment.formula.evaluate(values) for values in self.items]
            bad = self.checked(expr, exact)
            if bad is not None:
                raise _Fixed(
                    Message(
                        "%(where)s: Moodle's arithmetic (in doubles) does not give "
                        "%(formula)s exactly at %(values)s",
                        where=where,
                        formula=segment.formula.text,
                        values=_where(self.template, self.items[bad]),
                    )
                )
            self.computed[id(segment)] = (expr, exact)

    def question(
        self,
        position: int,
        key: MoodleExpr,
        answers: list[Candidate],
        chosen: list[_Pitfall],
        made: list[tuple[Candidate, list[Candidate]]],
        picked: list[int],
    ) -> CalculatedQuestion:
        template = self.template
        assert template.unit is not None
        exprs = [key]
        for p in chosen:
            assert p.expr is not None  # only usable pitfalls are chosen
            exprs.append(p.expr)
        columns = [[a.value for a in answers]]
        columns += [[shown[i].value for _, shown in made] for i in picked]
        exact = [[v for v in column if v is not None] for column in columns]
        unit = readable_unit([v for column in exact for v in column], template.unit, self.figures)
        spec = get_unit(unit)
        suffix = _suffix(unit, self.lang)
        values = [scaled(expr, spec.scale) for expr in exprs]
        forms = [self.answer_form(column, spec.scale, spec.whole) for column in exact]
        displays = [
            in_text(_shown(value, form, column)) + suffix
            for value, form, column in zip(values, forms, exact, strict=True)
        ]
        named = {**self.parameters(), "answer": displays[0]}
        built = []
        for index, (value, form, display) in enumerate(zip(values, forms, displays, strict=True)):
            pitfall = chosen[index - 1].pitfall if index else None
            built.append(
                CalculatedAnswer(
                    text=in_text(value) + suffix,
                    correct=pitfall is None,
                    pitfall=pitfall,
                    value=value,
                    answer_format=form[0],
                    length=form[1],
                    shown=display,
                    title=mathjax_delimiters(pitfall.title.get(self.lang)) if pitfall else "",
                    explanation=(
                        self.text(pitfall.explanation_template, {**named, "value": display})
                        if pitfall
                        else ""
                    ),
                )
            )
        below = [a for a, p in zip(built[1:], chosen, strict=True) if p.side < 0]
        above = [a for a, p in zip(built[1:], chosen, strict=True) if p.side > 0]
        return CalculatedQuestion(
            position=position,
            unit=unit,
            stem=self.text(template.stem, named),
            solution=tuple(self.text(step, named) for step in template.solution),
            answers=(*below, built[0], *above),
        )

    def answer_form(self, values: list[Fraction], scale: Fraction, whole: bool) -> tuple[int, int]:
        """How Moodle shows one answer: with the template's significant figures where every
        value reads plainly in them (Moodle writes a value below 0.001, or one that rounds to
        10000 or more, in scientific notation: ``1.23e4``), else with the decimals the smallest
        value needs; a whole count with none."""
        shown = [abs(v / scale) for v in values]
        if self.figures == 0 or whole:
            return DECIMALS, 0
        top = 10**4 - Fraction(5, 10 ** (self.figures - 3))  # rounds up to 10000 from here
        if all(Fraction(1, 1000) <= v < top for v in shown):
            return SIGNIFICANT_FIGURES, self.figures
        return DECIMALS, max(significant_decimals(v, self.figures) for v in shown)

    def parameters(self) -> dict[str, str]:
        """Each drawn or derived parameter as texts show it."""
        out = {}
        for name in self.names:
            values = [item[name] for item in self.items]
            param = self.template.params.get(name)
            fmt = param.format if param is not None else None
            if param is None:
                fmt = next(d.format for d in self.template.derived if d.name == name)
            out[name] = _parameter(name, values, fmt, self.lang)
        return out

    def text(self, text: TextTemplate, named: Mapping[str, str]) -> str:
        """``text`` in the export's language as a Moodle text (math in MathJax's delimiters)."""
        parts: list[str] = []
        segments = text.zh if self.lang == "zh" else text.en
        for segment in segments:
            if isinstance(segment, str):
                parts.append(_literal(segment, self.names))
            elif isinstance(segment, tuple):
                parts.append(named[segment[0]])
            else:
                expr, exact = self.computed[id(segment)]
                parts.append(_computed(expr, exact, segment.unit, segment.decimals, self.lang))
        return mathjax_delimiters("".join(parts))


def _pick(
    order: list[int],
    pitfalls: list[_Pitfall],
    clashing: list[set[int]],
    *,
    below: int,
    above: int,
) -> list[int] | None:
    """``below`` pitfalls under the key and ``above`` over it, none clashing with another, taken
    in ``order`` (a bounded depth-first search); None when there are none."""
    visits = 0

    def search(start: int, taken: list[int], low: int, high: int) -> list[int] | None:
        nonlocal visits
        if low == 0 and high == 0:
            return taken
        for at in range(start, len(order)):
            visits += 1
            if visits > _SEARCH_LIMIT:
                return None
            i = order[at]
            where = pitfalls[i].side
            if (where < 0 and low == 0) or (where > 0 and high == 0):
                continue
            if any(j in clashing[i] for j in taken):
                continue
            found = search(at + 1, [*taken, i], low - (where < 0), high - (where > 0))
            if found is not None:
                return found
        return None

    return search(0, [], below, above)


def _shown(expr: MoodleExpr, form: tuple[int, int], exact: list[Fraction]) -> MoodleExpr:
    """An answer's value as a text shows it, rounded as the answer is."""
    kind, length = form
    if kind == SIGNIFICANT_FIGURES:
        return rounded(expr, length, positive=all(v > 0 for v in exact))
    return rounded_to(expr, length)


def _suffix(unit: str, lang: str) -> str:
    spec = get_unit(unit)
    suffix = spec.suffix_for("", lang)
    if not suffix:
        return ""
    return f" {suffix}" if spec.spaced else suffix


def _parameter(name: str, values: list[Fraction], fmt: str | None, lang: str) -> str:
    """A parameter as the service's texts show it (``format`` of the card), as a Moodle text."""
    wildcard = Wildcard(name)
    middle = sorted(abs(v) for v in values)[len(values) // 2]
    if fmt == "count":
        for size, letter in _COUNT_SUFFIXES:
            if middle >= size:
                return in_text(rounded_to(scaled(wildcard, Fraction(size)), 2)) + letter
        return in_text(rounded_to(wildcard, 2))
    if fmt is None or fmt == "int":
        if all(v.denominator == 1 for v in values):
            return "{" + name + "}"
        return in_text(rounded_to(wildcard, 4))
    spec = get_unit(fmt)
    return in_text(rounded_to(scaled(wildcard, spec.scale), 2)) + _suffix(fmt, lang)


def _computed(
    expr: MoodleExpr, exact: list[Fraction], unit: str | None, figures: int | None, lang: str
) -> str:
    """A ``{=formula:UNIT:FIGURES}`` placeholder as a Moodle text: the value rounded as the
    service rounds it, in one unit (or count word) for all items."""
    if unit == COUNT:
        words = _COUNT_WORDS["zh" if lang == "zh" else "en"]
        middle = sorted(abs(v) for v in exact)[len(exact) // 2]
        scale, word = next(((s, f" {w}") for s, w in words if middle >= s), (1, ""))
        return (
            in_text(_rounded_value(scaled(expr, Fraction(scale)), exact, scale, figures or 4))
            + word
        )
    digits = figures if figures is not None else 3
    if unit is None:
        return in_text(_rounded_value(expr, exact, 1, digits))
    shown = readable_unit(exact, unit, digits)
    spec = get_unit(shown)
    value = _rounded_value(scaled(expr, spec.scale), exact, spec.scale, digits)
    return in_text(value) + _suffix(shown, lang)


def _rounded_value(
    expr: MoodleExpr, exact: list[Fraction], scale: Fraction | int, figures: int
) -> MoodleExpr:
    """Significant figures computed in Moodle when the value is never zero, else the decimals
    the smallest value needs, for all."""
    shown = [v / scale for v in exact]
    if all(v != 0 for v in shown):
        return rounded(expr, figures, positive=all(v > 0 for v in shown))
    return rounded_to(expr, max(significant_decimals(v, figures) for v in shown))


def _literal(text: str, names: Sequence[str]) -> str:
    """Literal text with LaTeX's own braces kept from Moodle: ``{p}`` where ``p`` is a wildcard
    would be replaced by its value, ``{=`` would start a formula; a space after the brace
    changes nothing in LaTeX."""
    if "{" not in text:
        return text
    text = text.replace("{=", "{ =")
    for name in names:
        text = text.replace("{" + name + "}", "{ " + name + "}")
    return text
