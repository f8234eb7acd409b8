"""Exports from one source: an Anki package (``.apkg``), Moodle XML (``multichoice``) and a
QTI 3.0 package (app.authoring.qti).

Both write the fixed instances that :func:`app.domain.export_plan.plan_export` chooses (the same
variants, the same texts, one language per file); this module only lays them out.

Anki (genanki): one note per variant; the front is the stem with the choices listed (a, b,
c ...), the back the answer, each wrong choice with its pitfall's title and explanation (the
variant's numbers), and the worked solution. A note's guid comes from the card, the template,
the seed and the language (not the template's version), so re-importing a later export updates
the notes a learner already studies, keeping their review history, instead of adding duplicates;
the note type and the deck have fixed ids for the same reason. The package is a zip holding the
SQLite collection ``collection.anki2`` (the legacy schema that every Anki imports) and an empty
``media`` map.

Moodle XML: a category pseudo-question, then one ``multichoice`` question per variant: a single
answer, the key at fraction 100 and each pitfall at 0; each wrong answer's feedback is its
pitfall's explanation with the variant's numbers, the key's feedback (and the combined feedback
for any wrong answer) the worked solution. Answers are *not* shuffled: the generator already
puts the key at a seeded, uniformly distributed position, and keeping the order keeps the
letters a, b, c ... those of the service, the Anki notes and the analytics. Math is LaTeX in
``\\( ... \\)`` for Moodle's MathJax filter.
"""

from __future__ import annotations

import hashlib
import io
import itertools
import sqlite3
import tempfile
import time
import zipfile
from dataclasses import dataclass
from html import escape
from pathlib import Path
from typing import Literal

from app.domain.cards import Card
from app.domain.catalog import Catalog
from app.domain.export_plan import (
    DEFAULT_VARIANTS,
    ExportChoice,
    ExportError,
    ExportItem,
    ExportPlan,
    paragraphs,
    plan_export,
)
from app.domain.languages import Lang
from app.domain.messages import Message
from app.problems import InvalidInput

ExportFormat = Literal["apkg", "moodle", "qti"]
FORMATS: tuple[ExportFormat, ...] = ("apkg", "moodle", "qti")
MEDIA_TYPES: dict[ExportFormat, str] = {
    "apkg": "application/octet-stream",
    "moodle": "application/xml",
    "qti": "application/zip",
}
SUFFIXES: dict[ExportFormat, str] = {"apkg": ".apkg", "moodle": ".xml", "qti": "-qti3.zip"}

__all__ = [
    "FORMATS",
    "ExportError",
    "ExportFile",
    "ExportFormat",
    "anki_fields",
    "attachment_headers",
    "apkg_bytes",
    "export_card",
    "export_published",
    "moodle_xml",
]


@dataclass(frozen=True)
class ExportFile:
    content: bytes
    filename: str
    media_type: str


def export_card(
    card: Card,
    fmt: str,
    lang: Lang,
    variants: int = DEFAULT_VARIANTS,
    *,
    timestamp: float | None = None,
) -> ExportFile:
    """One card's export in ``fmt`` (``apkg``, ``moodle`` or ``qti``); ExportError for a bad
    request."""
    if fmt not in FORMATS:
        raise ExportError(
            Message(
                "unknown export format %(format)s (known: %(known)s)",
                format=repr(fmt),
                known=", ".join(FORMATS),
            )
        )
    chosen: ExportFormat = next(f for f in FORMATS if f == fmt)
    if chosen == "qti":
        from app.authoring.qti import qti_package

        content = qti_package(card, lang, variants)
    elif chosen == "apkg":
        content = apkg_bytes(plan_export(card, lang, variants), timestamp=timestamp)
    else:
        content = moodle_xml(plan_export(card, lang, variants)).encode("utf-8")
    return ExportFile(
        content=content,
        filename=f"{card.id}-{lang}{SUFFIXES[chosen]}",
        media_type=MEDIA_TYPES[chosen],
    )


def export_published(
    catalog: Catalog, card_id: str, fmt: str, lang: Lang, variants: int = DEFAULT_VARIANTS
) -> ExportFile:
    """The export of a card's latest published version (withdrawn or not), for the API and the
    dashboard alike: NotFound for an unknown card, InvalidInput for a card that cannot be
    exported."""
    from app.practice.questions import get_card

    card = get_card(catalog, card_id[:100], offered=False)  # a withdrawn card exports too
    try:
        return export_card(card, fmt, lang, variants)
    except ExportError as exc:
        raise InvalidInput(exc.text, code="invalid_export") from None


