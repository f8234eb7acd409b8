"""Routes registered flat on the app, and plain-parameter routes (:class:`PlainParamsRoute`).

Since FastAPI 0.137 ``include_router`` keeps each included router as a node of a route tree that
is walked, level by level, on every request (and again to hand the request over): with this
app's ~110 routes in two levels that cost ≈0.45 ms per request for a route near the end (measured
in-process: ``/healthz`` 0.60 ms nested against 0.1 ms flat). :func:`include_flat` registers a
router's routes directly on the app's router instead, as ``include_router`` did before 0.137:
each route is re-created with the prefix, the router's settings baked in by its own
``add_api_route`` (tags, dependencies, responses) and everything else copied. The OpenAPI
document is the same either way (tests/test_routing.py).
"""

from __future__ import annotations

import email.message
import functools
import inspect
import json
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, get_type_hints
from urllib.parse import parse_qsl

from fastapi import APIRouter, FastAPI
from fastapi import params as fastapi_params
from fastapi._body_limit import get_body_limit_error
from fastapi._compat import ModelField, Undefined, field_annotation_is_sequence, lenient_issubclass
from fastapi.datastructures import DefaultPlaceholder
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import (
    _get_param_aliases,
    _validate_value_with_model_field,
    request_body_to_args,
)
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute, _effective_route_context_var, _update_scope
from fastapi.telemetry._api import _route_selected
from pydantic import BaseModel, ValidationError
from starlette._exception_handler import wrap_app_handling_exceptions
from starlette.convertors import PathConvertor
from starlette.exceptions import HTTPException
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY
from starlette.middleware.exceptions import ExceptionMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Match, Mount, Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send


def include_flat(
    target: APIRouter, router: APIRouter, *, prefix: str = "", include_in_schema: bool = True
) -> None:
    """Register every route of ``router`` (which includes no router itself) on ``target``."""
    for route in router.routes:
        if not isinstance(route, APIRoute):
            raise TypeError(
                f"include_flat takes routers of path operations only, not {type(route).__name__}"
            )
        target.add_api_route(
            prefix + route.path,
            route.endpoint,
            response_model=route.response_model,
            status_code=route.status_code,
            tags=list(route.tags),
            dependencies=list(route.dependencies),
            summary=route.summary,
            description=route.description,
            response_description=route.response_description,
            responses=dict(route.responses),
            deprecated=route.deprecated,
            methods=route.methods,
            operation_id=route.operation_id,
            response_model_include=route.response_model_include,
            response_model_exclude=route.response_model_exclude,
            response_model_by_alias=route.response_model_by_alias,
            response_model_exclude_unset=route.response_model_exclude_unset,
            response_model_exclude_defaults=route.response_model_exclude_defaults,
            response_model_exclude_none=route.response_model_exclude_none,
            include_in_schema=route.include_in_schema and include_in_schema,
            response_class=route.response_class,
            name=route.name,
            route_class_override=type(route),
            callbacks=route.callbacks,
            openapi_extra=route.openapi_extra,
            generate_unique_id_function=route.generate_unique_id_function,
            strict_content_type=route.strict_content_type,
        )


# --- plain-parameter routes -------------------------------------------------------------------

# Request-level dependencies a PlainParamsRoute may take: ``async def f(request, **query)``.
PLAIN_DEPENDENCIES: set[Callable[..., Any]] = set()


