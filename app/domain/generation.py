"""Question variants: ``generate(card, template, seed)`` and ``grade(variant, choice_id)``.

A variant is fully determined by its :class:`~app.domain.identity.QuestionId` (card id, exam
point, template id and version, seed). A private
``random.Random`` seeded with that string is consumed in a fixed order:

1. each parameter, in declared order, is drawn from its domain;
2. the *rank* of the answer among the choices is drawn uniformly from ``0 .. choices - 1``: the
   number of shown pitfalls that will sort below it (numeric choices by value, statements by
   length, in English and in Chinese alike);
3. the pitfalls are shuffled, then kept in that order while their side of the answer still needs
   one and they do not *clash* with the answer or with a pitfall already kept, until ``rank``
   pitfalls below and ``choices - 1 - rank`` above are kept;
4. the kept choices (answer included) are shuffled and labelled ``a, b, c ...``.

So neither the size of a number nor the length of a statement says which choice is right: the
answer is the smallest, the second smallest ... or the largest equally often. Two numeric choices
clash when their displayed texts are equal or their exact values are less than
:data:`MIN_RELATIVE_GAP` apart; two statements clash when their texts are equal. Card validation
guarantees that no pitfall ever clashes with the answer and that every rank can be realised in
every seeded order (see :mod:`app.domain.validation`).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from .cards import Card, Pitfall, Template
from .identity import QuestionId
from .languages import LANGS
from .texts import Text
from .units import decimals_used, format_quantity, relative_gap, round_decimal, scaled

# Choices closer than this test rounding, not understanding (14.766 GB beside 15 GB).
MIN_RELATIVE_GAP = Fraction(1, 20)
_GAP = float(MIN_RELATIVE_GAP)
CHOICE_IDS = "abcdefgh"


class UnknownChoice(KeyError):
    """A choice id that is not among the variant's choices."""

    def __str__(self) -> str:
        return f"unknown choice {self.args[0]!r}"


@dataclass(frozen=True, eq=False)
class Candidate:
    """A possible choice before selection: the answer (``pitfall is None``) or one pitfall."""

    pitfall: Pitfall | None
    text: Text
    value: Fraction | None  # exact, base units; None for statements
    # A whole number shown without decimals (a GPU count): 23 and 24 are different answers, so
    # only equal texts clash, not the relative gap.
    whole: bool = False
    approx: float = 0.0  # float(value), for quick comparisons far from any threshold


@dataclass(frozen=True, eq=False)
class Choice:
    id: str
    text: Text
    value: float | None  # the displayed number, in ``unit``; None for statements
    unit: str | None
    pitfall: Pitfall | None  # None for the correct choice
    explanation: Text | None  # the pitfall's explanation with this variant's numbers

    @property
    def pitfall_id(self) -> str | None:
        return self.pitfall.id if self.pitfall is not None else None

    @property
    def correct(self) -> bool:
        return self.pitfall is None


@dataclass(frozen=True, eq=False)
class Variant:
    id: QuestionId
    kind: str
    params: dict[str, str]  # exact values, e.g. {"psi": "70000000000"}
    params_display: dict[str, str]  # e.g. {"psi": "70B"}
    stem: Text
    choices: tuple[Choice, ...]
    correct_choice_id: str
    answer: Text
    solution: tuple[Text, ...]

    def choice(self, choice_id: str) -> Choice:
        for choice in self.choices:
            if choice.id == choice_id:
                return choice
        raise UnknownChoice(choice_id)


@dataclass(frozen=True, eq=False)
class Grade:
    correct: bool
    chosen_choice_id: str
    correct_choice_id: str
    pitfall: Pitfall | None
    pitfall_explanation: Text | None
    explanation: Text
    solution: tuple[Text, ...]


# --- building blocks, shared with validation --------------------------------------------------


def question_id(card: Card, template: Template, seed: int) -> QuestionId:
    return QuestionId(card.id, template.point, template.id, template.version, seed)


def variant_rng(question: QuestionId) -> random.Random:
    return random.Random(question.rng_key)


def draw_params(template: Template, rng: random.Random) -> dict[str, Fraction]:
    return {name: rng.choice(param.values) for name, param in template.params.items()}


def named_values(template: Template, values: Mapping[str, Fraction]) -> dict[str, str]:
    return {name: template.params[name].display(value) for name, value in values.items()}


def text_values(
    template: Template, values: Mapping[str, Fraction], answer: Candidate
) -> dict[str, str]:
    """What ``{name}`` placeholders show: the parameters in their display formats and ``{answer}``."""
    return {**named_values(template, values), "answer": answer.text.en}


