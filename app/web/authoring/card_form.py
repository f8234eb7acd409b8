"""The card's own fields in the dashboard: its texts, parameters and named formulas on one form,
each refusal shown at its field (its exam points: :mod:`app.web.authoring.point_form`).

The forms build the new document with the plain edits of :mod:`app.domain.authoring` and save it
with :func:`app.authoring.service.save_draft`, as the API's ``PUT …/draft`` does; what they
refuse before saving is what a draft's validation reports at the same fields (a text empty in a
language, a formula that does not compile, at its column), so learners never read a blank text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from app.authoring import service
from app.authoring.revisions import DraftChanged
from app.authoring.sandbox import check_card_formulas
from app.deps import DbDep, InstructorVisitor
from app.domain.authoring import (
    CARD_TEXTS,
    MAX_FORMULAS,
    CardProblem,
    put_card_formulas,
    put_card_texts,
    text_problems,
)
from app.domain.formulas import is_identifier
from app.domain.messages import Message
from app.web.authoring.forms import (
    by_field,
    draft_form_context,
    saved,
    submitted,
    text_of,
    too_long,
)
from app.web.forms import check_csrf
from app.web.templating import render_page

router = APIRouter(include_in_schema=False, prefix="/instructor")
# A formula row's fields: formula<row>_<field>, rows numbered from 0 in the card's order.
_ROW = re.compile(r"^formula(\d{1,5})_")
_FORMULA_FIELDS = ("id", "title_en", "title_zh", "expr", "latex", "unit")


# --- the card's texts, parameters and formulas ------------------------------------------------


@router.get("/cards/{card_id}/edit")
def edit_card(request: Request, card_id: str, db: DbDep, visitor: InstructorVisitor) -> Response:
    """The card's texts in both languages, its parameters and its named formulas."""
    draft = service.get_draft(db=db, card_id=card_id[:100])
    return _card_page(request, visitor, card_id, draft.document, revision=draft.revision)


def _card_page(
    request: Request,
    visitor: InstructorVisitor,
    card_id: str,
    document: Mapping[str, Any],
    problems: Sequence[CardProblem] = (),
    *,
    revision: str,
    conflict: DraftChanged | None = None,
    status_code: int = 200,
) -> Response:
    """The card form showing ``document``, based on the draft of ``revision``."""
    formulas = [f for f in document.get("formulas") or [] if isinstance(f, Mapping)]
    params = document.get("params")
    context = {
        "card_id": card_id,
        "document": document,
        "texts": {name: text_of(document.get(name)) for name in CARD_TEXTS},
        "params_text": ", ".join(map(str, params)) if isinstance(params, list) else "",
        "formulas": [*formulas, {"id": "", "title": {}, "expr": "", "latex": "", "unit": "B"}],
        "problems": problems,
        "by_field": by_field(problems),
        **draft_form_context(
            visitor,
            revision=revision,
            conflict=conflict,
            reload_url=f"/instructor/cards/{card_id}/edit",
        ),
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
    form = await submitted(request)
    check_csrf(visitor, form.get("csrf_token"))

    def work() -> Response:
        draft = service.get_draft(db=db, card_id=card_id[:100])
        based_on = form.get("revision") or None
        shown = based_on or draft.revision
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
        problems = too_long(form)
        problems += [p for name in CARD_TEXTS for p in text_problems(name, texts[name])]
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
            return _card_page(
                request, visitor, card_id, document, problems, revision=shown, status_code=422
            )
        try:
            return saved(db, visitor, card_id, document, based_on)
        except DraftChanged as conflict:
            return _card_page(
                request, visitor, card_id, document, revision=shown, conflict=conflict,
                status_code=conflict.status_code,
            )  # fmt: skip

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
