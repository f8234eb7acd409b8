"""Every refusal is a 4xx with a message: JSON ``{"detail": ...}`` on /api, a page elsewhere."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse, Response

from app.services.errors import ServiceError, Unauthorized
from app.web.templating import pick_lang, render_page

API_PREFIX = "/api/"


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ServiceError, _service_error)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http_error)  # type: ignore[arg-type]
    app.add_exception_handler(RequestValidationError, _validation_error)  # type: ignore[arg-type]
    app.add_exception_handler(PoolTimeout, _busy)  # type: ignore[arg-type]
    app.add_exception_handler(OperationalError, _busy)  # type: ignore[arg-type]


def error_response(
    request: Request,
    status_code: int,
    message: str,
    *,
    headers: Mapping[str, str] | None = None,
    extra: dict[str, Any] | None = None,
) -> Response:
    if request.url.path.startswith(API_PREFIX) or request.url.path.startswith("/openapi"):
        return JSONResponse({"detail": message, **(extra or {})}, status_code, headers=headers)
    response = render_page(
        request,
        "error.html",
        {"status_code": status_code, "message": message},
        lang=pick_lang(request.query_params.get("lang")),
        status_code=status_code,
    )
    if headers:
        response.headers.update(headers)
    return response


def _service_error(request: Request, exc: ServiceError) -> Response:
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(exc, Unauthorized) else None
    return error_response(request, exc.status_code, exc.message, headers=headers)


def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
    if exc.status_code < 400:  # pragma: no cover - not raised by this app
        return Response(status_code=exc.status_code, headers=exc.headers)
    return error_response(request, exc.status_code, str(exc.detail), headers=exc.headers)


def _busy(request: Request, exc: Exception) -> Response:
    """Overload (no free database connection, SQLite busy past its timeout): 503, retry later.

    Other database errors are not the client's fault either, but they are bugs: re-raise them.
    """
    if isinstance(exc, OperationalError) and "locked" not in str(exc.orig).lower():
        raise exc
    return error_response(
        request, 503, "the service is busy: retry in a moment", headers={"Retry-After": "1"}
    )


def _validation_error(request: Request, exc: RequestValidationError) -> Response:
    problems = [_problem(error) for error in exc.errors()]
    message = "invalid request: " + "; ".join(p["message"] for p in problems[:5])
    if len(problems) > 5:
        message += f" (and {len(problems) - 5} more)"
    return error_response(request, 422, message, extra={"errors": problems})


def _problem(error: dict[str, Any]) -> dict[str, Any]:
    location = [str(part) for part in error.get("loc", ())]
    where = ".".join(location) or "request"
    return {
        "loc": location,
        "type": str(error.get("type", "")),
        "message": f"{where}: {error.get('msg', 'invalid')}",
    }