def explain(candidate: Candidate, values: Mapping[str, Fraction], named: Mapping[str, str]) -> Text:
    """A pitfall's explanation with this variant's numbers (``{value}`` is the pitfall's own)."""
    assert candidate.pitfall is not None
    return candidate.pitfall.explanation_template.render(
        values, {**named, "value": candidate.text.en}
    )


def candidates(
    template: Template, values: Mapping[str, Fraction]
) -> tuple[Candidate, list[Candidate]]:
    """The answer and every pitfall, evaluated for these parameters."""
    if template.kind == "numeric":
        assert template.answer_formula is not None
        answer = _numeric(template, None, template.answer_formula.evaluate(values))
        pitfalls = []
        for pitfall in template.pitfalls:
            assert pitfall.formula is not None
            pitfalls.append(_numeric(template, pitfall, pitfall.formula.evaluate(values)))
        return answer, pitfalls
    assert template.answer_statement is not None
    answer = Candidate(None, template.answer_statement, None)
    return answer, [Candidate(p, p.statement, None) for p in template.pitfalls if p.statement]


def _numeric(template: Template, pitfall: Pitfall | None, value: Fraction) -> Candidate:
    assert template.unit is not None
    shown = format_quantity(value, template.unit, template.precision)
    whole = template.precision == 0 and scaled(value, template.unit).denominator == 1
    return Candidate(pitfall, Text(shown, shown), value, whole, float(value))


def clash(a: Candidate, b: Candidate) -> bool:
    """Whether two choices would look alike to a learner (see the module docstring)."""
    if a.text.en == b.text.en or a.text.zh == b.text.zh:
        return True
    if a.value is not None and b.value is not None:
        if a.whole and b.whole:
            return a.value == b.value
        largest = max(abs(a.approx), abs(b.approx))
        if largest > 0:
            gap = abs(a.approx - b.approx) / largest
            if abs(gap - _GAP) > 1e-9:  # clearly on one side: no need for exact arithmetic
                return gap < _GAP
        return relative_gap(a.value, b.value) < MIN_RELATIVE_GAP
    return False


def side(answer: Candidate, candidate: Candidate) -> int:
    """-1 when ``candidate`` sorts below the answer, 1 above, 0 when it can take neither side.

    Numbers sort by value. Statements sort by length, and a statement is below (above) the
    answer only when it is shorter (longer) in every language, so that the answer's rank is the
    same whichever language a learner reads.
    """
    if answer.value is not None and candidate.value is not None:
        if candidate.approx != answer.approx:
            return -1 if candidate.approx < answer.approx else 1
        return -1 if candidate.value < answer.value else 1 if candidate.value > answer.value else 0
    signs = set()
    for lang in LANGS:
        a, c = len(answer.text.get(lang)), len(candidate.text.get(lang))
        signs.add(-1 if c < a else 1 if c > a else 0)
    return signs.pop() if len(signs) == 1 else 0


class Memo:
    """Clash verdicts and aligned texts of one parameter combination's candidates, for callers
    that arrange the same candidates many times (the giveaway measurement)."""

    def __init__(self) -> None:
        self.clashes: dict[tuple[int, int], bool] = {}
        self.decimals: dict[int, int] = {}
        self.texts: dict[tuple[int, int], Text] = {}

    def clash(self, a: Candidate, b: Candidate) -> bool:
        key = (id(a), id(b))
        found = self.clashes.get(key)
        if found is None:
            found = self.clashes[key] = clash(a, b)
        return found


def select_pitfalls(
    answer: Candidate,
    pitfalls: Sequence[Candidate],
    below: int,
    above: int,
    rng: random.Random,
    memo: Memo | None = None,
) -> list[Candidate]:
    """Walk the pitfalls in a seeded order, keeping ``below`` of them under the answer and
    ``above`` over it (fewer only when the card does not have them: validation refuses that)."""
    clashing = memo.clash if memo is not None else clash
    order = list(pitfalls)
    rng.shuffle(order)
    wanted = {-1: below, 1: above}
    kept: list[Candidate] = []
    for candidate in order:
        if not any(wanted.values()):
            break
        where = side(answer, candidate)
        if not wanted.get(where):
            continue
        if clashing(candidate, answer) or any(clashing(candidate, other) for other in kept):
            continue
        kept.append(candidate)
        wanted[where] -= 1
    return kept


def arrange(
    template: Template,
    answer: Candidate,
    pitfalls: Sequence[Candidate],
    rng: random.Random,
    memo: Memo | None = None,
) -> list[Candidate]:
    """The shown choices in display order: steps 2-4 of the module docstring."""
    rank = rng.randrange(template.choices)
    kept = select_pitfalls(answer, pitfalls, rank, template.choices - 1 - rank, rng, memo)
    shown = [answer, *kept]
    rng.shuffle(shown)
    return aligned(template, shown, memo)


