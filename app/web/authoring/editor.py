"""A template's editor (problems shown at their field and column), its preview exactly as
learners see it, and the formula check the editor calls as one types."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request
from pydantic import Field
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, Response

from app.authoring import service
from app.authoring.preview import preview
from app.authoring.revisions import DraftChanged
from app.authoring.sandbox import check_draft_formula
from app.authoring.sandbox import check_formula as check_in_sandbox
from app.deps import DbDep, InstructorVisitor
from app.domain.authoring import Checked, put_template
from app.domain.cards import find_template_document
from app.domain.formulas import FormulaError
from app.domain.generation import MIN_FIGURES
from app.domain.identity import MAX_SEED
from app.domain.messages import Message
from app.domain.texts import Text
from app.problems import InvalidInput, NotFound, Problem, UnprocessableInput
from app.web.authoring import back_to
from app.web.authoring.forms import draft_form_context, submitted, too_long
from app.web.authoring.template_form import (
    constraints_text,
    derived_text,
    form_problems,
    kind_fields_missing,
    params_text,
    read_template_form,
)
from app.web.forms import BlankIsNone, check_csrf
from app.web.templating import render_page

router = APIRouter(include_in_schema=False, prefix="/instructor")
# The longest formula the live check parses (a card's formulas are at most 500 characters).
MAX_FORMULA_CHARS = 2000
SWITCHED = {
    "statement": Message(
        "The form now shows a statement template's fields (its answer and each pitfall's"
        " statement, in both languages): fill them in, then save."
    ),
    "numeric": Message(
        "The form now shows a numeric template's fields (its answer formula, unit and"
        " significant figures, and each pitfall's formula): fill them in, then save."
    ),
}


@router.get("/cards/{card_id}/templates/{template_id}")
def edit_template(
    request: Request,
    card_id: str,
    template_id: str,
    db: DbDep,
    visitor: InstructorVisitor,
    point: Annotated[str | None, Query(max_length=100)] = None,
) -> Response:
    """The template editor (``template_id`` "new" starts a template in exam point ``point``)."""
    draft = service.get_draft(db=db, card_id=card_id[:100])
    if template_id == "new":
        found_point = next(
            (p for p in draft.document.get("points", []) if p.get("slug") == point),
            (draft.document.get("points") or [{}])[0],
        )
        template: dict[str, Any] = {
            "id": "",
            "kind": "numeric",
            "params": {},
            "stem": {"en": "", "zh": ""},
            "answer": "",
            "unit": "B",
            "precision": MIN_FIGURES,
            "choices": 4,
            "solution": [{"en": "", "zh": ""}],
            "pitfalls": [],
        }
        point_slug = found_point.get("slug", "")
    else:
        found = find_template_document(draft.document, template_id)
        if found is None:  # 404, as the preview of a missing template
            raise NotFound(
                Message("the card has no template %(template)s", template=repr(template_id)),
                code="template_not_found",
            )
        point_doc, template = found
        point_slug = point_doc.get("slug", "")
    checked = service.validate_template(draft.document, template_id)
    return _editor(
        request, visitor, draft.document, card_id, template, point_slug, template_id, checked,
        revision=draft.revision,
    )  # fmt: skip


def _editor(
    request: Request,
    visitor: InstructorVisitor,
    document: Mapping[str, Any],
    card_id: str,
    template: Mapping[str, Any],
    point_slug: str,
    original_id: str,
    checked: Any,
    *,
    revision: str,
    status_code: int = 200,
    message: Text | None = None,
    conflict: DraftChanged | None = None,
    notice: Text | None = None,
    saved: bool = False,
    typed: Mapping[str, str] | None = None,
) -> Response:
    """The editor showing ``template``, based on the draft of ``revision``; ``typed``: the form
    as submitted, whose lines and counts are shown as typed (they may not read)."""
    typed = typed or {}
    problems = [p for p in checked.problems if p.template_id in (template.get("id"), original_id)]
    # The card's parameters; static/authoring.js adds the template's from its field as typed.
    names = sorted(set(document.get("params", []) or []))
    context = {
        "card_id": card_id,
        "document": document,
        "template": template,
        "point_slug": point_slug,
        "original_id": original_id,
        "problems": problems,
        "stopped": checked.stopped,
        "by_field": _by_field(problems),
        "names": names,
        "message": message,
        "saved": saved,
        **draft_form_context(
            visitor,
            revision=revision,
            conflict=conflict,
            reload_url=f"/instructor/cards/{card_id}/templates/{original_id}",
        ),
        "notice": notice,
        "typed_choices": typed.get("choices"),
        "typed_precision": typed.get("precision"),
        "params_text": typed.get("params", params_text(template.get("params") or {})),
        "derived_text": typed.get("derived", derived_text(template.get("derived") or {})),
        "constraints_text": typed.get(
            "constraints", constraints_text(template.get("constraints") or [])
        ),
    }
    return render_page(
        request, "instructor_template.html", context, lang=visitor.lang, status_code=status_code
    )


def _by_field(problems: list[Any]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for problem in problems:
        field = problem.field or ""
        # a parameter's, a derived parameter's or a constraint's problem: under its whole field
        if field.startswith(("params.", "derived.", "constraints.")):
            field = field.split(".", 1)[0]
        grouped.setdefault(field, []).append(problem)
    return grouped


@router.post("/cards/{card_id}/templates/{template_id}")
async def save_template(
    request: Request,
    card_id: str,
    template_id: str,
    db: DbDep,
    visitor: InstructorVisitor,
) -> Response:
    """Save the editor's template into the draft; the editor comes back with its problems."""
    form = await submitted(request)
    check_csrf(visitor, form.get("csrf_token"))

    def work() -> Response:
        assert visitor.learner is not None
        draft = service.get_draft(db=db, card_id=card_id[:100])
        found = (
            find_template_document(draft.document, template_id) if template_id != "new" else None
        )
        # A new template is added to the draft as it is then; an edit replaces the template as
        # it was when the editor opened, which must still be the draft's.
        based_on = (form.get("revision") or None) if template_id != "new" else None
        revision = form.get("revision") or draft.revision

        def refused(
            shown: dict[str, Any],
            status_code: int,
            message: Text | None,
            extra: tuple[Any, ...] = (),
            **shown_with: Any,
        ) -> Response:
            """The editor again, unsaved, as typed, with the draft's problems (``extra`` first)."""
            checked = service.validate_template(draft.document, template_id)
            if extra:
                checked = Checked(None, (*extra, *checked.problems))
            return _editor(
                request, visitor, draft.document, card_id, shown, form.get("point", ""),
                template_id, checked, revision=revision, status_code=status_code, message=message,
                typed=form, **shown_with,
            )  # fmt: skip

        template, form_refusals = read_template_form(form, found[1] if found else None)
        if template_id == "new" and template["kind"] in SWITCHED and kind_fields_missing(form):
            # The kind of a new template was switched: its form, with the fields of that kind.
            return refused(template, 200, None, notice=SWITCHED[template["kind"]])
        form_refusals = [
            *too_long(form, template["id"] or template_id),
            *form_refusals,
            *form_problems(template),
        ]
        if form_refusals:
            return refused(template, 400, form_refusals[0].text, tuple(form_refusals))
        if template_id == "new" and find_template_document(draft.document, template["id"]):
            taken = Message("a template %(template)s exists already", template=repr(template["id"]))
            return refused(template, 409, taken)
        try:
            document = put_template(
                draft.document,
                form.get("point", ""),
                template,
                replaces=None if template_id == "new" else template_id,
            )
        except KeyError:
            raise InvalidInput(Message("unknown exam point"), code="point_not_found") from None
        try:
            revision = service.save_draft(
                db=db, actor=visitor.learner, card_id=card_id, document=document, based_on=based_on
            )
        except DraftChanged as conflict:
            return refused(template, conflict.status_code, None, conflict=conflict)
        saved_id = template["id"] or template_id
        if template_id != saved_id:
            return back_to(visitor, f"/instructor/cards/{card_id}/templates/{saved_id}")
        checked = service.validate_template(document, saved_id)
        return _editor(
            request,
            visitor,
            document,
            card_id,
            template,
            form.get("point", ""),
            saved_id,
            checked,
            revision=revision,
            saved=True,
        )

    return await run_in_threadpool(work)