def attachment_headers(export: ExportFile) -> dict[str, str]:
    """The response headers of an export sent as a download."""
    return {
        "Content-Disposition": f'attachment; filename="{export.filename}"',
        "Cache-Control": "no-store",
    }


# --- HTML shared by both formats --------------------------------------------------------------


def _html(text: str) -> str:
    """A text's paragraphs as ``<p>``, escaped (MathJax reads ``\\( ... \\)`` from the text)."""
    return "".join(f"<p>{escape(p, quote=False)}</p>" for p in paragraphs(text))


def _inline(text: str) -> str:
    return escape(" ".join(paragraphs(text)), quote=False)


# --- Anki -------------------------------------------------------------------------------------

ANKI_FIELDS = ("Question", "Answer", "Pitfalls", "Solution", "Source")
_ANKI_MODEL_NAME = "infracards question (v1)"  # a new name (and so id) if the fields change
_ANKI_CSS = """\
.card { font-family: system-ui, sans-serif; font-size: 18px; text-align: left; line-height: 1.45; }
.choices { list-style: none; padding-left: 0; }
.choices li { margin: 0.3em 0; }
.letter { font-weight: bold; margin-right: 0.4em; }
.answer { font-size: 1.1em; }
.pitfall-title { font-style: italic; }
.source { margin-top: 1.5em; font-size: 0.75em; color: #777; }
"""


def _stable_id(*parts: str) -> int:
    """An id in genanki's recommended range (2^30 .. 2^31), the same for the same parts."""
    digest = hashlib.sha256(":".join(parts).encode("utf-8")).digest()
    return (1 << 30) + int.from_bytes(digest[:8], "big") % (1 << 30)


def anki_fields(item: ExportItem, plan: ExportPlan) -> list[str]:
    """The note's fields (HTML), in :data:`ANKI_FIELDS` order."""
    choices = "".join(
        f'<li><span class="letter">{c.letter})</span> {_inline(c.text)}</li>' for c in item.choices
    )
    question = f'<div class="stem">{_html(item.stem)}</div><ul class="choices">{choices}</ul>'
    key = item.key
    answer = (
        f'<p class="answer"><b>{escape(plan.label("answer"))}:</b> '
        f"{key.letter}) {_inline(key.text)}</p>"
    )
    pitfalls = "".join(_anki_pitfall(c) for c in item.pitfalls)
    pitfalls_html = f"<h4>{escape(plan.label('pitfalls'))}</h4><ul>{pitfalls}</ul>"
    steps = "".join(f"<li>{_inline(step)}</li>" for step in item.solution)
    solution = f"<h4>{escape(plan.label('solution'))}</h4><ol>{steps}</ol>"
    source = escape(f"{plan.label('source')}: {item.reference}")
    return [question, answer, pitfalls_html, solution, source]


def _anki_pitfall(choice: ExportChoice) -> str:
    assert choice.explanation is not None and choice.pitfall_title is not None
    return (
        f"<li><b>{choice.letter}) {_inline(choice.text)}</b> — "
        f'<span class="pitfall-title">{_inline(choice.pitfall_title)}</span>'
        f"{_html(choice.explanation)}</li>"
    )


def anki_guid(item: ExportItem, lang: Lang) -> str:
    import genanki

    return str(genanki.guid_for(item.stable_key, lang))


