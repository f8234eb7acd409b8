"""What a request's malformed field is told, in the reader's language: the pydantic error types a
client meets (a field missing, too long, of the wrong type ...) named in the catalogs. English is
pydantic's own text, as it always was; a type not named here keeps it in every language (the
``type`` beside it is what a program reads)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from app.domain.messages import Message

Context = Mapping[str, Any]

_BY_TYPE: dict[str, Callable[[Context], Message]] = {
    "missing": lambda c: Message("this field is required"),
    "extra_forbidden": lambda c: Message("this field is not taken here"),
    "string_type": lambda c: Message("must be text"),
    "string_too_short": lambda c: Message(
        "must be at least %(least)s characters long", least=c["min_length"]
    ),
    "string_too_long": lambda c: Message(
        "must be at most %(most)s characters long", most=c["max_length"]
    ),
    "string_pattern_mismatch": lambda c: Message(
        "must match the pattern %(pattern)s", pattern=c["pattern"]
    ),
    "too_short": lambda c: Message("must have at least %(least)s items", least=c["min_length"]),
    "too_long": lambda c: Message("must have at most %(most)s items", most=c["max_length"]),
    "int_type": lambda c: Message("must be a whole number"),
    "int_parsing": lambda c: Message("must be a whole number"),
    "int_from_float": lambda c: Message("must be a whole number"),
    "float_type": lambda c: Message("must be a number"),
    "float_parsing": lambda c: Message("must be a number"),
    "finite_number": lambda c: Message("must be a finite number"),
    "bool_type": lambda c: Message("must be true or false"),
    "bool_parsing": lambda c: Message("must be true or false"),
    "greater_than": lambda c: Message("must be greater than %(limit)s", limit=c["gt"]),
    "greater_than_equal": lambda c: Message("must be %(limit)s or more", limit=c["ge"]),
    "less_than": lambda c: Message("must be less than %(limit)s", limit=c["lt"]),
    "less_than_equal": lambda c: Message("must be %(limit)s or less", limit=c["le"]),
    "literal_error": lambda c: Message("must be one of %(expected)s", expected=_listed(c)),
    "enum": lambda c: Message("must be one of %(expected)s", expected=_listed(c)),
    "list_type": lambda c: Message("must be a list"),
    "dict_type": lambda c: Message("must be an object"),
    "model_type": lambda c: Message("must be an object"),
    "model_attributes_type": lambda c: Message("must be an object"),
    "json_invalid": lambda c: Message("is not valid JSON"),
    "date_type": lambda c: Message("must be a date (YYYY-MM-DD)"),
    "date_parsing": lambda c: Message("must be a date (YYYY-MM-DD)"),
    "date_from_datetime_parsing": lambda c: Message("must be a date (YYYY-MM-DD)"),
    "datetime_type": lambda c: Message("must be a date and time (ISO 8601)"),
    "datetime_parsing": lambda c: Message("must be a date and time (ISO 8601)"),
    "datetime_from_date_parsing": lambda c: Message("must be a date and time (ISO 8601)"),
    "uuid_type": lambda c: Message("must be a UUID"),
    "uuid_parsing": lambda c: Message("must be a UUID"),
}


def _listed(context: Context) -> str:
    """pydantic's ``'a', 'b' or 'c'`` as a list without the English word."""
    return str(context["expected"]).replace(" or ", ", ")


def field_problem(error: Mapping[str, Any], lang: str, *, outside: str = "request") -> str:
    """``where: what``, one of pydantic's errors for a reader of ``lang`` (``outside``: what the
    error is of when it has no location)."""
    where = ".".join(str(part) for part in error.get("loc", ())) or outside
    return Message(": ").get(lang).join((where, reason(error, lang)))


def reason(error: Mapping[str, Any], lang: str) -> str:
    own = str(error.get("msg", "invalid"))
    make = _BY_TYPE.get(str(error.get("type", "")))
    if lang == "en" or make is None:
        return own
    try:
        return make(error.get("ctx") or {}).get(lang)
    except (KeyError, TypeError, ValueError):  # a context not as documented: pydantic's text
        return own