@router.get("/cards/{card_id}/preview")
def preview_page(
    request: Request,
    card_id: str,
    db: DbDep,
    visitor: InstructorVisitor,
    template_id: Annotated[str, Query(max_length=100)],
    seed: Annotated[Annotated[int, Field(ge=0, le=MAX_SEED)] | None, BlankIsNone, Query()] = None,
) -> Response:
    """A variant exactly as learners see it, with the key and every pitfall's explanation."""
    chosen = {
        key.removeprefix("param."): value[:100]
        for key, value in request.query_params.items()
        if key.startswith("param.") and value
    }
    try:
        variant = preview(
            db=db, card_id=card_id[:100], template_id=template_id, seed=seed, params=chosen or None
        )
    except Problem as problem:
        if problem.code not in ("card_has_errors", "template_not_found"):
            raise
        # A draft template that does not compile: its problems, as its editor shows them.
        draft = service.get_draft(db=db, card_id=card_id[:100])
        if find_template_document(draft.document, template_id) is None:
            raise
        checked = service.validate_template(draft.document, template_id)
        mine = [p for p in checked.problems if p.template_id == template_id]
        context = {
            "card_id": card_id,
            "template_id": template_id,
            "problems": mine or list(checked.problems),
            "refusal": problem.text,
        }
        return render_page(
            request,
            "instructor_preview_problems.html",
            context,
            lang=visitor.lang,
            status_code=UnprocessableInput.status_code,
        )
    context = {"card_id": card_id, "variant": variant, "chosen": chosen}
    return render_page(request, "instructor_preview.html", context, lang=visitor.lang)


