"""Every refusal is a 4xx: an RFC 9457 problem document on /api, a page in the page's language
elsewhere. Database trouble (overload, unreachable, timed out, full, read-only: see
:func:`app.db.failure_kind`) is a 503 with Retry-After; other database errors are bugs (500).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import DBAPIError, SQLAlchemyError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY
from starlette.responses import JSONResponse, RedirectResponse, Response

from app.auth.cookies import STATE_KEY, BrowserSession
from app.auth.visitors import remembered_visitor
from app.db import failure_kind, first_line
from app.db_errors import UnstorableText, WriteTimedOut
from app.deps import look_up_visitor, show_visitor
from app.domain.languages import choose_lang
from app.domain.messages import Message
from app.domain.texts import Text
from app.field_errors import field_problem
from app.problems import InvalidAnswer, LoginRequired, Problem, TooManyRequests, Unauthorized
from app.routing import BodyTooLarge
from app.web.templating import LANG_COOKIE, link, render_page

log = logging.getLogger(__name__)
API_PREFIX = "/api/"
_DASHBOARD_PAGE = re.compile(r"/instructor(?:/cards/([a-z0-9-]{1,100})(?:/|$))?")
PROBLEM_JSON = "application/problem+json"
STATUS_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_request",
    429: "rate_limited",
    503: "service_unavailable",
}
# A problem's title in the reader's language (RFC 9457 lets a title change for localisation
# alone); the English ones are the status phrases they were.
TITLES = {
    400: Message("Bad Request"),
    401: Message("Unauthorized"),
    403: Message("Forbidden"),
    404: Message("Not Found"),
    405: Message("Method Not Allowed"),
    409: Message("Conflict"),
    412: Message("Precondition Failed"),
    413: Message("Request Entity Too Large"),
    415: Message("Unsupported Media Type"),
    422: Message("Unprocessable Entity"),
    428: Message("Precondition Required"),
    429: Message("Too Many Requests"),
    500: Message("Internal Server Error"),
    503: Message("Service Unavailable"),
}
# The framework's own details of an API refusal (an unknown route, a method the route does not
# take, a body that is not JSON), in the reader's language.
FRAMEWORK_DETAILS = {
    "Not Found": TITLES[404],
    "Method Not Allowed": TITLES[405],
    "There was an error parsing the body": Message("There was an error parsing the body"),
}
PAGE_MESSAGES = {
    404: Message("There is no such page."),
    405: Message("That address cannot be used this way."),
    422: Message("Something in the address or the form is not right: go back and try again."),
}


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(Problem, _problem)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(PoolTimeout, _database_failure)  # type: ignore[arg-type]
    app.add_exception_handler(DBAPIError, _database_failure)  # type: ignore[arg-type]
    app.add_exception_handler(WriteTimedOut, _database_failure)  # type: ignore[arg-type]
    app.add_exception_handler(UnstorableText, _unstorable_text)  # type: ignore[arg-type]


def request_lang(request: Request) -> str:
    """The language of an error: the page's, else chosen as pages choose it."""
    page_lang = getattr(request.state, "page_lang", None)
    if page_lang and request.query_params.get("lang") is None:
        return str(page_lang)
    return choose_lang(
        request.query_params.get("lang"),
        request.cookies.get(LANG_COOKIE),
        request.headers.get("accept-language"),
    )


