"""My data: download everything stored about me (JSON), or delete it all with my account."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from app.auth.learner_data import delete_learner, export_filename, export_learner_data
from app.auth.service import confirm_password
from app.deps import ContextDep, DbDep, LimiterDep, VisitorDep
from app.domain.languages import LANGS
from app.domain.messages import Message
from app.problems import InvalidInput, Problem
from app.web.account import Text_, client_address, form_page, refused
from app.web.forms import check_csrf
from app.web.templating import link

router = APIRouter(include_in_schema=False)


@router.get("/account/export")
def export_my_data(db: DbDep, ctx: ContextDep, visitor: VisitorDep) -> Response:
    """Everything stored about this browser's learner, as a JSON download (the answers of an
    exam still running come once it ends)."""
    if visitor.learner is None:
        return RedirectResponse(link("/login", visitor.lang), status_code=303)
    document = export_learner_data(db=db, learner_id=visitor.learner.id, now=ctx.clock())
    disposition = f'attachment; filename="{export_filename(document)}"'
    headers = {"Content-Disposition": disposition, "Cache-Control": "no-store"}
    return JSONResponse(document, headers=headers)


# What a guest types to confirm (either language's word is accepted).
CONFIRM_WORD = Message("delete")


@router.get("/account/delete")
def delete_page(request: Request, visitor: VisitorDep) -> Response:
    if visitor.learner is None:
        return RedirectResponse(link("/login", visitor.lang), status_code=303)
    return form_page(request, visitor, "account_delete.html", deleted=False)


@router.post("/account/delete")
def delete_my_account(
    request: Request,
    db: DbDep,
    visitor: VisitorDep,
    limiter: LimiterDep,
    csrf_token: Annotated[str | None, Form()] = None,
    password: Text_ = "",
    confirm: Text_ = "",
) -> Response:
    """Delete the learner and all their data: an account confirms with its password, a guest by
    typing the confirmation word."""
    check_csrf(visitor, csrf_token)
    learner = visitor.learner
    if learner is None:
        return RedirectResponse(link("/login", visitor.lang), status_code=303)
    try:
        if learner.has_account:
            confirm_password(
                db=db,
                limiter=limiter,
                learner=learner,
                password=password,
                address=client_address(request),
            )
        elif confirm.strip().casefold() not in {CONFIRM_WORD.get(lang) for lang in LANGS}:
            raise InvalidInput(
                Message('Type "%(word)s" to confirm', word=CONFIRM_WORD),
                code="not_confirmed",
            )
    except Problem as problem:
        return refused(request, visitor, "account_delete.html", problem, deleted=False)
    delete_learner(db=db, learner_id=learner.id)
    visitor.browser.clear()
    visitor.learner = None
    request.state.visitor_learner = None
    request.state.due_count = 0
    return form_page(request, visitor, "account_delete.html", deleted=True)
