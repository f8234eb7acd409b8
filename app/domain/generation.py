"""Question variants: ``generate(card, template, seed)`` and ``grade(variant, choice_id)``.

A variant is fully determined by its :class:`~app.domain.identity.QuestionId` (card id, exam
point, template id and version, seed). A private stream seeded with that string
(:func:`variant_rng`: the template's ``generator``, a ``random.Random`` read through
:class:`Draws` or the BLAKE2b blocks of :class:`HashDraws`) is consumed in a fixed order:

1. each parameter, in declared order, is drawn from its domain;
2. the *rank* of the answer among the choices is drawn uniformly from ``0 .. choices - 1``: the
   number of shown pitfalls that will sort below it (numeric choices by value, statements by
   length, in English and in Chinese alike);
3. the pitfalls are shuffled, then kept in that order while their side of the answer still needs
   one and they do not *clash* with the answer or with a pitfall already kept, until ``rank``
   pitfalls below and ``choices - 1 - rank`` above are kept;
4. the kept choices (answer included) are shuffled and labelled ``a, b, c ...``;
5. a statement with other wordings (``answer_phrasings``, a pitfall's ``phrasings``) is shown
   in one of them, drawn choice by choice in display order (nothing is drawn for a statement
   with one wording).

So neither the size of a number nor the length of a statement says which choice is right: the
answer is the smallest, the second smallest ... or the largest equally often. Two numeric choices
clash when their displayed texts are equal or their exact values are less than
:data:`MIN_RELATIVE_GAP` apart; two statements clash when their texts are equal. Card validation
guarantees that no pitfall ever clashes with the answer and that every rank can be realised in
every seeded order (see :mod:`app.domain.validation`).

Numeric choices are shown together (:func:`aligned`): each in the readable unit of the template
unit's family (``40.6 MB`` rather than ``0.0406 GB``, ``17.8 µs`` beside ``20.5 ms``), all with
the template's number of significant figures (its ``precision``; 0 for whole counts), fewer when
every choice would only lose zeros (``6.0×, 12×, 1.5×, 48×``). A unit depends on its value only
and the figures on the shown set only, never on which choice is the key.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TypeVar

from .cards import Card, Pitfall, Template
from .identity import QuestionId
from .languages import LANGS
from .messages import Message
from .texts import BoundText, Text, TextTemplate
from .typed_number import TypedAnswer
from .units import (
    format_in,
    format_readable,
    get_unit,
    readable_unit,
    relative_gap,
    round_decimal,
    scaled,
    significant_decimals,
)

# Choices closer than this test rounding, not understanding (14.766 GB beside 15 GB).
MIN_RELATIVE_GAP = Fraction(1, 20)
_GAP = float(MIN_RELATIVE_GAP)
CHOICE_IDS = "abcdefgh"
T = TypeVar("T")


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
    unit: str | None = None  # the display unit once the choice is shown (see aligned)


@dataclass(frozen=True, eq=False, slots=True)
class Choice:
    id: str
    text: Text
    value: float | None  # the displayed number, in ``unit``; None for statements
    unit: str | None  # this choice's display unit (a readable one of the template's family)
    pitfall: Pitfall | None  # None for the correct choice
    # Where the pitfall's explanation gets this variant's numbers (its Combination, this shown
    # choice and the shown answer): filled when the choice is graded or reviewed, not when the
    # question is shown (the Combination caches the text).
    content: Combination = field(repr=False)
    shown: Candidate = field(repr=False)
    shown_answer: Candidate = field(repr=False)

    @property
    def explanation(self) -> Text | None:
        """The pitfall's explanation with this variant's numbers (None for the correct choice)."""
        if self.pitfall is None:
            return None
        return self.content.explanation(self.shown, self.shown_answer)

    @property
    def pitfall_id(self) -> str | None:
        return self.pitfall.id if self.pitfall is not None else None

    @property
    def correct(self) -> bool:
        return self.pitfall is None


@dataclass(frozen=True, eq=False, slots=True)
class Variant:
    id: QuestionId
    kind: str
    # Shared with the variant's Combination and every variant of it: read, never changed.
    params: Mapping[str, str]  # exact values, e.g. {"psi": "70000000000"}
    params_display: Mapping[str, str]  # e.g. {"psi": "70B"}
    stem: Text
    choices: tuple[Choice, ...]
    correct_choice_id: str
    answer: Text
    # The worked solution gets this variant's numbers when graded (see Choice.content).
    content: Combination = field(repr=False)
    shown_answer: Candidate = field(repr=False)

    @property
    def solution(self) -> tuple[Text, ...]:
        return self.content.solution(self.shown_answer)

    def choice(self, choice_id: str) -> Choice:
        for choice in self.choices:
            if choice.id == choice_id:
                return choice
        raise UnknownChoice(choice_id)


@dataclass(frozen=True, eq=False)
class Grade:
    """A graded answer: a choice (``chosen_choice_id``), or a typed number (``typed``, no choice
    ids: none were shown; see app.domain.typed)."""

    correct: bool
    chosen_choice_id: str | None
    correct_choice_id: str | None
    pitfall: Pitfall | None
    pitfall_explanation: Text | None
    explanation: Text
    solution: tuple[Text, ...]
    typed: TypedAnswer | None = None
    # Other pitfalls a typed value matches as well (the first in the template's order is
    # ``pitfall``).
    also_matched: tuple[Pitfall, ...] = ()

    @property
    def pitfall_id(self) -> str | None:
        return self.pitfall.id if self.pitfall is not None else None


# --- building blocks, shared with validation --------------------------------------------------


def question_id(card: Card, template: Template, seed: int) -> QuestionId:
    return QuestionId(card.id, template.point, template.id, template.version, seed)


class Draws:
    """A seeded stream's draws, made from its ``getrandbits`` alone: ``below`` (``randrange(n)``),
    ``choice`` and ``shuffle`` give exactly what ``random.Random``'s own methods give for the
    same seed (CPython's algorithms, spelled out: tests/test_generation.py compares them), so
    every variant regenerates as it was generated even if a later Python changes those methods
    (its documentation promises reproducible seeding and ``random()``, which reads the same
    Mersenne Twister words as ``getrandbits``, not the methods built on them), and at a
    fraction of the calls (the methods went three Python frames deep per number)."""

    __slots__ = ("_bits",)

    def __init__(self, rng: random.Random) -> None:
        self._bits = rng.getrandbits

    def below(self, n: int) -> int:
        """A uniform integer in ``0 .. n - 1`` (``n >= 1``): ``Random._randbelow``, which is
        also what ``Random.randrange(n)`` draws."""
        bits = self._bits
        k = n.bit_length()
        r = bits(k)
        while r >= n:
            r = bits(k)
        return r

    def choice(self, items: Sequence[T]) -> T:
        if not items:
            raise IndexError("cannot choose from an empty sequence")
        return items[self.below(len(items))]

    def shuffle(self, items: list[T]) -> None:
        """In place, Fisher-Yates from the end (``Random.shuffle``)."""
        bits = self._bits
        for i in range(len(items) - 1, 0, -1):
            n = i + 1
            k = n.bit_length()
            j = bits(k)
            while j >= n:
                j = bits(k)
            items[i], items[j] = items[j], items[i]


class HashDraws(Draws):
    """Generator 2's draws: the same ``below``, ``choice`` and ``shuffle`` over a stream of bytes,
    the BLAKE2b-512 digests of the key (its UTF-8 bytes; digest ``j`` made with ``salt`` = ``j`` as
    16 little-endian bytes, so the first is the plain digest), one after another. A number of
    ``k`` bits takes the next ``ceil(k / 8)`` bytes, little-endian, keeping its lowest ``k`` bits;
    when the digest has fewer bytes left, they are dropped and the number starts the next one.
    ``below(n)`` draws ``n.bit_length()`` bits until the number is below ``n``.

    One hash where seeding a Mersenne Twister from a string fills and stirs 624 words of state
    (SHA-512 of the key, then the state set up twice over): over a quarter of generating a
    variant. ``below`` and ``shuffle`` read the bytes inline: every range a variant draws from is
    below 256 (a byte a number), which takes no call and no big integer per number."""

    __slots__ = ("_key", "_block", "_bytes", "_at")

    DIGEST_BYTES = 64

    def __init__(self, key: str) -> None:
        self._key = key.encode()
        self._block = 0
        self._bytes = hashlib.blake2b(self._key, digest_size=self.DIGEST_BYTES).digest()
        self._at = 0

    def _next_block(self) -> None:
        self._block += 1
        salt = self._block.to_bytes(16, "little")
        self._bytes = hashlib.blake2b(self._key, digest_size=self.DIGEST_BYTES, salt=salt).digest()
        self._at = 0

    def getrandbits(self, k: int) -> int:
        """The next number of ``k`` bits (``1 <= k <= 512``)."""
        if not 0 < k <= 8 * self.DIGEST_BYTES:
            raise ValueError(f"numbers of 1 to {8 * self.DIGEST_BYTES} bits, not {k}")
        size = (k + 7) >> 3
        if self._at + size > self.DIGEST_BYTES:
            self._next_block()
        at = self._at
        self._at = at + size
        return int.from_bytes(self._bytes[at : at + size], "little") & ((1 << k) - 1)

    # What Draws' own methods read their numbers through, as a method of the class: an instance
    # holding its own bound method would be a reference cycle, left to the cyclic collector
    # (two more tracked objects alive per question until the next young collection).
    _bits = getrandbits

    def below(self, n: int) -> int:
        k = n.bit_length()
        if not 0 < k <= 8:
            return super().below(n)  # through getrandbits (validated there)
        mask = (1 << k) - 1
        while True:
            if self._at >= self.DIGEST_BYTES:
                self._next_block()
            r = self._bytes[self._at] & mask
            self._at += 1
            if r < n:
                return r

    def shuffle(self, items: list[T]) -> None:
        if len(items) > 256:
            super().shuffle(items)
            return
        data, at, end = self._bytes, self._at, self.DIGEST_BYTES
        for i in range(len(items) - 1, 0, -1):
            n = i + 1
            mask = (1 << n.bit_length()) - 1
            while True:
                if at >= end:
                    self._next_block()
                    data, at = self._bytes, 0
                j = data[at] & mask
                at += 1
                if j < n:
                    break
            items[i], items[j] = items[j], items[i]
        self._at = at


# The streams a template's variants may be drawn from (``generator`` in the card file): 1, a
# ``random.Random`` seeded with the key (read through :class:`Draws`); 2, :class:`HashDraws`.
# A template version keeps its generator for good (app.domain.catalog.check_versions).
GENERATORS = (1, 2)
LATEST_GENERATOR = 2


def seeded(key: str, generator: int = 1) -> Draws:
    """The draws of the stream of ``generator`` seeded with ``key``."""
    if generator == 2:
        return HashDraws(key)
    if generator == 1:
        return Draws(random.Random(key))
    raise ValueError(f"unknown generator {generator!r}: one of {GENERATORS}")


def variant_rng(question: QuestionId, generator: int) -> Draws:
    """The stream of the variant ``question`` of a template drawing from ``generator``."""
    return seeded(question.rng_key, generator)


def draw_params(template: Template, rng: Draws) -> dict[str, Fraction]:
    """The variant's parameter values, derived ones included: each parameter drawn in turn, or
    (a template with constraints) one of the combinations they allow."""
    return params_at(template, draw_indices(template, rng))


def draw_indices(template: Template, rng: Draws) -> int | tuple[int, ...]:
    """What :func:`draw_params` draws, as positions: in ``template.allowed`` (a template with
    constraints), or each parameter's in its ``values``."""
    if template.allowed is not None:
        return rng.below(len(template.allowed))
    return tuple([rng.below(len(param.values)) for param in template.params.values()])


def params_at(template: Template, indices: int | tuple[int, ...]) -> dict[str, Fraction]:
    """The parameter values, derived ones included, at the positions :func:`draw_indices`
    gives."""
    if isinstance(indices, int):
        assert template.allowed is not None
        drawn = dict(zip(template.params, template.allowed[indices], strict=True))
    else:
        drawn = {
            name: param.values[i]
            for (name, param), i in zip(template.params.items(), indices, strict=True)
        }
    return template.complete(drawn) if template.derived else drawn


def named_values(template: Template, values: Mapping[str, Fraction]) -> dict[str, str]:
    return {name: template.display(name, value) for name, value in values.items()}


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


# Choices show at least this many significant figures: with fewer, values 5% apart could read
# alike (1.9 and 2.0 as "2"), and a template's older 'precision' (once a count of decimals)
# still renders as before, choice for choice.
MIN_FIGURES = 3


def figures_of(template: Template) -> int:
    """The significant figures of a numeric template's choices: its ``precision``, at least
    :data:`MIN_FIGURES`; 0 (a whole count) stays 0."""
    return 0 if template.precision == 0 else max(template.precision, MIN_FIGURES)


def _numeric(template: Template, pitfall: Pitfall | None, value: Fraction) -> Candidate:
    """A numeric candidate, shown on its own in its readable unit (messages, clash of texts);
    :func:`displayed` shows the chosen ones together."""
    assert template.unit is not None
    figures = figures_of(template)
    en = format_readable(value, template.unit, figures, "en")
    has_zh = get_unit(template.unit).zh is not None
    text = Text(en, format_readable(value, template.unit, figures, "zh") if has_zh else en)
    whole = (figures == 0 or get_unit(template.unit).whole) and scaled(
        value, template.unit
    ).denominator == 1
    return Candidate(pitfall, text, value, whole, float(value))


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
    """Clash verdicts, sides and shown forms (unit, figures, texts) of one parameter
    combination's candidates, for callers that arrange the same candidates many times
    (generation, the giveaway measurement)."""

    def __init__(self) -> None:
        self.clashes: dict[tuple[int, int], bool] = {}
        self.walks: dict[tuple[int, int], _Walk] = {}
        self.forms: dict[int, tuple[Candidate, tuple[str, int]]] = {}
        self.rounded: dict[tuple[int, str, int], object] = {}
        self.shown: dict[tuple[int, int], Candidate] = {}
        self.phrased: dict[tuple[int, int], Candidate] = {}

    def clash(self, a: Candidate, b: Candidate) -> bool:
        key = (id(a), id(b))
        found = self.clashes.get(key)
        if found is None:
            found = self.clashes[key] = clash(a, b)
        return found

    def form(self, template: Template, c: Candidate) -> tuple[str, int]:
        found = self.forms.get(id(c))
        if found is None or found[0] is not c:
            found = self.forms[id(c)] = (c, choice_form(template, c, self))
        return found[1]

    def walk(self, answer: Candidate, pitfalls: Sequence[Candidate]) -> _Walk:
        key = (id(answer), id(pitfalls))
        found = self.walks.get(key)
        if found is None or found.answer is not answer or found.source is not pitfalls:
            found = self.walks[key] = _Walk.of(answer, pitfalls, self.clash)
        return found


@dataclass(frozen=True, slots=True)
class _Walk:
    """What :func:`_selected` asks of one answer's pitfalls, worked out once: each one's
    side of the answer, whether it clashes with the answer, and (bit ``j`` of ``clashes[i]``)
    with pitfall ``j``."""

    answer: Candidate
    source: Sequence[Candidate]
    pitfalls: tuple[Candidate, ...]
    sides: tuple[int, ...]
    clashes_answer: tuple[bool, ...]
    clashes: tuple[int, ...]

    @classmethod
    def of(
        cls,
        answer: Candidate,
        pitfalls: Sequence[Candidate],
        clashing: Callable[[Candidate, Candidate], bool] = clash,
    ) -> _Walk:
        own = tuple(pitfalls)
        return cls(
            answer,
            pitfalls,
            own,
            tuple(side(answer, c) for c in own),
            tuple(clashing(c, answer) for c in own),
            tuple(sum(1 << j for j, other in enumerate(own) if clashing(c, other)) for c in own),
        )


def _selected(walk: _Walk, below: int, above: int, rng: Draws) -> list[int]:
    """Step 3: walk the pitfalls in a seeded order, keeping ``below`` of them under the answer
    and ``above`` over it (fewer only when the card does not have them: validation refuses that);
    their positions in ``walk.pitfalls``."""
    # Shuffling the indices draws what shuffling the pitfalls would (it depends on the length
    # only) and gives the same order.
    order = list(range(len(walk.pitfalls)))
    rng.shuffle(order)
    kept: list[int] = []
    taken = 0  # bit i: pitfall i kept
    sides, clashes_answer, clashes = walk.sides, walk.clashes_answer, walk.clashes
    for i in order:
        if not below and not above:
            break
        where = sides[i]
        if where == -1:
            if not below:
                continue
        elif where == 1:
            if not above:
                continue
        else:
            continue
        if clashes_answer[i] or clashes[i] & taken:
            continue
        kept.append(i)
        taken |= 1 << i
        if where == -1:
            below -= 1
        else:
            above -= 1
    return kept


def _arranged(template: Template, walk: _Walk, rng: Draws) -> tuple[list[int], list[int]]:
    """Steps 2-5 of the module docstring as positions: the shown choices in display order
    (``len(walk.pitfalls)`` stands for the answer, ``i`` below it for ``walk.pitfalls[i]``) and
    the wording each is shown in (0: its own text; ``k``: its ``k``-th other wording; all 0 for
    a template without other wordings, which draws none)."""
    rank = rng.below(template.choices)
    shown = [len(walk.pitfalls), *_selected(walk, rank, template.choices - 1 - rank, rng)]
    rng.shuffle(shown)
    if not template.phrased:
        return shown, [0] * len(shown)
    wordings = []
    for i in shown:
        others = _wordings(template, walk.pitfalls[i] if i < len(walk.pitfalls) else walk.answer)
        wordings.append(rng.below(len(others) + 1) if others else 0)
    return shown, wordings


def arrange(
    template: Template,
    answer: Candidate,
    pitfalls: Sequence[Candidate],
    rng: Draws,
    memo: Memo | None = None,
) -> list[Candidate]:
    """The shown choices in display order: steps 2-5 of the module docstring."""
    memo = memo if memo is not None else Memo()
    walk = memo.walk(answer, pitfalls)
    positions, wordings = _arranged(template, walk, rng)
    shown = [
        phrased(template, walk.pitfalls[i] if i < len(walk.pitfalls) else answer, k, memo)
        for i, k in zip(positions, wordings, strict=True)
    ]
    return aligned(template, shown, memo)


def _wordings(template: Template, c: Candidate) -> tuple[Text, ...]:
    """The other wordings of ``c``'s statement."""
    return template.answer_phrasings if c.pitfall is None else c.pitfall.phrasings


def phrased(template: Template, c: Candidate, wording: int, memo: Memo) -> Candidate:
    """``c`` in its statement's wording ``wording`` (0: its own; drawn in display order, nothing
    drawn for a statement with one wording, so templates without phrasings draw as they always
    did). Validation keeps every wording on the same side of every wording of the answer, so the
    drawn rank by length holds whichever is shown."""
    if wording == 0:
        return c
    key = (id(c), wording)
    found = memo.phrased.get(key)
    if found is None or found.pitfall is not c.pitfall:
        found = memo.phrased[key] = Candidate(c.pitfall, _wordings(template, c)[wording - 1], None)
    return found


def aligned(
    template: Template, shown: Sequence[Candidate], memo: Memo | None = None
) -> list[Candidate]:
    """The numeric choices of one question shown together (see the module docstring): each in
    the readable unit of the template unit's family (40.6 MB beside 2.60 GB, not 0.0406 GB),
    all with the template's significant figures (fewer when all would only lose zeros),
    trailing zeros kept so that a text's length says nothing about the key."""
    if template.kind != "numeric" or template.unit is None:
        return list(shown)
    memo = memo if memo is not None else Memo()
    forms = [memo.form(template, c) for c in shown]
    # Each value allows a range of fewer figures; the set takes the narrowest.
    figures = max(fewest for _unit, fewest in forms)
    return [
        shown_in(c, unit, figures, memo) for c, (unit, _fewest) in zip(shown, forms, strict=True)
    ]


def shown_in(c: Candidate, unit: str, figures: int, memo: Memo) -> Candidate:
    """The numeric choice ``c`` as shown in ``unit`` with ``figures`` significant figures."""
    key = (id(c), figures)
    found = memo.shown.get(key)
    if found is None or found.pitfall is not c.pitfall or found.value is not c.value:
        assert c.value is not None
        en = format_in(c.value, unit, figures, "en")
        zh = format_in(c.value, unit, figures, "zh") if get_unit(unit).zh is not None else en
        found = memo.shown[key] = Candidate(
            c.pitfall, Text(en, zh), c.value, c.whole, c.approx, unit
        )
    return found


def choice_form(template: Template, c: Candidate, memo: Memo) -> tuple[str, int]:
    """How one numeric choice can be shown: the unit it reads best in (the template's unit gets
    one step of slack: 1120 GB stays 1120 GB; it depends on the value only, never on which
    choice is the key), and the fewest significant figures it reads the same at as at the
    template's, every count in between included (48.0 at 3 figures reads as 48 at 2, not as 50
    at 1): a question shows the largest of these over its choices, the template's own when
    there is a count unit among them (6.0×, 12×, 1.5×, 48× rather than 6.00×, 12.0×, 1.50×,
    48.0×)."""
    assert template.unit is not None and c.value is not None
    figures = figures_of(template)
    unit = readable_unit([c.value], template.unit, figures)
    if figures <= 1 or get_unit(unit).whole:
        return unit, figures
    exact = _rounded(c, unit, figures, memo)
    fewest = figures
    for fewer in range(figures - 1, 0, -1):
        if _rounded(c, unit, fewer, memo) != exact:
            break
        fewest = fewer
    return unit, fewest


def _rounded(c: Candidate, unit: str, figures: int, memo: Memo) -> object:
    key = (id(c), unit, figures)
    found = memo.rounded.get(key)
    if found is None:
        assert c.value is not None
        value = scaled(c.value, unit)
        found = memo.rounded[key] = round_decimal(value, significant_decimals(value, figures))
    return found


# --- the public API ---------------------------------------------------------------------------


class Combination:
    """What a template gives for one combination of parameter values, whatever the seed: the
    evaluated candidates, their clash verdicts and display texts (:class:`Memo`), and the stem,
    solution and explanations (:meth:`stem`, :meth:`solution`, :meth:`explanation`: the
    combination's values are put in once, the shown answer's and pitfall's texts, which follow
    the shown set's unit and figures, per set), and its variants (:meth:`variant`).
    Seeds only decide which combination, which pitfalls and in what order, so many seeds share
    one combination: a card's whole parameter domain is often a few hundred combinations.

    Immutable once built but for its memo dictionaries, which only ever gain entries equal to
    what any thread would compute; safe to share between threads.
    """

    __slots__ = (
        "template",
        "values",
        "answer",
        "pitfalls",
        "memo",
        "params",
        "params_display",
        "_bound",
        "_texts",
        "_walk",
        "_fewest",
        "_shown",
        "_placed",
        "_stems",
        "__weakref__",  # presenters keep what they make of a combination only while it lives
    )

    def __init__(self, template: Template, values: dict[str, Fraction]) -> None:
        self.template = template
        self.values = values
        self.answer, self.pitfalls = candidates(template, values)
        self.memo = Memo()
        wordings = [template.answer_phrasings, *(p.phrasings for p in template.pitfalls)]
        if figures_of(template) >= SHOWN_KEYS or max(map(len, wordings)) >= SHOWN_KEYS:
            raise ValueError(f"{template.id}: more figures or wordings than a choice's key holds")
        self.params = {name: _exact(value) for name, value in values.items()}
        self.params_display = named_values(template, values)
        self._bound: dict[tuple[object, ...], BoundText] = {}
        self._texts: dict[tuple[object, ...], tuple[Candidate, Candidate | None, Text]] = {}
        # What variant() keeps, by position (see there).
        self._walk: _Walk | None = None
        self._fewest: dict[int, tuple[str, int]] = {}
        self._shown: dict[int, Candidate] = {}
        self._placed: dict[tuple[int, int, int], Choice] = {}
        self._stems: dict[int, Text] = {}

    def variant(self, identity: QuestionId, rng: Draws) -> Variant:
        """The variant ``identity`` of this combination, its choices arranged by ``rng`` (whose
        parameters have been drawn): what :func:`arrange` and the choices make of it, worked out
        on positions, with every shown form, choice and stem kept by position. A seed's
        arrangement is seldom seen again (thousands per combination), but its parts are: a
        numeric choice is shown at one of a few figures, a statement in one of its wordings, a
        choice under one of a few labels. tests/test_generation.py compares this with
        :func:`arrange` over every template."""
        template = self.template
        walk = self._walk
        if walk is None:
            walk = self._walk = self.memo.walk(self.answer, self.pitfalls)
        positions, wordings = _arranged(template, walk, rng)
        # A shown form's key: its position times SHOWN_KEYS plus its figures (a numeric choice)
        # or its wording (a statement); both stay below SHOWN_KEYS (the card format's limits).
        if template.kind == "numeric" and template.unit is not None:
            fewest = self._fewest
            figures = 0
            for i in positions:
                form = fewest.get(i)
                if form is None:
                    form = fewest[i] = self.memo.form(template, self._candidate(walk, i))
                figures = max(figures, form[1])
            keys = [i * SHOWN_KEYS + figures for i in positions]
        else:
            keys = [i * SHOWN_KEYS + k for i, k in zip(positions, wordings, strict=True)]
        answer_key = keys[positions.index(len(walk.pitfalls))]
        answer = self._shown_form(walk, answer_key)
        placed = self._placed
        choices = []
        for label, key in enumerate(keys):
            choice = placed.get((label, key, answer_key))
            if choice is None:
                choice = placed[(label, key, answer_key)] = self.choice(
                    CHOICE_IDS[label], self._shown_form(walk, key), answer
                )
            choices.append(choice)
        stem = self._stems.get(answer_key)
        if stem is None:
            stem = self._stems[answer_key] = self.stem(answer)
        return Variant(
            id=identity,
            kind=template.kind,
            params=self.params,
            params_display=self.params_display,
            stem=stem,
            choices=tuple(choices),
            correct_choice_id=CHOICE_IDS[positions.index(len(walk.pitfalls))],
            answer=answer.text,
            content=self,
            shown_answer=answer,
        )

    def _candidate(self, walk: _Walk, position: int) -> Candidate:
        return walk.pitfalls[position] if position < len(walk.pitfalls) else self.answer

    def _shown_form(self, walk: _Walk, key: int) -> Candidate:
        """The shown form of a :meth:`variant` key."""
        found = self._shown.get(key)
        if found is None:
            position, detail = divmod(key, SHOWN_KEYS)
            c = self._candidate(walk, position)
            template = self.template
            if template.kind == "numeric" and template.unit is not None:
                found = shown_in(c, self._fewest[position][0], detail, self.memo)
            else:
                found = phrased(template, c, detail, self.memo)
            self._shown[key] = found
        return found

    def stem(self, answer: Candidate) -> Text:
        """The stem with ``answer`` as the shown answer."""
        return self._rendered(("stem",), self.template.stem, answer, None)

    def solution(self, answer: Candidate) -> tuple[Text, ...]:
        return tuple(
            self._rendered(("solution", i), step, answer, None)
            for i, step in enumerate(self.template.solution)
        )

    def choice(self, choice_id: str, shown: Candidate, answer: Candidate) -> Choice:
        """The choice labelled ``choice_id`` showing ``shown`` (one of the memo's shown forms, or
        a candidate itself) beside the shown ``answer`` (:meth:`variant` keeps each one it
        makes: every seed showing them shows this choice)."""
        return Choice(
            id=choice_id,
            text=shown.text,
            value=_display_number(shown, shown.unit),
            unit=shown.unit if shown.value is not None else None,
            pitfall=shown.pitfall,
            content=self,
            shown=shown,
            shown_answer=answer,
        )

    def explanation(self, candidate: Candidate, answer: Candidate) -> Text:
        """A pitfall's explanation with this variant's numbers (``{value}`` is the pitfall's
        own shown value, ``{answer}`` the shown answer)."""
        assert candidate.pitfall is not None
        template = candidate.pitfall.explanation_template
        return self._rendered(("explain", candidate.pitfall.id), template, answer, candidate)

    def _rendered(
        self,
        key: tuple[object, ...],
        text: TextTemplate,
        answer: Candidate,
        value: Candidate | None,
    ) -> Text:
        """``text`` with this combination's values and parameters, ``{answer}`` as ``answer``
        shows and ``{value}`` as ``value`` shows, put in. Both steps are cached: the text bound
        to the combination (formulas evaluated and formatted once; validation binds every text
        of every combination it walks), then the text filled for these shown candidates (the
        memo's shown forms, so many shown sets share them), by identity, checked."""
        filled_key = (key, id(answer), id(value))
        found = self._texts.get(filled_key)
        if found is not None and found[0] is answer and found[1] is value:
            return found[2]
        named = {"answer": answer.text}
        if value is not None:
            named["value"] = value.text
        bound = self._bound.get(key)
        if bound is None:
            bound = self._bound[key] = text.bind(self.values, self.params_display, frozenset(named))
        filled = bound.fill(named)
        self._texts[filled_key] = (answer, value, filled)
        return filled


# Figures (at most 12, the card format's precision limit) and wordings (at most 9) a shown form's
# key in Combination.variant leaves room for.
SHOWN_KEYS = 16

# Combinations kept per process (least recently used first out); each holds a few kilobytes.
COMBINATIONS_KEPT = 4096
_combinations: OrderedDict[tuple[int, object], Combination] = OrderedDict()
_combinations_lock = threading.Lock()


def combination(template: Template, values: dict[str, Fraction]) -> Combination:
    """The (cached) :class:`Combination` of ``template`` for ``values``.

    Keyed by the template object itself (identity, checked: a draft previewed under a published
    template's id and version is another object) and the values' numerators and denominators.
    """
    key = (id(template), tuple(n for v in values.values() for n in (v.numerator, v.denominator)))
    return _kept(_combinations, key, template, lambda: Combination(template, values))


def _kept(
    kept: OrderedDict[tuple[int, object], Combination],
    key: tuple[int, object],
    template: Template,
    build: Callable[[], Combination],
) -> Combination:
    """The combination ``kept`` holds under ``key`` for ``template`` (identity, checked), else
    the one ``build`` makes, kept (least recently used first out, ``COMBINATIONS_KEPT``)."""
    with _combinations_lock:
        found = kept.get(key)
        if found is not None and found.template is template:
            kept.move_to_end(key)
            return found
    built = build()
    with _combinations_lock:
        kept[key] = built
        while len(kept) > COMBINATIONS_KEPT:
            kept.popitem(last=False)
    return built


# Variants kept per process (the oldest made first out): a question served is answered within
# minutes, mostly by the same process (its client's connection), and grading regenerates it from
# its id; each holds its own small dicts and shares its texts with its Combination. Read without
# the lock (a question GET adds one, so the lookup is the cheap part). An OrderedDict: taking the
# oldest out of a plain dict (``next(iter(d))``) walks over the slot of every key taken out before
# it until the dict is next resized, about 5 µs a question once it is full.
VARIANTS_KEPT = 8192
_variants: OrderedDict[tuple[int, int, int], tuple[Card, Template, Variant]] = OrderedDict()
_variants_lock = threading.Lock()


def generate(card: Card, template: Template, seed: int) -> Variant:
    """The variant of ``template`` for ``seed``: the same inputs always give the same variant
    (the same object while it is kept: variants are immutable).

    Kept by the card and template objects themselves (identity, checked, as for
    :func:`combination`: a draft previewed under a published template's id and version is
    another object) and the seed."""
    key = (id(card), id(template), seed)
    found = _variants.get(key)
    if found is not None and found[0] is card and found[1] is template:
        return found[2]
    made = _generate(card, template, seed)
    with _variants_lock:
        _variants[key] = (card, template, made)
        while len(_variants) > VARIANTS_KEPT:
            _variants.popitem(last=False)
    return made


def _generate(card: Card, template: Template, seed: int) -> Variant:
    identity = question_id(card, template, seed)
    rng = variant_rng(identity, template.generator)
    return drawn_combination(template, rng).variant(identity, rng)


# The combinations above, kept by the template object and the drawn positions (draw_indices), so
# that a variant finds its combination without its values.
_drawn: OrderedDict[tuple[int, object], Combination] = OrderedDict()


def drawn_combination(template: Template, rng: Draws) -> Combination:
    """The :func:`combination` of the parameter values ``rng`` draws next (as
    :func:`draw_params` draws them)."""
    indices = draw_indices(template, rng)
    return _kept(
        _drawn,
        (id(template), indices),
        template,
        lambda: combination(template, params_at(template, indices)),
    )


def generate_for_point(card: Card, point_slug: str, seed: int) -> Variant:
    """A variant for an exam point: the seed picks the template, then the variant."""
    point = card.point_by_slug(point_slug)
    if point is None:
        raise KeyError(point_slug)
    template = point.templates[
        pick_index(f"{card.id}:point:{point.slug}:{seed}", len(point.templates))
    ]
    return generate(card, template, seed)


def pick_index(key: str, count: int) -> int:
    """An index below ``count`` fixed by ``key``: its 64-bit BLAKE2b digest modulo ``count``
    (uniform to within ``count / 2**64``). One hash, where a seeded Mersenne Twister set up
    624 words of state for one draw (a twentieth of a question request)."""
    digest = hashlib.blake2b(key.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") % count


def grade(variant: Variant, choice_id: str) -> Grade:
    """Right or wrong, the pitfall behind a wrong choice, and the worked solution."""
    chosen = variant.choice(choice_id)
    correct = variant.choice(variant.correct_choice_id)
    explanation: Text
    if chosen.pitfall is None and variant.kind == "numeric":
        explanation = Message("%(answer)s is right.", answer=correct.text)
    elif chosen.pitfall is None:  # a statement is a sentence of its own, full stop included
        explanation = Message("That statement is right: %(answer)s", answer=correct.text)
    elif variant.kind == "numeric":
        explanation = Message(
            "%(chosen)s is what the pitfall “%(pitfall)s” gives; the answer is %(answer)s.",
            chosen=chosen.text,
            pitfall=chosen.pitfall.title,
            answer=correct.text,
        )
    else:
        explanation = Message(
            "That statement is the pitfall “%(pitfall)s”. The correct statement: %(answer)s",
            pitfall=chosen.pitfall.title,
            answer=correct.text,
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


def _display_number(candidate: Candidate, unit: str | None) -> float | None:
    """The number a choice shows, in the question's unit (read back from its text)."""
    if candidate.value is None or unit is None:
        return None
    number = candidate.text.en.split(" ")[0]
    suffix = get_unit(unit).suffix
    if suffix and not get_unit(unit).spaced and number.endswith(suffix):
        number = number[: -len(suffix)]
    return float(number)


def _exact(value: Fraction) -> str:
    return (
        str(value.numerator) if value.denominator == 1 else f"{value.numerator}/{value.denominator}"
    )
