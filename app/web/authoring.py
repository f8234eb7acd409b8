"""The instructor dashboard: cards, their drafts, a template editor with problems shown at their
field and column, a live preview exactly as learners see it, "test every variant", publishing,
withdrawal, versions with diffs, and the audit log. Instructor role only (403 otherwise).

Forms post whole templates; the document edits themselves are plain functions in
:mod:`app.domain.authoring`, the use cases in :mod:`app.authoring.service` (shared with the API).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, RedirectResponse, Response

from app.authoring import service
from app.authoring.sandbox import check_formula as sandboxed_check
from app.deps import ContextDep, InstructorVisitor, SessionDep
from app.domain.authoring import (
    add_point,
    new_card_document,
    put_template,
    remove_template,
)
from app.domain.cards import SLUG_PATTERN, CardError, card_definitions, find_template_document
from app.domain.formulas import FormulaError
from app.domain.identity import MAX_SEED
from app.domain.messages import Message
from app.domain.texts import Text
from app.problems import InvalidInput, Problem
from app.web.forms import check_csrf
from app.web.templating import link, render_page

router = APIRouter(include_in_schema=False, prefix="/instructor")
_SLUG = re.compile(SLUG_PATTERN)
MAX_PITFALLS = 30


def _back(visitor: InstructorVisitor, path: str) -> RedirectResponse:
    return RedirectResponse(link(path, visitor.lang), status_code=303)


@router.get("")
def dashboard(request: Request, ctx: ContextDep, visitor: InstructorVisitor) -> Response:
    """Every card with its version and whether learners are offered it."""
    context = {
        "cards": ctx.catalog.all_cards(),
        "withdrawn": ctx.catalog.withdrawn,
        "csrf_token": visitor.csrf_token,
        "error": None,
    }
    return render_page(request, "instructor_cards.html", context, lang=visitor.lang)


@router.post("/cards")
def create_card(
    request: Request,
    session: SessionDep,
    ctx: ContextDep,
    visitor: InstructorVisitor,
    csrf_token: Annotated[str | None, Form()] = None,
    card_id: Annotated[str, Form(max_length=80)] = "",
    title_en: Annotated[str, Form(max_length=200)] = "",
    title_zh: Annotated[str, Form(max_length=200)] = "",
) -> Response:
    check_csrf(visitor, csrf_token)
    try:
        if not _SLUG.match(card_id):
            raise InvalidInput(
                Message("a card id is lowercase words joined by '-' (e.g. kv-cache)")
            )
        if not title_en.strip() or not title_zh.strip():
            raise InvalidInput(Message("give the card a title in both languages"))
        document = new_card_document(card_id, {"en": title_en.strip(), "zh": title_zh.strip()})
        assert visitor.learner is not None
        service.create_draft(session=session, actor=visitor.learner, document=document)
    except Problem as problem:
        context = {
            "cards": ctx.catalog.all_cards(),
            "withdrawn": ctx.catalog.withdrawn,
            "csrf_token": visitor.csrf_token,
            "error": problem.text.get(visitor.lang),
        }
        return render_page(
            request,
            "instructor_cards.html",
            context,
            lang=visitor.lang,
            status_code=problem.status_code,
        )
    return _back(visitor, f"/instructor/cards/{card_id}")


@router.get("/cards/{card_id}")
def card_overview(
    request: Request, card_id: str, session: SessionDep, ctx: ContextDep, visitor: InstructorVisitor
) -> Response:
    """The draft (or latest version): points, templates, every problem, publish, versions."""
    draft = service.get_draft(session=session, card_id=card_id[:100])
    checked = service.validate(draft.document)
    published = ctx.catalog.latest(card_id)
    versions = service.versions(session=session, card_id=card_id) if published else []
    context = {
        "card_id": card_id,
        "draft": draft,
        "document": draft.document,
        "checked": checked,
        "published": published,
        "offered": published is not None and card_id not in ctx.catalog.withdrawn,
        "versions": versions,
        "audit": service.audit_log(session=session, card_id=card_id, limit=30),
        "csrf_token": visitor.csrf_token,
    }
    return render_page(request, "instructor_card.html", context, lang=visitor.lang)


@router.get("/cards/{card_id}/templates/{template_id}")
def edit_template(
    request: Request,
    card_id: str,
    template_id: str,
    session: SessionDep,
    visitor: InstructorVisitor,
    point: Annotated[str | None, Query(max_length=100)] = None,
) -> Response:
    """The template editor (``template_id`` "new" starts a template in exam point ``point``)."""
    draft = service.get_draft(session=session, card_id=card_id[:100])
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
            "precision": 2,
            "choices": 4,
            "solution": [{"en": "", "zh": ""}],
            "pitfalls": [],
        }
        point_slug = found_point.get("slug", "")
    else:
        found = find_template_document(draft.document, template_id)
        if found is None:
            raise InvalidInput(
                Message("the card has no template %(template)s", template=repr(template_id)),
                code="template_not_found",
            )
        point_doc, template = found
        point_slug = point_doc.get("slug", "")
    checked = service.validate(draft.document)
    return _editor(
        request, visitor, draft.document, card_id, template, point_slug, template_id, checked
    )


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
    status_code: int = 200,
    message: Text | None = None,
    saved: bool = False,
) -> Response:
    problems = [p for p in checked.problems if p.template_id in (template.get("id"), original_id)]
    names = sorted(
        set(document.get("params", []) or []) | set((template.get("params") or {}).keys())
    )
    context = {
        "card_id": card_id,
        "document": document,
        "template": template,
        "point_slug": point_slug,
        "original_id": original_id,
        "problems": problems,
        "by_field": _by_field(problems),
        "names": names,
        "csrf_token": visitor.csrf_token,
        "message": message,
        "saved": saved,
        "params_text": _params_text(template.get("params") or {}),
    }
    return render_page(
        request, "instructor_template.html", context, lang=visitor.lang, status_code=status_code
    )


def _by_field(problems: list[Any]) -> dict[str, list[Any]]:
    grouped: dict[str, list[Any]] = {}
    for problem in problems:
        grouped.setdefault(problem.field or "", []).append(problem)
    return grouped


def _params_text(params: Mapping[str, Any]) -> str:
    lines = []
    for name, spec in params.items():
        values = ", ".join(str(v) for v in spec.get("values", []))
        fmt = spec.get("format")
        lines.append(f"{name} = {values}" + (f" | {fmt}" if fmt else ""))
    return "\n".join(lines)


def parse_params(text: str) -> dict[str, Any]:
    """``name = v1, v2 | format`` per line → the template's ``params``."""
    params: dict[str, Any] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, rest = line.partition("=")
        if not sep:
            raise InvalidInput(
                Message("parameters, line %(line)s: write 'name = value, value, ...'", line=number)
            )
        values_text, _, fmt = rest.partition("|")
        values: list[int | float | str] = []
        for raw in values_text.split(","):
            raw = raw.strip()
            if not raw:
                continue
            try:
                values.append(int(raw))
            except ValueError:
                values.append(raw)
        spec: dict[str, Any] = {"values": values}
        if fmt.strip():
            spec["format"] = fmt.strip()
        params[name.strip()] = spec
    return params


