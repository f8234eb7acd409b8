"""How often a guesser that never reads the content would be right.

A content-blind strategy looks only at the form of the choices: pick the longest (or shortest)
text, pick the k-th smallest number, pick the one choice whose register differs from the others
(hedged among absolute statements, or the reverse), pick among the choices that have (or lack) a
mark of form: a formula, an aside in parentheses, clauses joined by a semicolon, a number
(:data:`FORMS`). A well-made question gives every such strategy about ``1/choices``; a strategy
that wins clearly more often is a giveaway.

:func:`variant_wins` scores one shown question; :func:`template_giveaways` measures a template
over its whole parameter domain and many seeded arrangements of the choices (the same
arrangement code that :func:`app.domain.generation.generate` uses), and
:func:`card_giveaways` does it for every template of a card.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from .cards import Card, Template
from .generation import Candidate, Memo
from .languages import LANGS
from .texts import Text

# A content-blind strategy may win at most this much more often than a blind pick (1/choices).
GIVEAWAY_MARGIN = Fraction(1, 5)
# Arrangements measured per template when a card is validated at load (the report uses more).
LOAD_SAMPLES = 300
REPORT_SAMPLES = 4000

# Words that hedge a claim, and words that make it absolute. A choice is "hedged" when it has a
# hedge and no absolute word; "absolute" in the reverse case.
_HEDGES = {
    "en": re.compile(
        r"\b(usually|often|typically|generally|mostly|roughly|approximately|tends? to|"
        r"likely|in practice|can|may|might)\b",
        re.IGNORECASE,
    ),
    "zh": re.compile(r"通常|往往|一般|大多|可能|倾向|多半|未必"),
}
_ABSOLUTES = {
    "en": re.compile(
        r"\b(always|never|rarely|exactly|whatever|no matter|regardless|at any scale)\b",
        re.IGNORECASE,
    ),
    "zh": re.compile(r"总是|永远|从不|绝不|很少|无论|任何情况|完全"),
}


# Marks of form a guesser can see without reading: a choice has one or not. A key alone in
# carrying one (the only choice with a formula, or the only one with an aside), or alone in
# lacking it, is found by looking.
_MATH = re.compile(r"\$[^$]+\$")
# A number stated as such (32 GB, 1.5×, 8 位), not a digit inside a name (fp16, ZeRO-3, V100).
_NUMBER = re.compile(r"(?<![A-Za-z0-9_.\-])\d")
FORMS: dict[str, Callable[[str], bool]] = {
    "formula": lambda text: _MATH.search(text) is not None,
    "aside": lambda text: "(" in text or "（" in text,
    "semicolon": lambda text: ";" in text or "；" in text,
    "number": lambda text: _NUMBER.search(_MATH.sub("", text)) is not None,
}


@lru_cache(maxsize=8192)
def forms(text: str) -> tuple[bool, ...]:
    """Which of :data:`FORMS` ``text`` has, in their order."""
    return tuple(has(text) for has in FORMS.values())


@dataclass(frozen=True)
class ShownChoice:
    """What a content-blind guesser sees of one choice, and whether it is the key."""

    text: Text
    value: Fraction | float | None  # numeric choices: the value (exact or float); statements: None
    correct: bool


@dataclass(frozen=True)
class TemplateGiveaways:
    template_id: str
    choices: int
    samples: int
    shares: Mapping[str, float]  # strategy -> share of variants it answers right

    @property
    def chance(self) -> float:
        return 1 / self.choices

    @property
    def limit(self) -> float:
        return float(Fraction(1, self.choices) + GIVEAWAY_MARGIN)

    @property
    def worst(self) -> tuple[str, float]:
        strategy = max(self.shares, key=lambda name: (self.shares[name], name))
        return strategy, self.shares[strategy]

    def line(self) -> str:
        """One report line: the worst strategy first, then every share."""
        name, share = self.worst
        cells = ", ".join(f"{k} {v:.0%}" for k, v in self.shares.items())
        flag = "  GIVEAWAY" if share > self.limit else ""
        return (
            f"{self.template_id}: worst {name} {share:.0%} (chance {self.chance:.0%}, "
            f"limit {self.limit:.0%}){flag} | {cells}"
        )


@lru_cache(maxsize=4096)
def register(text: str, lang: str) -> str:
    """'hedged', 'absolute' or 'plain'."""
    hedged = _HEDGES[lang].search(text) is not None
    absolute = _ABSOLUTES[lang].search(text) is not None
    if hedged and not absolute:
        return "hedged"
    if absolute and not hedged:
        return "absolute"
    return "plain"


def _pick(group: Sequence[int], key: int) -> float:
    """A guesser choosing uniformly inside ``group``: its chance to hit ``key``."""
    return 1 / len(group) if key in group else 0.0


def variant_wins(choices: Sequence[ShownChoice]) -> dict[str, float]:
    """For one shown question, each strategy's chance of picking the key (ties split evenly)."""
    n = len(choices)
    key = next(i for i, c in enumerate(choices) if c.correct)
    wins: dict[str, float] = {}
    numeric = all(c.value is not None for c in choices)
    langs = ("en",) if numeric else LANGS
    for lang in langs:
        suffix = "" if numeric else f" ({lang})"
        lengths = [len(c.text.get(lang)) for c in choices]
        longest = [i for i, v in enumerate(lengths) if v == max(lengths)]
        shortest = [i for i, v in enumerate(lengths) if v == min(lengths)]
        wins[f"longest{suffix}"] = _pick(longest, key)
        wins[f"shortest{suffix}"] = _pick(shortest, key)
        if not numeric:
            # k-th by length, ties broken at random: the share of orders putting the key k-th
            for k in range(2, n):
                wins[f"length rank {k}{suffix}"] = _rank_share(lengths, key, k)
            registers = [register(c.text.get(lang), lang) for c in choices]
            odd = [
                i
                for i, r in enumerate(registers)
                if registers.count(r) == 1 and n - 1 >= 2 and len(set(registers)) == 2
            ]
            wins[f"odd register{suffix}"] = _pick(odd, key) if odd else 1 / n
            marks = [forms(c.text.get(lang)) for c in choices]
            for f, name in enumerate(FORMS):
                having = [i for i in range(n) if marks[i][f]]
                lacking = [i for i in range(n) if not marks[i][f]]
                wins[f"with {name}{suffix}"] = _pick(having, key) if having else 1 / n
                wins[f"without {name}{suffix}"] = _pick(lacking, key) if lacking else 1 / n
    if numeric:
        values = [c.value for c in choices if c.value is not None]  # all of them: numeric
        for k in range(1, n + 1):
            wins[f"value rank {k}"] = _rank_share(values, key, k)
    return wins


