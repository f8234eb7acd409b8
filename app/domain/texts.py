"""Bilingual texts and the placeholders that put a variant's numbers into them.

Placeholders: ``{name}`` is a parameter in its display format (or ``{answer}``, the correct
value as displayed); ``{=formula}``, ``{=formula:UNIT}`` and ``{=formula:UNIT:FIGURES}`` are
computed values, shown with FIGURES significant figures (3 unless given; digits before the
decimal point are never rounded away) and, with a UNIT, in the readable unit of that unit's
family (``{=2*psi/n_d:GB}`` shows ``40.6 MB`` for 1.3B on 64 ranks). ``{=formula:count}`` is a
large count in words: ``210 billion`` in English, ``2100 亿`` in Chinese. Braces that are not
placeholders (LaTeX's ``\\frac{a}{b}``) are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from .bilingual import Text as Text
from .formulas import Formula, FormulaError, parse_formula
from .languages import LANGS
from .messages import Message
from .units import (
    DEFAULT_FIGURES,
    format_count_words,
    format_number,
    format_readable,
    get_unit,
    significant_decimals,
)

# The pseudo-unit of ``{=formula:count}``: a count in words, per language.
COUNT = "count"

LANGUAGES = LANGS

_PLACEHOLDER = re.compile(r"\{(=[^{}]*|[a-z][a-z0-9_]*)\}")
# Inline maths (as app.rendering reads it), where braces also group LaTeX: ``\frac{a}{b}``,
# ``x^{n}``, ``P_{os}``. There a ``{name}`` right after a command, ``^``, ``_`` or another group
# is LaTeX; anywhere else a ``{name}`` that is not a value of the text is a misspelled
# placeholder (``{valeu}``), which would reach learners literally.
_MATH = re.compile(r"(?<!\\)\$(?!\s)(.+?)(?<!\\)\$", re.DOTALL)
_LATEX_GROUP_AFTER = re.compile(r"(?:\\[A-Za-z]+|[\^_{}])\s*$")


@dataclass(frozen=True)
class _Computed:
    formula: Formula
    unit: str | None
    decimals: int | None


Segment = str | tuple[str] | _Computed  # literal text, ("name",) a named value, or a formula


@dataclass(frozen=True)
class TextTemplate:
    """A :class:`Text` with placeholders, parsed once and rendered per variant."""

    source: Text
    en: tuple[Segment, ...]
    zh: tuple[Segment, ...]

    @property
    def has_placeholders(self) -> bool:
        return any(not isinstance(s, str) for s in self.en + self.zh)

    def render(self, values: Mapping[str, Fraction], named: Mapping[str, str | Text]) -> Text:
        """This variant's text; a ``named`` value that is a :class:`Text` is shown in each
        language's own form (``14 GPUs`` / ``14 张 GPU``)."""
        whole = self.bind(values, named, frozenset()).whole
        assert whole is not None  # nothing left open
        return whole

    def bind(
        self,
        values: Mapping[str, Fraction],
        named: Mapping[str, str | Text],
        open_names: frozenset[str],
    ) -> BoundText:
        """This text with ``values`` and ``named`` put in, but for the ``{name}`` placeholders in
        ``open_names``, which :meth:`BoundText.fill` supplies later: the formulas are evaluated
        and formatted once, and filling is a join (``bind(v, n, o).fill(m)`` is
        ``render(v, {**n, **m})`` when ``m`` names every open name)."""
        en = _bind(self.en, values, named, open_names, "en")
        zh = _bind(self.zh, values, named, open_names, "zh")
        whole = None
        if all(isinstance(part, str) for part in en + zh):
            whole = Text("".join(en), "".join(zh))  # type: ignore[arg-type]
        return BoundText(en, zh, whole)


@dataclass(frozen=True, slots=True)
class BoundText:
    """A :class:`TextTemplate` with one parameter combination put in (:meth:`TextTemplate.bind`):
    literal strings and the open ``("name",)`` placeholders left to fill."""

    en: tuple[str | tuple[str], ...]
    zh: tuple[str | tuple[str], ...]
    whole: Text | None  # the text itself, when no placeholder is left open

    def fill(self, named: Mapping[str, str | Text]) -> Text:
        if self.whole is not None:
            return self.whole
        return Text(_fill(self.en, named, "en"), _fill(self.zh, named, "zh"))


def compile_text(
    text: Text,
    names: frozenset[str],
    named: frozenset[str],
    definitions: Mapping[str, Formula],
) -> TextTemplate:
    """Parse the placeholders of ``text``.

    ``names`` are the parameters formulas may use, ``named`` the ``{name}`` values a renderer will
    supply (parameters and ``answer``); formulas may also use the card's ``definitions``.
    """
    return TextTemplate(
        source=text,
        en=_compile(text.en, names, named, definitions),
        zh=_compile(text.zh, names, named, definitions),
    )