def error_response(
    request: Request,
    status_code: int,
    message: Text,
    *,
    code: str | None = None,
    headers: Mapping[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> Response:
    lang = request_lang(request)
    if request.url.path.startswith(API_PREFIX) or request.url.path.startswith("/openapi"):
        body = {
            "type": "about:blank",
            "title": TITLES[status_code].get(lang)
            if status_code in TITLES
            else _title(status_code),
            "status": status_code,
            "code": code or STATUS_CODES.get(status_code, "error"),
            "detail": message.get(lang),
            **(extra or {}),
        }
        return JSONResponse(body, status_code, headers=headers, media_type=PROBLEM_JSON)
    if status_code != 503:  # the database's own trouble: not asked again
        _read_visitor(request)
    # On the dashboard, the way back is to the card or the dashboard (for an instructor: the
    # page checks the role), not to the learners' cards.
    dashboard = _DASHBOARD_PAGE.match(request.url.path)
    response = render_page(
        request,
        "error.html",
        {
            "status_code": status_code,
            "message": message.get(lang),
            "dashboard": dashboard is not None,
            "dashboard_card": dashboard.group(1) if dashboard and status_code != 404 else None,
        },
        lang=lang,
        status_code=status_code,
    )
    if headers:
        response.headers.update(headers)
    return response


def _read_visitor(request: Request) -> None:
    """Who is looking, for the navigation of an error page answered before any route read it
    (an unknown address, a body over its limit): a signed-in learner's page must not offer
    "Log in". Blocking: call it from the threadpool. Unknown (a guest's navigation) when the
    database cannot say."""
    if hasattr(request.state, "visitor_learner"):
        return
    browser: BrowserSession | None = getattr(request.state, STATE_KEY, None)
    known = None
    if browser is not None and not browser.is_new:
        now = request.app.state.context.clock()
        try:
            known = remembered_visitor(browser.secret, now) or look_up_visitor(
                request, browser.secret, now
            )
        except SQLAlchemyError:
            known = None
    if known is None:
        show_visitor(request, None)
    else:
        show_visitor(request, known.learner, known.due_count)


def problem_response(status_code: int, code: str, detail: str) -> JSONResponse:
    """A problem document in English, for answers made outside the app's handlers (the
    middlewares: ``/metrics``, a refused host, a server that did not start, a 500)."""
    return JSONResponse(
        {
            "type": "about:blank",
            "title": _title(status_code),
            "status": status_code,
            "code": code,
            "detail": detail,
        },
        status_code,
        media_type=PROBLEM_JSON,
    )


def too_large_response(request: Request, limit: int) -> Response:
    """The 413 of a body over the route's limit: the limit in the text and in ``limit_bytes``;
    the connection closed (the rest of the body is not read)."""
    message = Message(
        "The request body is too large. The limit here is %(size)s (%(limit)s bytes).",
        size=binary_size(limit),
        limit=limit,
    )
    return error_response(
        request,
        413,
        message,
        code="payload_too_large",
        headers={"Connection": "close"},
        extra={"limit_bytes": limit},
    )


def binary_size(count: int) -> str:
    """A byte count as request limits are set, in whole MiB or KiB where it is one: 4 MiB."""
    for unit, scale in (("MiB", 1024 * 1024), ("KiB", 1024)):
        if count >= scale and count % scale == 0:
            return f"{count // scale} {unit}"
    return f"{count} B"


def _title(status_code: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status_code).phrase
    except ValueError:
        return "Error"


def _problem(request: Request, exc: Problem) -> Response:
    if (
        isinstance(exc, LoginRequired)
        and request.method in ("GET", "HEAD")
        and not request.url.path.startswith(API_PREFIX)
    ):
        return _to_login(request)
    headers: dict[str, str] = {}
    if isinstance(exc, Unauthorized):
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(exc, TooManyRequests):
        headers["Retry-After"] = str(exc.retry_after_s)
    extra = dict(exc.members) or None
    if getattr(exc, "problems", None) is not None:  # a card that cannot be published
        extra = {"problems": [p.to_json() for p in exc.problems]}  # type: ignore[attr-defined]
    if isinstance(exc, InvalidAnswer):  # the field at fault, for the app to point at
        extra = {"field": exc.field}
    return error_response(
        request, exc.status_code, exc.text, code=exc.code, headers=headers, extra=extra
    )


def _to_login(request: Request) -> Response:
    """The login page, which comes back to the page asked for once the visitor is in."""
    back = request.url.path
    query = [(k, v) for k, v in request.query_params.multi_items() if k != "lang"]
    if query:
        back += "?" + urlencode(query)
    return RedirectResponse(link("/login", request_lang(request), next=back), status_code=303)


def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    if exc.status_code < 400:  # pragma: no cover - not raised by this app
        return Response(status_code=exc.status_code, headers=exc.headers)
    limit = (
        exc.limit if isinstance(exc, BodyTooLarge) else request.scope.get(MAX_BODY_SIZE_SCOPE_KEY)
    )
    if exc.status_code == 413 and limit is not None:  # the framework's body limit
        return too_large_response(request, limit)
    message = PAGE_MESSAGES.get(exc.status_code)
    if message is None or request.url.path.startswith(API_PREFIX):
        message = FRAMEWORK_DETAILS.get(str(exc.detail)) or Text.verbatim(str(exc.detail))
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        allowed = allowed_methods(request.app, request.url.path)
        if allowed:
            headers["Allow"] = ", ".join(allowed)
    return error_response(request, exc.status_code, message, headers=headers)


def allowed_methods(app: FastAPI, path: str) -> list[str]:
    """Every method the API describes for ``path`` (routing reports only the first route's)."""
    patterns = getattr(app.state, "allow_patterns", None)
    if patterns is None:
        patterns = []
        for template, operations in app.openapi().get("paths", {}).items():
            regex = "^" + re.sub(r"\\{[^/]+?\\}", "[^/]+", re.escape(template)) + "$"
            methods = {m.upper() for m in operations}
            if "GET" in methods:
                methods.add("HEAD")  # answered as its GET (app.observability.request_context)
            patterns.append((re.compile(regex), sorted(methods)))
        app.state.allow_patterns = patterns
    for regex, methods in patterns:
        if regex.match(path):
            return methods
    return []


BUSY = Message("The service is busy: retry in a moment.")
DATABASE_DOWN = Message("The service cannot reach its database just now: retry in a moment.")


def _database_failure(request: Request, exc: Exception) -> Response:
    """Database trouble: 503 with Retry-After (``busy`` or ``database_unavailable``).

    Other database errors (an integrity or programming error) are bugs: re-raised, a 500.
    """
    kind = failure_kind(exc)
    if kind is None:
        raise exc
    log.warning(
        "database failure (%s) on %s %s: %s",
        kind,
        request.method,
        request.url.path,
        first_line(exc),
    )
    settings = getattr(request.app.state, "settings", None)
    retry_after = str(getattr(settings, "db_retry_after_s", 1))
    busy = kind == "busy"
    return error_response(
        request,
        503,
        BUSY if busy else DATABASE_DOWN,
        code="busy" if busy else "database_unavailable",
        headers={"Retry-After": retry_after},
        extra={"reason": kind},
    )


UNSTORABLE = Message(
    "The text sent holds a character that cannot be stored (a NUL or an unpaired surrogate): "
    "remove it and send it again."
)


def _unstorable_text(request: Request, exc: UnstorableText) -> Response:
    """Text no database stores reached a statement: the request's fault, a 422."""
    return error_response(request, 422, UNSTORABLE, code="unstorable_text")


def _validation_error(request: Request, exc: RequestValidationError) -> Response:
    if not request.url.path.startswith(API_PREFIX):
        return error_response(request, 422, PAGE_MESSAGES[422], code="invalid_request")
    lang = request_lang(request)
    problems = [_item(error, lang) for error in exc.errors()]
    listed = "; ".join(p["message"] for p in problems[:5])
    message = (
        Message("invalid request: %(problems)s", problems=listed)
        if len(problems) <= 5
        else Message(
            "invalid request: %(problems)s (and %(more)s more)",
            problems=listed,
            more=len(problems) - 5,
        )
    )
    return error_response(request, 422, message, code="invalid_request", extra={"errors": problems})


def _item(error: dict[str, Any], lang: str) -> dict[str, Any]:
    return {
        "loc": [str(part) for part in error.get("loc", ())],
        "type": str(error.get("type", "")),
        "message": field_problem(error, lang),
    }
