"""Request dependencies as ``Annotated`` aliases: the database session, the catalog, who is asking.

API routes authenticate by bearer token only (a web cookie is not accepted there); pages use the
browser session (:mod:`app.auth.cookies`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, TypeVar, cast

from fastapi import Depends, Query, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from sqlalchemy.orm import Session
from starlette.concurrency import run_in_threadpool

from app.auth.cookies import READ_METHODS, STATE_KEY, BrowserSession, CsrfSigner
from app.auth.ratelimit import LoginLimiter
from app.auth.service import (
    LearnerRef,
    cached_learner_for_token,
    learner_for_token,
    learner_for_web_session,
    visitor_for_web_session,
)
from app.auth.visitors import KnownVisitor, remember_visitor, remembered_visitor
from app.config import Settings
from app.domain.calendar import is_time_zone
from app.domain.catalog import Catalog
from app.domain.languages import Lang, choose_lang, from_accept_language
from app.domain.messages import Message
from app.practice.answers import Context
from app.practice.questions import QuestionSigner
from app.problems import Forbidden, LoginRequired, Unauthorized
from app.routing import Values
from app.schemas import LangCode
from app.web.templating import LANG_COOKIE, TIME_ZONE_COOKIE


def get_db(request: Request) -> Iterator[Session]:
    with request.app.state.sessionmaker() as db:
        yield db


Result = TypeVar("Result")


async def in_db(request: Request, work: Callable[[Session], Result]) -> Result:
    """``work`` with a database session of its own, in the threadpool: one hop for an async
    route's blocking part (a ``DbDep`` takes two more, to open and to close the session)."""

    def run() -> Result:
        with request.app.state.sessionmaker() as db:
            return work(db)

    return await run_in_threadpool(run)


def get_settings_dep(request: Request) -> Settings:
    return cast(Settings, request.app.state.settings)


async def get_context(request: Request) -> Context:
    """The use-case context with the live catalog as this request finds it. Never waits: the
    catalog is swapped by whoever built a new one (the refresher thread, a publishing request)."""
    state = request.app.state
    catalog = state.live_catalog.catalog
    ctx: Context = state.context
    if ctx.catalog is not catalog:
        state.catalog = catalog
        state.context = ctx = dataclasses.replace(ctx, catalog=catalog)
    return ctx


async def get_catalog(ctx: Annotated[Context, Depends(get_context)]) -> Catalog:
    return ctx.catalog


async def get_signer(ctx: Annotated[Context, Depends(get_context)]) -> QuestionSigner:
    return ctx.signer


def get_limiter(request: Request) -> LoginLimiter:
    return cast(LoginLimiter, request.app.state.login_limiter)


DbDep = Annotated[Session, Depends(get_db)]
SettingsDep = Annotated[Settings, Depends(get_settings_dep)]
CatalogDep = Annotated[Catalog, Depends(get_catalog)]
ContextDep = Annotated[Context, Depends(get_context)]
SignerDep = Annotated[QuestionSigner, Depends(get_signer)]
LimiterDep = Annotated[LoginLimiter, Depends(get_limiter)]


# --- API: bearer tokens only ------------------------------------------------------------------

_NOT_BEARER = Message("the Authorization header must be %(form)s", form="'Bearer <token>'")

bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="LearnerToken",
    description=(
        "Opaque token (`access_token`) from `POST /api/v1/auth/token` (an account, per device) "
        "or `POST /api/v1/learners` (an anonymous app install), sent as "
        "`Authorization: Bearer <token>`; stored hashed, listed at `GET /api/v1/me/tokens` "
        "and revocable per device."
    ),
)
# The same header, documented apart: the instructor routes take an instructor's (or admin's)
# account token and answer 403 to any other.
instructor_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="InstructorToken",
    description="The `access_token` of an instructor's or admin's account, from "
    "`POST /api/v1/auth/token`, sent as `Authorization: Bearer <token>`.",
)


LangQuery = Annotated[
    LangCode | None, Query(description="Language of the texts: en or zh (else Accept-Language).")
]


async def api_lang(request: Request, lang: LangQuery = None) -> Lang:
    if lang is not None:
        return lang
    return from_accept_language(request.headers.get("accept-language")) or "en"


def _lookup_token(request: Request, token: str) -> LearnerRef | None:
    with request.app.state.lookups() as db:
        return learner_for_token(db=db, token=token)


# Lookups of a token in flight, per event loop: concurrent requests with the same token that
# miss the cache wait for one database read (not one each, which would drain the pool).
_lookups: dict[tuple[int, str], asyncio.Future[LearnerRef | None]] = {}