def plain_dependency(call: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``call`` (``async def call(request, <plain query parameters>)``) as a dependency a
    :class:`PlainParamsRoute` resolves itself."""
    PLAIN_DEPENDENCIES.add(call)
    return call


# Defaults FastAPI's deepcopy hands back as they are (``copy``'s atomic types).
_ATOMIC_DEFAULTS = (type(None), bool, int, float, str)


@dataclass(frozen=True)
class _Param:
    field: ModelField
    alias: str  # the path or query key
    where: str  # "path" or "query"

    @functools.cached_property
    def core(self) -> Callable[..., Any] | None:
        """The field's pydantic-core ``validate_python``: what ``ModelField.validate`` ends in,
        through two Python layers that cost four times the validation itself (None when the
        field is not FastAPI's pydantic-2 ModelField: FastAPI's own path then)."""
        adapter = getattr(self.field, "_type_adapter", None)
        validator = getattr(adapter, "validator", None)
        return getattr(validator, "validate_python", None)

    @functools.cached_property
    def plain_default(self) -> tuple[bool, Any]:
        """(True, the default) when a missing value is the default, unvalidated and not
        copied (an atomic one, which FastAPI's deepcopy returns as it is); (False, None) when
        FastAPI decides (a required value, a default to copy or validate)."""
        info = self.field.field_info
        default = self.field.default
        if info.is_required() or info.validate_default or type(default) not in _ATOMIC_DEFAULTS:
            return False, None
        return True, default


def _plain_params(dependant: Dependant, *, body: bool = False) -> list[_Param] | None:
    """A dependant's path and query parameters, when it has nothing else FastAPI resolves (but
    a JSON body, when ``body``)."""
    if (
        dependant.header_params
        or dependant.cookie_params
        or (dependant.body_params and not body)
        or dependant.websocket_param_name
        or dependant.http_connection_param_name
        or dependant.response_param_name
        or dependant.background_tasks_param_name
        or dependant.security_scopes_param_name
        or dependant.own_oauth_scopes
    ):
        return None
    found = []
    for where, fields in (("path", dependant.path_params), ("query", dependant.query_params)):
        for field in fields:
            aliases = _get_param_aliases(field)
            if (
                len(aliases) != 1
                or field_annotation_is_sequence(field.field_info.annotation)
                or lenient_issubclass(field.field_info.annotation, BaseModel)
            ):
                return None
            found.append(_Param(field, aliases[0][1], where))
    return found


class PlainParamsRoute(APIRoute):
    """A route whose endpoint is ``async``, returns a ``Response`` and takes only plain path and
    query values, a JSON body, the request and :func:`plain_dependency` functions: its values
    are validated here and the endpoint called directly.

    FastAPI 0.165's dependency solver re-inspects every parameter's annotation on every request
    (≈0.1 ms of a question GET's 0.37 ms in process; on the answer POST as much as the route's
    own work). The validation is FastAPI's own, field by field (``ModelField.validate``, missing
    values and defaults as FastAPI treats them; the body through ``request_body_to_args``, read
    by FastAPI's rules: :func:`_read_body`), so the 422s are the same
    ``RequestValidationError`` (tests/test_routing.py compares both handlers); the OpenAPI
    document is FastAPI's own, from the unchanged signature. Any other route, a route included
    with ``include_router`` (not :func:`include_flat`: the inclusion's settings live in a
    context only FastAPI's handler applies) and any request while ``dependency_overrides`` are
    set get FastAPI's handler."""

    # The handler DirectRoutes calls (None where FastAPI's handler serves the route).
    plain_handler: Callable[[Request], Coroutine[Any, Any, Response]] | None = None

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        fastapi_handler = super().get_route_handler()
        effective = _effective_route_context_var.get()
        if effective is not None and effective.original_route is self:
            return fastapi_handler
        handler = _plain_handler(self)
        if handler is None:
            return fastapi_handler
        self.plain_handler = handler  # served directly by DirectRoutes where it can be
        provider = self.dependency_overrides_provider

        async def handle(request: Request) -> Response:
            if getattr(provider, "dependency_overrides", None):
                return await fastapi_handler(request)
            return await handler(request)

        return handle


async def _read_body(request: Request, strict_content_type: bool) -> Any:
    """The body as FastAPI 0.165 reads a non-form body (fastapi.routing.get_request_handler):
    JSON when the content type says so (or, not strict, says nothing), the raw bytes otherwise,
    ``Undefined`` when empty; undecodable JSON is a ``json_invalid`` validation error at its
    position, a body over FastAPI's limit its limit error, any other failure a 400."""
    try:
        body_bytes = await request.body()
        if not body_bytes:
            return Undefined
        content_type = request.headers.get("content-type")
        if not content_type:
            return body_bytes if strict_content_type else await request.json()
        if _is_json_content_type(content_type):
            return await request.json()
        return body_bytes
    except json.JSONDecodeError as exc:
        error = {
            "type": "json_invalid",
            "loc": ("body", exc.pos),
            "msg": "JSON decode error",
            "input": {},
            "ctx": {"error": exc.msg},
        }
        raise RequestValidationError([error], body=exc.doc) from exc
    except HTTPException:
        raise
    except Exception as exc:
        if MAX_BODY_SIZE_SCOPE_KEY in request.scope and (limit := get_body_limit_error(exc)):
            raise limit from exc
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from exc


@functools.lru_cache(maxsize=64)
def _is_json_content_type(content_type: str) -> bool:
    """FastAPI's test, through ``email.message`` as it does it (a tenth of an answer POST's
    body handling), remembered per distinct header value: clients send a handful."""
    message = email.message.Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def query_values(query_string: bytes) -> dict[str, str]:
    """A query string's values as ``request.query_params.get`` gives them (Starlette's
    QueryParams: ``parse_qsl`` of its Latin-1 text, blank values kept, the last of a repeated
    name), without building the multi-dict."""
    if not query_string:
        return {}
    return dict(parse_qsl(query_string.decode("latin-1"), keep_blank_values=True))


def _plain_handler(route: APIRoute) -> Callable[[Request], Coroutine[Any, Any, Response]] | None:
    dependant, endpoint = route.dependant, route.endpoint
    if not inspect.iscoroutinefunction(endpoint):
        return None
    body_fields = list(dependant.body_params)
    if body_fields and (
        route.body_field is None
        or any(isinstance(field.field_info, fastapi_params.Form) for field in body_fields)
        or isinstance(route.body_field.field_info, fastapi_params.Form)
    ):
        return None  # forms and files: FastAPI's handler
    strict = route.strict_content_type
    strict_content_type = bool(strict.value if isinstance(strict, DefaultPlaceholder) else strict)
    embed_body_fields = route._embed_body_fields
    try:
        returns = get_type_hints(endpoint).get("return")
    except Exception:  # noqa: BLE001 - an annotation that does not resolve: FastAPI's handler
        return None
    if not (isinstance(returns, type) and issubclass(returns, Response)):
        return None
    own = _plain_params(dependant, body=True)
    if own is None:
        return None
    dependencies = []
    for sub in dependant.dependencies:
        params = _plain_params(sub)
        if (
            sub.call not in PLAIN_DEPENDENCIES
            or params is None
            or sub.dependencies
            or sub.request_param_name is None
            or any(p.where != "query" for p in params)
            or sub.name is None
        ):
            return None
        dependencies.append((sub.name, sub.call, sub.request_param_name, params))
    request_name = dependant.request_param_name

    def validate(
        params: list[_Param],
        request: Request,
        query: dict[str, str],
        values: dict[str, Any],
        errors: list[Any],
    ) -> None:
        for param in params:
            source = request.path_params if param.where == "path" else query
            raw = source.get(param.alias, None)
            # The common cases first, with FastAPI's outcome: a value pydantic accepts, a
            # missing one with a plain default. Everything else (every error) FastAPI's way.
            if raw is None:
                plain, default = param.plain_default
                if plain:
                    values[param.field.name] = default
                    continue
            elif (core := param.core) is not None:
                try:
                    values[param.field.name] = core(raw, from_attributes=True)
                    continue
                except ValidationError:
                    pass
            value, found = _validate_value_with_model_field(
                field=param.field,
                value=Undefined if raw is None else raw,
                values=values,
                loc=(param.where, param.alias),
            )
            if found:
                errors.extend(found)
            else:
                values[param.field.name] = value

    async def handler(request: Request) -> Response:
        # FastAPI's order: the body read, then the dependencies called, then the parameters
        # and the body validated; the errors of all at once.
        body = await _read_body(request, strict_content_type) if body_fields else Undefined
        query = query_values(request.scope["query_string"])
        errors: list[Any] = []
        kwargs: dict[str, Any] = {}
        for name, call, request_param, params in dependencies:
            values: dict[str, Any] = {}
            before = len(errors)
            validate(params, request, query, values, errors)
            if len(errors) == before:
                kwargs[name] = await call(**{request_param: request}, **values)
        validate(own, request, query, kwargs, errors)
        if body_fields:
            body_values, body_errors = await request_body_to_args(
                body_fields=body_fields, received_body=body, embed_body_fields=embed_body_fields
            )
            kwargs.update(body_values)
            errors.extend(body_errors)
        if errors:
            raise RequestValidationError(errors, body=None if body is Undefined else body)
        if request_name is not None:
            kwargs[request_name] = request
        response: Response = await endpoint(**kwargs)
        return response

    return handler


# --- plain routes served directly -------------------------------------------------------------


def _path_segments(route: Route) -> list[str | None] | None:
    """A route's segments, each a literal or ``None`` (a parameter, or a segment holding one);
    None for a route whose parameters may span segments (a ``path`` parameter)."""
    if any(isinstance(c, PathConvertor) for c in route.param_convertors.values()):
        return None
    return [None if "{" in part else part for part in route.path_format.split("/")]


def may_share_a_path(earlier: BaseRoute, route: APIRoute) -> bool:
    """Whether some request path could be matched by both ``earlier`` and ``route`` (True when
    unsure): only a route for which this is False for every route before it is served
    directly, so that the router's first-match order decides nothing that way."""
    if isinstance(earlier, WebSocketRoute):
        return False  # matches websocket requests only
    if isinstance(earlier, Mount):
        prefix = earlier.path
        path = route.path_format
        return "{" in prefix or path == prefix or path.startswith(prefix + "/")
    if not isinstance(earlier, Route):
        return True
    mine, theirs = _path_segments(route), _path_segments(earlier)
    if mine is None or theirs is None:
        return True
    if len(mine) != len(theirs):
        return False
    return all(a is None or b is None or a == b for a, b in zip(mine, theirs, strict=True))


class DirectRoutes:
    """The innermost middleware: a request for a :class:`PlainParamsRoute` that no earlier route
    could take goes straight to the route's handler, past FastAPI's router walk, its per-request
    wrapper (a Request, two exit stacks, a second exception wrapper) and its exit-stack
    middleware; everything else goes on to the app as before.

    The same rules apply either way: the route matches with its own ``matches`` (method and
    path, the path parameters converted by its convertors), the scope gets what the router
    would put there (router, route, endpoint, path parameters), the route's plain handler
    answers, and an exception goes to the app's exception handlers by Starlette's own code, with
    the handler tables of an ExceptionMiddleware built from the app's handlers as FastAPI builds
    it (see :meth:`_serve`). A route taken with
    ``include_router`` and any request while ``dependency_overrides`` are set are left to
    FastAPI. The routes served directly are worked out on the first request, and again
    whenever the app's number of routes has changed since.
    """

    def __init__(self, app: ASGIApp, *, fastapi_app: FastAPI) -> None:
        self.app = app
        self.fastapi_app = fastapi_app
        # (the route's literal prefix, the route, its handler)
        self.routes: tuple[tuple[str, PlainParamsRoute, Callable[..., Any]], ...] | None = None
        self._route_count = -1
        handlers = {
            key: value
            for key, value in fastapi_app.exception_handlers.items()
            if key not in (500, Exception)
        }
        # The handler tables, split by status code and class as Starlette's ExceptionMiddleware
        # splits them (it is built here for that only): what _serve puts on every scope.
        handling = ExceptionMiddleware(self._serve, handlers=handlers, debug=fastapi_app.debug)
        self._exception_tables = (handling._exception_handlers, handling._status_handlers)
        fastapi_app.state.direct_routes = self

    def direct_routes(self) -> tuple[tuple[str, PlainParamsRoute, Callable[..., Any]], ...]:
        """The routes served directly: each with its literal prefix and its plain handler."""
        routes = self.fastapi_app.router.routes
        if self.routes is None or self._route_count != len(routes):
            found = []
            for index, route in enumerate(routes):
                handler = getattr(route, "plain_handler", None)
                if not isinstance(route, PlainParamsRoute) or handler is None:
                    continue
                if any(may_share_a_path(earlier, route) for earlier in routes[:index]):
                    continue
                found.append((route.path_format.partition("{")[0], route, handler))
            self.routes, self._route_count = tuple(found), len(routes)
        return self.routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self.fastapi_app.dependency_overrides:
            path = scope["path"]
            for prefix, route, handler in self.direct_routes():
                if not path.startswith(prefix):
                    continue  # (behind a root_path the router decides)
                match, child_scope = route.matches(scope)
                if match is Match.FULL:
                    _update_scope(scope, child_scope)
                    if "router" not in scope:
                        scope["router"] = self.fastapi_app.router
                    _route_selected(scope=scope, path=route.path_format)
                    scope[_DIRECT_HANDLER] = handler
                    await self._serve(scope, receive, send)
                    return
                if match is not Match.NONE:
                    break  # a method the route lacks: the router's 405
        await self.app(scope, receive, send)

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The handler's response; an exception it raised goes to the app's handlers through
        Starlette's own wrapper (``wrap_app_handling_exceptions``: the handler looked up by
        status code and class, a sync one run in the threadpool), as ExceptionMiddleware would
        send it. The wrapper itself is left out of the usual path: a plain handler only builds
        its response, so nothing has been sent when it raises, and the wrapper's per-request
        closures cost a question GET about 3 % of its time."""
        scope["starlette.exception_handlers"] = self._exception_tables
        request = Request(scope, receive, send)
        try:
            response: Response = await scope.pop(_DIRECT_HANDLER)(request)
        except Exception as exc:  # noqa: BLE001 - answered by the app's handler, or re-raised
            await wrap_app_handling_exceptions(_raising(exc), request)(scope, receive, send)
            return
        await response(scope, receive, send)


def _raising(exc: Exception) -> ASGIApp:
    """An ASGI app that raises ``exc``: what Starlette's exception wrapper is given to answer."""

    async def app(_scope: Scope, _receive: Receive, _send: Send) -> None:
        raise exc

    return app


_DIRECT_HANDLER = "infracards.direct_handler"
