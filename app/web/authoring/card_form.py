"""The card's own fields in the dashboard: its texts, parameters and named formulas on one form,
and its exam points (add, edit, move, remove), each refusal shown at its field.

The forms build the new document with the plain edits of :mod:`app.domain.authoring` and save it
with :func:`app.authoring.service.save_draft`, as the API's ``PUT …/draft`` does; what they
refuse before saving is what a draft's validation reports at the same fields (a text empty in a
language, a formula that does not compile, at its column), so learners never read a blank text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Form, Request
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from app.authoring import service
from app.authoring.sandbox import check_card_formulas
from app.deps import DbDep, InstructorVisitor
from app.domain.authoring import (
    CARD_TEXTS,
    MAX_FORMULAS,
    CardProblem,
    PointInUse,
    add_point,
    move_point,
    put_card_formulas,
    put_card_texts,
    put_point,
    remove_point,
    text_problems,
)
from app.domain.cards import SLUG_PATTERN
from app.domain.formulas import is_identifier
from app.domain.languages import LANGS
from app.domain.messages import Message
from app.domain.texts import Text
from app.problems import InvalidInput
from app.web.authoring import back_to
from app.web.forms import check_csrf
from app.web.templating import render_page

router = APIRouter(include_in_schema=False, prefix="/instructor")
_SLUG = re.compile(SLUG_PATTERN)
# A formula row's fields: formula<row>_<field>, rows numbered from 0 in the card's order.
_ROW = re.compile(r"^formula(\d{1,5})_")
_FORMULA_FIELDS = ("id", "title_en", "title_zh", "expr", "latex", "unit")


# --- the card's texts, parameters and formulas ------------------------------------------------


@router.get("/cards/{card_id}/edit")
def edit_card(request: Request, card_id: str, db: DbDep, visitor: InstructorVisitor) -> Response:
    """The card's texts in both languages, its parameters and its named formulas."""
    draft = service.get_draft(db=db, card_id=card_id[:100])
    return _card_page(request, visitor, card_id, draft.document)


def _card_page(
    request: Request,
    visitor: InstructorVisitor,
    card_id: str,
    document: Mapping[str, Any],
    problems: Sequence[CardProblem] = (),
    *,
    status_code: int = 200,
) -> Response:
    formulas = [f for f in document.get("formulas") or [] if isinstance(f, Mapping)]
    params = document.get("params")
    context = {
        "card_id": card_id,
        "document": document,
        "texts": {name: _text(document.get(name)) for name in CARD_TEXTS},
        "params_text": ", ".join(map(str, params)) if isinstance(params, list) else "",
        "formulas": [*formulas, {"id": "", "title": {}, "expr": "", "latex": "", "unit": "B"}],
        "problems": problems,
        "by_field": _by_field(problems),
        "csrf_token": visitor.csrf_token,
    }
    return render_page(
        request, "instructor_card_edit.html", context, lang=visitor.lang, status_code=status_code
    )


@router.post("/cards/{card_id}/edit")
async def save_card(
    request: Request, card_id: str, db: DbDep, visitor: InstructorVisitor
) -> Response:
    """Save the card's texts, parameters and formulas into the draft, or show what is refused
    at its field (nothing saved)."""
    form = {k: str(v)[:20_000] for k, v in (await request.form()).items()}
    check_csrf(visitor, form.get("csrf_token"))

    def work() -> Response:
        draft = service.get_draft(db=db, card_id=card_id[:100])
        texts = {
            name: {
                "en": form.get(f"{name}_en", "").strip(),
                "zh": form.get(f"{name}_zh", "").strip(),
            }
            for name in CARD_TEXTS
        }
        params = [p for p in re.split(r"[\s,]+", form.get("params", "")) if p]
        rows = _formula_rows(form)
        document = put_card_formulas(
            put_card_texts(draft.document, texts), params, [formula for _, formula in rows]
        )
        problems = [p for name in CARD_TEXTS for p in text_problems(name, texts[name])]
        problems += [
            CardProblem("error", None, "params", Message("not a name: %(name)s", name=repr(p)))
            for p in params
            if not is_identifier(p)
        ]
        problems += _formula_problems(rows)
        if not problems:
            compiled = check_card_formulas(params, [formula for _, formula in rows])
            if compiled is not None:
                problems.append(_at_row(compiled, rows))
        if problems:
            return _card_page(request, visitor, card_id, document, problems, status_code=422)
        return _saved(db, visitor, card_id, document)

    return await run_in_threadpool(work)


