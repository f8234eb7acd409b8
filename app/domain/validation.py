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
- a family of content-blind guessers (:mod:`app.domain.giveaways`: length, rank, unit, form
  ... of :data:`~app.domain.giveaways.ENFORCED_FAMILIES`) wins more than ``1/choices`` +
  :data:`~app.domain.giveaways.GIVEAWAY_MARGIN` of the variants in some language, held out
  (its best strategy chosen on one half of the variants and scored on the other), measured over
  the domain and :data:`~app.domain.giveaways.LOAD_SAMPLES` seeded arrangements; and, once
  :data:`~app.domain.giveaways.CARD_GUESSER_ENFORCED` is on, a guesser using each template's best
  strategy wins more than chance + :data:`~app.domain.giveaways.CARD_MARGIN` over the card;
- a rendered text (stem, worked solution, pitfall explanation) shows arithmetic whose displayed
  numbers do not give its displayed result (``0.041 GB + 0.041 GB = 0.081 GB``), see
  :func:`check_arithmetic`;
- a rendered text doubles a word (``the the``, ``的的``, ``张 张 GPU``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction

from .cards import Card, CardError, Pitfall, RuleError, Template
from .cues import Cue, family_label, reading
from .formulas import Formula, FormulaError
from .generation import (
    Candidate,
    Combination,
    Memo,
    clash,
    combination,
    named_values,
    side,
)
from .giveaways import TemplateGiveaways
from .languages import LANGS
from .markup import check_markup
from .messages import Message
from .sampling import parameter_combinations
from .texts import Text
from .units import UNITS

# Every wrong statement is at most this many times longer or shorter than the correct one, in
# every language: test takers learn that "the longest, most qualified choice is right".
STATEMENT_LENGTH_RATIO = Fraction(3, 2)
# Beyond this many pitfalls the exact order check would be slow; fall back to declared order.
EXACT_ORDER_CHECK_LIMIT = 12


def validate_card(card: Card) -> None:
    check_markup(card.document)
    measured = [validate_template(card, template) for template in card.templates()]
    check_card_guesser(card, [m for m in measured if m is not None])


def check_card_guesser(card: Card, measured: Sequence[TemplateGiveaways]) -> None:
    """Refuse a card of at least :data:`~app.domain.giveaways.CARD_GUESSER_MIN_TEMPLATES`
    templates on which a guesser using each template's and language's best content-blind
    strategy (held out) beats a blind pick by more than
    :data:`~app.domain.giveaways.CARD_MARGIN`."""
    from . import giveaways
    from .giveaways import card_best_guess, card_limit

    if not giveaways.CARD_GUESSER_ENFORCED or len(measured) < giveaways.CARD_GUESSER_MIN_TEMPLATES:
        return
    score, chance = card_best_guess(measured)
    if score > card_limit(chance):
        raise CardError(
            Message(
                "card %(card)s: a guesser using each template's best content-blind strategy is "
                "right in %(share)s of the questions, held out (chance %(chance)s, at most "
                "%(limit)s allowed)",
                card=repr(card.id),
                share=f"{score:.1%}",
                chance=f"{chance:.1%}",
                limit=f"{card_limit(chance):.1%}",
            )
        )


def validate_template(
    card: Card, template: Template, *, giveaways: bool = True
) -> TemplateGiveaways | None:
    """Refuse the template (CardError) or return its content-blind measurement (None when
    ``giveaways`` is off)."""
    if template.kind == "statement":
        _check_statement_lengths(card, template)
    _check_stated_conventions(card, template)
    own_value_somewhere: set[str] = set()
    answers_shown: set[str] = set()
    evaluated: list[tuple[Candidate, list[Candidate]]] = []
    memos: list[Memo] = []
    stems: list[Text] = []
    checked: set[str] = set()
    for values in _combinations(card, template):
        where = Message(
            "card %(card)s, template %(template)s, parameters %(values)s",
            card=repr(card.id),
            template=repr(template.id),
            values=_show(template, values),
        )
        try:
            # The generator's own (cached) evaluation: a validated card is served warm.
            evaluated_here = combination(template, values)
            answer, pitfalls = evaluated_here.answer, evaluated_here.pitfalls
            rendered = _render_texts(evaluated_here)
        except FormulaError as exc:
            field, formula = _failing_formula(template, values)
            raise CardError(
                Message("%(where)s: %(error)s", where=where, error=exc.localized),
                template_id=template.id if field else None,
                field=field,
                position=exc.column if formula is not None and exc.shown == formula.text else None,
                reason=Message(
                    "with the parameters %(values)s: %(error)s",
                    values=_show(template, values),
                    error=exc.message,
                )
                if field
                else None,
            ) from None
        for what, field, text in rendered:
            for lang in LANGS:
                shown = text.get(lang)
                if shown in checked:
                    continue
                checked.add(shown)
                problem = check_arithmetic(shown) or doubled_word(shown, lang)
                if problem:
                    raise CardError(
                        Message(
                            "%(where)s, %(what)s (%(lang)s): %(problem)s: %(text)s",
                            where=where,
                            what=what,
                            lang=lang,
                            problem=problem,
                            text=repr(shown),
                        ),
                        template_id=template.id,
                        field=f"{field}.{lang}",
                    )
        answers_shown.add(answer.text.en)
        evaluated.append((answer, pitfalls))
        memos.append(evaluated_here.memo)
        stems.append(evaluated_here.stem(answer))
        for candidate in pitfalls:
            if clash(candidate, answer):
                assert candidate.pitfall is not None
                pitfall_id = candidate.pitfall.id
                shown = "formula" if template.kind == "numeric" else "statement"
                raise CardError(
                    Message(
                        "%(where)s: pitfall %(pitfall)s shows %(value)s, which clashes with the "
                        "answer %(answer)s",
                        where=where,
                        pitfall=repr(pitfall_id),
                        value=candidate.text,
                        answer=answer.text,
                    ),
                    template_id=template.id,
                    field=f"pitfalls.{pitfall_id}.{shown}",
                    reason=Message(
                        "with the parameters %(values)s it shows %(value)s, which clashes with "
                        "the answer %(answer)s",
                        values=_show(template, values),
                        value=candidate.text,
                        answer=answer.text,
                    ),
                )
        for candidate in pitfalls:
            assert candidate.pitfall is not None
            if not any(clash(candidate, other) for other in pitfalls if other is not candidate):
                own_value_somewhere.add(candidate.pitfall.id)
        _check_sides(where, template, answer, pitfalls)
    _check_unit_system_pitfalls(card, template, evaluated)
    never = [p.id for p in template.pitfalls if p.id not in own_value_somewhere]
    if never:
        raise CardError(
            Message(
                "card %(card)s, template %(template)s: pitfall(s) %(pitfalls)s always coincide "
                "with another pitfall: they never show a value of their own",
                card=repr(card.id),
                template=repr(template.id),
                pitfalls=", ".join(never),
            )
        )
    if template.kind == "numeric" and len(answers_shown) == 1:
        raise CardError(
            Message(
                "card %(card)s, template %(template)s: the answer is %(answer)s for every "
                "parameter combination; the parameters must change the key",
                card=repr(card.id),
                template=repr(template.id),
                answer=answers_shown.pop(),
            )
        )
    if giveaways:
        return _check_giveaways(card, template, evaluated, memos, stems)
    return None


def _check_giveaways(
    card: Card,
    template: Template,
    evaluated: Sequence[tuple[Candidate, list[Candidate]]],
    memos: Sequence[Memo],
    stems: Sequence[Text],
) -> TemplateGiveaways:
    from .giveaways import ENFORCED_FAMILIES, LOAD_SAMPLES, examples, template_giveaways

    measured = template_giveaways(template, LOAD_SAMPLES, evaluated, memos, stems)
    family, lang, strategy, share = measured.worst(ENFORCED_FAMILIES)
    if share > measured.limit:
        # The evaluated combinations are the ones validation walked, in its order.
        shown = [named_values(template, v) for v in parameter_combinations(template)]
        samples = examples(template, shown, evaluated, strategy, lang, LOAD_SAMPLES, memos, stems)
        raise CardError(
            Message(
                "card %(card)s, template %(template)s: gives the key away by its %(family)s: a "
                "content-blind guesser ('%(strategy)s', reading the choices %(reading)s) is "
                "right in %(share)s of %(samples)s variants, held out (chance %(chance)s, at "
                "most %(limit)s allowed)",
                card=repr(card.id),
                template=repr(template.id),
                family=family_label(family),
                strategy=strategy,
                reading=reading(lang),
                share=f"{share:.0%}",
                samples=measured.samples,
                chance=f"{measured.chance:.0%}",
                limit=f"{measured.limit:.0%}",
            ),
            template_id=template.id,
            cue=Cue(family, strategy, lang, share, samples),
        )
    return measured


def _check_stated_conventions(card: Card, template: Template) -> None:
    """Each convention the template declares is stated by the stem, in every language (see
    :mod:`app.domain.conventions`): a declared convention is one the key depends on, whether or
    not a pitfall is the key under another."""
    from .conventions import stated

    for name, value in sorted(template.conventions.items()):
        for lang in LANGS:
            if not stated(name, value, template.stem.source.get(lang), lang):
                raise CardError(
                    Message(
                        "card %(card)s, template %(template)s: the key depends on the "
                        "%(name)s convention, but the stem (%(lang)s) does not say the question "
                        "counts %(value)s",
                        card=repr(card.id),
                        template=repr(template.id),
                        name=repr(name),
                        lang=lang,
                        value=repr(value),
                    )
                )


# A binary figure shown under a decimal label, or the reverse: the same bytes in GiB (2**30).
_UNIT_SYSTEM_RATIOS = (Fraction(10**9, 2**30), Fraction(2**30, 10**9))


def _check_unit_system_pitfalls(
    card: Card, template: Template, evaluated: Sequence[tuple[Candidate, Sequence[Candidate]]]
) -> None:
    """A pitfall that is the key read in the other unit system (GiB for GB) everywhere is the
    key under another 'units' convention: it must say so (and the stem must state the units)."""
    if template.kind != "numeric" or not evaluated:
        return
    for i, pitfall in enumerate(template.pitfalls):
        if pitfall.convention == "units":
            continue
        pairs = [(answer.value, pitfalls[i].value) for answer, pitfalls in evaluated]
        values = [(a, v) for a, v in pairs if a is not None and v is not None and a != 0]
        if len(values) == len(pairs) and any(
            all(v == a * ratio for a, v in values) for ratio in _UNIT_SYSTEM_RATIOS
        ):
            raise CardError(
                Message(
                    "card %(card)s, template %(template)s, pitfall %(pitfall)s: it is the key "
                    "in the other unit system (GB and GiB); mark it 'convention: units' and "
                    "declare the template's units",
                    card=repr(card.id),
                    template=repr(template.id),
                    pitfall=repr(pitfall.id),
                )
            )


def _check_sides(
    where: Text, template: Template, answer: Candidate, pitfalls: Sequence[Candidate]
) -> None:
    """Every rank of the answer must be reachable whatever order the pitfalls are walked in."""
    needed = template.choices - 1
    for direction in (-1, 1):
        worst = distinct_on_side(answer, pitfalls, direction)
        if worst >= needed:
            continue
        if template.kind == "numeric":
            what: Text = (
                Message("below the answer %(answer)s", answer=answer.text)
                if direction == -1
                else Message("above the answer %(answer)s", answer=answer.text)
            )
            extreme = Message("largest") if direction == -1 else Message("smallest")
        else:
            what = (
                Message("shorter than the correct statement in every language")
                if direction == -1
                else Message("longer than the correct statement in every language")
            )
            extreme = Message("longest") if direction == -1 else Message("shortest")
        reason = Message(
            "%(where)s: only %(count)s distinct pitfall(s) %(what)s can remain after clashing "
            "pitfalls are merged; %(needed)s are needed so that the answer can be the %(extreme)s "
            "choice as often as any other rank",
            where=where,
            count=worst,
            what=what,
            needed=needed,
            extreme=extreme,
        )
        raise CardError(reason)


def distinct_on_side(answer: Candidate, pitfalls: Sequence[Candidate], direction: int) -> int:
    """How many mutually distinct pitfalls surely remain on one side of the answer (-1: below,
    1: above) whatever order generation walks them in: the smallest maximal set of pitfalls on
    that side that do not clash with one another."""
    return _smallest_maximal_distinct_set([p for p in pitfalls if side(answer, p) == direction])


def _check_statement_lengths(card: Card, template: Template) -> None:
    """Every wrong statement is of comparable length to the correct one, in every language and
    every wording; every wording of a pitfall sorts on the same side of every wording of the
    answer (so the rank drawn by length holds whichever wording is shown); no two wordings of
    the template are the same text."""
    assert template.answer_statement is not None
    answers = (template.answer_statement, *template.answer_phrasings)
    seen: set[tuple[str, str]] = set()
    for text in (*answers, *(w for p in template.pitfalls for w in _wordings(p))):
        for lang in LANGS:
            shown = text.get(lang)
            if (lang, shown) in seen:
                raise CardError(
                    Message(
                        "card %(card)s, template %(template)s: the wording %(text)s appears "
                        "twice among its choices",
                        card=repr(card.id),
                        template=repr(template.id),
                        text=repr(shown),
                    )
                )
            seen.add((lang, shown))
    for pitfall in template.pitfalls:
        first = side(
            Candidate(None, answers[0], None), Candidate(pitfall, _wordings(pitfall)[0], None)
        )
        for answer_text in answers:
            key = Candidate(None, answer_text, None)
            for wording in _wordings(pitfall):
                for lang in LANGS:
                    answer = len(answer_text.get(lang))
                    length = len(wording.get(lang))
                    if (
                        not answer / STATEMENT_LENGTH_RATIO
                        <= length
                        <= answer * STATEMENT_LENGTH_RATIO
                    ):
                        raise CardError(
                            Message(
                                "card %(card)s, template %(template)s: pitfall %(pitfall)s is "
                                "%(length)s characters long (%(lang)s) against %(answer)s for the "
                                "correct statement; keep every choice within %(ratio)sx of the "
                                "correct statement's length",
                                card=repr(card.id),
                                template=repr(template.id),
                                pitfall=repr(pitfall.id),
                                length=length,
                                lang=lang,
                                answer=answer,
                                ratio=float(STATEMENT_LENGTH_RATIO),
                            )
                        )
                if side(key, Candidate(pitfall, wording, None)) != first:
                    raise CardError(
                        Message(
                            "card %(card)s, template %(template)s: a wording of pitfall "
                            "%(pitfall)s is not on the same side (shorter or longer, in every "
                            "language) of every wording of the correct statement as its first "
                            "wording",
                            card=repr(card.id),
                            template=repr(template.id),
                            pitfall=repr(pitfall.id),
                        )
                    )


def _wordings(pitfall: Pitfall) -> tuple[Text, ...]:
    assert pitfall.statement is not None
    return (pitfall.statement, *pitfall.phrasings)


def _combinations(card: Card, template: Template) -> Iterator[dict[str, Fraction]]:
    """The combinations validation walks; a derived parameter that cannot be computed at some
    of them is refused at its field and column, with the values."""
    try:
        yield from parameter_combinations(template)
    except RuleError as exc:
        where = Message(
            "card %(card)s, template %(template)s", card=repr(card.id), template=repr(template.id)
        )
        raise exc.refusal(template.id, where, _show(template, exc.values)) from None


def _failing_formula(
    template: Template, values: Mapping[str, Fraction]
) -> tuple[str | None, Formula | None]:
    """The field (``answer``, ``pitfalls.<id>.formula``) of the formula that cannot be evaluated
    at ``values``, and that formula, for the dashboard to show the error at it."""
    if template.kind != "numeric":
        return None, None
    formulas = [("answer", template.answer_formula)] + [
        (f"pitfalls.{p.id}.formula", p.formula) for p in template.pitfalls
    ]
    for field, formula in formulas:
        if formula is None:
            continue
        try:
            formula.evaluate(values)
        except FormulaError:
            return field, formula
    return None, None


def _render_texts(content: Combination) -> list[tuple[Text, str, Text]]:
    """Every text of the combination's variant (its answer and every pitfall, each in its own
    form): (what, the field as authoring names it, the text), rendered as generation renders
    them (so that a validated card's texts are served warm)."""
    answer = content.answer
    rendered: list[tuple[Text, str, Text]] = [(Message("stem"), "stem", content.stem(answer))]
    for i, step in enumerate(content.solution(answer)):
        rendered.append(
            (Message("solution step %(number)s", number=i + 1), f"solution.{i + 1}", step)
        )
    for candidate in content.pitfalls:
        assert candidate.pitfall is not None
        pitfall_id = candidate.pitfall.id
        rendered.append(
            (
                Message(
                    "%(what)s explanation",
                    what=Message("pitfall %(pitfall)s", pitfall=repr(pitfall_id)),
                ),
                f"pitfalls.{pitfall_id}.explanation",
                content.explanation(candidate, answer),
            )
        )
    return rendered


# --- arithmetic a learner can check -----------------------------------------------------------

# Unit words after a number, longest first: their scale to base units (bytes, seconds, ratios).
_UNIT_WORDS: dict[str, Fraction] = {
    **{u.suffix: u.scale for u in UNITS.values() if u.suffix and u.spaced},
    "bytes": Fraction(1),
    "byte": Fraction(1),
    "字节": Fraction(1),
    "GPU": Fraction(1),
    "张 GPU": Fraction(1),
    "elements": Fraction(1),
    "个元素": Fraction(1),
}
_UNIT_PATTERN = "|".join(
    re.escape(w) for w in sorted(_UNIT_WORDS, key=len, reverse=True) if w.strip()
)
_COUNT_WORDS = {
    "trillion": Fraction(10**12),
    "billion": Fraction(10**9),
    "million": Fraction(10**6),
    "万亿": Fraction(10**12),
    "亿": Fraction(10**8),
    "万": Fraction(10**4),
}
_COUNT_SUFFIX = {
    "K": Fraction(10**3),
    "M": Fraction(10**6),
    "B": Fraction(10**9),
    "T": Fraction(10**12),
}
_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<number>(?<![\w.\-])\d+(?:\.\d+)?)
        (?P<suffix>[KMBT](?![A-Za-z]))?
        (?P<attached>[×%](?!\s*\d))?
        (?:\s?(?P<count>万亿|亿|万|trillion\b|billion\b|million\b))?
        (?:\s(?P<unit>(?:"""
    + _UNIT_PATTERN
    + r""")(?![A-Za-z])))?
  | (?P<op>[+\-−×·*/])
  | (?P<paren>[()])
  | (?P<eq>=)
  | (?P<other>[^\s\d+\-−×·*/=]+|.)
    """,
    re.VERBOSE,
)


@dataclass
class _Quantity:
    value: Fraction
    tolerance: Fraction  # half a unit in the last displayed place, in base units
    unit_scale: Fraction  # the scale of the unit written after it
    has_unit: bool


def _quantity(match: re.Match[str]) -> _Quantity:
    number = match.group("number")
    decimals = len(number.partition(".")[2])
    scale = Fraction(1)
    if match.group("suffix"):
        scale *= _COUNT_SUFFIX[match.group("suffix")]
    if match.group("attached") == "%":
        scale /= 100
    if match.group("count"):
        scale *= _COUNT_WORDS[match.group("count")]
    unit_scale = Fraction(1)
    if match.group("unit"):
        unit_scale = _UNIT_WORDS[match.group("unit")]
        scale *= unit_scale
    whole, _, fraction = number.partition(".")
    value = Fraction(int(whole + fraction), 10**decimals) * scale
    return _Quantity(
        value,
        Fraction(1, 2) * Fraction(1, 10**decimals) * scale,
        unit_scale,
        bool(match.group("unit") or match.group("attached")),
    )


# A displayed quantity as the tokenizer reads it, without named groups (for the quick scan).
_NUMBER = (
    r"(?<![\w.\-])\d+(?:\.\d+)?(?:[KMBT](?![A-Za-z]))?(?:[×%](?!\s*\d))?"
    r"(?:\s?(?:万亿|亿|万|trillion\b|billion\b|million\b))?"
    r"(?:\s(?:" + _UNIT_PATTERN + r")(?![A-Za-z]))?"
)
# An expression of two or more quantities (one level of parentheses) ending a segment, just
# before an "=" ...
_ATOM = r"(?:" + _NUMBER + r"|\(\s*" + _NUMBER + r"(?:\s*[+\-−×·*/]\s*" + _NUMBER + r")*\s*\))"
_LEFT = re.compile(_ATOM + r"(?:\s*[+\-−×·*/]\s*" + _ATOM + r")+\s*$")
# ... and the single quantity that starts the next one.
_RIGHT = re.compile(r"\s*(" + _NUMBER + r")\s*([+\-−×·*/]\s*\d)?")


def _chains(text: str) -> Iterator[tuple[list[object], _Quantity]]:
    """Every ``a op b ... = c`` of displayed numbers and operators (LaTeX, code and words end
    an expression), as the left side's items and the displayed result."""
    plain = re.sub(r"\$[^$]*\$|`[^`]*`", "\x00", text)
    parts = plain.split("=")
    for left, right in zip(parts, parts[1:], strict=False):
        expression = _LEFT.search(left)
        if expression is None:
            continue
        result = _RIGHT.match(right)
        if result is None or result.group(2):
            continue  # no number after "=", or an expression rather than a result
        items: list[object] = []
        for match in _TOKEN.finditer(expression.group(0)):
            if match.group("number") is not None:
                items.append(_quantity(match))
            elif match.lastgroup in ("op", "paren"):
                items.append(match.group(match.lastgroup))
        shown = next(_TOKEN.finditer(result.group(1)))
        yield items, _quantity(shown)


