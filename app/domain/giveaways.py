"""How often a guesser that never reads the content would be right.

A content-blind strategy looks only at the form of the choices (the echo and stem words
families at the stem's numbers and words too, never at what they mean). The strategies come in
families (:data:`FAMILIES`), the classic item-writing flaws:

- **length**: the longest, the shortest, the k-th by length;
- **rank**: the k-th smallest number;
- **unit**: the one number shown in a unit of its own, or the ones in the common unit;
- **form**: the choices with (or without) an aside in parentheses or a semicolon;
- **richness**: the choices with (or without) a formula or a number, the one with the most
  formulas and numbers, the one with the fewest;
- **register**: the odd register out (hedged among absolute statements, or the reverse), the
  choices with (or without) an absolute word (*only, any, every, always ...*);
- **convergence**: the choice sharing the most words with the others (each distractor changed
  one slot of the key), or the fewest;
- **ratio hub**: the value most of the others are simple multiples of (×2, ×4, ×1.5 ...);
- **magnitude**: the values not implausibly far (5× or 10×) from the others' median;
- **retry**: asked again, the choices that were shown the time before (a key shown every time
  stands out), or the ones that were not (a key whose wording alone changes);
- **echo**: the choice that repeats a quantity the stem gives, a number with the unit written
  after it (a stem that states its own key), or the ones that do not;
- **stem words** (statements): the choice sharing the most words with the stem (a key that
  echoes the question's terms), or the fewest (distractors that all reuse them).

A well-made question gives every strategy about ``1/choices``. Because a guesser that tries
many strategies and keeps the best one flatters itself, the figures are *held out*: the shown
questions are split in two halves (even and odd draws), each family's best strategy is chosen on
one half and scored on the other, per template and per language. :func:`template_giveaways`
measures a template over its whole parameter domain and many seeded arrangements of the
choices (the same arrangement code that :func:`app.domain.generation.generate` uses);
:func:`card_giveaways` does it for every template of a card, and :func:`card_best_guess` gives
the held-out score of a guesser that picks, per template and language, its best strategy of all.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from .cards import Card, Template
from .cues import CueExample
from .generation import Candidate, Combination, Memo
from .languages import LANGS
from .texts import Text

# No family of content-blind strategies may win more often than a blind pick (1/choices) plus
# this, held out, per template and language.
GIVEAWAY_MARGIN = Fraction(1, 5)
# Over the whole card, a guesser using each template's and language's best strategy (held out)
# wins at most this much more often than a blind pick.
CARD_MARGIN = Fraction(2, 25)
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
        r"\b(always|never|rarely|exactly|whatever|no matter|regardless|at any scale|only|any|"
        r"every|whenever|all|none|nothing|entirely|completely|must)\b",
        re.IGNORECASE,
    ),
    "zh": re.compile(
        r"总是|永远|从不|绝不|很少|无论|任何|完全|只有|只要|仅仅|所有|一切|根本|绝对|必然|必须|不管"
    ),
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
# The family each mark of form belongs to.
_FORM_FAMILY = {"formula": "richness", "aside": "form", "semicolon": "form", "number": "richness"}

FAMILIES = (
    "length",
    "rank",
    "unit",
    "form",
    "richness",
    "register",
    "convergence",
    "ratio hub",
    "magnitude",
    "retry",
    "echo",
    "stem words",
)

# The families validation refuses a template for: every family. (The ratio hub was measured and
# reported only until version 8 of the ZeRO card reworded the templates it found; the stem words
# until version 13 of the ZeRO card, 5 of Megatron's and 4 of activation memory's reworded their
# statements.)
ENFORCED_FAMILIES = frozenset(FAMILIES)
# Whether validation refuses a card on which a guesser using each template's and language's best
# strategy (held out) beats a blind pick by more than CARD_MARGIN (``check-cards --report``, the
# card's "best held-out guesser" line).
CARD_GUESSER_ENFORCED = True
# A card of fewer templates is judged per template only: over a handful of templates the mean
# of each one's best strategy, chosen among a dozen, measures their noise more than the card (a
# fair one-template card scores 35-40 %).
CARD_GUESSER_MIN_TEMPLATES = 10

# Ratios a learner reads as "simple multiples" of one another (both ways round).
_SIMPLE_RATIOS = (Fraction(3, 2), Fraction(4, 3), 2, Fraction(5, 2), 3, 4, 5, 6, 8, 10, 12, 16)
_RATIO_TOLERANCE = 0.01
# The same ratios as floats in increasing order, with their tolerances: converted once, not per
# comparison.
_SIMPLE_RATIO_BANDS = tuple(sorted((float(s), _RATIO_TOLERANCE * float(s)) for s in _SIMPLE_RATIOS))
_SIMPLE_RATIO_FLOATS = tuple(s for s, _tolerance in _SIMPLE_RATIO_BANDS)
# Values this many times away from the median of the shown values look implausible.
_MAGNITUDE_LIMITS = (5, 10)
_MAGNITUDE_LOG_LIMITS = tuple((limit, math.log10(limit)) for limit in _MAGNITUDE_LIMITS)


# A quantity as a stem or a choice shows it: a number (not a digit inside a name) and the unit
# written right after it, if any ("48 GB", "1.5×", "16" in "$p = 16$").
_QUANTITY = re.compile(r"(?<![A-Za-z0-9_.\-])(\d[\d,]*(?:\.\d+)?)\s*([A-Za-zµ%×/]*)")


@lru_cache(maxsize=8192)
def quantities(text: str) -> frozenset[tuple[Fraction, str]]:
    """The quantities ``text`` shows, as (number, unit) pairs (unit "" when none follows)."""
    return frozenset(
        (Fraction(number.replace(",", "")), unit) for number, unit in _QUANTITY.findall(text)
    )


@lru_cache(maxsize=8192)
def forms(text: str) -> tuple[bool, ...]:
    """Which of :data:`FORMS` ``text`` has, in their order."""
    return tuple(has(text) for has in FORMS.values())


@lru_cache(maxsize=8192)
def richness(text: str) -> int:
    """How many formulas and stated numbers ``text`` carries."""
    return len(_MATH.findall(text)) + len(_NUMBER.findall(_MATH.sub("", text)))


_CJK = re.compile(r"[\u4e00-\u9fff]+")
_LATIN = re.compile(r"[A-Za-z0-9]+")


@lru_cache(maxsize=8192)
def words(text: str, lang: str) -> frozenset[str]:
    """The words of ``text`` a guesser can compare across choices: Latin words and numbers
    (lower case), and in Chinese every pair of neighbouring characters."""
    found = {w.lower() for w in _LATIN.findall(text)}
    if lang == "zh":
        for run in _CJK.findall(text):
            found.update(run[i : i + 2] for i in range(len(run) - 1))
            if len(run) == 1:
                found.add(run)
    return frozenset(found)


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 1.0


@dataclass(frozen=True)
class ShownChoice:
    """What a content-blind guesser sees of one choice, and whether it is the key."""

    text: Text
    value: Fraction | float | None  # numeric choices: the value (exact or float); statements: None
    correct: bool
    unit: str | None = None  # numeric choices: the unit it is shown in


def family(strategy: str) -> str:
    """The family (:data:`FAMILIES`) of a strategy named by :func:`variant_wins`."""
    for prefix, name in (
        ("longest", "length"),
        ("shortest", "length"),
        ("length rank", "length"),
        ("value rank", "rank"),
        ("odd unit", "unit"),
        ("common unit", "unit"),
        ("odd register", "register"),
        ("with absolute", "register"),
        ("without absolute", "register"),
        ("richest", "richness"),
        ("plainest", "richness"),
        ("most shared", "convergence"),
        ("fewest shared", "convergence"),
        ("ratio hub", "ratio hub"),
        ("within ", "magnitude"),
        ("shown before", "retry"),
        ("not shown before", "retry"),
        ("repeats the stem", "echo"),
        ("avoids the stem", "echo"),
        ("most words shared with the stem", "stem words"),
        ("fewest words shared with the stem", "stem words"),
    ):
        if strategy.startswith(prefix):
            return name
    for mark, name in _FORM_FAMILY.items():
        if strategy in (f"with {mark}", f"without {mark}"):
            return name
    raise KeyError(strategy)


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


@lru_cache(maxsize=8192)
def absolute(text: str, lang: str) -> bool:
    return _ABSOLUTES[lang].search(_MATH.sub("", text)) is not None


def _pick(group: Sequence[int], key: int, n: int) -> float:
    """A guesser choosing uniformly inside ``group`` (a blind pick when it is empty or holds
    every choice): its chance to hit ``key``."""
    if not group or len(group) == n:
        return 1 / n
    return 1 / len(group) if key in group else 0.0


def _extremes(scores: Sequence[float], key: int, n: int) -> tuple[float, float]:
    """The chance to hit ``key`` picking (ties at random) the highest score, and the lowest."""
    top = [i for i, s in enumerate(scores) if s == max(scores)]
    bottom = [i for i, s in enumerate(scores) if s == min(scores)]
    return _pick(top, key, n), _pick(bottom, key, n)


def variant_wins(
    choices: Sequence[ShownChoice],
    lang: str = "en",
    before: Sequence[ShownChoice] = (),
    stem: Text | None = None,
) -> dict[str, float]:
    """For one shown question read in ``lang``, each strategy's chance of picking the key (ties
    split evenly; a strategy that cannot tell the choices apart is a blind pick). ``before``:
    the choices of the question shown just before it from the same template (a retry);
    ``stem``: its stem (none: the strategies that read it are blind picks)."""
    wins = dict(_content_wins(choices, lang))
    wins.update(_retry_wins(choices, lang, before))
    wins.update(_stem_wins(choices, lang, stem))
    return wins


def _content_wins(choices: Sequence[ShownChoice], lang: str) -> dict[str, float]:
    """The strategies that read the choices alone: the same whatever their order (every measure
    is a count, a rank or an exactly rounded sum), so that :func:`measure` reuses them for
    another arrangement of the same choices."""
    n = len(choices)
    key = next(i for i, c in enumerate(choices) if c.correct)
    texts = [c.text.get(lang) for c in choices]
    numeric = all(c.value is not None for c in choices)
    wins: dict[str, float] = {}
    lengths = [len(t) for t in texts]
    wins["longest"], wins["shortest"] = _extremes(lengths, key, n)
    if numeric:
        values = [float(c.value) for c in choices if c.value is not None]
        for k in range(1, n + 1):
            wins[f"value rank {k}"] = _rank_share(values, key, k)
        units = [c.unit for c in choices]
        counts = [units.count(u) for u in units]
        odd = [i for i, count in enumerate(counts) if count == 1]
        common = [i for i, count in enumerate(counts) if count == max(counts)]
        several = len(set(units)) > 1
        wins["odd unit"] = _pick(odd, key, n) if several else 1 / n
        wins["common unit"] = _pick(common, key, n) if several else 1 / n
        hubs = [0] * n
        for i in range(n):
            for j in range(i + 1, n):
                if _simple_multiple(values[i], values[j]):
                    hubs[i] += 1
                    hubs[j] += 1
        wins["ratio hub"] = _extremes(hubs, key, n)[0]
        logs = [math.log10(v) if v > 0 else None for v in values]
        known = sorted(x for x in logs if x is not None)
        if known:
            middle = len(known) // 2
            median = known[middle] if len(known) % 2 else (known[middle - 1] + known[middle]) / 2
            for limit, log_limit in _MAGNITUDE_LOG_LIMITS:
                near = [
                    i for i, x in enumerate(logs) if x is not None and abs(x - median) <= log_limit
                ]
                wins[f"within {limit}x of the median"] = _pick(near, key, n)
    else:
        # k-th by length, ties broken at random: the share of orders putting the key k-th
        for k in range(2, n):
            wins[f"length rank {k}"] = _rank_share(lengths, key, k)
        registers = [register(t, lang) for t in texts]
        odd = [
            i
            for i, r in enumerate(registers)
            if registers.count(r) == 1 and n - 1 >= 2 and len(set(registers)) == 2
        ]
        wins["odd register"] = _pick(odd, key, n)
        absolutes = [absolute(t, lang) for t in texts]
        wins["with absolute words"] = _pick([i for i in range(n) if absolutes[i]], key, n)
        wins["without absolute words"] = _pick([i for i in range(n) if not absolutes[i]], key, n)
        marks = [forms(t) for t in texts]
        for f, name in enumerate(FORMS):
            wins[f"with {name}"] = _pick([i for i in range(n) if marks[i][f]], key, n)
            wins[f"without {name}"] = _pick([i for i in range(n) if not marks[i][f]], key, n)
        wins["richest"], wins["plainest"] = _extremes([richness(t) for t in texts], key, n)
        sets = [words(t, lang) for t in texts]
        shared = [
            math.fsum(_overlap(sets[i], sets[j]) for j in range(n) if j != i) for i in range(n)
        ]
        wins["most shared words"], wins["fewest shared words"] = _extremes(shared, key, n)
    return wins


def _retry_wins(
    choices: Sequence[ShownChoice], lang: str, before: Sequence[ShownChoice]
) -> dict[str, float]:
    """The retry strategies: the choices shown (or not) the time before."""
    n = len(choices)
    if not before:
        return {"shown before": 1 / n, "not shown before": 1 / n}
    key = next(i for i, c in enumerate(choices) if c.correct)
    earlier = {c.text.get(lang) for c in before}
    again = [i for i in range(n) if choices[i].text.get(lang) in earlier]
    return {
        "shown before": _pick(again, key, n),
        "not shown before": _pick([i for i in range(n) if i not in again], key, n),
    }


STEM_WORDS = ("most words shared with the stem", "fewest words shared with the stem")


def _stem_wins(choices: Sequence[ShownChoice], lang: str, stem: Text | None) -> dict[str, float]:
    """The strategies that read the stem too. Numbers (echo): the choices that repeat a
    quantity of the stem, or do not. Statements (stem words): the choice sharing the most words
    with the stem, or the fewest; a statement key may well repeat the conventions its stem
    states, so a quantity repeated is no cue there."""
    n = len(choices)
    statements = any(c.value is None for c in choices)
    if stem is None:
        names = STEM_WORDS if statements else ("repeats the stem", "avoids the stem")
        return dict.fromkeys(names, 1 / n)
    key = next(i for i, c in enumerate(choices) if c.correct)
    if statements:
        stem_words = words(stem.get(lang), lang)
        shared = [_overlap(words(c.text.get(lang), lang), stem_words) for c in choices]
        return dict(zip(STEM_WORDS, _extremes(shared, key, n), strict=True))
    given = quantities(stem.get(lang))
    repeats = [i for i in range(n) if quantities(choices[i].text.get(lang)) & given]
    return {
        "repeats the stem": _pick(repeats, key, n),
        "avoids the stem": _pick([i for i in range(n) if i not in repeats], key, n),
    }


def _simple_multiple(a: float, b: float) -> bool:
    if a <= 0 or b <= 0:
        return False
    ratio = max(a, b) / min(a, b)
    # the bands do not overlap: only the simple ratios on either side of this one can hold it
    at = bisect.bisect_left(_SIMPLE_RATIO_FLOATS, ratio)
    return any(
        abs(ratio - s) <= tolerance for s, tolerance in _SIMPLE_RATIO_BANDS[max(at - 1, 0) : at + 1]
    )


def _rank_share(measures: Sequence[Fraction | float | int], key: int, k: int) -> float:
    """Chance that the key is k-th (1 = smallest) when ties are ordered at random."""
    below = sum(1 for m in measures if m < measures[key])
    tied = sum(1 for m in measures if m == measures[key])
    if below < k <= below + tied:
        return 1 / tied
    return 0.0


@dataclass(frozen=True)
class LanguageGiveaways:
    """One template read in one language: every strategy's share on each half of the shown
    questions, and each family's held-out figure."""

    lang: str
    halves: tuple[Mapping[str, float], Mapping[str, float]]  # strategy -> share, per half

    @property
    def shares(self) -> dict[str, float]:
        """Every strategy's share over both halves (in sample)."""
        first, second = self.halves
        return {k: (first[k] + second.get(k, first[k])) / 2 for k in first}

    def held_out(self, strategies: Iterable[str]) -> tuple[str, float]:
        """The strategy among ``strategies`` with the best share on each half, scored on the
        other half: (the strategy chosen on the first half, the mean of both held-out scores)."""
        names = sorted(strategies)
        scores = []
        chosen = []
        for train, test in (self.halves, self.halves[::-1]):
            best = max(names, key=lambda name: (train.get(name, 0.0), name))
            chosen.append(best)
            scores.append(test.get(best, 0.0))
        return chosen[0], sum(scores) / len(scores)

    @property
    def families(self) -> dict[str, tuple[str, float]]:
        """Each measured family's held-out (strategy, share)."""
        grouped: dict[str, list[str]] = {}
        for name in self.halves[0]:
            grouped.setdefault(family(name), []).append(name)
        return {f: self.held_out(grouped[f]) for f in FAMILIES if f in grouped}

    @property
    def best(self) -> tuple[str, float]:
        """The best strategy of all, held out."""
        return self.held_out(self.halves[0])


