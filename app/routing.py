"""Routes registered flat on the app (:func:`include_flat`), and the hot routes served as plain
Starlette routes ahead of FastAPI's (:class:`HotRoute`).

Since FastAPI 0.137 ``include_router`` keeps each included router as a node of a route tree that
is walked, level by level, on every request (and again to hand the request over): with this
app's ~110 routes in two levels that cost ≈0.45 ms per request for a route near the end (measured
in-process: ``/healthz`` 0.60 ms nested against 0.1 ms flat). :func:`include_flat` registers a
router's routes directly on the app's router instead, through ``add_api_route``.

The hot routes (a question, an answer) are plain Starlette routes placed first: FastAPI's
dependency solver costs a question GET about as much again as the question itself (callgrind:
1,138k instructions through FastAPI as written, 584k as a Starlette route). Each is documented
by the FastAPI path operation of the same method and path, registered after it (so never
reached while the hot route is there) and calling the same function; its values are read and
validated here as FastAPI reads and validates them, from the same annotations, so a client sees
the same statuses and problem documents either way (tests/test_routing.py compares both over
good and bad requests). Public APIs of Starlette, FastAPI and pydantic only.
"""

from __future__ import annotations

import email.message
import functools
import json
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from typing import Any, Literal, Required, TypeVar
from urllib.parse import parse_qsl

from fastapi import APIRouter
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute
from pydantic import BaseModel, TypeAdapter, ValidationError, create_model
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.body_limit import MAX_BODY_SIZE_SCOPE_KEY, RequestBodyLimitMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match, Route
from starlette.types import Receive, Scope, Send
from typing_extensions import TypedDict

M = TypeVar("M", bound=BaseModel)
# The largest body a route at a path (its template) takes for its methods; None: no limit.
BodyLimit = Callable[[str, Collection[str]], int | None]


def include_flat(
    target: APIRouter,
    router: APIRouter,
    *,
    prefix: str = "",
    include_in_schema: bool = True,
    body_limit: BodyLimit | None = None,
) -> None:
    """Register every route of ``router`` (which includes no router itself) on ``target``.

    A route's ``max_body_size`` is its own if its path operation declares one, else
    ``body_limit(path, methods)`` (app.observability.guards.BodyLimits), else none.

    The routes registered are made once per process for each router, prefix, body limit and
    set of ``target``'s route defaults, and shared by every router that includes them alike:
    making a path operation (its dependant, its models' validators) is most of the cost of
    making an app, about 0.2 s for this app's routes, paid again by every app a process makes
    (each test's). A route holds nothing of the app it serves: the app comes with each request.
    What it cannot see is an app's ``dependency_overrides`` (FastAPI reads them from the router
    a route was made on); this app sets none."""
    defaults = {name: getattr(target, name) for name in _ROUTE_DEFAULTS}
    made = _FLAT_ROUTES.setdefault((id(router), prefix, include_in_schema, body_limit), [])
    routes = next((r for of, with_, r in made if of is router and with_ == defaults), None)
    if routes is None:
        routes = _flat_routes(APIRouter(**defaults), router, prefix, include_in_schema, body_limit)
        made.append((router, defaults, routes))  # the router kept: its id is not reused
    target.routes.extend(routes)


# What APIRouter.add_api_route takes from the router it registers a route on.
_ROUTE_DEFAULTS = (
    "prefix", "tags", "dependencies", "default_response_class", "responses", "callbacks",
    "route_class", "deprecated", "include_in_schema", "generate_unique_id_function",
    "strict_content_type", "max_body_size",
)  # fmt: skip
# (id of the router, prefix, include_in_schema, body limit) ->
# [(the router, the target's route defaults, the routes made)]
_FLAT_ROUTES: dict[
    tuple[Any, ...], list[tuple[APIRouter, dict[str, Any], tuple[APIRoute, ...]]]
] = {}


def _flat_routes(
    holder: APIRouter,
    router: APIRouter,
    prefix: str,
    include_in_schema: bool,
    body_limit: BodyLimit | None,
) -> tuple[APIRoute, ...]:
    """``router``'s routes made on ``holder`` (a router with the target's route defaults)."""
    for route in router.routes:
        if not isinstance(route, APIRoute):
            raise TypeError(
                f"include_flat takes routers of path operations only, not {type(route).__name__}"
            )
        max_body_size = route.max_body_size
        if max_body_size is None and body_limit is not None:
            max_body_size = body_limit(prefix + route.path, route.methods or ())
        holder.add_api_route(
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
            max_body_size=max_body_size,
        )
    return tuple(route for route in holder.routes if isinstance(route, APIRoute))


