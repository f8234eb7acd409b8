"""What a database can store: text without NUL characters or unpaired surrogates, numbers that
are finite. PostgreSQL refuses a NUL in text and NaN or Infinity in JSON; SQLite cannot encode
a lone surrogate as UTF-8. Input that holds one is refused where it arrives (a 422 naming where),
so that nothing reaches the database that it cannot store.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

MAX_DEPTH = 64


def text_problem(text: str) -> str | None:
    """Why ``text`` cannot be stored, or None."""
    if "\x00" in text:
        return "contains a NUL character"
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return "contains an unpaired surrogate (not a character)"
    return None


def value_problem(value: object, where: str = "", depth: int = 0) -> str | None:
    """Where and why ``value`` (JSON-like data: texts, numbers, lists, mappings) cannot be stored,
    e.g. ``points[0].title.en: contains a NUL character``; None when it can."""
    if depth > MAX_DEPTH:
        return f"{where or 'the document'}: nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, str):
        problem = text_problem(value)
        return f"{where}: {problem}" if problem and where else problem
    if isinstance(value, float) and not math.isfinite(value):
        return f"{where or 'a number'}: {value} is not a finite number"
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and (problem := text_problem(key)):
                return f"{where or 'the document'}: a name {problem}"
            found = value_problem(item, f"{where}.{key}" if where else str(key), depth + 1)
            if found:
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = value_problem(item, f"{where}[{index}]", depth + 1)
            if found:
                return found
    return None
