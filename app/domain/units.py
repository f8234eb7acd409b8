"""Display units and number formatting.

Formulas compute in base units (bytes, seconds, bytes per second, plain ratios); a unit here says
how a value is scaled and labelled for display. GB is 10**9 bytes and GiB is 2**30 bytes, the way
the ZeRO paper and the card count.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal, localcontext
from fractions import Fraction


@dataclass(frozen=True)
class Unit:
    name: str
    scale: Fraction  # base units per displayed unit
    suffix: str  # what follows the number
    spaced: bool = True  # a space between number and suffix
    singular: str | None = None  # the suffix after exactly 1 ("1 GPU"), when it differs


def _unit(
    name: str,
    scale: int | Fraction,
    suffix: str | None = None,
    spaced: bool = True,
    singular: str | None = None,
) -> Unit:
    return Unit(name, Fraction(scale), name if suffix is None else suffix, spaced, singular)


UNITS: dict[str, Unit] = {
    unit.name: unit
    for unit in (
        _unit("B", 1),
        _unit("KB", 10**3),
        _unit("MB", 10**6),
        _unit("GB", 10**9),
        _unit("TB", 10**12),
        _unit("KiB", 2**10),
        _unit("MiB", 2**20),
        _unit("GiB", 2**30),
        _unit("TiB", 2**40),
        _unit("B/s", 1),
        _unit("GB/s", 10**9),
        _unit("s", 1),
        _unit("ms", Fraction(1, 10**3)),
        _unit("us", Fraction(1, 10**6), "µs"),
        _unit("x", 1, "×", spaced=False),
        _unit("%", Fraction(1, 100), "%", spaced=False),
        _unit("GPUs", 1, singular="GPU"),
        _unit("1", 1, ""),
    )
}

# Parameter display formats that are not units.
FORMATS = ("count", "int")

_COUNT_SUFFIXES = ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K"))


class UnitError(ValueError):
    pass


def get_unit(name: str) -> Unit:
    try:
        return UNITS[name]
    except KeyError:
        raise UnitError(f"unknown unit {name!r} (known: {', '.join(UNITS)})") from None


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
    suffix = spec.singular if spec.singular is not None and number == "1" else spec.suffix
    if not suffix:
        return number
    return f"{number} {suffix}" if spec.spaced else f"{number}{suffix}"


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
