"""Validate every template of a card over its parameter domain before it is served.

For every parameter combination (or :data:`SAMPLED_SEEDS` seeded draws when the domain is larger
than that) the answer, every pitfall and every text are evaluated, and the card is refused when

- a formula or a placeholder cannot be evaluated;
- a pitfall's displayed value clashes with the answer (a learner holding the misconception would
  be graded right);
- some rank of the answer cannot be realised: generation draws how many shown pitfalls sort
  below the answer (by value, or for statements by length in every language), so for every
  parameter combination and every seeded order, ``choices - 1`` mutually distinct pitfalls must
  remain below the answer and as many above it (checked exactly: the smallest maximal set of
  mutually distinct pitfalls on each side);
- a pitfall never has a value of its own anywhere in the domain;
- a numeric answer shows the same value over the whole domain (the parameters are decoration,
  and the learner can memorise the key);
- a statement is not of comparable length to the correct one (see :data:`STATEMENT_LENGTH_RATIO`);
- a content-blind guesser (longest, shortest, k-th smallest, the odd register out ...) wins more
  than ``1/choices`` + :data:`~app.domain.giveaways.GIVEAWAY_MARGIN` of the variants, measured
  over the domain and :data:`~app.domain.giveaways.LOAD_SAMPLES` seeded arrangements.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from fractions import Fraction

from .cards import Card, CardError, Template
from .formulas import FormulaError
from .generation import (
    Candidate,
    candidates,
    clash,
    explain,
    named_values,
    side,
    text_values,
)
from .languages import LANGS
from .sampling import parameter_combinations

# Every wrong statement is at most this many times longer or shorter than the correct one, in
# every language: test takers learn that "the longest, most qualified choice is right".
STATEMENT_LENGTH_RATIO = Fraction(3, 2)
# Beyond this many pitfalls the exact order check would be slow; fall back to declared order.
EXACT_ORDER_CHECK_LIMIT = 12


def validate_card(card: Card) -> None:
    for template in card.templates():
        validate_template(card, template)


def validate_template(card: Card, template: Template, *, giveaways: bool = True) -> None:
    if template.kind == "statement":
        _check_statement_lengths(card, template)
    own_value_somewhere: set[str] = set()
    answers_shown: set[str] = set()
    evaluated: list[tuple[Candidate, list[Candidate]]] = []
    for values in parameter_combinations(template):
        where = f"card {card.id!r}, template {template.id!r}, parameters {_show(template, values)}"
        try:
            answer, pitfalls = candidates(template, values)
            _render_texts(template, values, answer, pitfalls)
        except FormulaError as exc:
            raise CardError(f"{where}: {exc}") from None
        answers_shown.add(answer.text.en)
        evaluated.append((answer, pitfalls))
        for candidate in pitfalls:
            if clash(candidate, answer):
                assert candidate.pitfall is not None
                raise CardError(
                    f"{where}: pitfall {candidate.pitfall.id!r} shows {candidate.text.en}, "
                    f"which clashes with the answer {answer.text.en}"
                )
        for candidate in pitfalls:
            assert candidate.pitfall is not None
            if not any(clash(candidate, other) for other in pitfalls if other is not candidate):
                own_value_somewhere.add(candidate.pitfall.id)
        _check_sides(where, template, answer, pitfalls)
    never = [p.id for p in template.pitfalls if p.id not in own_value_somewhere]
    if never:
        raise CardError(
            f"card {card.id!r}, template {template.id!r}: pitfall(s) {', '.join(never)} always "
            "coincide with another pitfall: they never show a value of their own"
        )
    if template.kind == "numeric" and len(answers_shown) == 1:
        raise CardError(
            f"card {card.id!r}, template {template.id!r}: the answer is {answers_shown.pop()} "
            "for every parameter combination; the parameters must change the key"
        )
    if giveaways:
        _check_giveaways(card, template, evaluated)


def _check_giveaways(
    card: Card, template: Template, evaluated: Sequence[tuple[Candidate, list[Candidate]]]
) -> None:
    from .giveaways import LOAD_SAMPLES, template_giveaways

    measured = template_giveaways(template, LOAD_SAMPLES, evaluated)
    strategy, share = measured.worst
    if share > measured.limit:
        raise CardError(
            f"card {card.id!r}, template {template.id!r}: a content-blind guesser picking "
            f"'{strategy}' is right in {share:.0%} of {measured.samples} variants (chance "
            f"{measured.chance:.0%}, at most {measured.limit:.0%} allowed)"
        )


def _check_sides(
    where: str, template: Template, answer: Candidate, pitfalls: Sequence[Candidate]
) -> None:
    """Every rank of the answer must be reachable whatever order the pitfalls are walked in."""
    needed = template.choices - 1
    for direction, word in ((-1, "below"), (1, "above")):
        group = [p for p in pitfalls if side(answer, p) == direction]
        worst = _smallest_maximal_distinct_set(group)
        if worst >= needed:
            continue
        if template.kind == "numeric":
            what = f"{word} the answer {answer.text.en}"
            extreme = "largest" if direction == -1 else "smallest"
        else:
            what = "shorter" if direction == -1 else "longer"
            what += " than the correct statement in every language"
            extreme = "longest" if direction == -1 else "shortest"
        raise CardError(
            f"{where}: only {worst} distinct pitfall(s) {what} can remain after clashing "
            f"pitfalls are merged; {needed} are needed so that the answer can be the {extreme} "
            f"choice as often as any other rank"
        )


def _check_statement_lengths(card: Card, template: Template) -> None:
    """Every wrong statement is of comparable length to the correct one, in every language."""
    assert template.answer_statement is not None
    for lang in LANGS:
        answer = len(template.answer_statement.get(lang))
        for pitfall in template.pitfalls:
            assert pitfall.statement is not None
            length = len(pitfall.statement.get(lang))
            if not answer / STATEMENT_LENGTH_RATIO <= length <= answer * STATEMENT_LENGTH_RATIO:
                raise CardError(
                    f"card {card.id!r}, template {template.id!r}: pitfall {pitfall.id!r} is "
                    f"{length} characters long ({lang}) against {answer} for the correct "
                    f"statement; keep every choice within {float(STATEMENT_LENGTH_RATIO)}x of "
                    "the correct statement's length"
                )


def _render_texts(
    template: Template, values: dict[str, Fraction], answer: Candidate, pitfalls: list[Candidate]
) -> None:
    named = text_values(template, values, answer)
    template.stem.render(values, named)
    for step in template.solution:
        step.render(values, named)
    for candidate in pitfalls:
        explain(candidate, values, named)


def _smallest_maximal_distinct_set(pitfalls: Sequence[Candidate]) -> int:
    """The fewest pitfalls the greedy selection can keep, over every order it may walk them in.

    Greedy selection in some order always ends on a maximal set of mutually non-clashing
    pitfalls, and every maximal set is reached by some order, so the worst case is the smallest
    maximal independent set of the clash graph.
    """
    n = len(pitfalls)
    conflicts = [
        {j for j in range(n) if j != i and clash(pitfalls[i], pitfalls[j])} for i in range(n)
    ]
    if not any(conflicts):
        return n
    if n > EXACT_ORDER_CHECK_LIMIT:
        kept: list[int] = []
        for i in range(n):
            if not conflicts[i] & set(kept):
                kept.append(i)
        return len(kept)
    best = n
    for size in range(1, n + 1):
        for subset in itertools.combinations(range(n), size):
            chosen = set(subset)
            independent = all(not (conflicts[i] & chosen) for i in chosen)
            maximal = all(conflicts[j] & chosen for j in range(n) if j not in chosen)
            if independent and maximal:
                return min(best, size)
    return best


def _show(template: Template, values: dict[str, Fraction]) -> str:
    shown = named_values(template, values)
    return "{" + ", ".join(f"{k}={v}" for k, v in shown.items()) + "}"
