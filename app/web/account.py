"""Account pages: sign up, log in (a guest's history moves along), log out (here or everywhere),
change password, reset a forgotten one by email, download or delete one's data. Forms re-render
with the reason when refused; every POST is CSRF-checked and every successful login rotates the
session secret. Signing up answers the same whether the address had an account
(:mod:`app.auth.signup`): the login form, to log in with the password just chosen.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote, unquote

from fastapi import APIRouter, Form, Query, Request
from starlette.responses import RedirectResponse, Response

from app.auth.service import (
    authenticate,
    change_password,
    end_all_sessions,
    end_web_session,
    hash_secret,
    list_tokens,
    merge_learner,
    start_web_session,
)
from app.auth.signup import sign_up
from app.deps import DbDep, LimiterDep, SettingsDep, VisitorDep
from app.models import EMAIL_MAX
from app.problems import Problem, TooManyRequests
from app.web.forms import check_csrf
from app.web.templating import link, render_page

router = APIRouter(include_in_schema=False)
# No length limit here (the body limit holds): the use cases refuse what is too long with a
# message the form shows, rather than the framework with a bare 422.
Text_ = Annotated[str, Form()]


def form_page(request: Request, visitor: VisitorDep, name: str, **context: object) -> Response:
    status = int(context.pop("status_code", 200))  # type: ignore[call-overload]
    context.setdefault("error", None)
    context["csrf_token"] = visitor.csrf_token
    return render_page(request, name, context, lang=visitor.lang, status_code=status)


def refused(
    request: Request, visitor: VisitorDep, name: str, problem: Problem, **context: object
) -> Response:
    """The form again, with the reason (and Retry-After when rate-limited)."""
    response = form_page(
        request,
        visitor,
        name,
        error=problem.text.get(visitor.lang),
        status_code=problem.status_code,
        **context,
    )
    if isinstance(problem, TooManyRequests):
        response.headers["Retry-After"] = str(problem.retry_after_s)
    return response


def client_address(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def _signed_in(visitor: VisitorDep, secret: str, to: str = "/account") -> Response:
    visitor.browser.replace(secret)
    return RedirectResponse(link(to, visitor.lang), status_code=303)


@router.get("/signup")
def signup_page(request: Request, visitor: VisitorDep) -> Response:
    return form_page(request, visitor, "signup.html", email="")


@router.post("/signup")
def signup(
    request: Request,
    db: DbDep,
    visitor: VisitorDep,
    settings: SettingsDep,
    limiter: LimiterDep,
    csrf_token: Annotated[str | None, Form()] = None,
    email: Text_ = "",
    password: Text_ = "",
) -> Response:
    """A new account, or an email to the owner of a taken address: the same page either way,
    the login form (logging in moves the guest's history to the account)."""
    check_csrf(visitor, csrf_token)
    try:
        email = sign_up(
            db=db,
            limiter=limiter,
            mailer=request.app.state.mailer,
            sessions=request.app.state.sessionmaker,
            email=email,
            password=password,
            lang=visitor.lang,
            base_url=settings.public_url or str(request.base_url),
            address=client_address(request),
        )
    except Problem as problem:
        return refused(request, visitor, "signup.html", problem, email=email)
    # The login form comes from a GET (a reload must not sign up again, emailing the owner of a
    # taken address once more); the address it is filled with, in a cookie for that page alone.
    response = RedirectResponse(link("/login", visitor.lang), status_code=303)
    response.set_cookie(
        SIGNED_UP_COOKIE,
        quote(email, safe=""),
        max_age=SIGNED_UP_MAX_AGE_S,
        path="/login",
        httponly=True,
        samesite="lax",
        secure=settings.secure_cookies,  # as the session cookie's
    )
    return response


SIGNED_UP_COOKIE = "infracards_signed_up"
SIGNED_UP_MAX_AGE_S = 600


# The longest address the login page comes back to (a dashboard page with its filters).
MAX_NEXT = 2000


def page_to_return_to(next_: str | None) -> str | None:
    """``next_`` when it is a page of this site to go back to after logging in (a path: ``/``
    then not ``/`` or ``\\``, no scheme or host, no control character), else None: the login
    page never sends a visitor to another site."""
    if not next_ or len(next_) > MAX_NEXT or not next_.startswith("/"):
        return None
    if next_[1:2] in ("/", "\\") or any(ord(c) < 32 or c == "\\" for c in next_):
        return None
    return next_


@router.get("/login")
def login_page(request: Request, visitor: VisitorDep, next: str | None = None) -> Response:
    """The login form; just after signing up, with the address and what became of it (once)."""
    signed_up = request.cookies.get(SIGNED_UP_COOKIE)
    email = unquote(signed_up)[:EMAIL_MAX] if signed_up else ""
    response = form_page(
        request, visitor, "login.html", email=email, next=page_to_return_to(next),
        signed_up=bool(signed_up),
    )  # fmt: skip
    if signed_up:
        response.delete_cookie(SIGNED_UP_COOKIE, path="/login")
    return response


@router.post("/login")
def login(
    request: Request,
    db: DbDep,
    visitor: VisitorDep,
    limiter: LimiterDep,
    csrf_token: Annotated[str | None, Form()] = None,
    email: Text_ = "",
    password: Text_ = "",
    next: Text_ = "",
) -> Response:
    check_csrf(visitor, csrf_token)
    back = page_to_return_to(next)
    try:
        learner = authenticate(
            db=db,
            limiter=limiter,
            email=email,
            password=password,
            address=client_address(request),
        )
    except Problem as problem:
        return refused(request, visitor, "login.html", problem, email=email, next=back)
    if visitor.learner is not None and visitor.learner.kind == "guest":
        merge_learner(db=db, source_id=visitor.learner.id, target_id=learner.id)
    secret = start_web_session(
        db=db, learner_id=learner.id, lang=visitor.lang, replace=visitor.browser.secret
    )
    if back is not None:  # the page asked for; its language stays in the cookie
        visitor.browser.replace(secret)
        return RedirectResponse(back, status_code=303)
    return _signed_in(visitor, secret, "/")


@router.post("/logout")
def logout(
    db: DbDep, visitor: VisitorDep, csrf_token: Annotated[str | None, Form()] = None
) -> Response:
    check_csrf(visitor, csrf_token)
    end_web_session(db=db, secret=visitor.browser.secret)
    visitor.browser.clear()
    return RedirectResponse(link("/", visitor.lang), status_code=303)


@router.post("/logout-everywhere")
def logout_everywhere(
    db: DbDep, visitor: VisitorDep, csrf_token: Annotated[str | None, Form()] = None
) -> Response:
    check_csrf(visitor, csrf_token)
    if visitor.learner is not None and visitor.learner.has_account:
        end_all_sessions(db=db, learner_id=visitor.learner.id)
    visitor.browser.clear()
    return RedirectResponse(link("/", visitor.lang), status_code=303)


# ?changed=password: the page a password change redirects to (it says the change was made).
PASSWORD_CHANGED = "password"


@router.get("/account")
def account_page(
    request: Request,
    db: DbDep,
    visitor: VisitorDep,
    changed: Annotated[str | None, Query(max_length=20)] = None,
) -> Response:
    """An account's page; a guest who has practised sees what it can do with its data."""
    if visitor.learner is None:
        return RedirectResponse(link("/login", visitor.lang), status_code=303)
    if not visitor.learner.has_account:
        return form_page(request, visitor, "account.html", devices=[], done=False)
    devices = list_tokens(db=db, learner_id=visitor.learner.id)
    done = changed == PASSWORD_CHANGED
    return form_page(request, visitor, "account.html", devices=devices, done=done)


@router.post("/account/password")
def password(
    request: Request,
    db: DbDep,
    visitor: VisitorDep,
    limiter: LimiterDep,
    csrf_token: Annotated[str | None, Form()] = None,
    current: Text_ = "",
    new: Text_ = "",
) -> Response:
    check_csrf(visitor, csrf_token)
    if visitor.learner is None or not visitor.learner.has_account:
        return RedirectResponse(link("/login", visitor.lang), status_code=303)
    try:
        change_password(
            db=db,
            limiter=limiter,
            learner=visitor.learner,
            current=current,
            new=new,
            address=client_address(request),
            keep_session_hash=hash_secret(visitor.browser.secret),
        )
    except Problem as problem:
        devices = list_tokens(db=db, learner_id=visitor.learner.id)
        return refused(request, visitor, "account.html", problem, devices=devices, done=False)
    # Redirected (post/redirect/get): reloading the page does not send the form again, which
    # refused the old password it held as "not right" and counted a failed attempt.
    return RedirectResponse(
        link("/account", visitor.lang, changed=PASSWORD_CHANGED), status_code=303
    )