@dataclass(frozen=True)
class TemplateGiveaways:
    template_id: str
    choices: int
    samples: int
    languages: Mapping[str, LanguageGiveaways]

    @property
    def chance(self) -> float:
        return 1 / self.choices

    @property
    def limit(self) -> float:
        return float(Fraction(1, self.choices) + GIVEAWAY_MARGIN)

    def worst(self, families: Iterable[str] = FAMILIES) -> tuple[str, str, str, float]:
        """Among ``families``, the one with the highest held-out share in any language:
        (family, language, strategy, share)."""
        wanted = set(families)
        cells = [
            (f, lang, strategy, share)
            for lang, measured in self.languages.items()
            for f, (strategy, share) in measured.families.items()
            if f in wanted
        ]
        return max(cells, key=lambda cell: (cell[3], cell[0], cell[1]))

    def line(self) -> str:
        """One report line per language: every family's held-out share (a share over the limit
        marked "!"), the best guesser's."""
        out = []
        for lang, measured in self.languages.items():
            cells = ", ".join(
                f"{f} {share:.0%}" + ("!" if share > self.limit else "")
                for f, (_strategy, share) in measured.families.items()
            )
            strategy, best = measured.best
            flag = (
                "  GIVEAWAY"
                if any(share > self.limit for _s, share in measured.families.values())
                else ""
            )
            out.append(
                f"{self.template_id} ({lang}): best {strategy} {best:.0%} (chance "
                f"{self.chance:.0%}, limit {self.limit:.0%}){flag} | {cells}"
            )
        return "\n  ".join(out)


