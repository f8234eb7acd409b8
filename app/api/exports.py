"""Instructor exports: a card's fixed variants as an Anki package, a Moodle XML question file or
a QTI 3.0 package."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Query, Response

from app.authoring.exports import ExportFormat, attachment_headers, export_published
from app.deps import ApiInstructor, ApiLang, CatalogDep
from app.domain.export_plan import DEFAULT_VARIANTS, MAX_VARIANTS
from app.schemas import ProblemPublic

router = APIRouter(tags=["instructor"])

RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The export file, sent as an attachment.",
        "content": {
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
            "application/xml": {"schema": {"type": "string"}},
            "application/zip": {"schema": {"type": "string", "format": "binary"}},
        },
    },
    400: {"model": ProblemPublic, "description": "invalid_export: the card cannot be exported."},
    403: {"model": ProblemPublic, "description": "The token is not an instructor's."},
    404: {"model": ProblemPublic, "description": "Unknown card."},
}


@router.get("/instructor/cards/{card_id}/export", response_class=Response, responses=RESPONSES)
def export_card_file(
    card_id: Annotated[str, Path(max_length=100, description="The card's id.")],
    instructor: ApiInstructor,
    catalog: CatalogDep,
    lang: ApiLang,
    fmt: Annotated[
        ExportFormat,
        Query(
            alias="format",
            description="apkg: an Anki package; moodle: Moodle XML (multichoice questions); "
            "qti: a QTI 3.0 content package (zip, one assessment item per variant).",
        ),
    ],
    variants: Annotated[
        int, Query(ge=1, le=MAX_VARIANTS, description="Fixed variants per template.")
    ] = DEFAULT_VARIANTS,
) -> Response:
    """The latest published version of a card (withdrawn or not), ``variants`` fixed variants of each template, in one
    language: the question, its choices, the key, every shown pitfall's explanation with the
    variant's numbers and the worked solution. Anki notes keep their guid across re-exports."""
    export = export_published(catalog, card_id, fmt, lang, variants)
    return Response(
        content=export.content, media_type=export.media_type, headers=attachment_headers(export)
    )
