"""A forgotten password: a link by email (app.auth.resets), then a new password on its page."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Request
from starlette.responses import Response

from app.auth.resets import ask_for_reset, reset_link_works, reset_password
from app.deps import DbDep, LimiterDep, SettingsDep, VisitorDep
from app.problems import Problem
from app.web.account import Text_, client_address, form_page, refused
from app.web.forms import check_csrf

router = APIRouter(include_in_schema=False)


@router.get("/password-reset")
def password_reset_page(request: Request, visitor: VisitorDep) -> Response:
    return form_page(request, visitor, "password_reset.html", email="", sent=False)


@router.post("/password-reset")
def ask_password_reset(
    request: Request,
    settings: SettingsDep,
    visitor: VisitorDep,
    limiter: LimiterDep,
    csrf_token: Annotated[str | None, Form()] = None,
    email: Text_ = "",
) -> Response:
    """Send a reset link if the address has an account; the same page either way."""
    check_csrf(visitor, csrf_token)
    try:
        ask_for_reset(
            limiter=limiter,
            mailer=request.app.state.mailer,
            sessions=request.app.state.sessionmaker,
            email=email,
            address=client_address(request),
            lang=visitor.lang,
            base_url=settings.public_url or str(request.base_url),
        )
    except Problem as problem:
        return refused(request, visitor, "password_reset.html", problem, email=email, sent=False)
    return form_page(request, visitor, "password_reset.html", email=email, sent=True)


def _no_store(response: Response) -> Response:
    response.headers["Cache-Control"] = "no-store"  # the page's URL holds the link's secret
    return response


@router.get("/password-reset/{token}")
def new_password_page(request: Request, token: str, db: DbDep, visitor: VisitorDep) -> Response:
    works = reset_link_works(db=db, token=token)
    page = form_page(
        request,
        visitor,
        "password_reset_new.html",
        works=works,
        done=False,
        status_code=200 if works else 404,
    )
    return _no_store(page)


@router.post("/password-reset/{token}")
def set_new_password(
    request: Request,
    token: str,
    db: DbDep,
    visitor: VisitorDep,
    csrf_token: Annotated[str | None, Form()] = None,
    new: Text_ = "",
) -> Response:
    check_csrf(visitor, csrf_token)
    try:
        reset_password(db=db, token=token, new=new)
    except Problem as problem:
        works = problem.code != "invalid_reset_link"
        page = refused(
            request, visitor, "password_reset_new.html", problem, works=works, done=False
        )
        return _no_store(page)
    return _no_store(form_page(request, visitor, "password_reset_new.html", works=True, done=True))