def _formula_rows(form: Mapping[str, str]) -> list[tuple[int, dict[str, Any]]]:
    """The form's formula rows that are not blank, each with its row number (from 0)."""
    rows = []
    indices = sorted({int(m[1]) for key in form if (m := _ROW.match(key))})
    for index in indices[:MAX_FORMULAS]:
        values = {name: form.get(f"formula{index}_{name}", "").strip() for name in _FORMULA_FIELDS}
        if not any(values[name] for name in _FORMULA_FIELDS if name != "unit"):
            continue
        rows.append(
            (
                index,
                {
                    "id": values["id"],
                    "title": {"en": values["title_en"], "zh": values["title_zh"]},
                    "expr": values["expr"],
                    "latex": values["latex"],
                    "unit": values["unit"] or "B",
                },
            )
        )
    return rows


def _formula_problems(rows: Sequence[tuple[int, Mapping[str, Any]]]) -> list[CardProblem]:
    """Each formula row needs its id, its title in every language, its expression and LaTeX."""
    required = Message("required")
    problems = []
    for index, formula in rows:
        for name in ("id", "expr", "latex"):
            if not formula[name]:
                problems.append(CardProblem("error", None, f"formulas.{index}.{name}", required))
        problems += text_problems(f"formulas.{index}.title", formula["title"])
    return problems


def _at_row(problem: CardProblem, rows: Sequence[tuple[int, Mapping[str, Any]]]) -> CardProblem:
    """A compilation problem at ``formulas.<id>.expr`` placed at its form row's field."""
    field = problem.field or ""
    for index, formula in rows:
        if field == f"formulas.{formula['id']}.expr":
            return CardProblem(
                "error", None, f"formulas.{index}.expr", problem.text, problem.position,
                problem.detail,
            )  # fmt: skip
    return problem


# --- exam points -----------------------------------------------------------------------------


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
    status_code: int = 200,
) -> Response:
    context = {
        "card_id": card_id,
        "point": point,
        "title": _text(point.get("title")),
        "explanation": _text(point.get("explanation")),
        "original": original,
        "problems": problems,
        "by_field": _by_field(problems),
        "message": message,
        "csrf_token": visitor.csrf_token,
    }
    return render_page(
        request, "instructor_point.html", context, lang=visitor.lang, status_code=status_code
    )


TextField = Annotated[str, Field(max_length=20_000)]


class PointTextsForm(BaseModel):
    """An exam point's texts as the point form posts them (blank where left empty)."""

    csrf_token: str | None = None
    title_en: TextField = ""
    title_zh: TextField = ""
    explanation_en: TextField = ""
    explanation_zh: TextField = ""

    def texts(self) -> tuple[dict[str, str], dict[str, str], list[CardProblem]]:
        """The title and the explanation, trimmed, and what the card format refuses in them."""
        title = {"en": self.title_en.strip(), "zh": self.title_zh.strip()}
        explanation = {"en": self.explanation_en.strip(), "zh": self.explanation_zh.strip()}
        problems = text_problems("title", title) + text_problems("explanation", explanation)
        return title, explanation, problems


def _saved(
    db: DbDep, visitor: InstructorVisitor, card_id: str, document: dict[str, Any]
) -> Response:
    """Write the draft as the API's ``PUT …/draft`` does, then see the card's page."""
    assert visitor.learner is not None
    service.save_draft(db=db, actor=visitor.learner, card_id=card_id, document=document)
    return back_to(visitor, f"/instructor/cards/{card_id}")


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
        text = Message("an exam point slug is lowercase words joined by '-'")
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
    return _saved(db, visitor, card_id, document)


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
    return _point_page(request, visitor, card_id, point, slug)


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
    if problems:
        shown = {**point, "title": title, "explanation": explanation}
        return _point_page(request, visitor, card_id, shown, slug, problems, status_code=422)
    return _saved(db, visitor, card_id, put_point(draft.document, slug, title, explanation))


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
    return _saved(
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
    return _saved(db, visitor, card_id, document)


# --- shared -------------------------------------------------------------------------------------


def _text(value: object) -> dict[str, str]:
    """A text of every language as the form shows it (blank where the document has none)."""
    found = value if isinstance(value, Mapping) else {}
    return {lang: str(found.get(lang) or "") for lang in LANGS}


def _by_field(problems: Sequence[CardProblem]) -> dict[str, list[CardProblem]]:
    grouped: dict[str, list[CardProblem]] = {}
    for problem in problems:
        grouped.setdefault(problem.field or "", []).append(problem)
    return grouped