def apkg_bytes(plan: ExportPlan, *, timestamp: float | None = None) -> bytes:
    """The plan as an Anki package: a zip of ``collection.anki2`` (SQLite) and ``media``."""
    import genanki  # only exports need it

    model = genanki.Model(
        _stable_id("infracards", "anki-model", _ANKI_MODEL_NAME),
        _ANKI_MODEL_NAME,
        fields=[{"name": name} for name in ANKI_FIELDS],
        templates=[
            {
                "name": "Question",
                "qfmt": "{{Question}}",
                "afmt": (
                    '{{FrontSide}}<hr id="answer">{{Answer}}{{Pitfalls}}{{Solution}}'
                    '<div class="source">{{Source}}</div>'
                ),
            }
        ],
        css=_ANKI_CSS,
    )
    deck = genanki.Deck(
        _stable_id("infracards", "anki-deck", plan.card_id, plan.lang),
        f"infracards::{plan.title} ({plan.lang})",
        description=escape(plan.title),
    )
    for item in plan.items:
        deck.add_note(
            genanki.Note(
                model=model,
                fields=anki_fields(item, plan),
                guid=anki_guid(item, plan.lang),
                tags=list(item.tags),
            )
        )
    package = genanki.Package(deck)
    # Written here rather than with Package.write_to_file, which leaves its SQLite file behind
    # in the temporary folder on every call.
    stamp = time.time() if timestamp is None else timestamp
    with tempfile.TemporaryDirectory(prefix="infracards-apkg-") as folder:
        database = Path(folder) / "collection.anki2"
        connection = sqlite3.connect(database)
        try:
            package.write_to_db(connection.cursor(), stamp, itertools.count(int(stamp * 1000)))
            connection.commit()
        finally:
            connection.close()
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.write(database, "collection.anki2")
            archive.writestr("media", "{}")
    return buffer.getvalue()


# --- Moodle XML -------------------------------------------------------------------------------


def _cdata(html: str) -> str:
    return "<![CDATA[" + html.replace("]]>", "]]]]><![CDATA[>") + "]]>"


def _text_element(tag: str, html: str, *, fmt: str = "html", indent: str = "    ") -> str:
    return (
        f'{indent}<{tag} format="{fmt}">\n{indent}  <text>{_cdata(html)}</text>\n{indent}</{tag}>'
    )


def _plain(value: str) -> str:
    return escape(value, quote=True)


def moodle_xml(plan: ExportPlan) -> str:
    """The plan as a Moodle XML question file (one category, one multichoice per variant)."""
    category = f"$course$/top/infracards/{plan.card_id}"
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        "<quiz>",
        '  <question type="category">',
        f"    <category><text>{_plain(category)}</text></category>",
        '    <info format="html">',
        f"      <text>{_cdata(_html(plan.title))}</text>",
        "    </info>",
        "  </question>",
    ]
    for item in plan.items:
        lines.append(_moodle_question(item, plan))
    lines.append("</quiz>")
    return "\n".join(lines) + "\n"


def _moodle_question(item: ExportItem, plan: ExportPlan) -> str:
    q = item.question
    name = f"{plan.card_id} · {item.point_number}. {q.template_id} · seed {q.seed}"
    solution = _solution_html(item, plan)
    parts = [
        '  <question type="multichoice">',
        f"    <name><text>{_plain(name)}</text></name>",
        _text_element("questiontext", _html(item.stem)),
        _text_element("generalfeedback", ""),
        "    <defaultgrade>1</defaultgrade>",
        "    <penalty>0.3333333</penalty>",
        "    <hidden>0</hidden>",
        f"    <idnumber>{_plain(_idnumber(item))}</idnumber>",
        "    <single>true</single>",
        "    <shuffleanswers>false</shuffleanswers>",
        "    <answernumbering>abc</answernumbering>",
        "    <showstandardinstruction>0</showstandardinstruction>",
        _text_element("correctfeedback", _html(plan.label("correct"))),
        _text_element("partiallycorrectfeedback", ""),
        _text_element("incorrectfeedback", _html(plan.label("incorrect")) + solution),
    ]
    for choice in item.choices:
        feedback = solution if choice.correct else _html(choice.explanation or "")
        parts += [
            f'    <answer fraction="{100 if choice.correct else 0}" format="html">',
            f"      <text>{_cdata(_inline(choice.text))}</text>",
            _text_element("feedback", feedback, indent="      "),
            "    </answer>",
        ]
    parts += [
        "    <tags>",
        *(f"      <tag><text>{_plain(tag)}</text></tag>" for tag in item.tags),
        "    </tags>",
        "  </question>",
    ]
    return "\n".join(parts)


def _solution_html(item: ExportItem, plan: ExportPlan) -> str:
    steps = "".join(f"<li>{_inline(step)}</li>" for step in item.solution)
    return f"<p><b>{escape(plan.label('solution'))}</b></p><ol>{steps}</ol>"


def _idnumber(item: ExportItem) -> str:
    """Moodle's question id number (at most 100 characters, unique within the category)."""
    q = item.question
    full = f"{q.template_id}-v{q.template_version}-s{q.seed}"
    if len(full) <= 100:
        return full
    return hashlib.sha256(full.encode("utf-8")).hexdigest()[:32]