def _evaluate(expression: list[object]) -> Fraction | None:
    """Quantities, + - × · / and parentheses with the usual precedence, or None if the items do
    not form an expression."""
    position = 0

    def peek() -> object:
        return expression[position] if position < len(expression) else None

    def factor() -> Fraction | None:
        nonlocal position
        item = peek()
        position += 1
        if isinstance(item, _Quantity):
            return item.value
        if item == "(":
            value = terms()
            if value is None or peek() != ")":
                return None
            position += 1
            return value
        return None

    def product() -> Fraction | None:
        nonlocal position
        value = factor()
        while value is not None and peek() in ("×", "·", "*", "/"):
            operator = peek()
            position += 1
            right = factor()
            if right is None or (operator == "/" and right == 0):
                return None
            value = value / right if operator == "/" else value * right
        return value

    def terms() -> Fraction | None:
        nonlocal position
        value = product()
        while value is not None and peek() in ("+", "-", "−"):
            operator = peek()
            position += 1
            right = product()
            if right is None:
                return None
            value = value + right if operator == "+" else value - right
        return value

    result = terms()
    return result if result is not None and position == len(expression) else None


def check_arithmetic(text: str) -> Text | None:
    """Why the displayed arithmetic of ``text`` does not add up, or None.

    Every ``a op b ... = c`` whose sides are displayed numbers (with their units, counts such as
    70B or 2031 万, and the operators + − × · /) is recomputed from the numbers as shown; the
    result must be within half a unit of its last displayed digit (so ``40.6 MB + 40.6 MB =
    81.2 MB`` passes, ``0.041 GB + 0.041 GB = 0.081 GB`` does not). A left side written without
    units (``140 + 140 + 840 = 1120 GB``) is read in the result's unit."""
    if "=" not in text:
        return None
    for left, shown in _chains(text):
        if len(left) < 3:
            continue
        computed = _evaluate(left)
        if computed is None:
            continue
        if shown.has_unit and not any(isinstance(q, _Quantity) and q.has_unit for q in left):
            computed *= shown.unit_scale
        if abs(computed - shown.value) > shown.tolerance:
            return Message(
                "the displayed arithmetic gives %(computed)s, not the displayed %(shown)s (base "
                "units)",
                computed=f"{float(computed):.6g}",
                shown=f"{float(shown.value):.6g}",
            )
    return None


_DOUBLED = {
    "en": re.compile(r"\b([A-Za-z]{2,})\s+\1\b|\b(GPUs?)\s+GPUs?\b", re.IGNORECASE),
    "zh": re.compile(
        r"([的了是在和与为把被将从向对每张个])\1|([\u4e00-\u9fff]{2,})\2|张\s*张|GPU\s*GPU"
    ),
}


def doubled_word(text: str, lang: str) -> Text | None:
    """A word written twice in a row ('the the', '的的', '张 张 GPU'), or None."""
    plain = re.sub(r"\$[^$]*\$|`[^`]*`", "\x00", text)  # math and code separate words
    found = _DOUBLED.get(lang, _DOUBLED["en"]).search(plain)
    return Message("doubled word %(word)s", word=repr(found.group(0))) if found else None


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