# --- hot routes ---------------------------------------------------------------------------------


class HotRoute(Route):
    """A plain Starlette route for a GET or POST documented by the FastAPI path operation of the
    same method and path (``documented_by``, its endpoint's name): it is left out of the OpenAPI
    document and served first. Its body limit (``max_body_size``) is Starlette's
    ``RequestBodyLimitMiddleware``, the one FastAPI's per-route limit is made of.

    Its endpoint is served as an ASGI app (Starlette's route takes one as it is): the request
    made, the response sent; an exception it raises goes on to the app's ExceptionMiddleware,
    which answers it with the app's handlers as it answers every other route's, without the
    second exception wrapper Starlette puts around a function endpoint."""

    def __init__(
        self,
        path: str,
        endpoint: Callable[[Request], Awaitable[Response]],
        *,
        method: Literal["GET", "POST"],
        documented_by: str,
        max_body_size: int | None = None,
    ) -> None:
        limit = (
            None
            if max_body_size is None
            else [Middleware(RequestBodyLimitMiddleware, max_body_size=max_body_size)]
        )
        super().__init__(
            path,
            Endpoint(endpoint),
            methods=[method],
            name=f"{documented_by}_hot",
            middleware=limit,
        )
        self.methods = {method}  # not HEAD, which Starlette adds to a GET: FastAPI does not
        self.documented_by = documented_by
        self.call = endpoint
        self.max_body_size = max_body_size

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        match, child_scope = super().matches(scope)
        if match is not Match.NONE:
            child_scope["route"] = self  # as FastAPI's own routes do: logs and metrics read it
        return match, child_scope

    def with_prefix(self, prefix: str) -> HotRoute:
        return self._copy(prefix + self.path, self.max_body_size)

    def with_body_limit(self, body_limit: BodyLimit) -> HotRoute:
        """This route with the body limit ``body_limit`` gives its path and method."""
        return self._copy(self.path, body_limit(self.path, self.methods or ()))

    def _copy(self, path: str, max_body_size: int | None) -> HotRoute:
        (method,) = self.methods or ()
        return HotRoute(
            path,
            self.call,
            method=method,  # type: ignore[arg-type]
            documented_by=self.documented_by,
            max_body_size=max_body_size,
        )


class Endpoint:
    """``call(request) -> response`` as an ASGI app."""

    def __init__(self, call: Callable[[Request], Awaitable[Response]]) -> None:
        self.call = call

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = await self.call(Request(scope, receive, send))
        await response(scope, receive, send)


Where = Literal["path", "query"]


class Values:
    """The named path or query values of a route, validated by pydantic from the annotations the
    FastAPI path operation declares (``Annotated[int | None, Query(ge=0)]``), as FastAPI
    validates them: a missing value is its default, a repeated query name its last value, an
    error located ``(where, name)``."""

    def __init__(self, where: Where, **fields: tuple[Any, Any]) -> None:
        self.where = where
        self.fields = fields
        self.model: type[BaseModel] = create_model(  # type: ignore[call-overload]
            f"{where.title()}Values", **fields
        )

    def read(self, source: Mapping[str, str], errors: list[Any]) -> dict[str, Any]:
        """The validated values of ``source`` by name; {} with their errors added to
        ``errors``."""
        try:
            return vars(self.model.model_validate(source, from_attributes=True))
        except ValidationError as exc:
            errors.extend(located(exc, (self.where,)))
            return {}


class AllValues:
    """A route's values from several places at once (``{**query, **path}``: a path value wins
    over a query value of its name, as FastAPI reads only the path's), in one validation: what
    a request whose every value is valid costs. Where one is not, the route reads them again
    place by place (:meth:`Values.read`) for FastAPI's errors in FastAPI's order. Validated as
    a TypedDict (half the cost of a model): a value not sent is absent, read it with ``get``
    (the optional values here all default to None)."""

    def __init__(self, *parts: Values) -> None:
        fields = {
            name: annotation if default is None else Required[annotation]
            for part in parts
            for name, (annotation, default) in part.fields.items()
        }
        if any(default not in (None, ...) for p in parts for _, default in p.fields.values()):
            raise ValueError("AllValues takes values that are required or default to None")
        self.adapter: TypeAdapter[dict[str, Any]] = TypeAdapter(
            TypedDict("AllValues", fields, total=False)  # type: ignore[operator]
        )

    def valid(self, source: Mapping[str, str]) -> dict[str, Any] | None:
        """The validated values by name, or None when one is invalid."""
        try:
            return self.adapter.validate_python(source)
        except ValidationError:
            return None


