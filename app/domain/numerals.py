"""Whole numbers written with the digits 0-9, as requests, URLs and card fields write them.

``str.isdigit()`` also accepts other scripts' digits and superscripts: ``int()`` then reads
``'١٢٣'`` as 123 and refuses ``'²'`` (a ValueError, a 500 where the text came from a request).
"""

from __future__ import annotations


def is_digits(text: str) -> bool:
    """True when ``text`` is one or more of the ASCII digits 0-9 and nothing else."""
    return text.isascii() and text.isdigit()