def template_from_form(
    form: Mapping[str, str], existing: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The template document a submitted editor form describes."""
    kind = form.get("kind", "numeric")
    template: dict[str, Any] = {
        "id": form.get("id", "").strip(),
        "kind": kind,
        "params": parse_params(form.get("params", "")),
        "stem": {"en": form.get("stem_en", ""), "zh": form.get("stem_zh", "")},
        "choices": _int(form.get("choices"), 4),
        "solution": _steps(form.get("solution_en", ""), form.get("solution_zh", "")),
        "pitfalls": [],
    }
    if existing is not None and "version" in existing:
        template["version"] = existing["version"]
    if kind == "numeric":
        template["answer"] = form.get("answer", "").strip()
        template["unit"] = form.get("unit", "").strip() or "B"
        template["precision"] = _int(form.get("precision"), 2)
    else:
        template["answer"] = {"en": form.get("answer_en", ""), "zh": form.get("answer_zh", "")}
    for index in range(MAX_PITFALLS):
        prefix = f"pitfall{index}_"
        pitfall_id = form.get(prefix + "id", "").strip()
        if not pitfall_id:
            continue
        pitfall: dict[str, Any] = {
            "id": pitfall_id,
            "title": {
                "en": form.get(prefix + "title_en", ""),
                "zh": form.get(prefix + "title_zh", ""),
            },
            "explanation": {
                "en": form.get(prefix + "explanation_en", ""),
                "zh": form.get(prefix + "explanation_zh", ""),
            },
        }
        if kind == "numeric":
            pitfall["formula"] = form.get(prefix + "formula", "").strip()
        else:
            pitfall["statement"] = {
                "en": form.get(prefix + "statement_en", ""),
                "zh": form.get(prefix + "statement_zh", ""),
            }
        template["pitfalls"].append(pitfall)
    return template


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value not in (None, "") else default
    except ValueError:
        return default


def _steps(en: str, zh: str) -> list[dict[str, str]]:
    """Solution steps, one per line, the two languages paired line by line."""
    left = [line.strip() for line in en.splitlines() if line.strip()]
    right = [line.strip() for line in zh.splitlines() if line.strip()]
    count = max(len(left), len(right))
    return [
        {"en": left[i] if i < len(left) else "", "zh": right[i] if i < len(right) else ""}
        for i in range(count)
    ]


@router.post("/cards/{card_id}/templates/{template_id}")
async def save_template(
    request: Request,
    card_id: str,
    template_id: str,
    session: SessionDep,
    visitor: InstructorVisitor,
) -> Response:
    """Save the editor's template into the draft; the editor comes back with its problems."""
    form = {k: str(v)[:20_000] for k, v in (await request.form()).items()}
    check_csrf(visitor, form.get("csrf_token"))

    def work() -> Response:
        assert visitor.learner is not None
        draft = service.get_draft(session=session, card_id=card_id[:100])
        found = (
            find_template_document(draft.document, template_id) if template_id != "new" else None
        )
        try:
            template = template_from_form(form, found[1] if found else None)
        except InvalidInput as problem:
            checked = service.validate(draft.document)
            base = found[1] if found else {}
            return _editor(
                request,
                visitor,
                draft.document,
                card_id,
                base,
                form.get("point", ""),
                template_id,
                checked,
                status_code=400,
                message=problem.text,
            )
        if template_id == "new" and find_template_document(draft.document, template["id"]):
            checked = service.validate(draft.document)
            return _editor(
                request,
                visitor,
                draft.document,
                card_id,
                template,
                form.get("point", ""),
                template_id,
                checked,
                status_code=409,
                message=Message(
                    "a template %(template)s exists already", template=repr(template["id"])
                ),
            )
        try:
            document = put_template(
                draft.document,
                form.get("point", ""),
                template,
                replaces=None if template_id == "new" else template_id,
            )
        except KeyError:
            raise InvalidInput(Message("unknown exam point"), code="point_not_found") from None
        service.save_draft(
            session=session, actor=visitor.learner, card_id=card_id, document=document
        )
        checked = service.validate(document)
        saved_id = template["id"] or template_id
        if template_id != saved_id:
            return _back(visitor, f"/instructor/cards/{card_id}/templates/{saved_id}")
        return _editor(
            request,
            visitor,
            document,
            card_id,
            template,
            form.get("point", ""),
            saved_id,
            checked,
            saved=True,
        )

    return await run_in_threadpool(work)


@router.post("/cards/{card_id}/templates/{template_id}/delete")
def delete_template(
    card_id: str,
    template_id: str,
    session: SessionDep,
    visitor: InstructorVisitor,
    csrf_token: Annotated[str | None, Form()] = None,
) -> Response:
    check_csrf(visitor, csrf_token)
    assert visitor.learner is not None
    draft = service.get_draft(session=session, card_id=card_id[:100])
    service.save_draft(
        session=session,
        actor=visitor.learner,
        card_id=card_id,
        document=remove_template(draft.document, template_id),
    )
    return _back(visitor, f"/instructor/cards/{card_id}")


@router.post("/cards/{card_id}/points")
def new_point(
    card_id: str,
    session: SessionDep,
    visitor: InstructorVisitor,
    csrf_token: Annotated[str | None, Form()] = None,
    slug: Annotated[str, Form(max_length=80)] = "",
    title_en: Annotated[str, Form(max_length=300)] = "",
    title_zh: Annotated[str, Form(max_length=300)] = "",
) -> Response:
    check_csrf(visitor, csrf_token)
    if not _SLUG.match(slug):
        raise InvalidInput(
            Message("an exam point slug is lowercase words joined by '-'"), code="invalid_slug"
        )
    assert visitor.learner is not None
    draft = service.get_draft(session=session, card_id=card_id[:100])
    document = add_point(draft.document, slug, {"en": title_en or slug, "zh": title_zh or slug})
    service.save_draft(session=session, actor=visitor.learner, card_id=card_id, document=document)
    return _back(visitor, f"/instructor/cards/{card_id}")


@router.post("/cards/{card_id}/publish")
def publish(
    request: Request,
    card_id: str,
    session: SessionDep,
    visitor: InstructorVisitor,
    csrf_token: Annotated[str | None, Form()] = None,
) -> Response:
    check_csrf(visitor, csrf_token)
    assert visitor.learner is not None
    service.publish(
        session=session, actor=visitor.learner, live=request.app.state.live_catalog, card_id=card_id
    )
    return _back(visitor, f"/instructor/cards/{card_id}")


@router.post("/cards/{card_id}/offer")
def offer(
    request: Request,
    card_id: str,
    session: SessionDep,
    visitor: InstructorVisitor,
    csrf_token: Annotated[str | None, Form()] = None,
    offered: Annotated[str, Form(max_length=5)] = "yes",
) -> Response:
    check_csrf(visitor, csrf_token)
    assert visitor.learner is not None
    service.set_offered(
        session=session,
        actor=visitor.learner,
        live=request.app.state.live_catalog,
        card_id=card_id,
        offered=offered == "yes",
    )
    return _back(visitor, f"/instructor/cards/{card_id}")


@router.get("/cards/{card_id}/diff")
def diff_page(
    request: Request,
    card_id: str,
    session: SessionDep,
    visitor: InstructorVisitor,
    from_version: Annotated[int, Query(alias="from", ge=1, le=10**9)],
    to_version: Annotated[int, Query(alias="to", ge=1, le=10**9)],
) -> Response:
    changes = service.diff(session=session, card_id=card_id, old=from_version, new=to_version)
    context = {"card_id": card_id, "changes": changes, "old": from_version, "new": to_version}
    return render_page(request, "instructor_diff.html", context, lang=visitor.lang)


@router.get("/cards/{card_id}/preview")
def preview_page(
    request: Request,
    card_id: str,
    session: SessionDep,
    visitor: InstructorVisitor,
    template_id: Annotated[str, Query(max_length=100)],
    seed: Annotated[int | None, Query(ge=0, le=MAX_SEED)] = None,
) -> Response:
    """A variant exactly as learners see it, with the key and every pitfall's explanation."""
    card = service.preview_card(session=session, card_id=card_id[:100])
    chosen = {
        key.removeprefix("param."): value[:100]
        for key, value in request.query_params.items()
        if key.startswith("param.") and value
    }
    variant = service.preview(card=card, template_id=template_id, seed=seed, params=chosen or None)
    template = card.template(template_id)
    context = {
        "card": card,
        "card_id": card_id,
        "point": card.point_by_slug(variant.id.point),
        "variant": variant,
        "template": template,
        "chosen": chosen,
    }
    return render_page(request, "instructor_preview.html", context, lang=visitor.lang)


@router.get("/check-formula")
def check_formula(
    session: SessionDep,
    visitor: InstructorVisitor,
    card_id: Annotated[str, Query(max_length=100)],
    text: Annotated[str, Query(max_length=2000)] = "",
    names: Annotated[str, Query(max_length=1000)] = "",
) -> Response:
    """Parse one formula as the editor types it: ok, or the reason and the column."""
    draft = service.get_draft(session=session, card_id=card_id)
    try:
        definitions = card_definitions(draft.document)
    except CardError:  # a broken card-level formula is reported on the card page
        definitions = {}
    wanted = frozenset(n.strip() for n in names.split(",") if n.strip())
    result = sandboxed_check(text, wanted, [(n, f.text) for n, f in definitions.items()])
    if isinstance(result, FormulaError):
        return JSONResponse(
            {"ok": False, "message": result.message.get(visitor.lang), "position": result.column}
        )
    return JSONResponse({"ok": True, "message": None, "position": None})