async def _learner_of(request: Request, token: str) -> LearnerRef:
    """The bearer token's learner: from the in-process cache (validated less than
    ``TOKEN_CACHE_TTL_S`` ago, see app.auth.service), else from the database in the threadpool."""
    learner = cached_learner_for_token(token)
    if learner is None:
        key = (id(asyncio.get_running_loop()), token)
        pending = _lookups.get(key)
        if pending is not None:
            learner = await asyncio.shield(pending)
        else:
            future: asyncio.Future[LearnerRef | None] = asyncio.get_running_loop().create_future()
            _lookups[key] = future
            try:
                learner = await run_in_threadpool(_lookup_token, request, token)
                future.set_result(learner)
            except asyncio.CancelledError:
                future.cancel()
                raise
            except BaseException as exc:
                future.set_exception(exc)
                future.exception()  # retrieved: no "never retrieved" warning without waiters
                raise
            finally:
                _lookups.pop(key, None)
    if learner is None:
        raise Unauthorized(Message("unknown or revoked token"), code="invalid_token")
    return learner


async def get_api_learner(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(bearer_scheme)],
) -> LearnerRef:
    """The learner of the bearer token; 401 without one (cookies are not accepted here)."""
    if credentials is None:
        if request.headers.get("authorization"):
            raise Unauthorized(_NOT_BEARER, code="invalid_authorization")
        raise Unauthorized(
            Message("this needs %(header)s", header="'Authorization: Bearer <token>'"),
            code="token_required",
        )
    return await _learner_of(request, credentials.credentials)


async def get_optional_api_learner(request: Request) -> LearnerRef | None:
    """On public routes (documented with :data:`OPTIONAL_BEARER`): None without an Authorization
    header, else the bearer token's learner (401 for a malformed header or an unknown or revoked
    token, as on every API route)."""
    credentials = bearer_credentials(request)
    if credentials is None:
        if request.headers.get("authorization"):
            raise Unauthorized(_NOT_BEARER, code="invalid_authorization")
        return None
    return await _learner_of(request, credentials.credentials)


ApiLang = Annotated[Lang, Depends(api_lang)]
ApiLearner = Annotated[LearnerRef, Depends(get_api_learner)]
OptionalApiLearner = Annotated[LearnerRef | None, Depends(get_optional_api_learner)]


# The hot API routes (questions, answers) take what they need as one dependency: each further
# dependency costs the framework tens of microseconds per request to resolve.


@dataclass(frozen=True)
class ApiCall:
    """One API request's context, language and bearer token's learner (None without a token)."""

    ctx: Context
    lang: Lang
    learner: LearnerRef | None


@dataclass(frozen=True)
class LearnerCall:
    """One API request's context, language and bearer token's learner (a token is required)."""

    ctx: Context
    lang: Lang
    learner: LearnerRef


def bearer_credentials(request: Request) -> HTTPAuthorizationCredentials | None:
    """What ``bearer_scheme`` reads (``Authorization: Bearer <token>``, else None), read directly:
    on the hot routes the scheme as a dependency of its own costs the framework more than the
    request's own work. Those routes document it with :data:`BEARER_SECURITY`."""
    scheme, token = get_authorization_scheme_param(request.headers.get("authorization"))
    if scheme.lower() != "bearer" or not token:
        return None
    return HTTPAuthorizationCredentials(scheme=scheme, credentials=token)


# ``openapi_extra`` of a route that reads the bearer token with bearer_credentials: required,
# or optional (``{}``: it answers without one too).
BEARER_SECURITY: dict[str, Any] = {"security": [{bearer_scheme.scheme_name: []}]}
OPTIONAL_BEARER: dict[str, Any] = {"security": [{}, {bearer_scheme.scheme_name: []}]}


async def get_api_call(request: Request, lang: LangQuery = None) -> ApiCall:
    """:func:`get_context`, :func:`api_lang` and :func:`get_optional_api_learner` at once."""
    ctx = await get_context(request)
    learner = await get_optional_api_learner(request)
    return ApiCall(ctx, await api_lang(request, lang), learner)


async def get_learner_call(request: Request, lang: LangQuery = None) -> LearnerCall:
    """:func:`get_context`, :func:`api_lang` and :func:`get_api_learner` at once."""
    ctx = await get_context(request)
    learner = await get_api_learner(request, bearer_credentials(request))
    return LearnerCall(ctx, await api_lang(request, lang), learner)


ApiCallDep = Annotated[ApiCall, Depends(get_api_call)]
LearnerCallDep = Annotated[LearnerCall, Depends(get_learner_call)]

# What get_api_call and get_learner_call read of the query, for the hot routes (app.routing).
LANG_VALUES = Values("query", lang=(LangQuery, None))


Call = TypeVar("Call", ApiCall, LearnerCall)


