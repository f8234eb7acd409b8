"""An exam point in the dashboard: add one, edit its title and explanation, move it, remove it
(only once no template is left in it), each refusal shown at its field."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Form, Request
from pydantic import BaseModel, BeforeValidator, Field
from starlette.responses import Response

from app.authoring import service
from app.authoring.revisions import DraftChanged
from app.deps import DbDep, InstructorVisitor
from app.domain.authoring import (
    CardProblem,
    PointInUse,
    add_point,
    move_point,
    put_point,
    remove_point,
    text_problems,
)
from app.domain.cards import SLUG_PATTERN
from app.domain.messages import Message
from app.domain.texts import Text
from app.problems import InvalidInput
from app.web.authoring.forms import (
    by_field,
    draft_form_context,
    plain_text,
    saved,
    text_of,
    too_long,
)
from app.web.forms import check_csrf
from app.web.templating import render_page

router = APIRouter(include_in_schema=False, prefix="/instructor")
_SLUG = re.compile(SLUG_PATTERN)


@router.get("/cards/{card_id}/new-point")
def new_point_page(
    request: Request, card_id: str, db: DbDep, visitor: InstructorVisitor
) -> Response:
    """The form of a new exam point: its slug, its title and explanation in both languages."""
    service.get_draft(db=db, card_id=card_id[:100])  # the card exists
    point = {"slug": "", "title": {}, "explanation": {}}
    return _point_page(request, visitor, card_id, point, None)


def _point_page(
    request: Request,
    visitor: InstructorVisitor,
    card_id: str,
    point: Mapping[str, Any],
    original: str | None,
    problems: Sequence[CardProblem] = (),
    *,
    message: Text | None = None,
    revision: str | None = None,
    conflict: DraftChanged | None = None,
    status_code: int = 200,
) -> Response:
    """The exam point's form; ``revision``: the draft it is based on (an existing point)."""
    context = {
        "card_id": card_id,
        "point": point,
        "title": text_of(point.get("title")),
        "explanation": text_of(point.get("explanation")),
        "original": original,
        "problems": problems,
        "by_field": by_field(problems),
        "message": message,
        **draft_form_context(
            visitor,
            revision=revision,
            conflict=conflict,
            reload_url=f"/instructor/cards/{card_id}/points/{original}",
        ),
    }
    return render_page(
        request, "instructor_point.html", context, lang=visitor.lang, status_code=status_code
    )


# Line endings LF; a text over the limit is refused at its field by texts(), not by the model.
TextField = Annotated[str, BeforeValidator(plain_text)]


class PointTextsForm(BaseModel):
    """An exam point's texts as the point form posts them (blank where left empty)."""

    csrf_token: str | None = None
    revision: Annotated[str | None, Field(max_length=100)] = None  # the draft it was opened on
    title_en: TextField = ""
    title_zh: TextField = ""
    explanation_en: TextField = ""
    explanation_zh: TextField = ""

    def texts(self) -> tuple[dict[str, str], dict[str, str], list[CardProblem]]:
        """The title and the explanation, trimmed, and what the card format refuses in them."""
        title = {"en": self.title_en.strip(), "zh": self.title_zh.strip()}
        explanation = {"en": self.explanation_en.strip(), "zh": self.explanation_zh.strip()}
        problems = too_long(self.model_dump(include=set(_TEXT_FIELDS)))
        problems += text_problems("title", title) + text_problems("explanation", explanation)
        return title, explanation, problems


_TEXT_FIELDS = ("title_en", "title_zh", "explanation_en", "explanation_zh")


