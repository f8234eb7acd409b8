"""The dashboard's import: a Moodle XML question file into an exam point of a card's draft
(the use case: :func:`app.authoring.imports.import_moodle`, shared with the API)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, File, Form, Request, Response, UploadFile

from app.authoring.checks import DraftTooLarge
from app.authoring.imports import import_moodle
from app.deps import ContextDep, DbDep, InstructorVisitor
from app.domain.moodle_import import MAX_BYTES
from app.problems import InvalidInput
from app.web.authoring.cards import card_page
from app.web.forms import check_csrf
from app.web.templating import render_page

router = APIRouter(include_in_schema=False, prefix="/instructor")


@router.post("/cards/{card_id}/import")
def import_page(
    request: Request,
    card_id: str,
    db: DbDep,
    ctx: ContextDep,
    visitor: InstructorVisitor,
    file: Annotated[UploadFile, File()],
    csrf_token: Annotated[str | None, Form()] = None,
    point: Annotated[str, Form(max_length=100)] = "",
    language: Annotated[str, Form(max_length=5)] = "en",
) -> Response:
    """Import, then show what became a template (with a link to its editor) and what was
    skipped, with the reason. A file that cannot be imported (one the draft has no room for
    included) comes back on the card's page, its reason at the file field, the exam point and
    language as chosen."""
    check_csrf(visitor, csrf_token)
    assert visitor.learner is not None
    try:
        read = import_moodle(
            db=db,
            actor=visitor.learner,
            card_id=card_id[:100],
            point=point,
            content=file.file.read(MAX_BYTES + 1),
            lang=language,
        )
    except (InvalidInput, DraftTooLarge) as refusal:
        chosen = {"point": point, "language": language, "file": file.filename or ""}
        return card_page(request, db, ctx, visitor, card_id, refusal=refusal, import_form=chosen)
    context = {
        "card_id": card_id,
        "point": point,
        "language": language,
        "imported": [t["id"] for t in read.templates],
        "skipped": read.skipped,
    }
    return render_page(request, "instructor_import.html", context, lang=visitor.lang)
