"""Texts to HTML: inline LaTeX (``$...$``) becomes MathML on the server, the rest is escaped.

Browsers render MathML Core natively, so pages need neither JavaScript nor a CDN. The converter's
output is parsed back and must consist of MathML elements only, without link, event or style
attributes; anything else (or LaTeX it cannot read) is shown as escaped source instead.

Every ``<math>`` is named by its formula in words in the page's language
(:func:`app.maths_text.spoken`): Chromium leaves MathML out of the names it computes from
content, so a heading or a label holding a formula would otherwise lose it. Where markup cannot
go (a ``<title>``, a ``<select>``'s options) :func:`render_plain` writes the formulas as plain
text.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from functools import lru_cache

from latex2mathml.converter import convert
from markupsafe import Markup, escape

from app.maths_text import plain, spoken, spoken_operator

_MATHML_NS = "{http://www.w3.org/1998/Math/MathML}"
_MATHML_TAGS = frozenset(
    """math mrow mi mn mo mtext mspace ms mfrac msqrt mroot mstyle merror mpadded mphantom
    mfenced menclose msub msup msubsup munder mover munderover mmultiscripts mprescripts none
    mtable mtr mtd mlabeledtr semantics annotation""".split()
)
# Attributes that could link, script or restyle (\href, \style, on..., xlink:...): never kept.
_UNSAFE_ATTRIBUTE = re.compile(r"^(?:href|src|style|on.*|\{.*)$", re.IGNORECASE)
# $...$ not preceded by a backslash; the content may not be empty or start with a space.
_INLINE_MATH = re.compile(r"(?<!\\)\$(?!\s)(.+?)(?<!\\)\$", re.DOTALL)
_QUANTITY = re.compile(
    r"^(?P<number>[-−]?\d[\d,]*(?:\.\d+)?)(?P<space>\s?)(?P<unit>[^\d\s$][^$]*)?$"
)
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


@lru_cache(maxsize=4096)
def latex_to_mathml(latex: str, display: bool = False, lang: str = "en") -> Markup:
    """MathML for a LaTeX formula, named by its words in ``lang``, or the escaped source when it
    cannot be converted safely."""
    try:
        mathml = convert(latex, display="block" if display else "inline")
        root = ET.fromstring(mathml)
    except Exception:  # the converter raises many kinds of errors on bad input
        return _latex_source(latex)
    if any(
        el.tag.removeprefix(_MATHML_NS) not in _MATHML_TAGS
        or any(_UNSAFE_ATTRIBUTE.match(name) for name in el.attrib)
        for el in root.iter()
    ):
        return _latex_source(latex)
    label = Markup('<math aria-label="') + escape(spoken(latex, lang)) + Markup('" ')
    return Markup(mathml.replace("<math ", label, 1))


def _latex_source(latex: str) -> Markup:
    return Markup('<code class="latex">') + escape(latex) + Markup("</code>")


_CODE = re.compile(r"`([^`\n]{1,200})`")


def _prose(text: str) -> Markup:
    """Plain text, escaped, with ```name``` spans as ``<code>``."""
    parts: list[Markup] = []
    position = 0
    for match in _CODE.finditer(text):
        parts.append(escape(_undollar(text[position : match.start()])))
        parts.append(Markup("<code>") + escape(match.group(1)) + Markup("</code>"))
        position = match.end()
    parts.append(escape(_undollar(text[position:])))
    return Markup("").join(parts)


@lru_cache(maxsize=4096)
def render_inline(text: str, lang: str = "en") -> Markup:
    """A text with ``$...$`` math rendered as MathML and ```code``` as code; ``\\$`` stays a
    dollar sign."""
    parts: list[Markup] = []
    position = 0
    for match in _INLINE_MATH.finditer(text):
        parts.append(_prose(text[position : match.start()]))
        parts.append(latex_to_mathml(match.group(1).strip(), lang=lang))
        position = match.end()
    parts.append(_prose(text[position:]))
    return Markup("").join(parts)


@lru_cache(maxsize=4096)
def render_plain(text: str) -> str:
    """A text with its ``$...$`` math as plain Unicode (``16Ψ → 16Ψ/N_d``) and ```code``` as
    its name: for a ``<title>`` or an ``<option>``, which hold text only (escaped by Jinja)."""
    parts: list[str] = []
    position = 0
    for match in _INLINE_MATH.finditer(text):
        parts.append(_plain_prose(text[position : match.start()]))
        parts.append(plain(match.group(1).strip()))
        position = match.end()
    parts.append(_plain_prose(text[position:]))
    return "".join(parts)


def _plain_prose(text: str) -> str:
    return _CODE.sub(lambda match: match.group(1), _undollar(text))


def render_paragraphs(text: str, lang: str = "en") -> Markup:
    """Blank-line separated paragraphs, each a ``<p>`` with its math rendered."""
    paragraphs = [p.strip() for p in _PARAGRAPH_BREAK.split(text.strip()) if p.strip()]
    return Markup("\n").join(
        Markup("<p>") + render_inline(p, lang) + Markup("</p>") for p in paragraphs
    )


@lru_cache(maxsize=4096)
def render_quantity(text: str, lang: str = "en") -> Markup:
    """A displayed quantity such as ``332.5 GB`` or ``1.5×`` as MathML (number and unit), named
    by its words (``1.5 times``, ``1.5 倍``)."""
    match = _QUANTITY.match(text.strip())
    if match is None or "$" in text:
        return render_inline(text, lang)
    number = match.group("number").replace("−", "-")
    unit = match.group("unit")
    body = Markup("<mn>") + escape(number) + Markup("</mn>")
    words = number
    if unit:
        gap = "\u00a0" if match.group("space") else ""
        body += Markup("<mtext>") + escape(gap + unit.strip()) + Markup("</mtext>")
        words += " " + spoken_operator(unit.strip(), lang)
    return (
        Markup('<math xmlns="http://www.w3.org/1998/Math/MathML" display="inline" aria-label="')
        + escape(words)
        + Markup('"><mrow>')
        + body
        + Markup("</mrow></math>")
    )


def _undollar(text: str) -> str:
    return text.replace("\\$", "$")
