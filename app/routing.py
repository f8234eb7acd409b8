"""Routes registered flat on the app.

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

from fastapi import APIRouter
from fastapi.routing import APIRoute


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
