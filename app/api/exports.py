"""Instructor exports and imports: a card's fixed variants as an Anki package, a Moodle XML
question file (numeric templates optionally as calculated questions, with the plan of which) or a
QTI 3.0 package; Moodle XML multichoice questions into a draft."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, File, Path, Query, Response, UploadFile
from pydantic import BaseModel, Field

from app.api.problem_schemas import ProblemPublic
from app.authoring.exports import (
    ExportFormat,
    attachment_headers,
    export_published,
    moodle_calculated_plan,
)
from app.authoring.imports import import_moodle
from app.deps import ApiInstructor, ApiLang, CatalogDep, DbDep
from app.domain.export_plan import DEFAULT_VARIANTS, MAX_VARIANTS
from app.domain.languages import LANGS
from app.domain.moodle_calculated import MAX_DATASET_ITEMS
from app.domain.moodle_import import MAX_BYTES
from app.schemas import LangCode, NumericExportCode

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
    400: {
        "model": ProblemPublic,
        "description": "invalid_export: the card cannot be exported, or numeric=calculated "
        "asked of a format other than moodle.",
    },
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
    numeric: Annotated[
        NumericExportCode,
        Query(
            description="fixed: every template as fixed variants; calculated (format moodle "
            "only): numeric templates as Moodle calculated multichoice questions where Moodle "
            "can compute them, the others as fixed variants (the plan: "
            "planMoodleCalculated).",
        ),
    ] = "fixed",
) -> Response:
    """The latest published version of a card (withdrawn or not), ``variants`` fixed variants
    of each template, in one language: the question, its choices, the key, every shown
    pitfall's explanation with the variant's numbers and the worked solution. Anki notes keep
    their guid across re-exports. With ``numeric=calculated`` a Moodle file carries numeric
    templates as formulas Moodle computes itself, one category per template."""
    export = export_published(catalog, card_id, fmt, lang, variants, numeric=numeric)
    return Response(
        content=export.content, media_type=export.media_type, headers=attachment_headers(export)
    )


class TemplateExportPublic(BaseModel):
    template_id: str
    point: int = Field(description="The exam point's number.")
    calculated: bool = Field(
        description="Exported as calculated multichoice questions; false: as fixed variants."
    )
    questions: int = Field(
        description="Calculated questions, one per position of the key by value (0 when fixed)."
    )
    combinations: int = Field(description="Parameter combinations the template draws from.")
    items: int = Field(
        description=f"Of those, the dataset items Moodle draws from (at most {MAX_DATASET_ITEMS};"
        " 0 when fixed)."
    )
    summary: str = Field(description="What the export does with the template, in a line.")
    reason: str | None = Field(description="Why fixed variants; null when calculated.")


class MoodleCalculatedPublic(BaseModel):
    card_id: str
    card_version: int
    calculated: int = Field(description="Templates exported as calculated questions.")
    fixed: int = Field(description="Templates exported as fixed variants.")
    templates: list[TemplateExportPublic] = Field(description="Every template, in card order.")


PLAN_RESPONSES: dict[int | str, dict[str, Any]] = {
    403: {"model": ProblemPublic, "description": "The token is not an instructor's."},
    404: {"model": ProblemPublic, "description": "Unknown card."},
}


@router.get(
    "/instructor/cards/{card_id}/export/moodle-calculated",
    response_model=MoodleCalculatedPublic,
    responses=PLAN_RESPONSES,
)
def plan_moodle_calculated(
    card_id: Annotated[str, Path(max_length=100, description="The card's id.")],
    instructor: ApiInstructor,
    catalog: CatalogDep,
    lang: ApiLang,
) -> MoodleCalculatedPublic:
    """Which templates of the card's latest published version a Moodle export with
    ``numeric=calculated`` writes as calculated multichoice questions, and why the others stay
    fixed variants (a statement, a function Moodle lacks, a value Moodle's doubles miss, too
    few positions of the key by value)."""
    card, plan = moodle_calculated_plan(catalog, card_id, lang)
    templates = [
        TemplateExportPublic(
            template_id=route.template.id,
            point=route.point_number,
            calculated=route.calculated,
            questions=len(route.questions),
            combinations=route.combinations,
            items=route.items,
            summary=route.summary.get(lang),
            reason=route.reason.get(lang) if route.reason is not None else None,
        )
        for route in plan
    ]
    calculated = sum(1 for t in templates if t.calculated)
    return MoodleCalculatedPublic(
        card_id=card.id,
        card_version=card.version,
        calculated=calculated,
        fixed=len(templates) - calculated,
        templates=templates,
    )


class SkippedQuestionPublic(BaseModel):
    question: str = Field(description="The question's name in the file.")
    reason: str


class ImportPublic(BaseModel):
    imported: list[str] = Field(description="The new templates' ids, in the file's order.")
    skipped: list[SkippedQuestionPublic]
    to_translate: list[str] = Field(
        description="The languages filled with the file's text, to be translated."
    )


IMPORT_RESPONSES: dict[int | str, dict[str, Any]] = {
    400: {
        "model": ProblemPublic,
        "description": "invalid_import: not a Moodle XML question file, or over its limits; "
        "invalid_language.",
    },
    403: {"model": ProblemPublic, "description": "The token is not an instructor's."},
    404: {"model": ProblemPublic, "description": "Unknown card or exam point."},
}


@router.post(
    "/instructor/cards/{card_id}/import", response_model=ImportPublic, responses=IMPORT_RESPONSES
)
def import_questions(
    card_id: Annotated[str, Path(max_length=100, description="The card's id.")],
    file: Annotated[UploadFile, File(description="A Moodle XML question file.")],
    point: Annotated[str, Query(max_length=100, description="The exam point's slug.")],
    db: DbDep,
    instructor: ApiInstructor,
    lang: ApiLang,
    language: Annotated[
        LangCode, Query(description="The language the questions are written in.")
    ] = "en",
) -> ImportPublic:
    """Moodle XML ``multichoice`` questions into exam point ``point`` of the card's draft, each
    a statement template (the 100 % answer the key, each wrong answer a pitfall explained by
    its feedback); other questions are listed as skipped with their reason. The text fills every
    language: translate the others, and name each pitfall's misconception, before publishing."""
    content = file.file.read(MAX_BYTES + 1)
    read = import_moodle(
        db=db, actor=instructor, card_id=card_id, point=point, content=content, lang=language
    )
    return ImportPublic(
        imported=[str(t["id"]) for t in read.templates],
        skipped=[
            SkippedQuestionPublic(question=s.question, reason=s.reason.get(lang))
            for s in read.skipped
        ],
        to_translate=[other for other in LANGS if other != language] if read.templates else [],
    )