def _rank_share(measures: Sequence[Fraction | float], key: int, k: int) -> float:
    """Chance that the key is k-th (1 = smallest) when ties are ordered at random."""
    below = sum(1 for m in measures if m < measures[key])
    tied = sum(1 for m in measures if m == measures[key])
    if below < k <= below + tied:
        return 1 / tied
    return 0.0


def measure(
    template_id: str, choices: int, variants: Iterable[Sequence[ShownChoice]]
) -> TemplateGiveaways:
    """Average :func:`variant_wins` over ``variants``."""
    totals: dict[str, float] = {}
    count = 0
    for shown in variants:
        count += 1
        for name, value in variant_wins(shown).items():
            totals[name] = totals.get(name, 0.0) + value
    return TemplateGiveaways(
        template_id, choices, count, {k: v / count for k, v in totals.items()} if count else {}
    )


Evaluated = Sequence[tuple[Candidate, Sequence[Candidate]]]


def evaluate_domain(template: Template) -> list[tuple[Candidate, list[Candidate]]]:
    """The answer and pitfalls of every parameter combination validation walks."""
    from .generation import candidates
    from .sampling import parameter_combinations

    return [candidates(template, values) for values in parameter_combinations(template)]


def _arrangements(
    template: Template, samples: int, evaluated: Evaluated, memos: Sequence[Memo] | None = None
) -> Iterator[list[ShownChoice]]:
    from .generation import arrange, seeded

    per_combo = max(1, -(-samples // len(evaluated)))
    for index, (answer, pitfalls) in enumerate(evaluated):
        memo = memos[index] if memos is not None else Memo()
        rng = seeded(f"giveaways:{template.id}:{index}", template.generator)
        for _ in range(per_combo):
            shown = arrange(template, answer, pitfalls, rng, memo)
            # floats order the values exactly as Fractions here: shown values are >= 5% apart
            yield [
                ShownChoice(c.text, None if c.value is None else c.approx, c.pitfall is None)
                for c in shown
            ]


def template_giveaways(
    template: Template,
    samples: int = REPORT_SAMPLES,
    evaluated: Evaluated | None = None,
    memos: Sequence[Memo] | None = None,
) -> TemplateGiveaways:
    """The template measured over its domain and about ``samples`` seeded arrangements of the
    choices (``evaluated``: the domain's candidates, when the caller has them already; ``memos``:
    their combinations' memos, which the arrangements then warm for generation)."""
    if evaluated is None:
        evaluated = evaluate_domain(template)
    arrangements = _arrangements(template, samples, evaluated, memos)
    return measure(template.id, template.choices, arrangements)


def card_giveaways(card: Card, samples: int = REPORT_SAMPLES) -> list[TemplateGiveaways]:
    return [template_giveaways(t, samples) for t in card.templates()]


def overall_best_guess(reports: Sequence[TemplateGiveaways]) -> tuple[float, float]:
    """A guesser that knows, per template, its best content-blind strategy: its mean score over
    templates, and the mean chance score, as ``(score, chance)``."""
    if not reports:
        return 0.0, 0.0
    score = sum(r.worst[1] for r in reports) / len(reports)
    chance = sum(r.chance for r in reports) / len(reports)
    return score, chance


def report_lines(card: Card, samples: int = REPORT_SAMPLES) -> list[str]:
    reports = card_giveaways(card, samples)
    lines = [
        f"{card.id} v{card.version}: content-blind guessers, {samples} arrangements a template"
    ]
    lines += ["  " + r.line() for r in reports]
    score, chance = overall_best_guess(reports)
    lines.append(f"  best strategy per template, averaged: {score:.1%} (chance {chance:.1%})")
    return lines


__all__ = [
    "GIVEAWAY_MARGIN",
    "LOAD_SAMPLES",
    "REPORT_SAMPLES",
    "ShownChoice",
    "TemplateGiveaways",
    "card_giveaways",
    "measure",
    "overall_best_guess",
    "register",
    "report_lines",
    "template_giveaways",
    "variant_wins",
]
