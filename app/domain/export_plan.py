"""What an export holds: which variants of each template, and the texts of each question.

Exports (Anki, Moodle XML: :mod:`app.authoring.exports`) write *fixed instances* (but for
Moodle's calculated questions, which carry formulas: :mod:`app.domain.moodle_calculated`): a
fixed set of variants per template, each a question with its choices, its key, every shown pitfall's
explanation with the variant's numbers, and the worked solution. This module decides which
variants and which texts, in one language; it does no I/O and knows no file format.

Which seeds (:func:`export_seeds`): seeds ``0, 1, 2 ...`` are walked in order and a seed is kept
when its parameter values are new, until ``count`` are kept; a template whose domain has fewer
combinations than ``count`` (a statement template has one) is then filled with the seeds whose
set of shown pitfalls is new. The walk is deterministic, so the same card exports the same
variants, and asking for more variants keeps the first ones (a longer export extends a shorter
one). Each item names its seed, so an exporter can give it an identity that survives re-exports
(``stable_key``: card, template and seed, not the template's version, so that a re-export after
an edit updates the note an Anki user already studies instead of adding a second one).

Inline math stays LaTeX but with MathJax's delimiters (:func:`mathjax_delimiters`): ``$x$``
becomes ``\\(x\\)``, which Anki (2.1.29+) and Moodle's MathJax filter both typeset.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .cards import Card, Template
from .generation import Variant, generate
from .identity import QuestionId
from .languages import Lang
from .markup import strip_markup
from .messages import Message, contextual_message
from .texts import Text

DEFAULT_VARIANTS = 5
MAX_VARIANTS = 20
# Seeds tried per wanted variant before settling for fewer distinct ones.
_SEEDS_PER_VARIANT = 50
_MIN_SEEDS = 200

# The same rule as app.rendering: $...$ not preceded by a backslash, not starting with a space.
_INLINE_MATH = re.compile(r"(?<!\\)\$(?!\s)(.+?)(?<!\\)\$", re.DOTALL)
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")

# The headings and feedback an exported question carries, written in the export's language.
LABELS: dict[str, Text] = {
    "answer": contextual_message("export", "Answer"),
    "pitfalls": contextual_message("export", "Why the other choices are wrong"),
    "solution": contextual_message("export", "Worked solution"),
    "source": contextual_message("export", "Source"),
    "correct": contextual_message("export", "Correct."),
    "incorrect": contextual_message("export", "Not quite: see the worked solution."),
}


class ExportError(ValueError):
    """An export that cannot be made (an unknown card, a bad number of variants ...).

    ``text`` is the reason in every language; ``str()`` is the English one."""

    def __init__(self, reason: Text) -> None:
        super().__init__(reason.en)
        self.text = reason


@dataclass(frozen=True)
class ExportChoice:
    """One shown choice, in the export's language (math with MathJax delimiters)."""

    letter: str  # a, b, c ... as the service labels it
    text: str
    correct: bool
    pitfall_id: str | None  # None for the key
    pitfall_title: str | None
    explanation: str | None  # the pitfall's explanation with the variant's numbers


@dataclass(frozen=True)
class ExportItem:
    """One fixed question of the export."""

    question: QuestionId
    point_number: int
    point_title: str
    stem: str
    choices: tuple[ExportChoice, ...]
    solution: tuple[str, ...]

    @property
    def key(self) -> ExportChoice:
        return next(c for c in self.choices if c.correct)

    @property
    def pitfalls(self) -> tuple[ExportChoice, ...]:
        return tuple(c for c in self.choices if not c.correct)

    @property
    def stable_key(self) -> str:
        """The item's identity across re-exports: card, template and seed (not the version)."""
        q = self.question
        return f"infracards:{q.card_id}:{q.template_id}:{q.seed}"

    @property
    def reference(self) -> str:
        """The exact question, version included (what an instructor quotes back)."""
        q = self.question
        return f"{q.card_id} / {q.template_id} v{q.template_version} / seed {q.seed}"

    @property
    def tags(self) -> tuple[str, ...]:
        q = self.question
        return ("infracards", q.card_id, q.point, q.template_id)


@dataclass(frozen=True)
class ExportPlan:
    card_id: str
    card_version: int
    title: str
    lang: Lang
    variants: int  # wanted per template
    items: tuple[ExportItem, ...]

    def label(self, name: str) -> str:
        return LABELS[name].get(self.lang)


def check_variants(variants: int) -> int:
    if isinstance(variants, bool) or not isinstance(variants, int):
        raise ExportError(Message("the number of variants must be a whole number"))
    if not 1 <= variants <= MAX_VARIANTS:
        raise ExportError(
            Message(
                "the number of variants must be 1 to %(limit)s, got %(variants)s",
                limit=MAX_VARIANTS,
                variants=variants,
            )
        )
    return variants


