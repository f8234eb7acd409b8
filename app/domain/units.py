"""Display units and number formatting.

Formulas compute in base units (bytes, seconds, bytes per second, plain ratios); a unit here says
how a value is scaled and labelled for display. GB is 10**9 bytes and GiB is 2**30 bytes, the way
the ZeRO paper and the card count.

Numbers a learner reads are shown with a number of *significant figures* (3 by default:
``31.4 GB``, ``1.88 GB``, ``17.5 GB``), never rounding digits before the decimal point
(``2412 GB``, not ``2410 GB``), and in a readable unit of the declared unit's *family*
(``40.6 MB``, not ``0.0406 GB``; ``1.27 ms``, not ``0.00127 s``): see :func:`readable_unit`.
Binary units (GiB) stand alone: a question asked in GiB answers in GiB.
Chinese texts count in 万 and 亿 (``2031 万``, ``8.4 万亿``) and GPUs with a measure word
(``14 张 GPU``): see :func:`format_count_words` and the ``zh`` forms of :class:`Unit`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction
from functools import wraps
from typing import TypeVar, TypeVarTuple

from .bilingual import Text
from .messages import Message


@dataclass(frozen=True)
class Unit:
    name: str
    scale: Fraction  # base units per displayed unit
    suffix: str  # what follows the number
    spaced: bool = True  # a space between number and suffix
    singular: str | None = None  # the suffix after exactly 1 ("1 GPU"), when it differs
    zh: str | None = None  # the Chinese suffix, when it differs ("张 GPU")
    whole: bool = False  # counted in whole numbers (GPUs): no significant-figure rounding

    def suffix_for(self, number: str, lang: str = "en") -> str:
        if lang == "zh" and self.zh is not None:
            return self.zh
        return self.singular if self.singular is not None and number == "1" else self.suffix


def _unit(
    name: str,
    scale: int | Fraction,
    suffix: str | None = None,
    spaced: bool = True,
    singular: str | None = None,
    zh: str | None = None,
    whole: bool = False,
) -> Unit:
    return Unit(
        name, Fraction(scale), name if suffix is None else suffix, spaced, singular, zh, whole
    )


UNITS: dict[str, Unit] = {
    unit.name: unit
    for unit in (
        _unit("B", 1),
        _unit("KB", 10**3),
        _unit("MB", 10**6),
        _unit("GB", 10**9),
        _unit("TB", 10**12),
        _unit("PB", 10**15),
        _unit("KiB", 2**10),
        _unit("MiB", 2**20),
        _unit("GiB", 2**30),
        _unit("TiB", 2**40),
        _unit("B/s", 1),
        _unit("MB/s", 10**6),
        _unit("GB/s", 10**9),
        _unit("TB/s", 10**12),
        _unit("s", 1),
        _unit("ms", Fraction(1, 10**3)),
        _unit("us", Fraction(1, 10**6), "µs"),
        _unit("x", 1, "×", spaced=False),
        _unit("%", Fraction(1, 100), "%", spaced=False),
        _unit("GPUs", 1, singular="GPU", zh="张 GPU", whole=True),
        _unit("1", 1, ""),
    )
}

# Units a value may be shown in instead of the declared one, smallest first: a template that
# declares GB may show MB or TB when that reads better. Units not listed stand alone.
# Binary units stand alone: a question asked in GiB (what a profiler prints) answers in GiB.
FAMILIES: tuple[tuple[str, ...], ...] = (
    ("B", "KB", "MB", "GB", "TB", "PB"),
    ("us", "ms", "s"),
    ("B/s", "MB/s", "GB/s", "TB/s"),
)
_FAMILY_OF = {name: family for family in FAMILIES for name in family}


_Rest = TypeVarTuple("_Rest")
_Result = TypeVar("_Result")


def _memo_by_ratio(
    function: Callable[[Fraction, *_Rest], _Result],
) -> Callable[[Fraction, *_Rest], _Result]:
    """Memoise a function of (Fraction, *hashables), called positionally, keyed by the
    fraction's numerator and denominator: hashing ints is much cheaper than hashing a Fraction.
    (A result of None would not be remembered: none of these functions returns one.)"""
    cache: dict[tuple[object, ...], _Result] = {}

    @wraps(function)
    def wrapper(value: Fraction, *rest: *_Rest) -> _Result:
        key = (value.numerator, value.denominator, *rest)
        found = cache.get(key)
        if found is None:
            if len(cache) > 1 << 17:
                cache.clear()
            found = cache[key] = function(value, *rest)
        return found

    return wrapper


# Significant figures shown when a text or template does not say otherwise.
DEFAULT_FIGURES = 3

# Parameter display formats that are not units.
FORMATS = ("count", "int")

_COUNT_SUFFIXES = ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K"))


class UnitError(ValueError):
    """An unknown unit; ``message`` says so in every language, ``str()`` in English."""

    def __init__(self, message: Text) -> None:
        super().__init__(message.en)
        self.message = message


def get_unit(name: str) -> Unit:
    try:
        return UNITS[name]
    except KeyError:
        raise UnitError(
            Message(
                "unknown unit %(unit)s (known: %(known)s)", unit=repr(name), known=", ".join(UNITS)
            )
        ) from None


@_memo_by_ratio
def round_decimal(value: Fraction, decimals: int) -> Decimal:
    """``value`` rounded half-to-even to ``decimals`` places, computed exactly."""
    with localcontext() as ctx:
        ctx.prec = 80
        exact = Decimal(value.numerator) / Decimal(value.denominator)
        return exact.quantize(Decimal(1).scaleb(-decimals), rounding=ROUND_HALF_EVEN)


def format_number(value: Fraction, decimals: int, *, keep_zeros: bool = False) -> str:
    """Rounded to ``decimals`` places, trailing zeros dropped: 201.250 -> '201.25', 70.0 -> '70'
    (kept with ``keep_zeros``: '201.250', '70.000')."""
    text = format(round_decimal(value, decimals), "f")
    if "." in text and not keep_zeros:
        text = text.rstrip("0").rstrip(".")
    if text.lstrip("-").strip("0.") == "":
        text = text.lstrip("-")  # no negative zero
    return "0" if text == "" else text


def decimals_used(value: Fraction, decimals: int) -> int:
    """How many of ``decimals`` places the rounded value needs: 201.250 at 3 -> 2, 70 -> 0."""
    text = format_number(value, decimals)
    return len(text.split(".")[1]) if "." in text else 0


def scaled(value: Fraction, unit: str) -> Fraction:
    """``value`` (in base units) expressed in ``unit``."""
    return value / get_unit(unit).scale


def format_quantity(
    value: Fraction, unit: str, decimals: int = 2, *, keep_zeros: bool = False
) -> str:
    """'332.5 GB', '1.5×', '0.42 s' ... (``keep_zeros``: '332.50 GB' at 2 decimals)."""
    spec = get_unit(unit)
    number = format_number(value / spec.scale, decimals, keep_zeros=keep_zeros)
    suffix = spec.suffix_for(number)
    if not suffix:
        return number
    return f"{number} {suffix}" if spec.spaced else f"{number}{suffix}"


def family(unit: str) -> tuple[str, ...]:
    """The units ``unit`` may be replaced by for display (itself alone when it has no family)."""
    get_unit(unit)
    return _FAMILY_OF.get(unit, (unit,))


@_memo_by_ratio
def _magnitude(value: Fraction) -> int:
    """floor(log10(|value|)) for a non-zero value, computed exactly (in integers)."""
    p, q = abs(value.numerator), value.denominator
    guess = len(str(p)) - len(str(q))

    def at_least(g: int) -> bool:  # 10**g <= p/q
        power: int = 10 ** abs(g)  # an int: typeshed types int ** int as Any (negative powers)
        return power * q <= p if g >= 0 else q <= p * power

    while not at_least(guess):
        guess -= 1
    while at_least(guess + 1):
        guess += 1
    return guess


@_memo_by_ratio
def significant_decimals(value: Fraction, figures: int) -> int:
    """Decimals that show ``value`` with ``figures`` significant figures, never rounding digits
    before the point: 17.0625 at 3 -> 1 (17.1), 0.040625 at 3 -> 4 (0.0406), 2411.7 at 3 -> 0
    (2412). ``figures`` 0 means a whole number."""
    if figures <= 0 or value == 0:
        return 0
    decimals = max(0, figures - 1 - _magnitude(value))
    rounded = round_decimal(value, decimals)
    if rounded != 0 and decimals > 0:
        # 9.996 at 3 figures rounds to 10.00: one decimal fewer keeps 3 figures (10.0)
        again = max(0, figures - 1 - _magnitude(Fraction(rounded)))
        decimals = min(decimals, again)
    return decimals


def format_significant(value: Fraction, figures: int) -> str:
    """``value`` with ``figures`` significant figures, trailing zeros kept ('70.0', '0.0406')."""
    return format_number(value, significant_decimals(value, figures), keep_zeros=True)


def common_figures(values: Sequence[Fraction], figures: int) -> int:
    """The fewest significant figures (at most ``figures``) that show every value exactly as
    ``figures`` do: (6, 12, 1.5, 48) at 3 -> 2 ('6.0', '12', '1.5', '48'), so that trailing zeros
    that every choice would carry are dropped from all of them alike."""
    if figures <= 1:
        return figures
    exact = [round_decimal(v, significant_decimals(v, figures)) for v in values]
    best = figures
    for fewer in range(figures - 1, 0, -1):
        if all(
            round_decimal(v, significant_decimals(v, fewer)) == e
            for v, e in zip(values, exact, strict=True)
        ):
            best = fewer
        else:
            break
    return best


def _awkwardness(value: Fraction, figures: int) -> int:
    """How far a number falls outside what reads at a glance, [1, 10**figures): the leading
    '0.' and zeros of 0.0406 (3), or the digits beyond ``figures`` of 21875 at 3 (2)."""
    value = abs(value)
    if value == 0:
        return 0
    magnitude = _magnitude(value)
    if magnitude < 0:
        return -2 * magnitude - 1  # 0.938 -> 1, 0.0586 -> 3: leading zeros read worst
    return max(0, magnitude + 1 - max(figures, 1))


@_memo_by_ratio
def unit_score(value: Fraction, unit: str, figures: int) -> tuple[int, int]:
    """(awkwardness, characters) of ``value`` shown in ``unit``."""
    scaled_value = value / get_unit(unit).scale
    return (
        _awkwardness(scaled_value, figures),
        len(format_significant(scaled_value, max(figures, 1))),
    )


def readable_unit(values: Sequence[Fraction], preferred: str, figures: int) -> str:
    """The unit of ``preferred``'s family in which ``values`` read best together: the least
    awkward numbers in all (40.6 MB rather than 0.0406 GB; 21.9 s, 8.20 s, 0.684 s rather than
    21875 ms ...). ``preferred`` gets one step of slack (1120 GB stays 1120 GB, not 1.12 TB);
    then the larger unit (97.656 KB rather than 97656 B)."""
    units = family(preferred)
    if len(units) == 1 or not values:
        return preferred
    best, best_key = preferred, None
    for index, unit in enumerate(units):
        awkward = length = 0
        for v in values:
            a, n = unit_score(v, unit, figures)
            awkward += a
            length += n
        slack = 1 if unit == preferred else 0
        key = (awkward - slack, 0 if unit == preferred else 1, -index, length)
        if best_key is None or key < best_key:
            best, best_key = unit, key
    return best


def format_readable(
    value: Fraction,
    unit: str,
    figures: int = DEFAULT_FIGURES,
    lang: str = "en",
    *,
    keep_zeros: bool = False,
) -> str:
    """One value in the readable unit of ``unit``'s family, with ``figures`` significant
    figures: '1120 GB', '40.6 MB', '2.54 ms', '14 张 GPU' (zh)."""
    shown = readable_unit([value], unit, figures)
    return format_in(value, shown, figures, lang, keep_zeros=keep_zeros)


def format_in(
    value: Fraction, unit: str, figures: int, lang: str = "en", *, keep_zeros: bool = True
) -> str:
    """``value`` (base units) in exactly ``unit`` with ``figures`` significant figures (whole
    units such as GPUs: a whole number); ``keep_zeros=False`` drops trailing zeros ('70 GB')."""
    spec = get_unit(unit)
    scaled_value = value / spec.scale
    decimals = 0 if spec.whole else significant_decimals(scaled_value, figures)
    number = format_number(scaled_value, decimals, keep_zeros=keep_zeros)
    suffix = spec.suffix_for(number, lang)
    if not suffix:
        return number
    return f"{number} {suffix}" if spec.spaced else f"{number}{suffix}"


_WORDS_EN = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"))
_WORDS_ZH = ((10**12, "万亿"), (10**8, "亿"), (10**4, "万"))


def format_count_words(value: Fraction, lang: str = "en", figures: int = 4) -> str:
    """A large count in words: '210 billion', '20.31 million'; in Chinese '2100 亿', '2031 万',
    '8.4 万亿' (not '84000 亿' or '0.2031 亿'). Up to ``figures`` significant figures, trailing
    zeros dropped."""
    words = _WORDS_ZH if lang == "zh" else _WORDS_EN
    for scale, word in words:
        if abs(value) >= scale:
            scaled_value = value / scale
            number = format_number(scaled_value, significant_decimals(scaled_value, figures))
            return f"{number} {word}"
    return format_number(value, significant_decimals(value, figures))


def format_count(value: Fraction) -> str:
    """A parameter count the way people say it: 70B, 1.3B, 175B, 350M, 1T."""
    for scale, suffix in _COUNT_SUFFIXES:
        if abs(value) >= scale:
            return f"{format_number(value / scale, 2)}{suffix}"
    return format_number(value, 2)


def format_value(value: Fraction, fmt: str | None) -> str:
    """A parameter in its declared display format."""
    if fmt == "count":
        return format_count(value)
    if fmt is None or fmt == "int":
        return format_number(value, 0 if value.denominator == 1 else 4)
    return format_quantity(value, fmt, 2)


def relative_gap(a: Fraction, b: Fraction) -> Fraction:
    """|a - b| relative to the larger magnitude (0 when both are 0)."""
    largest = max(abs(a), abs(b))
    if largest == 0:
        return Fraction(0)
    return abs(a - b) / largest


# Units that measure the same thing, whatever their display family: a learner may type an answer
# in any of them (105 GiB for a key of 112.7 GB: graded by value). Units not listed measure
# something of their own (×, %, GPUs, plain numbers).
DIMENSIONS: tuple[tuple[str, ...], ...] = (
    ("B", "KB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB"),
    ("us", "ms", "s"),
    ("B/s", "MB/s", "GB/s", "TB/s"),
)
_DIMENSION_OF = {name: dimension for dimension in DIMENSIONS for name in dimension}


def dimension(unit: str) -> tuple[str, ...]:
    """The units that measure what ``unit`` measures (itself alone when none other does)."""
    get_unit(unit)
    return _DIMENSION_OF.get(unit, (unit,))


def within_figures(value: Fraction, target: Fraction, figures: int) -> bool:
    """Whether ``value`` is ``target`` at ``figures`` significant figures: at most half a unit
    of ``target``'s last significant figure away, either side, the bounds included (26.25 at 3
    figures: 26.2, 26.3 and 26.25 all are; 2411.7: 2410 and 2412 are). ``figures`` 0: a whole
    number: ``target`` rounded half-to-even, or ``target`` itself when it is not whole (a
    pitfall's 13.7 GPUs, typed as computed). Exact arithmetic."""
    if figures <= 0:
        return value in (Fraction(round_decimal(target, 0)), target)
    if target == 0:
        return value == 0
    exponent = _magnitude(target) - figures + 1
    half = Fraction(10) ** exponent / 2
    return abs(value - target) <= half