@router.post("/cards/{card_id}/points")
def create_point(
    request: Request,
    card_id: str,
    db: DbDep,
    visitor: InstructorVisitor,
    form: Annotated[PointTextsForm, Form()],
    slug: Annotated[str, Form(max_length=80)] = "",
) -> Response:
    """Add an exam point at the end of the card; a refusal shows the form again at its field."""
    check_csrf(visitor, form.csrf_token)
    draft = service.get_draft(db=db, card_id=card_id[:100])
    slug = slug.strip()
    title, explanation, problems = form.texts()
    if not _SLUG.match(slug):
        text = Message(
            "an exam point slug is lower-case letters and digits, words joined by single "
            "hyphens (e.g. %(example)s)",
            example="per-layer-formula",
        )
        problems.insert(0, CardProblem("error", None, "slug", text))
    shown = {"slug": slug, "title": title, "explanation": explanation}
    if problems:
        return _point_page(request, visitor, card_id, shown, None, problems, status_code=422)
    try:
        document = add_point(draft.document, slug, title, explanation)
    except KeyError:
        taken = Message("the card has an exam point %(point)s already", point=repr(slug))
        problem = CardProblem("error", None, "slug", taken)
        return _point_page(request, visitor, card_id, shown, None, [problem], status_code=409)
    return saved(db, visitor, card_id, document)


def _find_point(document: Mapping[str, Any], slug: str) -> dict[str, Any]:
    for point in document.get("points") or []:
        if point.get("slug") == slug:
            return dict(point)
    raise InvalidInput(
        Message("the card has no exam point %(point)s", point=repr(slug)), code="point_not_found"
    )


@router.get("/cards/{card_id}/points/{slug}")
def edit_point(
    request: Request, card_id: str, slug: str, db: DbDep, visitor: InstructorVisitor
) -> Response:
    """An exam point's title and explanation in both languages; moving and removing it."""
    draft = service.get_draft(db=db, card_id=card_id[:100])
    point = _find_point(draft.document, slug)
    return _point_page(request, visitor, card_id, point, slug, revision=draft.revision)


@router.post("/cards/{card_id}/points/{slug}")
def save_point(
    request: Request,
    card_id: str,
    slug: str,
    db: DbDep,
    visitor: InstructorVisitor,
    form: Annotated[PointTextsForm, Form()],
) -> Response:
    """Save the exam point's title and explanation; a refusal shows them at their fields."""
    check_csrf(visitor, form.csrf_token)
    draft = service.get_draft(db=db, card_id=card_id[:100])
    point = _find_point(draft.document, slug)
    title, explanation, problems = form.texts()
    shown = {**point, "title": title, "explanation": explanation}
    revision = form.revision or draft.revision
    if problems:
        return _point_page(
            request, visitor, card_id, shown, slug, problems, revision=revision, status_code=422
        )
    document = put_point(draft.document, slug, title, explanation)
    try:
        return saved(db, visitor, card_id, document, form.revision)
    except DraftChanged as conflict:
        return _point_page(
            request, visitor, card_id, shown, slug, revision=revision, conflict=conflict,
            status_code=conflict.status_code,
        )  # fmt: skip


@router.post("/cards/{card_id}/points/{slug}/move")
def move(
    card_id: str,
    slug: str,
    db: DbDep,
    visitor: InstructorVisitor,
    csrf_token: Annotated[str | None, Form()] = None,
    direction: Annotated[Literal["up", "down"], Form()] = "up",
) -> Response:
    """Move the exam point one place up or down the card."""
    check_csrf(visitor, csrf_token)
    draft = service.get_draft(db=db, card_id=card_id[:100])
    _find_point(draft.document, slug)
    return saved(
        db, visitor, card_id, move_point(draft.document, slug, -1 if direction == "up" else 1)
    )


@router.post("/cards/{card_id}/points/{slug}/delete")
def delete_point(
    request: Request,
    card_id: str,
    slug: str,
    db: DbDep,
    visitor: InstructorVisitor,
    csrf_token: Annotated[str | None, Form()] = None,
) -> Response:
    """Remove an exam point without templates; refused (409) while templates use it."""
    check_csrf(visitor, csrf_token)
    draft = service.get_draft(db=db, card_id=card_id[:100])
    point = _find_point(draft.document, slug)
    try:
        document = remove_point(draft.document, slug)
    except PointInUse as refusal:
        text = Message(
            "exam point %(point)s still has templates (%(templates)s): delete them first",
            point=repr(slug),
            templates=", ".join(refusal.templates),
        )
        return _point_page(request, visitor, card_id, point, slug, message=text, status_code=409)
    return saved(db, visitor, card_id, document)