def located(exc: ValidationError, prefix: tuple[str, ...]) -> list[dict[str, Any]]:
    """A pydantic error's items as FastAPI reports them: no URL, the location prefixed."""
    return [{**error, "loc": (*prefix, *error["loc"])} for error in exc.errors(include_url=False)]


def query_values(query_string: bytes) -> dict[str, str]:
    """A query string's values as ``request.query_params.get`` gives them (Starlette's
    QueryParams: ``parse_qsl`` of its Latin-1 text, blank values kept, the last of a repeated
    name), without building the multi-dict."""
    if not query_string:
        return {}
    text = query_string.decode("latin-1")
    if "%" in text or "+" in text:
        return dict(parse_qsl(text, keep_blank_values=True))
    # Nothing to unquote (``seed=5``): parse_qsl's split on "&" and first "=", without its
    # per-pair unquoting calls.
    values = {}
    for pair in text.split("&"):
        if pair:
            name, _, value = pair.partition("=")
            values[name] = value
    return values


class BodyTooLarge(HTTPException):
    """A body over the hot route's limit (``limit`` bytes), raised past the route's
    ``RequestBodyLimitMiddleware`` (which answers only its own exception, in plain text) to the
    app's handlers, which answer it as every other route's 413."""

    def __init__(self, limit: int | None) -> None:
        super().__init__(status_code=413)
        self.limit = limit


class Missing:
    """No body was sent (an empty one)."""


MISSING = Missing()


async def read_body(request: Request) -> Any:
    """A non-form body as FastAPI reads it with its strict content type (the default): JSON when
    the content type says so (``application/json`` or ``+json``), the raw bytes otherwise,
    :data:`MISSING` when empty. Undecodable JSON is a ``json_invalid`` validation error at its
    position; a body over the limit the limit's own 413; any other failure a 400."""
    try:
        body = await request.body()
        if not body:
            return MISSING
        content_type = request.headers.get("content-type")
        if content_type and is_json_content_type(content_type):
            return json.loads(body)
        return body
    except json.JSONDecodeError as exc:
        error = {
            "type": "json_invalid",
            "loc": ("body", exc.pos),
            "msg": "JSON decode error",
            "input": {},
            "ctx": {"error": exc.msg},
        }
        raise RequestValidationError([error], body=exc.doc) from exc
    except HTTPException as exc:
        if exc.status_code == 413:  # the route's body limit, which would answer in plain text
            raise BodyTooLarge(request.scope.get(MAX_BODY_SIZE_SCOPE_KEY)) from exc
        raise
    except Exception as exc:
        raise HTTPException(status_code=400, detail="There was an error parsing the body") from exc


@functools.lru_cache(maxsize=64)
def is_json_content_type(content_type: str) -> bool:
    """FastAPI's test, through ``email.message`` as it does it, remembered per distinct header
    value: clients send a handful."""
    message = email.message.Message()
    message["content-type"] = content_type
    if message.get_content_maintype() != "application":
        return False
    subtype = message.get_content_subtype()
    return subtype == "json" or subtype.endswith("+json")


def read_model(model: type[M], body: Any, errors: list[Any]) -> M | None:
    """``body`` validated as the route's one (not embedded) body model, as FastAPI does it: a
    missing body is a ``missing`` error at ``("body",)``."""
    if body is MISSING:
        errors.append({"type": "missing", "loc": ("body",), "msg": "Field required", "input": None})
        return None
    try:
        return model.model_validate(body, from_attributes=True)
    except ValidationError as exc:
        errors.extend(located(exc, ("body",)))
        return None


def refuse(errors: Sequence[Any], body: Any = MISSING) -> RequestValidationError:
    """The 422 of a request whose values failed validation."""
    return RequestValidationError(list(errors), body=None if body is MISSING else body)
