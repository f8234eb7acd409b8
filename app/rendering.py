"""Texts to HTML: inline LaTeX (``$...$``) becomes MathML on the server, the rest is escaped.

Browsers render MathML Core natively, so pages need neither JavaScript nor a CDN. The converter's
output is parsed back and written again from the tree, element by element: MathML elements and
presentation attributes on allow-lists only, every text escaped; anything else (or LaTeX it
cannot read) is shown as escaped source instead.

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
# The presentation attributes the converter writes. None of them can link, script or restyle
# (\href, \style, on..., xlink:... are not here): a formula using anything else is shown as
# its source.
_MATHML_ATTRIBUTES = frozenset(
    """display mathvariant mathsize mathcolor mathbackground stretchy fence separator form
    lspace rspace accent accentunder movablelimits largeop symmetric minsize maxsize width
    height depth voffset linethickness numalign denomalign bevelled columnalign rowalign
    columnspacing rowspacing columnlines rowlines columnspan rowspan frame framespacing
    equalrows equalcolumns notation open close separators scriptlevel displaystyle encoding
    align""".split()
)
# $...$ not preceded by a backslash; the content may not be empty or start with a space.
_INLINE_MATH = re.compile(r"(?<!\\)\$(?!\s)(.+?)(?<!\\)\$", re.DOTALL)
_QUANTITY = re.compile(
    r"^(?P<number>[-−]?\d[\d,]*(?:\.\d+)?)(?P<space>\s?)(?P<unit>[^\d\s$][^$]*)?$"
)
_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")


@lru_cache(maxsize=4096)
def latex_to_mathml(latex: str, display: bool = False, lang: str = "en") -> Markup:
    """MathML for a LaTeX formula, named by its words in ``lang``, or the escaped source when it
    cannot be converted safely.

    The converter copies ``\\text{...}`` verbatim into its output, so its output is never sent
    as it is: it is parsed as XML (comments and processing instructions kept, so that they can
    be refused) and written again element by element from the allow-lists, every text and
    attribute value escaped. Whatever an HTML parser would read differently from the XML one
    (``<!-->``, CDATA, entities) is then only text."""
    try:
        builder = ET.TreeBuilder(insert_comments=True, insert_pis=True)
        parser = ET.XMLParser(target=builder)
        parser.feed(convert(latex, display="block" if display else "inline"))
        root = parser.close()
    except Exception:  # the converter raises many kinds of errors on bad input
        return _latex_source(latex)
    body = _mathml_children(root)
    if body is None or root.tag != _MATHML_NS + "math":
        return _latex_source(latex)
    return (
        Markup('<math aria-label="')
        + escape(spoken(latex, lang))
        + Markup('" xmlns="http://www.w3.org/1998/Math/MathML" display="')
        + ("block" if display else "inline")
        + Markup('">')
        + body
        + Markup("</math>")
    )


def _mathml_children(element: ET.Element) -> Markup | None:
    """The escaped text and allowed child elements of ``element``; None when anything is not on
    the allow-lists (a comment, a processing instruction, a foreign element or attribute)."""
    parts = [escape(element.text or "")]
    for child in element:
        if not isinstance(child.tag, str) or not child.tag.startswith(_MATHML_NS):
            return None  # a comment, a processing instruction or a non-MathML element
        tag = child.tag.removeprefix(_MATHML_NS)
        if tag not in _MATHML_TAGS or tag == "math":
            return None
        if any(name not in _MATHML_ATTRIBUTES for name in child.attrib):
            return None
        inner = _mathml_children(child)
        if inner is None:
            return None
        attributes = Markup("").join(
            Markup(' {}="{}"').format(name, value) for name, value in sorted(child.attrib.items())
        )
        parts.append(Markup("<{}{}>").format(tag, attributes) + inner + Markup("</{}>").format(tag))
        parts.append(escape(child.tail or ""))
    return Markup("").join(parts)


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


# Sized for the texts questions show: the three cards' stems and choices in both languages are
# about 12,600 texts (about 10 MB rendered). Random questions of the three cards in both
# languages found 71 % of their texts already rendered with room for 4,096 (a miss costs 50-75 µs
# of MathML), 99.95 % with 16,384.
@lru_cache(maxsize=16384)
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
