"""Bilingual texts and the placeholders that put a variant's numbers into them.

Placeholders: ``{name}`` is a parameter in its display format (or ``{answer}``, the correct
value as displayed); ``{=formula}``, ``{=formula:UNIT}`` and ``{=formula:UNIT:DECIMALS}`` are
computed values. Braces that are not placeholders (LaTeX's ``\\frac{a}{b}``) are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from .formulas import Formula, FormulaError, parse_formula
from .languages import LANGS
from .units import format_number, format_quantity, get_unit

LANGUAGES = LANGS

_PLACEHOLDER = re.compile(r"\{(=[^{}]*|[a-z][a-z0-9_]*)\}")


@dataclass(frozen=True)
class Text:
    """A text in English and Simplified Chinese."""

    en: str
    zh: str

    def get(self, lang: str) -> str:
        if lang == "zh" and self.zh:
            return self.zh
        return self.en


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

    def render(self, values: Mapping[str, Fraction], named: Mapping[str, str]) -> Text:
        return Text(_render(self.en, values, named), _render(self.zh, values, named))


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
    for match in _PLACEHOLDER.finditer(source):
        body = match.group(1)
        if not body.startswith("=") and body not in named:
            continue  # LaTeX braces such as {n} in x^{n}
        segments.append(source[position : match.start()])
        position = match.end()
        if not body.startswith("="):
            segments.append((body,))
            continue
        parts = body[1:].split(":")
        if len(parts) > 3:
            raise FormulaError(f"placeholder {match.group(0)!r} has too many ':' parts")
        unit = parts[1].strip() if len(parts) > 1 and parts[1].strip() else None
        if unit is not None:
            get_unit(unit)
        decimals: int | None = None
        if len(parts) == 3:
            try:
                decimals = int(parts[2])
            except ValueError:
                raise FormulaError(
                    f"placeholder {match.group(0)!r}: decimals must be a whole number"
                ) from None
            if not 0 <= decimals <= 12:
                raise FormulaError(f"placeholder {match.group(0)!r}: decimals must be 0..12")
        try:
            formula = parse_formula(parts[0], names, definitions)
        except FormulaError as exc:
            raise FormulaError(f"placeholder {match.group(0)!r}: {exc}") from None
        segments.append(_Computed(formula, unit, decimals))
    segments.append(source[position:])
    return tuple(s for s in segments if s != "")


def _render(
    segments: tuple[Segment, ...], values: Mapping[str, Fraction], named: Mapping[str, str]
) -> str:
    out: list[str] = []
    for segment in segments:
        if isinstance(segment, str):
            out.append(segment)
        elif isinstance(segment, tuple):
            out.append(named[segment[0]])
        else:
            value = segment.formula.evaluate(values)
            if segment.unit is not None:
                out.append(format_quantity(value, segment.unit, _decimals(segment.decimals, 2)))
            else:
                default = 0 if value.denominator == 1 else 4
                out.append(format_number(value, _decimals(segment.decimals, default)))
    return "".join(out)


def _decimals(explicit: int | None, default: int) -> int:
    return default if explicit is None else explicit