def _compile(
    source: str,
    names: frozenset[str],
    named: frozenset[str],
    definitions: Mapping[str, Formula],
) -> tuple[Segment, ...]:
    segments: list[Segment] = []
    position = 0
    maths: list[tuple[int, int]] | None = None
    for match in _PLACEHOLDER.finditer(source):
        body = match.group(1)
        if not body.startswith("=") and body in named and "$" in source:
            if maths is None:
                maths = [m.span() for m in _MATH.finditer(source)]
            if _latex_argument(source, match.start(), maths):
                continue  # \frac{p - 1}{p}: the letter p, not p's value
        if not body.startswith("=") and body not in named:
            if maths is None:
                maths = [m.span() for m in _MATH.finditer(source)]
            if _latex_group(source, match.start(), maths):
                continue  # LaTeX braces such as {n} in x^{n}
            raise FormulaError(
                Message(
                    "unknown placeholder %(placeholder)s: this text can show %(names)s",
                    placeholder=repr(match.group(0)),
                    names=", ".join(f"{{{name}}}" for name in sorted(named)) or "—",
                ),
                column=match.start() + 1,
            )
        segments.append(source[position : match.start()])
        position = match.end()
        if not body.startswith("="):
            segments.append((body,))
            continue
        parts = body[1:].split(":")
        shown = repr(match.group(0))
        if len(parts) > 3:
            raise FormulaError(
                Message("placeholder %(placeholder)s has too many ':' parts", placeholder=shown)
            )
        unit = parts[1].strip() if len(parts) > 1 and parts[1].strip() else None
        if unit is not None and unit != COUNT:
            get_unit(unit)
        decimals: int | None = None
        if len(parts) == 3:
            try:
                decimals = int(parts[2])
            except ValueError:
                raise FormulaError(
                    Message(
                        "placeholder %(placeholder)s: significant figures must be a whole number",
                        placeholder=shown,
                    )
                ) from None
            if not 1 <= decimals <= 12:
                raise FormulaError(
                    Message(
                        "placeholder %(placeholder)s: significant figures must be 1..12",
                        placeholder=shown,
                    )
                )
        try:
            formula = parse_formula(parts[0], names, definitions)
        except FormulaError as exc:
            raise FormulaError(
                Message(
                    "placeholder %(placeholder)s: %(reason)s",
                    placeholder=shown,
                    reason=exc.localized,
                )
            ) from None
        segments.append(_Computed(formula, unit, decimals))
    segments.append(source[position:])
    return tuple(s for s in segments if s != "")


_LATEX_ARGUMENT_AFTER = re.compile(r"(?:\\[A-Za-z]+|[\^_}])$")


def _latex_argument(source: str, start: int, maths: list[tuple[int, int]]) -> bool:
    """Whether the braces of a known name at ``start`` are a LaTeX argument: inside maths and
    right after a command, ``^``, ``_`` or another group (``\\frac{p - 1}{p}``, ``x^{n}``).
    A value goes there braced once more: ``\\frac{1}{{nodes}}``."""
    inside = any(begin < start < end for begin, end in maths)
    return inside and _LATEX_ARGUMENT_AFTER.search(source, 0, start) is not None


def _latex_group(source: str, start: int, maths: list[tuple[int, int]]) -> bool:
    """Whether the braces at ``start`` group LaTeX (inside maths, after a command, ``^``, ``_``
    or another group) rather than name a value."""
    inside = any(begin < start < end for begin, end in maths)
    return inside and _LATEX_GROUP_AFTER.search(source, 0, start) is not None


def _segment_text(
    segment: Segment, values: Mapping[str, Fraction], named: Mapping[str, str | Text], lang: str
) -> str:
    if isinstance(segment, str):
        return segment
    if isinstance(segment, tuple):
        return _named_text(named[segment[0]], lang)
    return format_computed(segment, segment.formula.evaluate(values), lang)


def _named_text(shown: str | Text, lang: str) -> str:
    return shown.get(lang) if isinstance(shown, Text) else shown


def _bind(
    segments: tuple[Segment, ...],
    values: Mapping[str, Fraction],
    named: Mapping[str, str | Text],
    open_names: frozenset[str],
    lang: str,
) -> tuple[str | tuple[str], ...]:
    """The segments with all but the open names turned into text, adjacent texts joined."""
    out: list[str | tuple[str]] = []
    for segment in segments:
        if isinstance(segment, tuple) and segment[0] in open_names:
            out.append(segment)
            continue
        text = _segment_text(segment, values, named, lang)
        if out and isinstance(out[-1], str):
            out[-1] += text
        else:
            out.append(text)
    return tuple(out)


def _fill(parts: tuple[str | tuple[str], ...], named: Mapping[str, str | Text], lang: str) -> str:
    return "".join(
        part if isinstance(part, str) else _named_text(named[part[0]], lang) for part in parts
    )


def format_computed(segment: _Computed, value: Fraction, lang: str) -> str:
    """A computed placeholder's text: trailing zeros dropped, since a text shows one value."""
    if segment.unit == COUNT:
        return format_count_words(value, lang, segment.decimals or 4)
    figures = segment.decimals if segment.decimals is not None else DEFAULT_FIGURES
    if segment.unit is not None:
        return format_readable(value, segment.unit, figures, lang)
    if value.denominator == 1:
        return format_number(value, 0)
    return format_number(value, significant_decimals(value, figures))
