"""Which question comes next: the rules that keep a learner from being handed a key they have
just seen. Practice sessions, batches of questions and "practise again" all choose through
:func:`choose_questions`.

- **Rounds.** Within one session or batch, no template comes a second time before every template
  in scope has been shown once (nor a third time before every one has come twice, and so on); the
  exam points in scope take turns the same way, and of the templates still due in a round, the
  one the learner saw longest ago comes first.
- **Fresh keys.** A question whose key the learner saw in their last :data:`RECENT_ANSWERS`
  answers is not served. A question's key is what the feedback showed as the answer: a numeric
  template's exact value (in base units, so 16Ψ in GB and in GiB is one key, and two templates
  with the same answer share it), or a statement template's key sentence.
- **New numbers.** A template seen in those answers comes back only with a new value for every
  parameter its key depends on (the parameters its answer formula reads that can take more than
  one value): "practise again" never asks about the same model size again.

A template whose key cannot be fresh (a statement template has one key sentence, so it is stale
for as long as it stays among the recent answers) gives way to the other templates in scope,
then to the other templates of the same exam points (``wider``); only when none of them can be
fresh is the stalest question served (the one breaking the fewest rules, seen longest ago).
Where the rounds and the fresh keys disagree (the templates left in a round are statements seen
in the last answers), the fresh keys win: those wait while others come again with new numbers.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from .cards import Template
from .generation import draw_params, seeded
from .identity import QuestionId
from .units import FAMILIES

RECENT_ANSWERS = 10  # the answers whose keys are not served again
DRAWS = 48  # seeds tried for a fresh key before a template counts as stale

_BASE_UNIT = {name: family[0] for family in FAMILIES for name in family}


@dataclass(frozen=True)
class SeenQuestion:
    """A question the learner answered, and so saw the key of in its feedback."""

    card_id: str
    template_id: str
    key: str
    values: Mapping[str, Fraction]


@dataclass(frozen=True)
class Pick:
    """A chosen question: its template and the seed of its variant (the ``draw``-th tried)."""

    card_id: str
    template: Template
    seed: int
    draw: int
    key: str
    values: Mapping[str, Fraction]

    def seen(self) -> SeenQuestion:
        return SeenQuestion(self.card_id, self.template.id, self.key, self.values)


def question_key(template: Template, values: Mapping[str, Fraction]) -> str:
    """The key of ``template``'s question with these parameter values (see the module doc)."""
    if template.kind == "statement":
        assert template.answer_statement is not None
        return f"says:{template.answer_statement.en}"
    assert template.answer_formula is not None and template.unit is not None
    unit = template.unit
    base = "B" if unit.endswith("iB") else _BASE_UNIT.get(unit, unit)
    return f"{base}:{template.answer_formula.evaluate(values)}"


def key_params(template: Template) -> list[str]:
    """The parameters a template's key depends on and that can change between its questions."""
    if template.answer_formula is None:
        return []
    return [
        name
        for name in sorted(template.answer_formula.names)
        if name in template.params and len(template.params[name].values) > 1
    ]


def draw_values(card_id: str, template: Template, seed: int) -> dict[str, Fraction]:
    """The parameter values of the variant ``seed`` of ``template`` (what generation draws)."""
    identity = QuestionId(card_id, template.point, template.id, template.version, seed)
    return draw_params(template, seeded(identity.rng_key, template.generator))


# A seed for (position in the sequence, draw): draw 0 is the position's own seed; later draws
# are other seeds for the same position, tried when the earlier ones were stale.
Seeds = Callable[[int, int], int]


def choose_questions(
    card_id: str,
    scope: Sequence[Template],
    count: int,
    *,
    seen: Sequence[SeenQuestion],
    seeds: Seeds,
    rng: random.Random,
    wider: Sequence[Template] = (),
) -> list[Pick]:
    """``count`` questions from ``scope`` in order, each chosen by the rules of this module.

    ``seen`` is what the learner answered before, oldest first (only the last
    :data:`RECENT_ANSWERS` block keys; older ones still order a round). Each pick counts as seen
    by the next, as the learner answers them in order. ``rng`` breaks ties between templates.
    """
    if not scope:
        return []
    chooser = Chooser(card_id, scope, history=list(seen), rng=rng, wider=wider)
    return [chooser.choose(position, seeds) for position in range(count)]


