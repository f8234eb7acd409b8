"""A LaTeX formula as text, for the places that cannot hold MathML or do not read it.

- :func:`plain` writes it in one line of Unicode (``16Ψ → 16Ψ/N_d``): a page's ``<title>``, the
  options of a ``<select>``.
- :func:`spoken` says it in words, in the reader's language (``16 Psi to 16 Psi over N sub d``,
  ``16 Psi 变为 N 下标 d 分之 16 Psi``): the accessible name of a ``<math>`` element, so that a
  heading, a label or a choice that holds a formula names it (Chromium leaves MathML out of the
  names it computes from content).

Both read the MathML that latex2mathml makes of the formula (the same converter as the pages),
so they follow its parse of fractions, scripts and fences; the words come from the catalogs
(``pgettext`` context "spoken maths").
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from functools import lru_cache

from latex2mathml.converter import convert

from app.domain.messages import Message, contextual_message

_NS = "{http://www.w3.org/1998/Math/MathML}"

# Greek letters by their names, the same in both languages.
_GREEK = dict(
    zip(
        "αβγδεζηθικλμνξπρστυφχψωΓΔΘΛΞΠΣΦΨΩ",
        """alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho sigma
        tau upsilon phi chi psi omega Gamma Delta Theta Lambda Xi Pi Sigma Phi Psi Omega""".split(),
        strict=True,
    )
)
_GREEK["Ψ"] = "Psi"  # the card's Ψ (parameter count) is read with its capital


def _operator_words() -> dict[str, Message]:
    # Literal msgids, so that `pybabel extract` finds them.
    return {
        "+": contextual_message("spoken maths", "plus"),
        "−": contextual_message("spoken maths", "minus"),
        "-": contextual_message("spoken maths", "minus"),
        "=": contextual_message("spoken maths", "equals"),
        "≠": contextual_message("spoken maths", "is not equal to"),
        "≈": contextual_message("spoken maths", "is approximately"),
        "<": contextual_message("spoken maths", "is less than"),
        ">": contextual_message("spoken maths", "is greater than"),
        "≤": contextual_message("spoken maths", "is at most"),
        "≥": contextual_message("spoken maths", "is at least"),
        "→": contextual_message("spoken maths", "to"),
        "×": contextual_message("spoken maths", "times"),
        "·": contextual_message("spoken maths", "times"),
        "⋅": contextual_message("spoken maths", "times"),
        "/": contextual_message("spoken maths", "divided by"),
        "±": contextual_message("spoken maths", "plus or minus"),
        "(": contextual_message("spoken maths", "open bracket"),
        ")": contextual_message("spoken maths", "close bracket"),
        "⌈": contextual_message("spoken maths", "the ceiling of"),
        "⌉": contextual_message("spoken maths", "end of ceiling"),
        "⌊": contextual_message("spoken maths", "the floor of"),
        "⌋": contextual_message("spoken maths", "end of floor"),
    }


_OPERATORS = _operator_words()
# "1.5×" at the end of a formula is a factor: "1.5 times", "1.5 倍".
_FOLD = contextual_message("spoken maths, a factor", "times")
# Operators written with a space either side in plain text (when they have both operands).
_SPACED = frozenset("+−-=≠≈<>≤≥→×·⋅±")
_SUPERSCRIPTS = str.maketrans("0123456789+−-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁻")
_SUBSCRIPTS = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
_SPACES = re.compile(r"\s+")
# Elements that are one thing for a fraction's parts: 16Ψ, N_d, 0.8B (a product of tokens).
_ATOMS = frozenset({"mi", "mn", "mtext", "msub", "msup", "msqrt"})


def _tag(element: ET.Element) -> str:
    return element.tag.removeprefix(_NS)


def _parse(latex: str) -> ET.Element:
    """The MathML tree of a formula; raises on LaTeX the converter cannot read."""
    return ET.fromstring(convert(latex))


def _row(element: ET.Element) -> list[ET.Element]:
    """The items of a row, with nested rows (``mrow``, ``mstyle``) flattened."""
    items: list[ET.Element] = []
    for child in element:
        if _tag(child) in {"mrow", "mstyle", "mpadded"}:
            items.extend(_row(child))
        else:
            items.append(child)
    return items


def _is_atom(element: ET.Element) -> bool:
    """A fraction's part that needs no brackets in one line: a product of tokens and bracketed
    groups (``16Ψ``, ``(2 + K)Ψ``)."""
    items = _row(element) if _tag(element) in {"mrow", "mstyle", "msqrt"} else [element]
    depth = 0
    for item in items:
        text = _text(item) if _tag(item) == "mo" else ""
        depth += (text == "(") - (text == ")")
        if _tag(item) not in _ATOMS and not (depth > 0 or text == ")"):
            return False
    return bool(items)


def _text(element: ET.Element) -> str:
    return "".join(element.itertext()).strip()


# --- plain -------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def plain(latex: str) -> str:
    """The formula in one line of Unicode text (``\\frac{16\\Psi}{N_d}`` is ``16Ψ/N_d``); the
    LaTeX itself when the converter cannot read it."""
    try:
        root = _parse(latex)
    except Exception:  # the converter raises many kinds of errors on bad input
        return latex
    return _SPACES.sub(" ", _plain_row(_row(root))).strip()


def _plain_row(items: list[ET.Element]) -> str:
    out = []
    for index, item in enumerate(items):
        text = _plain(item)
        if _tag(item) == "mo" and text in _SPACED and 0 < index < len(items) - 1:
            text = f" {text} "
        elif _tag(item) == "mspace" or (_tag(item) == "mo" and text == ","):
            text = text + " "
        out.append(text)
    return "".join(out)


def _plain(element: ET.Element) -> str:
    tag = _tag(element)
    children = list(element)
    if tag in {"mi", "mn", "mo", "mtext", "ms"}:
        return _text(element)
    if tag == "mspace":
        return ""
    if tag == "mfrac" and len(children) == 2:
        return f"{_plain_part(children[0])}/{_plain_part(children[1])}"
    if tag == "msqrt":
        radicand = _plain_row(_row(element))
        return "√" + (radicand if _is_atom(element) else f"({radicand})")
    if tag == "msub" and len(children) == 2:
        sub = _plain(children[1])
        written = sub.translate(_SUBSCRIPTS)
        return _plain(children[0]) + (written if written != sub else "_" + _bracketed(sub, 1))
    if tag == "msup" and len(children) == 2:
        sup = _plain(children[1])
        written = sup.translate(_SUPERSCRIPTS)
        if all(c in "⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻" for c in written):
            return _plain(children[0]) + written
        return _plain(children[0]) + "^" + _bracketed(sup, 1)
    return _plain_row(_row(element) if tag in {"mrow", "mstyle", "math"} else children)


def _plain_part(element: ET.Element) -> str:
    text = _plain(element)
    return text if _is_atom(element) else f"({text})"


def _bracketed(text: str, longest: int) -> str:
    return text if len(text) <= longest else f"({text})"


# --- spoken ------------------------------------------------------------------------------------


@lru_cache(maxsize=4096)
def spoken(latex: str, lang: str) -> str:
    """The formula in words in ``lang`` (``16\\Psi`` is ``16 Psi``; a fraction of two products
    is "a over b", a larger one "the fraction with numerator a and denominator b"); the plain
    text when the converter cannot read it."""
    try:
        root = _parse(latex)
    except Exception:  # the converter raises many kinds of errors on bad input
        return latex
    return _SPACES.sub(" ", _spoken_row(_row(root), lang)).strip()


def spoken_operator(operator: str, lang: str) -> str:
    """An operator or a unit sign in words (``×`` after a number: "times", "倍")."""
    if operator == "×":
        return _FOLD.get(lang)
    word = _OPERATORS.get(operator)
    return word.get(lang) if word else operator


def _spoken_row(items: list[ET.Element], lang: str) -> str:
    words = []
    for index, item in enumerate(items):
        if _tag(item) == "mo" and _text(item) == "×" and index == len(items) - 1 and index > 0:
            words.append(_FOLD.get(lang))
        else:
            words.append(_spoken(item, lang))
    return " ".join(w for w in words if w)


def _spoken(element: ET.Element, lang: str) -> str:
    tag = _tag(element)
    children = list(element)
    if tag in {"mn", "mtext", "ms"}:
        return _text(element)
    if tag in {"mi", "mo"}:
        text = _text(element)
        if text in _GREEK:
            return _GREEK[text]
        word = _OPERATORS.get(text)
        return word.get(lang) if word else text
    if tag == "mspace":
        return ""
    if tag == "mfrac" and len(children) == 2:
        numerator, denominator = (_spoken(c, lang) for c in children)
        if _is_atom(children[0]) and _is_atom(children[1]):
            message = contextual_message(
                "spoken maths",
                "%(numerator)s over %(denominator)s",
                numerator=numerator,
                denominator=denominator,
            )
        else:
            message = contextual_message(
                "spoken maths",
                "the fraction with numerator %(numerator)s and denominator %(denominator)s",
                numerator=numerator,
                denominator=denominator,
            )
        return message.get(lang)
    if tag == "msqrt":
        return contextual_message(
            "spoken maths",
            "the square root of %(radicand)s",
            radicand=_spoken_row(_row(element), lang),
        ).get(lang)
    if tag == "msub" and len(children) == 2:
        return contextual_message(
            "spoken maths",
            "%(base)s sub %(subscript)s",
            base=_spoken(children[0], lang),
            subscript=_spoken(children[1], lang),
        ).get(lang)
    if tag == "msup" and len(children) == 2:
        base = _spoken(children[0], lang)
        if _text(children[1]) == "2":
            return contextual_message("spoken maths", "%(base)s squared", base=base).get(lang)
        return contextual_message(
            "spoken maths",
            "%(base)s to the power %(exponent)s",
            base=base,
            exponent=_spoken(children[1], lang),
        ).get(lang)
    return _spoken_row(_row(element) if tag in {"mrow", "mstyle", "math"} else children, lang)
