"""The dashboard's exports: a card's latest published version as a file (the same files as the
API's, :func:`app.authoring.exports.export_published`), and the page that says how a Moodle export
with calculated questions takes each template, with its form."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from starlette.responses import Response

from app.authoring.exports import (
    ExportFormat,
    attachment_headers,
    export_published,
    moodle_calculated_plan,
)
from app.deps import ContextDep, InstructorVisitor
from app.domain.languages import Lang
from app.domain.moodle_calculated import NumericExport
from app.web.templating import render_page

router = APIRouter(include_in_schema=False, prefix="/instructor")


@router.get("/cards/{card_id}/export")
def export_file(
    card_id: str,
    ctx: ContextDep,
    visitor: InstructorVisitor,
    fmt: Annotated[ExportFormat, Query(alias="format")],
    language: Annotated[Lang | None, Query()] = None,
    numeric: Annotated[NumericExport, Query()] = "fixed",
) -> Response:
    """The card's latest published version as an Anki package, a Moodle XML file (numeric
    templates as fixed variants or calculated questions) or a QTI package, in ``language``
    (the page's by default): the same file as the API's export."""
    export = export_published(ctx.catalog, card_id, fmt, language or visitor.lang, numeric=numeric)
    return Response(
        content=export.content, media_type=export.media_type, headers=attachment_headers(export)
    )


@router.get("/cards/{card_id}/export/moodle")
def moodle_export_page(
    request: Request, card_id: str, ctx: ContextDep, visitor: InstructorVisitor
) -> Response:
    """Which templates a Moodle export with calculated questions writes as calculated
    multichoice questions, which as fixed variants and why, and the form that downloads it."""
    card, plan = moodle_calculated_plan(ctx.catalog, card_id, visitor.lang)
    context = {
        "card_id": card.id,
        "card_version": card.version,
        "plan": plan,
        "calculated": sum(1 for route in plan if route.calculated),
    }
    return render_page(request, "instructor_moodle_export.html", context, lang=visitor.lang)