def export_seeds(card: Card, template: Template, count: int) -> list[int]:
    """The seeds of the ``count`` variants exported for ``template`` (see the module docstring);
    fewer when the template has fewer distinct variants within the seeds tried."""
    check_variants(count)
    limit = max(_MIN_SEEDS, _SEEDS_PER_VARIANT * count)
    made: dict[int, Variant] = {}

    def variant(seed: int) -> Variant:
        found = made.get(seed)
        if found is None:
            found = made[seed] = generate(card, template, seed)
        return found

    kept: list[int] = []
    seen_params: set[tuple[tuple[str, str], ...]] = set()
    domain = template.domain_size()
    for seed in range(limit):
        if len(seen_params) == domain:
            break  # every combination is in: the rest can only repeat them
        params = _params_key(variant(seed))
        if params not in seen_params:
            seen_params.add(params)
            kept.append(seed)
            if len(kept) == count:
                return kept
    seen_shown = {_shown_key(variant(seed)) for seed in kept}
    for seed in range(limit):
        if seed in kept:
            continue
        shown = _shown_key(variant(seed))
        if shown not in seen_shown:
            seen_shown.add(shown)
            kept.append(seed)
            if len(kept) == count:
                break
    return kept


def _params_key(variant: Variant) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(variant.params.items()))


def _shown_key(variant: Variant) -> tuple[tuple[tuple[str, str], ...], frozenset[str | None]]:
    return (_params_key(variant), frozenset(c.pitfall_id for c in variant.choices))


def _as_is(text: str) -> str:
    """The text as the card writes it, without markup a card stored before validation refused
    it may hold (:func:`app.domain.markup.strip_markup`)."""
    return strip_markup(text)


def export_item(
    card: Card, template: Template, seed: int, lang: Lang, *, mathjax: bool = True
) -> ExportItem:
    """The texts of one variant in one language; math in MathJax's delimiters, or (``mathjax``
    false) as the card writes it, ``$...$``, for a format that renders it itself."""
    math = _mathjax if mathjax else _as_is
    variant = generate(card, template, seed)
    point = card.point_by_slug(template.point)
    assert point is not None
    choices = tuple(
        ExportChoice(
            letter=choice.id,
            text=math(choice.text.get(lang)),
            correct=choice.correct,
            pitfall_id=choice.pitfall_id,
            pitfall_title=(math(choice.pitfall.title.get(lang)) if choice.pitfall else None),
            explanation=(math(choice.explanation.get(lang)) if choice.explanation else None),
        )
        for choice in variant.choices
    )
    return ExportItem(
        question=variant.id,
        point_number=point.number,
        point_title=math(point.title.get(lang)),
        stem=math(variant.stem.get(lang)),
        choices=choices,
        solution=tuple(math(step.get(lang)) for step in variant.solution),
    )


def plan_export(
    card: Card, lang: Lang, variants: int = DEFAULT_VARIANTS, *, mathjax: bool = True
) -> ExportPlan:
    """Every template of ``card`` (exam point order), ``variants`` fixed variants each."""
    check_variants(variants)
    items = [
        export_item(card, template, seed, lang, mathjax=mathjax)
        for template in card.templates()
        for seed in export_seeds(card, template, variants)
    ]
    return ExportPlan(
        card_id=card.id,
        card_version=card.version,
        title=(_mathjax if mathjax else _as_is)(card.title.get(lang)),
        lang=lang,
        variants=variants,
        items=tuple(items),
    )


def mathjax_delimiters(text: str) -> str:
    return _mathjax(text)


def _mathjax(text: str) -> str:
    """``$x$`` as ``\\(x\\)`` (MathJax's inline delimiters); ``\\$`` becomes a plain ``$``. Markup
    a card stored before validation refused it may hold is left out first
    (:func:`app.domain.markup.strip_markup`): no ``\\href`` or ``\\(`` of the card's reaches
    MathJax."""
    text = strip_markup(text)
    parts: list[str] = []
    position = 0
    for match in _INLINE_MATH.finditer(text):
        parts.append(text[position : match.start()].replace("\\$", "$"))
        parts.append("\\(" + match.group(1).strip() + "\\)")
        position = match.end()
    parts.append(text[position:].replace("\\$", "$"))
    return "".join(parts)


def paragraphs(text: str) -> list[str]:
    """Blank-line separated paragraphs (as the service's pages show them)."""
    return [p.strip() for p in _PARAGRAPH_BREAK.split(text.strip()) if p.strip()]
