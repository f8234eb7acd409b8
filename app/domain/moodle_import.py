"""Moodle XML multichoice questions read into statement templates of a draft.

An instructor moving a question bank into a card: each single-answer ``multichoice`` question
becomes a statement template (its text the stem, the 100 % answer the key, each wrong answer a
pitfall whose explanation is that answer's feedback); every other question is listed as skipped
with its reason. Moodle questions are in one language: the import fills both languages with it
and says which texts are waiting for their translation. What it cannot know (each pitfall's name,
the misconception behind it) starts from the answer's text and is the instructor's to edit.

The file is untrusted: parsed by defusedxml (no DTD, no entity expansion), at most
:data:`MAX_BYTES` and :data:`MAX_QUESTIONS`; HTML is read as text (tags dropped, entities
decoded), MathJax's ``\\( ... \\)`` and ``\\[ ... \\]`` become the card's ``$ ... $``. A text
that reads like a placeholder (``{name}``) is left as it is: validation points at it.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any
from xml.etree.ElementTree import Element

from defusedxml import DefusedXmlException, DTDForbidden
from defusedxml.ElementTree import ParseError, fromstring

from .bilingual import Text
from .calculator import format_bytes
from .languages import LANGS
from .messages import Message

MAX_BYTES = 2_000_000
MAX_QUESTIONS = 300
MIN_PITFALLS = 3  # a template's (app.domain.cards)
MAX_TITLE = 80


class MoodleImportError(ValueError):
    """A file that is not a Moodle XML question file (or is too large)."""

    def __init__(self, reason: Text) -> None:
        super().__init__(reason.en)
        self.text = reason


@dataclass(frozen=True)
class Skipped:
    question: str  # its name in the file
    reason: Text


@dataclass
class MoodleImport:
    templates: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def read_moodle_xml(content: bytes, *, lang: str, taken: Collection[str] = ()) -> MoodleImport:
    """The statement templates of the file's multichoice questions (ids unique among ``taken``
    and each other), in ``lang`` copied into the other languages, and what was skipped."""
    if len(content) > MAX_BYTES:
        raise MoodleImportError(
            Message("the file is larger than %(limit)s", limit=format_bytes(MAX_BYTES))
        )
    try:
        root = fromstring(content, forbid_dtd=True)
    except DTDForbidden:  # well-formed, but a DTD can expand entities: never read
        raise MoodleImportError(
            Message(
                "the file has a document type declaration (DOCTYPE), which an import does not "
                "accept: remove that line, or export the questions from Moodle again"
            )
        ) from None
    except (ParseError, DefusedXmlException, ValueError):
        raise MoodleImportError(Message("this is not a well-formed XML file")) from None
    if root.tag != "quiz":
        raise MoodleImportError(Message("a Moodle XML question file has quiz as its root element"))
    questions = [q for q in root.findall("question") if q.get("type") != "category"]
    if len(questions) > MAX_QUESTIONS:
        raise MoodleImportError(
            Message("at most %(limit)s questions per file", limit=MAX_QUESTIONS)
        )
    result = MoodleImport()
    used = set(taken)
    for number, question in enumerate(questions, start=1):
        name = _text_of(question.find("name/text")) or f"question {number}"
        template = _template(question, name, lang, used)
        if isinstance(template, Skipped):
            result.skipped.append(template)
            continue
        used.add(template["id"])
        result.templates.append(template)
    return result


def _template(question: Element, name: str, lang: str, used: set[str]) -> dict[str, Any] | Skipped:
    kind = question.get("type", "")
    if kind != "multichoice":
        return Skipped(
            name,
            Message("only multichoice questions are imported (this one is %(type)s)", type=kind),
        )
    if (_text_of(question.find("single")) or "true").lower() not in ("true", "1"):
        return Skipped(name, Message("a question with several right answers is not imported"))
    stem = _plain(_text_of(question.find("questiontext/text")))
    answers = [
        (
            _fraction(answer.get("fraction", "0")),
            _plain(_text_of(answer.find("text"))),
            _plain(_text_of(answer.find("feedback/text"))),
        )
        for answer in question.findall("answer")
    ]
    right = [a for a in answers if a[0] >= 100]
    wrong = [a for a in answers if a[0] <= 0 and a[1]]
    if not stem:
        return Skipped(name, Message("the question has no text"))
    if len(right) != 1 or not right[0][1]:
        return Skipped(name, Message("the question needs exactly one answer with full marks"))
    if len(wrong) < MIN_PITFALLS:
        return Skipped(
            name,
            Message(
                "a template needs at least %(count)s wrong answers (this question has %(has)s)",
                count=MIN_PITFALLS,
                has=len(wrong),
            ),
        )
    general = _plain(_text_of(question.find("generalfeedback/text")))
    key = right[0]
    pitfalls = []
    for index, (_, text, feedback) in enumerate(wrong, start=1):
        pitfalls.append(
            {
                "id": f"answer-{index}",
                "title": _both(_title(text), lang),
                "statement": _both(text, lang),
                "explanation": _both(feedback or text, lang),
            }
        )
    return {
        "id": _unique(_slug(name), used),
        "version": 1,
        "kind": "statement",
        "stem": _both(stem, lang),
        "answer": _both(key[1], lang),
        "choices": min(4, 1 + len(pitfalls)),
        "solution": [_both(general or key[2] or key[1], lang)],
        "pitfalls": pitfalls,
        "sources": [f"Moodle XML import: {name}"[:300]],
    }


def _both(text: str, lang: str) -> dict[str, str]:
    """The text in every language (the others to be translated)."""
    return {other: text for other in LANGS} | {lang: text}


def _title(text: str) -> str:
    return text if len(text) <= MAX_TITLE else text[: MAX_TITLE - 1].rstrip() + "…"


def _fraction(value: str) -> float:
    try:
        return float(value)
    except ValueError:
        return 0.0


def _text_of(element: Element | None) -> str:
    return (element.text or "").strip() if element is not None else ""


_SLUG = re.compile(r"[^a-z0-9]+")


def _slug(name: str) -> str:
    slug = _SLUG.sub("-", name.lower()).strip("-")[:60].strip("-")
    return f"moodle-{slug}" if slug else "moodle-question"


def _unique(slug: str, used: set[str]) -> str:
    candidate, n = slug, 2
    while candidate in used:
        candidate, n = f"{slug}-{n}", n + 1
    return candidate


class _Reader(HTMLParser):
    """An HTML fragment's text: paragraphs and line breaks kept, tags dropped."""

    BREAKS = frozenset({"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("script", "style"):
            self.skip += 1
        elif tag in self.BREAKS:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self.skip = max(0, self.skip - 1)
        elif tag in self.BREAKS:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.parts.append(_WHITE.sub(" ", data))  # HTML's white space collapses


_MATH = re.compile(r"\\\((.+?)\\\)|\\\[(.+?)\\\]|\$\$(.+?)\$\$", re.DOTALL)
_SPACES = re.compile(r"[ \t\r\f\v]+")
_WHITE = re.compile(r"\s+")
_BLANKS = re.compile(r"\s*\n\s*\n\s*")


def _plain(html: str) -> str:
    """Moodle's HTML as the card's text: paragraphs separated by a blank line, math in ``$``."""
    reader = _Reader()
    reader.feed(html)
    reader.close()
    text = "".join(reader.parts)
    text = _MATH.sub(lambda m: "$" + next(g for g in m.groups() if g).strip() + "$", text)
    text = _SPACES.sub(" ", text)
    text = "\n\n".join(p.strip() for p in _BLANKS.split(text) if p.strip())
    return text
