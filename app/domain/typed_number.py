"""A number as a learner types it, read strictly (see :mod:`app.domain.typed`): the exact value
or a :class:`TypedError` naming the field at fault. No imports of the grading, so that
:class:`~app.domain.generation.Grade` can hold a :class:`TypedAnswer`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from .messages import Message
from .units import get_unit

MAX_LENGTH = 40  # characters of a typed number
MAX_EXPONENT = 30  # |exponent| of a typed number (1e30 bytes is already a quettabyte)
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE]([+-]?[0-9]+))?")
_GROUPED = re.compile(r"[+-]?[0-9]{1,3}(?:[, ' _][0-9]{3})+(?:\.[0-9]*)?")
_DECIMAL_COMMA = re.compile(r"[+-]?[0-9]+,[0-9]+")


class TypedError(ValueError):
    """What the learner typed cannot be graded: ``field`` (``value`` or ``unit``) says where,
    ``message`` why, in every language."""

    def __init__(self, field: str, message: Message) -> None:
        super().__init__(f"{field}: {message.en}")
        self.field = field
        self.message = message


@dataclass(frozen=True)
class TypedAnswer:
    """A typed answer, read: the number as typed (spaces trimmed), its unit, its exact value in
    base units."""

    text: str
    unit: str
    value: Fraction

    def shown(self, lang: str = "en") -> str:
        """'105 GiB', '1.5×', '14 张 GPU' (zh): the number as typed with its unit's suffix."""
        spec = get_unit(self.unit)
        suffix = spec.suffix_for(self.text, lang)
        if not suffix:
            return self.text
        return f"{self.text} {suffix}" if spec.spaced else f"{self.text}{suffix}"


def parse_number(text: str) -> Fraction:
    """The exact value of a typed number (see the module docstring); :class:`TypedError` on
    ``value`` otherwise."""
    typed = text.strip()
    if not typed:
        raise TypedError("value", Message("Type a number."))
    if len(typed) > MAX_LENGTH:
        raise TypedError(
            "value", Message("That number is too long: at most %(max)s characters.", max=MAX_LENGTH)
        )
    match = _NUMBER.fullmatch(typed)
    if match is None:
        if _GROUPED.fullmatch(typed):
            plain = re.sub(r"[, ' _]", "", typed)
            raise TypedError(
                "value",
                Message(
                    "Type the number without thousands separators: %(plain)s, not %(typed)s.",
                    plain=plain,
                    typed=typed,
                ),
            )
        if _DECIMAL_COMMA.fullmatch(typed):
            raise TypedError(
                "value",
                Message(
                    "Use a decimal point, not a comma: %(plain)s, not %(typed)s.",
                    plain=typed.replace(",", "."),
                    typed=typed,
                ),
            )
        raise TypedError(
            "value",
            Message(
                "%(typed)s is not a number: type digits, with a decimal point and an exponent "
                "(1.5e3) if you need them.",
                typed=repr(typed),
            ),
        )
    exponent = match.group(1)
    if exponent is not None and abs(int(exponent)) > MAX_EXPONENT:
        raise TypedError(
            "value",
            Message(
                "%(typed)s is out of range: exponents go up to %(max)s.",
                typed=typed,
                max=MAX_EXPONENT,
            ),
        )
    return Fraction(Decimal(typed))