def aligned(
    template: Template, shown: Sequence[Candidate], memo: Memo | None = None
) -> list[Candidate]:
    """Numeric choices shown with one number of decimals, the most any of them needs (at most
    the template's precision): '20.800 GB' beside '17.062 GB', not '20.8 GB'. The values do not
    change; only a choice's trailing zeros do, so its length says nothing about the key."""
    if template.kind != "numeric" or template.unit is None:
        return list(shown)
    unit = template.unit
    memo = memo if memo is not None else Memo()
    for c in shown:
        if id(c) not in memo.decimals:
            assert c.value is not None
            memo.decimals[id(c)] = decimals_used(scaled(c.value, unit), template.precision)
    decimals = max(memo.decimals[id(c)] for c in shown)
    out = []
    for c in shown:
        assert c.value is not None
        text = memo.texts.get((id(c), decimals))
        if text is None:
            shown_text = format_quantity(c.value, unit, decimals, keep_zeros=True)
            text = memo.texts[(id(c), decimals)] = Text(shown_text, shown_text)
        out.append(Candidate(c.pitfall, text, c.value, c.whole, c.approx))
    return out


# --- the public API ---------------------------------------------------------------------------


def generate(card: Card, template: Template, seed: int) -> Variant:
    """The variant of ``template`` for ``seed``: the same inputs always give the same variant."""
    identity = question_id(card, template, seed)
    rng = variant_rng(identity)
    values = draw_params(template, rng)
    answer, pitfalls = candidates(template, values)
    shown = arrange(template, answer, pitfalls, rng)
    answer = next(c for c in shown if c.pitfall is None)

    named = text_values(template, values, answer)
    choices = []
    for choice_id, candidate in zip(CHOICE_IDS, shown, strict=False):
        explanation = explain(candidate, values, named) if candidate.pitfall is not None else None
        choices.append(
            Choice(
                id=choice_id,
                text=candidate.text,
                value=_display_number(template, candidate.value),
                unit=template.unit if candidate.value is not None else None,
                pitfall=candidate.pitfall,
                explanation=explanation,
            )
        )
    correct = next(c.id for c in choices if c.pitfall is None)
    return Variant(
        id=identity,
        kind=template.kind,
        params={name: _exact(value) for name, value in values.items()},
        params_display={name: named[name] for name in values},
        stem=template.stem.render(values, named),
        choices=tuple(choices),
        correct_choice_id=correct,
        answer=answer.text,
        solution=tuple(step.render(values, named) for step in template.solution),
    )


def generate_for_point(card: Card, point_slug: str, seed: int) -> Variant:
    """A variant for an exam point: the seed picks the template, then the variant."""
    point = card.point_by_slug(point_slug)
    if point is None:
        raise KeyError(point_slug)
    rng = random.Random(f"{card.id}:point:{point.slug}:{seed}")
    template = point.templates[rng.randrange(len(point.templates))]
    return generate(card, template, seed)


def grade(variant: Variant, choice_id: str) -> Grade:
    """Right or wrong, the pitfall behind a wrong choice, and the worked solution."""
    chosen = variant.choice(choice_id)
    correct = variant.choice(variant.correct_choice_id)
    if chosen.pitfall is None:
        explanation = Text(
            en=f"{correct.text.en} is right.",
            zh=f"{correct.text.zh} 是正确答案。",
        )
    else:
        title = chosen.pitfall.title
        if variant.kind == "numeric":
            explanation = Text(
                en=f"{chosen.text.en} is what the pitfall “{title.en}” gives; "
                f"the answer is {correct.text.en}.",
                zh=f"{chosen.text.zh} 来自误区「{title.zh}」；正确答案是 {correct.text.zh}。",
            )
        else:
            explanation = Text(
                en=f"That statement is the pitfall “{title.en}”. "
                f"The correct statement: {correct.text.en}",
                zh=f"这个说法属于误区「{title.zh}」。正确的说法：{correct.text.zh}",
            )
    return Grade(
        correct=chosen.pitfall is None,
        chosen_choice_id=chosen.id,
        correct_choice_id=correct.id,
        pitfall=chosen.pitfall,
        pitfall_explanation=chosen.explanation,
        explanation=explanation,
        solution=variant.solution,
    )


def _display_number(template: Template, value: Fraction | None) -> float | None:
    if value is None or template.unit is None:
        return None
    return float(round_decimal(scaled(value, template.unit), template.precision))


def _exact(value: Fraction) -> str:
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )
