"""What every calculator's form shares: numbers read as people type them, one message per
field for what cannot be used, and the GPU-memory line of its chart.

A calculator's inputs are read as numbers only (:func:`read_number`: digits, a decimal point,
an exponent, thousands commas, a K/M/B/T suffix); no text a person typed ever reaches the formula
parser. Bad input raises :class:`CalculatorError` listing every field at fault, each message from
the catalogs (shown in the reader's language); nothing else is raised for any text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from html import escape

from .bilingual import Text
from .messages import Message, contextual_message
from .units import format_number

MAX_TEXT = 40  # characters of one field
MAX_EXPONENT = 30  # |exponent| of a typed number

_NUMBER = re.compile(
    r"(?P<sign>-?)(?P<mantissa>[0-9][0-9_,]*(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?:[eE](?P<exponent>[+-]?[0-9]{1,4}))?"
    r"\s*(?P<suffix>[kKmMbBtT]?)"
)
_GROUPED = re.compile(r"[0-9]{1,3}(?:,[0-9]{3})+")
_SUFFIX = {"": 1, "k": 10**3, "m": 10**6, "b": 10**9, "t": 10**12}


def read_number(text: str) -> Fraction | None:
    """A decimal number with an optional exponent and K/M/B/T suffix; None if it is not one."""
    match = _NUMBER.fullmatch(text.strip())
    if match is None:
        return None
    mantissa = match.group("mantissa")
    whole = mantissa.partition(".")[0]
    if "," in whole and not _GROUPED.fullmatch(whole):
        return None  # commas only as thousands separators: "1,5" is not 15
    if "," in mantissa.partition(".")[2] or "__" in mantissa or whole.endswith("_"):
        return None
    exponent = int(match.group("exponent") or 0)
    if abs(exponent) > MAX_EXPONENT:
        return None
    value = Fraction(mantissa.replace("_", "").replace(",", "")) * Fraction(10) ** exponent
    value *= _SUFFIX[match.group("suffix").lower()]
    return -value if match.group("sign") else value


def group_digits(number: str) -> str:
    """A formatted number with its thousands grouped: '1120.5' -> '1,120.5'."""
    sign = "-" if number.startswith("-") else ""
    whole, _, decimals = number.lstrip("-").partition(".")
    return sign + f"{int(whole):,}" + (f".{decimals}" if decimals else "")


def grouped(value: Fraction | int) -> str:
    """A bound as a message shows it: '10,000', '0.5', '1,048,576'."""
    value = Fraction(value)
    return group_digits(format_number(value, 0 if value.denominator == 1 else 4))


# --- errors -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FieldError:
    field: str
    message: Text


class CalculatorError(ValueError):
    """Unusable input: one message per field, in the reader's language when shown (safe to show)."""

    def __init__(self, errors: list[FieldError] | tuple[FieldError, ...]) -> None:
        self.errors = tuple(errors)
        super().__init__("; ".join(f"{e.field}: {e.message.en}" for e in self.errors))

    def text(self) -> Text:
        """Every message, one sentence after another."""
        return sentences([e.message for e in self.errors])


def sentences(texts: list[Text]) -> Text:
    """Sentences one after the other (a space between them in English, none in Chinese)."""
    joined = texts[-1]
    for text in reversed(texts[:-1]):
        # Translators: two sentences one after the other (Chinese puts no space between them).
        joined = contextual_message(
            "sentences", "%(sentence)s %(next)s", sentence=text, next=joined
        )
    return joined


def listed(texts: list[Text]) -> Text:
    """Items in a list ("a, b, c"; "a、b、c" in Chinese)."""
    joined = texts[-1]
    for text in reversed(texts[:-1]):
        # Translators: an item of a list and the rest of the list (Chinese separates them with 、).
        joined = contextual_message("list", "%(item)s, %(next)s", item=text, next=joined)
    return joined


# --- reading a form ---------------------------------------------------------------------------


class FormReader:
    """Reads a form's fields, collecting every error instead of stopping at the first."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self.values = values
        self.errors: list[FieldError] = []

    def fail(self, field: str, message: Text) -> None:
        self.errors.append(FieldError(field, message))

    def text(self, field: str) -> str:
        return str(self.values.get(field, "") or "").strip()

    def number(self, field: str, label: Text, *, whole: bool) -> Fraction | None:
        raw = self.text(field)
        if not raw:
            return None
        if len(raw) > MAX_TEXT:
            self.fail(
                field,
                Message("%(label)s: at most %(limit)s characters.", label=label, limit=MAX_TEXT),
            )
            return None
        value = read_number(raw)
        if value is None:
            self.fail(
                field,
                Message("%(label)s: %(value)s is not a number.", label=label, value=repr(raw)),
            )
            return None
        if whole and value.denominator != 1:
            self.fail(field, Message("%(label)s: a whole number, please.", label=label))
            return None
        return value

    def within(
        self,
        field: str,
        label: Text,
        low: Fraction | int,
        high: Fraction | int,
        *,
        whole: bool,
        required: bool,
    ) -> Fraction | None:
        """A number from ``low`` to ``high`` (whole when ``whole``); None, with its error, when
        it is not one (or is empty and not ``required``: None without an error)."""
        value = self.number(field, label, whole=whole)
        if value is None:
            if required and not self.text(field):
                self.fail(field, Message("%(label)s: required.", label=label))
            return None
        if not low <= value <= high:
            self.fail(
                field,
                Message(
                    "%(label)s: from %(low)s to %(high)s.",
                    label=label,
                    low=grouped(low),
                    high=grouped(high),
                ),
            )
            return None
        return value

    def bounded(
        self, field: str, label: Text, low: int, high: int, *, required: bool
    ) -> int | None:
        """A whole number from ``low`` to ``high``."""
        value = self.within(field, label, low, high, whole=True, required=required)
        return None if value is None else int(value)


def chart_start(width: int, height: int, title: str) -> str:
    """The opening of a calculator's chart: an SVG of ``width`` × ``height`` named by ``title``."""
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-labelledby="calc-chart-title" '
        f'class="calc-svg"><title id="calc-chart-title">{escape(title)}</title>'
    )


def capacity_marker(
    x: float, top: float, bottom: float, label_y: float, width: float, label: str
) -> str:
    """A chart's dashed vertical line at the GPU's memory (``x``), from ``top`` to ``bottom``,
    and its ``label`` at ``label_y``, on the side of the line with room (an SVG fragment)."""
    anchor = "end" if x > width / 2 else "start"
    shift = -5 if anchor == "end" else 5
    return (
        f'<line x1="{x:.2f}" y1="{top}" x2="{x:.2f}" y2="{bottom}" '
        f'stroke="currentColor" stroke-width="2" stroke-dasharray="5 4" class="calc-capacity"/>'
        f'<text x="{x + shift:.2f}" y="{label_y}" font-size="14" fill="currentColor" '
        f'text-anchor="{anchor}">{escape(label)}</text>'
    )