Shown = Sequence[ShownChoice]


def measure(
    template_id: str, choices: int, variants: Iterable[tuple[Shown, Shown, Text | None]]
) -> TemplateGiveaways:
    """Sum :func:`variant_wins` over ``variants`` (each shown question with the one shown before
    it, or ``()``, and its stem) in each language, even and odd draws apart."""
    totals: dict[str, tuple[dict[str, float], dict[str, float]]] = {
        lang: ({}, {}) for lang in LANGS
    }
    counts = [0, 0]
    # An arrangement often shows the same choices as an earlier one in another order: what the
    # choices alone tell is measured once per set of choices and language.
    content: dict[tuple[frozenset[ShownChoice], str], dict[str, float]] = {}
    for index, (shown, before, stem) in enumerate(variants):
        half = index % 2
        counts[half] += 1
        as_set = frozenset(shown)
        for lang in LANGS:
            into = totals[lang][half]
            if len(as_set) == len(shown):
                wins = content.get((as_set, lang))
                if wins is None:
                    wins = content[as_set, lang] = _content_wins(shown, lang)
            else:
                wins = _content_wins(shown, lang)
            for name, value in wins.items():
                into[name] = into.get(name, 0.0) + value
            for name, value in _retry_wins(shown, lang, before).items():
                into[name] = into.get(name, 0.0) + value
            for name, value in _stem_wins(shown, lang, stem).items():
                into[name] = into.get(name, 0.0) + value
    languages = {
        lang: LanguageGiveaways(
            lang,
            (
                {k: v / counts[0] for k, v in halves[0].items()} if counts[0] else {},
                {k: v / counts[1] for k, v in halves[1].items()} if counts[1] else {},
            ),
        )
        for lang, halves in totals.items()
    }
    return TemplateGiveaways(template_id, choices, sum(counts), languages)


