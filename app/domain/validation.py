"""Validate every template of a card over its parameter domain before it is served.

For every parameter combination (or :data:`SAMPLED_SEEDS` seeded draws when the domain is larger
than that) the answer, every pitfall and every text are evaluated, and the card is refused when

- a formula or a placeholder cannot be evaluated;
- a pitfall's displayed value clashes with the answer (a learner holding the misconception would
  be graded right);
- some seeded order of the pitfalls could leave fewer than ``choices - 1`` of them after clash
  resolution (checked exactly: the smallest maximal set of mutually distinct pitfalls);
- a pitfall never has a value of its own anywhere in the domain;
- the answer gives itself away: a numeric answer with no pitfall above it or none below it (so it
  would always be the largest or the smallest choice), or a correct statement longer than every
  pitfall some variant could show beside it (see :data:`STATEMENT_LENGTH_SLACK`).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator, Sequence
from fractions import Fraction

from .cards import Card, CardError, Template
from .formulas import FormulaError
from .generation import (
    Candidate,
    candidates,
    clash,
    draw_params,
    explain,
    named_values,
    text_values,
)

SAMPLED_SEEDS = 500
# A variant's pitfalls may be shorter than the correct statement by at most this fraction: test
# takers learn that "the longest, most qualified choice is right".
STATEMENT_LENGTH_SLACK = Fraction(1, 10)
# Beyond this many pitfalls the exact order check would be slow; fall back to declared order.
EXACT_ORDER_CHECK_LIMIT = 12


def validate_card(card: Card) -> None:
    for template in card.templates():
        validate_template(card, template)


def parameter_combinations(template: Template) -> Iterator[dict[str, Fraction]]:
    """The whole domain, or :data:`SAMPLED_SEEDS` seeded draws when it is larger."""
    if template.domain_size() <= SAMPLED_SEEDS:
        names = list(template.params)
        for combo in itertools.product(*(template.params[n].values for n in names)):
            yield dict(zip(names, combo, strict=True))
        return
    for seed in range(SAMPLED_SEEDS):
        yield draw_params(template, random.Random(f"validate:{template.id}:{seed}"))


def validate_template(card: Card, template: Template) -> None:
    if template.kind == "statement":
        _check_statement_lengths(card, template)
    own_value_somewhere: set[str] = set()
    for values in parameter_combinations(template):
        where = f"card {card.id!r}, template {template.id!r}, parameters {_show(template, values)}"
        try:
            answer, pitfalls = candidates(template, values)
            _render_texts(template, values, answer, pitfalls)
        except FormulaError as exc:
            raise CardError(f"{where}: {exc}") from None
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
        if answer.value is not None:
            _check_magnitude(where, answer, pitfalls)
        worst = _smallest_maximal_distinct_set(pitfalls)
        if worst < template.choices - 1:
            raise CardError(
                f"{where}: after clashing pitfalls are merged only {worst} distinct pitfall(s) "
                f"may remain, {template.choices - 1} are needed"
            )
    never = [p.id for p in template.pitfalls if p.id not in own_value_somewhere]
    if never:
        raise CardError(
            f"card {card.id!r}, template {template.id!r}: pitfall(s) {', '.join(never)} always "
            "coincide with another pitfall: they never show a value of their own"
        )


def _check_magnitude(where: str, answer: Candidate, pitfalls: Sequence[Candidate]) -> None:
    assert answer.value is not None
    values = [p.value for p in pitfalls if p.value is not None]
    if not any(v > answer.value for v in values):
        side = "largest"
    elif not any(v < answer.value for v in values):
        side = "smallest"
    else:
        return
    raise CardError(
        f"{where}: the answer {answer.text.en} is the {side} of all choices, so it can be picked "
        "by magnitude alone; add a pitfall on the other side"
    )


def _check_statement_lengths(card: Card, template: Template) -> None:
    """The correct statement must not be the longest choice of some variant by a clear margin."""
    assert template.answer_statement is not None
    shown = template.choices - 1
    for lang in ("en", "zh"):
        answer = len(template.answer_statement.get(lang))
        lengths = sorted(len(p.statement.get(lang)) for p in template.pitfalls if p.statement)
        # The variant whose pitfalls are the shortest ones: its longest pitfall is this one.
        longest_of_shortest = lengths[shown - 1]
        if longest_of_shortest < answer * (1 - STATEMENT_LENGTH_SLACK):
            raise CardError(
                f"card {card.id!r}, template {template.id!r}: the correct statement ({lang}, "
                f"{answer} characters) is longer than every pitfall of some variant (the "
                f"{shown} shortest reach {longest_of_shortest}); a learner could pick it by "
                f"length: make at least {len(lengths) - shown + 1} pitfall(s) at least "
                f"{float(1 - STATEMENT_LENGTH_SLACK):.0%} as long as the answer"
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