async def hot_call(
    get_call: Callable[[Request, Lang | None], Awaitable[Call]],
    request: Request,
    query: dict[str, str],
    errors: list[Any],
) -> Call | None:
    """``get_call`` (:func:`get_api_call` or :func:`get_learner_call`) for a hot route, as
    FastAPI resolves it: not called (None) when its values are invalid (``errors``)."""
    values = LANG_VALUES.read(query, errors)
    return await get_call(request, values["lang"]) if values else None


async def get_api_instructor(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Security(instructor_scheme)],
) -> LearnerRef:
    learner = await get_api_learner(request, credentials)
    if learner.role not in ("instructor", "admin"):
        raise Forbidden(Message("This needs an instructor account."), code="instructor_only")
    return learner


ApiInstructor = Annotated[LearnerRef, Depends(get_api_instructor)]


# --- web pages: the browser session -----------------------------------------------------------


@dataclass
class Visitor:
    """Who is looking at a page: the browser session, its learner (None for a new guest)."""

    browser: BrowserSession
    learner: LearnerRef | None
    lang: Lang
    csrf: CsrfSigner
    browser_time_zone: str | None = None  # the zone the browser reported (static/timezone.js)

    @property
    def time_zone(self) -> str:
        """The learner's time zone: the one they chose, else their browser's, else UTC."""
        if self.learner is not None and is_time_zone(self.learner.time_zone):
            return str(self.learner.time_zone)
        if is_time_zone(self.browser_time_zone):
            return str(self.browser_time_zone)
        return "UTC"

    @property
    def csrf_token(self) -> str:
        self.browser.used = True
        return self.csrf.token(self.browser.secret)

    @property
    def signed_in(self) -> bool:
        return self.learner is not None and self.learner.has_account


def look_up_visitor(request: Request, secret: str, now: datetime) -> KnownVisitor | None:
    offered = request.app.state.live_catalog.catalog.offered_templates  # as get_context finds it
    with request.app.state.lookups() as db:
        return visitor_for_web_session(db=db, secret=secret, now=now, offered=offered)


def look_up_learner(request: Request, secret: str) -> LearnerRef | None:
    with request.app.state.lookups() as db:
        return learner_for_web_session(db=db, secret=secret)


def show_visitor(request: Request, learner: LearnerRef | None, due: int | None = None) -> None:
    """What the page's navigation shows of its visitor (app.web.templating.render_page reads
    it): the learner, and the reviews due (None: not known, no count shown)."""
    request.state.visitor_learner = learner
    if learner is not None and due is not None:
        request.state.due_count = due


async def get_visitor(request: Request) -> Visitor:
    """The browser session's visitor. A page GET takes it from this process's memory when read
    there a few seconds ago (app.auth.visitors), else from the database in the threadpool; any
    other request reads its session there but not the reviews (a refusal it shows counts those
    this process last read for the browser: a form's request answers with a redirect)."""
    browser: BrowserSession = getattr(request.state, STATE_KEY)
    learner, due_count = None, None
    if not browser.is_new:
        now = request.app.state.context.clock()
        known = remembered_visitor(browser.secret, now)
        if request.method in READ_METHODS:
            if known is None:
                known = await run_in_threadpool(look_up_visitor, request, browser.secret, now)
                if known is not None:
                    remember_visitor(browser.secret, known)
            if known is not None:
                learner, due_count = known.learner, known.due_count
        else:
            learner = await run_in_threadpool(look_up_learner, request, browser.secret)
            if learner is not None and known is not None and known.learner.id == learner.id:
                due_count = known.due_count
    lang = choose_lang(
        request.query_params.get("lang"),
        request.cookies.get(LANG_COOKIE),
        request.headers.get("accept-language"),
    )
    request.state.page_lang = lang
    show_visitor(request, learner, due_count)
    return Visitor(
        browser=browser,
        learner=learner,
        lang=lang,
        csrf=request.app.state.csrf,
        browser_time_zone=request.cookies.get(TIME_ZONE_COOKIE),
    )


VisitorDep = Annotated[Visitor, Depends(get_visitor)]


async def get_instructor_visitor(visitor: VisitorDep) -> Visitor:
    """A signed-in instructor (or admin) on a dashboard page; 403 for everyone else (a visitor
    without an account asking for a page is sent to log in first: LoginRequired)."""
    if visitor.learner is None or not visitor.learner.has_account:
        raise LoginRequired(
            Message("This page is for instructors: log in with an instructor account."),
            code="instructor_only",
        )
    if visitor.learner.role not in ("instructor", "admin"):
        raise Forbidden(
            Message("This page is for instructors: log in with an instructor account."),
            code="instructor_only",
        )
    return visitor


InstructorVisitor = Annotated[Visitor, Depends(get_instructor_visitor)]