Evaluated = Sequence[tuple[Candidate, Sequence[Candidate]]]


def domain_combinations(template: Template) -> list[Combination]:
    """Every parameter combination validation walks, in its order."""
    from .generation import combination
    from .sampling import parameter_combinations

    return [combination(template, values) for values in parameter_combinations(template)]


def domain_stems(template: Template) -> list[Text]:
    """The stem of every parameter combination validation walks, in its order."""
    return [made.stem(made.answer) for made in domain_combinations(template)]


def _arrangements(
    template: Template,
    samples: int,
    evaluated: Evaluated,
    memos: Sequence[Memo] | None,
    stems: Sequence[Text],
) -> Iterator[tuple[Shown, Shown, Text]]:
    """Seeded arrangements of every combination's choices, each with the question a learner
    asking again would have seen just before (one of another parameter combination, drawn at
    random, when the template has several: a new seed draws new numbers; else the previous
    arrangement) and its combination's stem (``stems``, in the order of ``evaluated``)."""
    for index, shown, before in _indexed_arrangements(template, samples, evaluated, memos):
        yield shown, before, stems[index]


def _indexed_arrangements(
    template: Template, samples: int, evaluated: Evaluated, memos: Sequence[Memo] | None = None
) -> Iterator[tuple[int, Shown, Shown]]:
    """:func:`_arrangements`, each with the index of its combination in ``evaluated``."""
    from .generation import arrange, seeded

    per_combo = max(2, -(-samples // len(evaluated)))
    blocks: list[list[Shown]] = []
    for index, (answer, pitfalls) in enumerate(evaluated):
        memo = memos[index] if memos is not None else Memo()
        rng = seeded(f"giveaways:{template.id}:{index}", template.generator)
        block: list[Shown] = []
        for _ in range(per_combo):
            arranged = arrange(template, answer, pitfalls, rng, memo)
            # floats order the values exactly as Fractions here: shown values are >= 5% apart
            block.append(
                [
                    ShownChoice(
                        c.text, None if c.value is None else c.approx, c.pitfall is None, c.unit
                    )
                    for c in arranged
                ]
            )
        blocks.append(block)
    retries = seeded(f"giveaways:{template.id}:retries", template.generator)
    for index, block in enumerate(blocks):
        for j, shown in enumerate(block):
            if len(blocks) == 1:
                before: Shown = block[j - 1] if j else ()
            else:
                other = retries.below(len(blocks) - 1)
                other += other >= index  # any combination but this one
                before = blocks[other][j]
            yield index, shown, before


# Sample variants a giveaway problem shows.
CUE_EXAMPLES = 3


def examples(
    template: Template,
    combinations: Sequence[Mapping[str, str]],
    evaluated: Evaluated,
    strategy: str,
    lang: str,
    samples: int = LOAD_SAMPLES,
    memos: Sequence[Memo] | None = None,
    stems: Sequence[Text] | None = None,
) -> tuple[CueExample, ...]:
    """Up to :data:`CUE_EXAMPLES` of the arrangements measured where ``strategy``, read in
    ``lang``, points at the key alone (else among as few choices as it can), of different
    parameter combinations when there are several. ``combinations``: each evaluated
    combination's parameters as the stem shows them; ``stems``: their stems."""
    from .generation import CHOICE_IDS

    if stems is None:
        stems = domain_stems(template)
    found: list[tuple[float, int, int, Shown]] = []
    for order, (index, shown, before) in enumerate(
        _indexed_arrangements(template, samples, evaluated, memos)
    ):
        win = variant_wins(shown, lang, before, stems[index]).get(strategy, 0.0)
        if win > 1 / len(shown):
            found.append((win, order, index, shown))
    found.sort(key=lambda item: (-item[0], item[1]))
    chosen: list[tuple[int, Shown]] = []
    seen: set[tuple[str, ...]] = set()
    for distinct_combinations in (True, False):  # one a combination first, then any
        for _win, _order, index, shown in found:
            texts = tuple(c.text.get(lang) for c in shown)
            if len(chosen) == CUE_EXAMPLES:
                break
            if texts in seen or (
                distinct_combinations and any(index == other for other, _ in chosen)
            ):
                continue
            seen.add(texts)
            chosen.append((index, shown))
    return tuple(
        CueExample(
            tuple(combinations[index].items()),
            tuple((label, c.text, c.correct) for label, c in zip(CHOICE_IDS, shown, strict=False)),
        )
        for index, shown in chosen
    )


def template_giveaways(
    template: Template,
    samples: int = REPORT_SAMPLES,
    evaluated: Evaluated | None = None,
    memos: Sequence[Memo] | None = None,
    stems: Sequence[Text] | None = None,
) -> TemplateGiveaways:
    """The template measured over its domain and about ``samples`` seeded arrangements of the
    choices (``evaluated``: the domain's candidates, when the caller has them already; ``memos``:
    their combinations' memos, which the arrangements then warm for generation; ``stems``: their
    stems)."""
    if evaluated is None:
        # One combination each gives the candidates, their memo and the stem.
        made = domain_combinations(template)
        evaluated = [(c.answer, c.pitfalls) for c in made]
        memos = [c.memo for c in made] if memos is None else memos
        stems = [c.stem(c.answer) for c in made] if stems is None else stems
    elif stems is None:
        stems = domain_stems(template)
    arrangements = _arrangements(template, samples, evaluated, memos, stems)
    return measure(template.id, template.choices, arrangements)


def card_giveaways(card: Card, samples: int = REPORT_SAMPLES) -> list[TemplateGiveaways]:
    return [template_giveaways(t, samples) for t in card.templates()]


def card_best_guess(reports: Sequence[TemplateGiveaways]) -> tuple[float, float]:
    """A guesser that picks, per template and language, its best content-blind strategy on one
    half of the questions: its mean held-out score over templates and languages, and the mean
    chance score, as ``(score, chance)``."""
    cells = [(m.best[1], r.chance) for r in reports for m in r.languages.values()]
    if not cells:
        return 0.0, 0.0
    return sum(s for s, _ in cells) / len(cells), sum(c for _, c in cells) / len(cells)


def card_limit(chance: float) -> float:
    return chance + float(CARD_MARGIN)


def report_lines(card: Card, samples: int = REPORT_SAMPLES) -> list[str]:
    reports = card_giveaways(card, samples)
    lines = [
        f"{card.id} v{card.version}: content-blind guessers, {samples} arrangements a template, "
        "each family's best strategy chosen on half of them and scored on the other half"
    ]
    lines += ["  " + r.line() for r in reports]
    score, chance = card_best_guess(reports)
    flag = "  GIVEAWAY" if score > card_limit(chance) else ""
    lines.append(
        f"  best held-out guesser over the card: {score:.1%} (chance {chance:.1%}, limit "
        f"{card_limit(chance):.1%}){flag}"
    )
    return lines


__all__ = [
    "CARD_GUESSER_ENFORCED",
    "CARD_GUESSER_MIN_TEMPLATES",
    "CARD_MARGIN",
    "ENFORCED_FAMILIES",
    "FAMILIES",
    "GIVEAWAY_MARGIN",
    "LOAD_SAMPLES",
    "REPORT_SAMPLES",
    "LanguageGiveaways",
    "ShownChoice",
    "TemplateGiveaways",
    "card_best_guess",
    "card_giveaways",
    "card_limit",
    "examples",
    "family",
    "measure",
    "register",
    "report_lines",
    "template_giveaways",
    "variant_wins",
    "words",
]