class Chooser:
    """The questions of one card's ``scope``, one at a time, by the rules of this module.

    Choosers of several cards may share one ``history`` (a session spanning the deck): each
    pick joins it, so a card's next question knows what every card asked before it, while the
    rounds over templates and exam points are each card's own."""

    def __init__(
        self,
        card_id: str,
        scope: Sequence[Template],
        *,
        history: list[SeenQuestion],
        rng: random.Random,
        wider: Sequence[Template] = (),
    ) -> None:
        if not scope:
            raise ValueError("a chooser needs at least one template in scope")
        self.card_id = card_id
        self.scope = scope
        self.wider = wider
        self.history = history
        self.rng = rng
        self.shown: dict[str, int] = {}
        self.point_turns: dict[str, int] = {}

    def choose(self, position: int, seeds: Seeds) -> Pick:
        """The question at ``position`` of the sequence (its seeds: ``seeds(position, draw)``)."""
        pick = _choose(
            self.card_id, self.scope, self.wider, self.history, self.shown, self.point_turns,
            seeds, position, self.rng,
        )  # fmt: skip
        self.history.append(pick.seen())
        self.shown[pick.template.id] = self.shown.get(pick.template.id, 0) + 1
        self.point_turns[pick.template.point] = self.point_turns.get(pick.template.point, 0) + 1
        return pick


@dataclass(frozen=True)
class _Try:
    stale: tuple[int, int]  # (key seen recently, parameters of the key unchanged): 0 when fresh
    seed: int
    draw: int
    key: str
    values: Mapping[str, Fraction]


def _choose(
    card_id: str,
    scope: Sequence[Template],
    wider: Sequence[Template],
    history: Sequence[SeenQuestion],
    shown: Mapping[str, int],
    point_turns: Mapping[str, int],
    seeds: Seeds,
    position: int,
    rng: random.Random,
) -> Pick:
    recent = history[-RECENT_ANSWERS:]
    blocked = {s.key for s in recent}
    # Templates are named within their card: another card's template of the same id is another.
    last_values = {s.template_id: s.values for s in recent if s.card_id == card_id}
    last_seen = {s.template_id: i for i, s in enumerate(history) if s.card_id == card_id}

    def order(templates: Sequence[Template]) -> list[Template]:
        shuffled = list(templates)
        rng.shuffle(shuffled)
        return sorted(
            shuffled,
            key=lambda t: (
                shown.get(t.id, 0),
                point_turns.get(t.point, 0),
                last_seen.get(t.id, -1),
            ),
        )

    def best_try(template: Template) -> _Try:
        previous = last_values.get(template.id)
        names = key_params(template) if previous is not None else []
        best: _Try | None = None
        for draw in range(DRAWS if template.params else 1):
            seed = seeds(position, draw)
            values = draw_values(card_id, template, seed)
            key = question_key(template, values)
            same = sum(1 for n in names if previous is not None and previous.get(n) == values[n])
            attempt = _Try((int(key in blocked), same), seed, draw, key, values)
            if attempt.stale == (0, 0):
                return attempt
            if best is None or attempt.stale < best.stale:
                best = attempt
        assert best is not None
        return best

    in_scope = {t.id for t in scope}
    stalest: tuple[tuple[int, int], Template, _Try] | None = None
    for group in (scope, [t for t in wider if t.id not in in_scope]):
        for template in order(group):
            found = best_try(template)
            if found.stale == (0, 0):
                return Pick(card_id, template, found.seed, found.draw, found.key, found.values)
            if group is scope and (stalest is None or found.stale < stalest[0]):
                stalest = (found.stale, template, found)
    assert stalest is not None
    _, template, found = stalest
    return Pick(card_id, template, found.seed, found.draw, found.key, found.values)
