"""The card list, a card's overview, and what an instructor does to a whole card: create it,
publish its draft, withdraw or offer it, compare two versions."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from starlette.responses import JSONResponse, Response

from app.authoring import history, service
from app.authoring.revisions import DraftChanged
from app.authoring.validation import ValidationJob
from app.deps import ContextDep, DbDep, InstructorVisitor
from app.domain.authoring import Checked, new_card_document
from app.domain.cards import SLUG_PATTERN
from app.domain.messages import Message, plural_message
from app.domain.moodle_import import MAX_BYTES as MOODLE_MAX_BYTES
from app.domain.texts import Text
from app.problems import InvalidInput, Problem
from app.web.authoring import back_to
from app.web.forms import check_csrf
from app.web.templating import render_page

router = APIRouter(include_in_schema=False, prefix="/instructor")
_SLUG = re.compile(SLUG_PATTERN)
# Audit entries on one page of the card's audit log (newest first).
AUDIT_PAGE = 20
# How long the card page waits for its draft's validation before showing its progress instead.
PAGE_WAIT_S = 1.5


def dashboard_context(
    db: DbDep, ctx: ContextDep, visitor: InstructorVisitor, typed: Mapping[str, str] | None = None
) -> dict[str, object]:
    return {
        "cards": ctx.catalog.all_cards(),
        "withdrawn": ctx.catalog.withdrawn,
        "drafts": history.drafts(db=db),
        "csrf_token": visitor.csrf_token,
        "error": None,
        "typed": typed or {},
    }


@router.get("")
def dashboard(request: Request, db: DbDep, ctx: ContextDep, visitor: InstructorVisitor) -> Response:
    """Every card with its version and whether learners are offered it, and every draft (a
    new card's only way back before it is published)."""
    context = dashboard_context(db, ctx, visitor)
    return render_page(request, "instructor_cards.html", context, lang=visitor.lang)


@router.post("/cards")
def create_card(
    request: Request,
    db: DbDep,
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
                Message(
                    "a card id is lower-case letters and digits, words joined by single hyphens "
                    "(e.g. %(example)s)",
                    example="kv-cache",
                )
            )
        if not title_en.strip() or not title_zh.strip():
            raise InvalidInput(Message("give the card a title in both languages"))
        document = new_card_document(card_id, {"en": title_en.strip(), "zh": title_zh.strip()})
        assert visitor.learner is not None
        service.create_draft(db=db, actor=visitor.learner, document=document)
    except Problem as problem:
        typed = {"card_id": card_id, "title_en": title_en, "title_zh": title_zh}
        context = dashboard_context(db, ctx, visitor, typed) | {
            "error": problem.text.get(visitor.lang)
        }
        return render_page(
            request,
            "instructor_cards.html",
            context,
            lang=visitor.lang,
            status_code=problem.status_code,
        )
    return back_to(visitor, f"/instructor/cards/{card_id}")


@router.get("/cards/{card_id}")
def card_overview(
    request: Request,
    card_id: str,
    db: DbDep,
    ctx: ContextDep,
    visitor: InstructorVisitor,
    audit_page: Annotated[int, Query(ge=1, le=100_000)] = 1,
) -> Response:
    """The draft (or latest version): points, templates, every problem, publish, versions, and
    the audit log, :data:`AUDIT_PAGE` entries a page (``audit_page`` 2: the next older ones)."""
    return card_page(request, db, ctx, visitor, card_id, audit_page=audit_page)


def card_page(
    request: Request,
    db: DbDep,
    ctx: ContextDep,
    visitor: InstructorVisitor,
    card_id: str,
    *,
    audit_page: int = 1,
    refusal: Problem | None = None,
    import_form: Mapping[str, str] | None = None,
) -> Response:
    """The card's page; ``refusal``: what was refused, shown at the top (with its status), and
    at the import form's file field when ``import_form`` (what it was sent with) is given."""
    draft = service.get_draft(db=db, card_id=card_id[:100])
    job = service.start_validation(draft.document)
    # A small draft's problems come with the page; a large one's page shows the validation's
    # progress and reloads when it is done (its problems are kept for the unchanged draft).
    job.wait(PAGE_WAIT_S)
    checked = Checked(None, job.problems) if job.problems is not None else None
    published = ctx.catalog.latest(card_id)
    versions = history.versions(db=db, card_id=card_id) if published else []
    audit = history.audit_log(
        db=db, card_id=card_id, limit=AUDIT_PAGE + 1, offset=(audit_page - 1) * AUDIT_PAGE
    )
    context = {
        "card_id": card_id,
        "draft": draft,
        "document": draft.document,
        "checked": checked,
        "validation": job,
        "validation_text": progress_text(job).get(visitor.lang),
        "published": published,
        "offered": published is not None and card_id not in ctx.catalog.withdrawn,
        "versions": versions,
        "audit": audit[:AUDIT_PAGE],
        "audit_page": audit_page,
        "audit_older": len(audit) > AUDIT_PAGE,
        "csrf_token": visitor.csrf_token,
        "message": None if refusal is None else refusal.text,
        "import_form": import_form,
        "import_max_bytes": MOODLE_MAX_BYTES,
    }
    return render_page(
        request,
        "instructor_card.html",
        context,
        lang=visitor.lang,
        status_code=200 if refusal is None else refusal.status_code,
    )


def progress_text(job: ValidationJob) -> Text:
    if job.total is None:
        return Message("Compiling the draft…")
    return plural_message(
        "Validating the draft: %(done)s of %(num)s template checked…",
        "Validating the draft: %(done)s of %(num)s templates checked…",
        job.total,
        done=job.done,
        num=job.total,
    )


@router.get("/validations/{job_id}")
def validation_progress(job_id: str, visitor: InstructorVisitor) -> JSONResponse:
    """A validation job's progress, for the card page's script."""
    job = service.validation_job(job_id[:64])
    return JSONResponse(
        {
            "status": job.state,
            "templates_done": job.done,
            "templates_total": job.total,
            "text": progress_text(job).get(visitor.lang),
        }
    )


@router.post("/cards/{card_id}/publish")
def publish(
    request: Request,
    card_id: str,
    db: DbDep,
    ctx: ContextDep,
    visitor: InstructorVisitor,
    csrf_token: Annotated[str | None, Form()] = None,
) -> Response:
    """Publish the draft; one changed while it was checked is kept, and its page says so."""
    check_csrf(visitor, csrf_token)
    assert visitor.learner is not None
    try:
        service.publish(
            db=db, actor=visitor.learner, live=request.app.state.live_catalog, card_id=card_id
        )
    except DraftChanged as refusal:
        return card_page(request, db, ctx, visitor, card_id, refusal=refusal)
    return back_to(visitor, f"/instructor/cards/{card_id}")


@router.post("/cards/{card_id}/offer")
def offer(
    request: Request,
    card_id: str,
    db: DbDep,
    visitor: InstructorVisitor,
    csrf_token: Annotated[str | None, Form()] = None,
    offered: Annotated[str, Form(max_length=5)] = "yes",
) -> Response:
    check_csrf(visitor, csrf_token)
    assert visitor.learner is not None
    service.set_offered(
        db=db,
        actor=visitor.learner,
        live=request.app.state.live_catalog,
        card_id=card_id,
        offered=offered == "yes",
    )
    return back_to(visitor, f"/instructor/cards/{card_id}")


@router.get("/cards/{card_id}/diff")
def diff_page(
    request: Request,
    card_id: str,
    db: DbDep,
    ctx: ContextDep,
    visitor: InstructorVisitor,
    from_version: Annotated[int, Query(alias="from", ge=1, le=10**9)],
    to_version: Annotated[int, Query(alias="to", ge=1, le=10**9)],
) -> Response:
    """Each change between two versions, before and after, and whether a changed template's
    values changed (major) or only its wording (minor), with the reason."""
    changes = history.diff(
        db=db,
        catalog=ctx.catalog,
        card_id=card_id,
        old=from_version,
        new=to_version,
        lang=visitor.lang,
    )
    context = {"card_id": card_id, "changes": changes, "old": from_version, "new": to_version}
    return render_page(request, "instructor_diff.html", context, lang=visitor.lang)


@router.get("/cards/{card_id}/draft/diff")
def draft_diff_page(
    request: Request, card_id: str, db: DbDep, visitor: InstructorVisitor
) -> Response:
    """What the draft changes since the latest version, before and after, and for each changed
    template whether publishing keeps its version (wording only) or starts a new one."""
    old, changes = history.draft_diff(db=db, card_id=card_id[:100], lang=visitor.lang)
    context = {"card_id": card_id, "changes": changes, "old": old, "new": None}
    return render_page(request, "instructor_diff.html", context, lang=visitor.lang)
