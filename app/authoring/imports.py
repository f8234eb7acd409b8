"""Importing questions into a card's draft: Moodle XML multichoice questions become statement
templates of one exam point (app.domain.moodle_import), saved like any edit (audited)."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.auth.service import LearnerRef
from app.authoring.checks import DraftTooLarge
from app.authoring.service import get_draft, save_draft
from app.domain.authoring import put_template, size_problem
from app.domain.cards import document_templates
from app.domain.languages import LANGS
from app.domain.messages import Message, plural_message
from app.domain.moodle_import import MoodleImport, MoodleImportError, read_moodle_xml
from app.problems import InvalidInput, NotFound


def import_moodle(
    *,
    db: Session,
    actor: LearnerRef,
    card_id: str,
    point: str,
    content: bytes,
    lang: str,
) -> MoodleImport:
    """Add the file's multichoice questions to exam point ``point`` of the card's draft, as
    statement templates written in ``lang`` (copied into the other languages, to translate)."""
    if lang not in LANGS:
        raise InvalidInput(
            Message("unknown language %(lang)s", lang=repr(lang)), code="invalid_language"
        )
    draft = get_draft(db=db, card_id=card_id)
    document = draft.document
    if not any(p.get("slug") == point for p in document.get("points", [])):
        raise NotFound(Message("unknown exam point"), code="point_not_found")
    taken = {str(t.get("id")) for _, t in document_templates(document)}
    try:
        read = read_moodle_xml(content, lang=lang, taken=taken)
    except MoodleImportError as exc:
        raise InvalidInput(exc.text, code="invalid_import") from None
    for template in read.templates:
        document = put_template(document, point, template, replaces=None)
    too_large = size_problem(document)
    if too_large is not None:  # said of the import, as the file field shows it
        raise DraftTooLarge(
            plural_message(
                "importing the file's %(num)s question would make the draft too large: %(problem)s",
                "importing the file's %(num)s questions would make the draft too large: "
                "%(problem)s",
                len(read.templates),
                problem=too_large,
            )
        )
    if read.templates:
        save_draft(db=db, actor=actor, card_id=card_id, document=document)
    return read
