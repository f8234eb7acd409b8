"""The rule behind ``choices: N``, shown per parameter combination: the key and each pitfall's
value with its side of the key.

Generation draws the key's rank among the N choices uniformly, so for every parameter
combination N−1 pitfalls of mutually distinct values must be able to sort below the key and N−1
above it (numbers by value, statements by length in every language); a pitfall equal to the key
(or as long, for a statement) takes neither side. :func:`side_table` lays this out for the
template editor's preview: the first :data:`SHOWN_ROWS` combinations, plus every failing one up
to :data:`FAILING_ROWS`, each with its count of distinct pitfalls on each side
(:func:`app.domain.validation.distinct_on_side`, the check validation runs).
"""

from __future__ import annotations

from dataclasses import dataclass

from .bilingual import Text
from .cards import Template
from .generation import candidates, clash, named_values, side
from .sampling import parameter_combinations
from .validation import distinct_on_side

SHOWN_ROWS = 12
FAILING_ROWS = 40


@dataclass(frozen=True)
class SideCell:
    text: Text  # the value (or statement) as a choice shows it
    side: int  # -1 below the key, 1 above, 0 neither (equal to the key)
    clashes: bool  # too close to the key to be told apart (validation refuses it)
    # The pitfall before it, on its side, whose value it cannot be told apart from: the two
    # count once among the distinct pitfalls of that side.
    same_as: str | None = None


@dataclass(frozen=True)
class SideRow:
    params: tuple[tuple[str, str], ...]  # as the stem shows them
    key: Text
    cells: tuple[SideCell, ...]  # one per pitfall, in the template's order
    below: int  # distinct pitfalls that surely remain below the key
    above: int

    def failing(self, needed: int) -> bool:
        return self.below < needed or self.above < needed


@dataclass(frozen=True)
class SideTable:
    pitfall_ids: tuple[str, ...]
    needed: int  # choices − 1, on each side
    rows: tuple[SideRow, ...]
    combinations: int  # how many were checked
    failing: int  # how many of them fail
    first: int  # the rows are the first this many combinations, then failing ones


def side_table(template: Template) -> SideTable:
    """Each combination validation walks, with the key and each pitfall's side (see above)."""
    needed = template.choices - 1
    rows: list[SideRow] = []
    checked = failing = 0
    shown_failing = 0
    for values in parameter_combinations(template):
        checked += 1
        answer, pitfalls = candidates(template, values)
        cells = []
        for index, candidate in enumerate(pitfalls):
            where = side(answer, candidate)
            same_as = next(
                (
                    other.pitfall.id
                    for other in pitfalls[:index]
                    if other.pitfall is not None
                    and side(answer, other) == where
                    and clash(candidate, other)
                ),
                None,
            )
            cells.append(SideCell(candidate.text, where, clash(candidate, answer), same_as))
        row = SideRow(
            tuple(named_values(template, values).items()),
            answer.text,
            tuple(cells),
            distinct_on_side(answer, pitfalls, -1),
            distinct_on_side(answer, pitfalls, 1),
        )
        bad = row.failing(needed)
        failing += bad
        if len(rows) < SHOWN_ROWS or (bad and shown_failing < FAILING_ROWS):
            rows.append(row)
            shown_failing += bad
    return SideTable(
        tuple(p.id for p in template.pitfalls),
        needed,
        tuple(rows),
        checked,
        failing,
        min(SHOWN_ROWS, checked),
    )