@router.get("/check-formula")
def check_formula(
    db: DbDep,
    visitor: InstructorVisitor,
    card_id: Annotated[str, Query(max_length=100)],
    text: Annotated[str, Query(max_length=100_000)] = "",
    names: Annotated[str, Query(max_length=1000)] = "",
    scope: Annotated[Literal["template", "card"], Query()] = "template",
) -> Response:
    """Parse one formula as the editor types it: ok, or the reason and the column. A template's
    formula may use ``names`` and the draft's card formulas; a card formula (``scope`` card)
    only ``names``: the card's parameters and the formulas above it, as saving compiles it."""
    draft = service.get_draft(db=db, card_id=card_id)
    if len(text) > MAX_FORMULA_CHARS:  # answered as the script reads every refusal
        too_long = Message("must be at most %(limit)s characters long", limit=MAX_FORMULA_CHARS)
        return JSONResponse(
            {
                "ok": False,
                "message": too_long.get(visitor.lang),
                "position": MAX_FORMULA_CHARS + 1,  # the first character past it
                "where": None,
            }
        )
    wanted = frozenset(n.strip() for n in names.split(",") if n.strip())
    # The card formulas are compiled in the sandbox with the formula, never here.
    if scope == "card":
        result = check_in_sandbox(text, wanted)
    else:
        result = check_draft_formula(text, wanted, draft.document)
    if isinstance(result, FormulaError):
        where = (
            None if result.column is None else Message("column %(column)s", column=result.column)
        )
        return JSONResponse(
            {
                "ok": False,
                "message": result.message.get(visitor.lang),
                "position": result.column,
                "where": None if where is None else where.get(visitor.lang),
            }
        )
    return JSONResponse({"ok": True, "message": None, "position": None})
