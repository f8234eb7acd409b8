"""Exports from one source: an Anki package (``.apkg``), Moodle XML (:mod:`app.authoring.moodle`:
``multichoice``, or numeric templates as ``calculatedmulti`` where Moodle can compute them) and a
QTI 3.0 package (:mod:`app.authoring.qti`).

All write the fixed instances that :func:`app.domain.export_plan.plan_export` chooses (the same
variants, the same texts, one language per file), but for Moodle's calculated questions, which
carry formulas instead (:mod:`app.domain.moodle_calculated`); these modules only lay them out.

Anki (genanki): one note per variant; the front is the stem with the choices listed (a, b,
c ...), the back the answer, each wrong choice with its pitfall's title and explanation (the
variant's numbers), and the worked solution. A note's guid comes from the card, the template,
the seed and the language (not the template's version), so re-importing a later export updates
the notes a learner already studies, keeping their review history, instead of adding duplicates;
the note type and the deck have fixed ids for the same reason. The package is a zip holding the
SQLite collection ``collection.anki2`` (the legacy schema that every Anki imports) and an empty
``media`` map.

Moodle XML: see :mod:`app.authoring.moodle`.
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

from app.authoring.export_html import block_html, inline_html
from app.authoring.moodle import moodle_calculated_xml, moodle_xml
from app.domain.cards import Card
from app.domain.catalog import Catalog
from app.domain.export_plan import (
    DEFAULT_VARIANTS,
    ExportChoice,
    ExportError,
    ExportItem,
    ExportPlan,
    check_variants,
    plan_export,
)
from app.domain.languages import Lang
from app.domain.messages import Message
from app.domain.moodle_calculated import (
    NUMERIC_EXPORTS,
    NumericExport,
    TemplateExport,
    plan_calculated,
)
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
    "NUMERIC_EXPORTS",
    "ExportError",
    "ExportFile",
    "ExportFormat",
    "NumericExport",
    "anki_fields",
    "attachment_headers",
    "apkg_bytes",
    "export_card",
    "export_published",
    "moodle_calculated_plan",
    "moodle_calculated_xml",
    "moodle_xml",
]


@dataclass(frozen=True)
class ExportFile:
    content: bytes
    filename: str
    media_type: str


def check_export_request(fmt: str, numeric: str = "fixed") -> None:
    """ExportError unless ``fmt`` is a known format and ``numeric`` a known way to export numeric
    templates for it (checked before any card is read or validated)."""
    if numeric not in NUMERIC_EXPORTS:
        raise ExportError(
            Message(
                "unknown way to export numeric templates %(numeric)s (known: %(known)s)",
                numeric=repr(numeric),
                known=", ".join(NUMERIC_EXPORTS),
            )
        )
    if numeric == "calculated" and fmt != "moodle":
        raise ExportError(Message("calculated questions are a Moodle XML export (format moodle)"))
    if fmt not in FORMATS:
        raise ExportError(
            Message(
                "unknown export format %(format)s (known: %(known)s)",
                format=repr(fmt),
                known=", ".join(FORMATS),
            )
        )


def export_card(
    card: Card,
    fmt: str,
    lang: Lang,
    variants: int = DEFAULT_VARIANTS,
    *,
    numeric: str = "fixed",
    timestamp: float | None = None,
) -> ExportFile:
    """One card's export in ``fmt`` (``apkg``, ``moodle`` or ``qti``), numeric templates as
    fixed variants or (``numeric="calculated"``, Moodle only) as calculated questions where
    Moodle can compute them; ExportError for a bad request."""
    check_export_request(fmt, numeric)
    chosen: ExportFormat = next(f for f in FORMATS if f == fmt)
    if chosen == "qti":
        from app.authoring.qti import qti_package

        content = qti_package(card, lang, variants)
    elif chosen == "apkg":
        content = apkg_bytes(plan_export(card, lang, variants), timestamp=timestamp)
    elif numeric == "calculated":
        content = moodle_calculated_xml(card, lang, check_variants(variants)).encode("utf-8")
    else:
        content = moodle_xml(plan_export(card, lang, variants)).encode("utf-8")
    kind = "-calculated" if numeric == "calculated" else ""
    return ExportFile(
        content=content,
        filename=f"{card.id}-{lang}{kind}{SUFFIXES[chosen]}",
        media_type=MEDIA_TYPES[chosen],
    )


def export_published(
    catalog: Catalog,
    card_id: str,
    fmt: str,
    lang: Lang,
    variants: int = DEFAULT_VARIANTS,
    *,
    numeric: str = "fixed",
) -> ExportFile:
    """The export of a card's latest published version (withdrawn or not), for the API and the
    dashboard alike: NotFound for an unknown card, InvalidInput for a card that cannot be
    exported."""
    card = published_card(catalog, card_id)
    try:
        return export_card(card, fmt, lang, variants, numeric=numeric)
    except ExportError as exc:
        raise InvalidInput(exc.text, code="invalid_export") from None


def published_card(catalog: Catalog, card_id: str) -> Card:
    """A card's latest published version, withdrawn or not (NotFound for an unknown card)."""
    from app.practice.questions import get_card

    return get_card(catalog, card_id[:100], offered=False)  # a withdrawn card exports too


def moodle_calculated_plan(
    catalog: Catalog, card_id: str, lang: Lang
) -> tuple[Card, tuple[TemplateExport, ...]]:
    """The latest published version of a card and how each of its templates goes into a Moodle
    export with calculated questions (NotFound for an unknown card)."""
    card = published_card(catalog, card_id)
    return card, plan_calculated(card, lang)


def attachment_headers(export: ExportFile) -> dict[str, str]:
    """The response headers of an export sent as a download."""
    return {
        "Content-Disposition": f'attachment; filename="{export.filename}"',
        "Cache-Control": "no-store",
    }


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


# A label and what it introduces: ": " in English, "：" in Chinese (the pages' own msgid).
COLON = Message(": ")


def anki_fields(item: ExportItem, plan: ExportPlan) -> list[str]:
    """The note's fields (HTML), in :data:`ANKI_FIELDS` order."""
    choices = "".join(
        f'<li><span class="letter">{c.letter})</span> {inline_html(c.text)}</li>'
        for c in item.choices
    )
    question = f'<div class="stem">{block_html(item.stem)}</div><ul class="choices">{choices}</ul>'
    key = item.key
    colon = COLON.get(plan.lang)  # "：" in Chinese, as the pages write it
    answer = (
        f'<p class="answer"><b>{escape(plan.label("answer") + colon)}</b>'
        f"{key.letter}) {inline_html(key.text)}</p>"
    )
    pitfalls = "".join(_anki_pitfall(c) for c in item.pitfalls)
    pitfalls_html = f"<h4>{escape(plan.label('pitfalls'))}</h4><ul>{pitfalls}</ul>"
    steps = "".join(f"<li>{inline_html(step)}</li>" for step in item.solution)
    solution = f"<h4>{escape(plan.label('solution'))}</h4><ol>{steps}</ol>"
    source = escape(f"{plan.label('source')}{colon}{item.reference}")
    return [question, answer, pitfalls_html, solution, source]


def _anki_pitfall(choice: ExportChoice) -> str:
    assert choice.explanation is not None and choice.pitfall_title is not None
    return (
        f"<li><b>{choice.letter}) {inline_html(choice.text)}</b> — "
        f'<span class="pitfall-title">{inline_html(choice.pitfall_title)}</span>'
        f"{block_html(choice.explanation)}</li>"
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
