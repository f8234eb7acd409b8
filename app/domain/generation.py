"""Question variants: ``generate(card, template, seed)`` and ``grade(variant, choice_id)``.

A variant is fully determined by its :class:`~app.domain.identity.QuestionId` (card id, exam
point, template id and version, seed). A private
``random.Random`` seeded with that string is consumed in a fixed order:

1. each parameter, in declared order, is drawn from its domain;
2. the pitfalls are shuffled, then kept in that order while they do not *clash* with the answer
   or with a pitfall already kept, until ``choices - 1`` are kept;
3. the kept choices (answer included) are shuffled and labelled ``a, b, c ...``.

Two numeric choices clash when their displayed texts are equal or their exact values are less
than :data:`MIN_RELATIVE_GAP` apart; two statements clash when their texts are equal. So when two
pitfalls coincide for some parameters, the one met first in the seeded order is shown. Card
validation guarantees that no pitfall ever clashes with the answer and that enough pitfalls
survive in every order.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from .cards import Card, Pitfall, Template
from .identity import QuestionId
from .texts import Text
from .units import format_quantity, relative_gap, round_decimal, scaled

MIN_RELATIVE_GAP = Fraction(1, 100)
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
    return Candidate(pitfall, Text(shown, shown), value)


def clash(a: Candidate, b: Candidate) -> bool:
    """Whether two choices would look alike to a learner (see the module docstring)."""
    if a.text.en == b.text.en or a.text.zh == b.text.zh:
        return True
    if a.value is not None and b.value is not None:
        return relative_gap(a.value, b.value) < MIN_RELATIVE_GAP
    return False


def select_pitfalls(
    answer: Candidate, pitfalls: Sequence[Candidate], wanted: int, rng: random.Random
) -> list[Candidate]:
    order = list(pitfalls)
    rng.shuffle(order)
    kept: list[Candidate] = []
    for candidate in order:
        if len(kept) == wanted:
            break
        if clash(candidate, answer) or any(clash(candidate, other) for other in kept):
            continue
        kept.append(candidate)
    return kept


# --- the public API ---------------------------------------------------------------------------


def generate(card: Card, template: Template, seed: int) -> Variant:
    """The variant of ``template`` for ``seed``: the same inputs always give the same variant."""
    identity = question_id(card, template, seed)
    rng = variant_rng(identity)
    values = draw_params(template, rng)
    answer, pitfalls = candidates(template, values)
    kept = select_pitfalls(answer, pitfalls, template.choices - 1, rng)
    shown = [answer, *kept]
    rng.shuffle(shown)

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
