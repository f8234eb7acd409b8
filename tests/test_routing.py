"""Routes registered flat (app.routing.include_flat) serve and document the API exactly as the
same routers included the framework's way would."""

import pytest
from fastapi import APIRouter, FastAPI
from fastapi.openapi.utils import get_openapi

from app.api.router import API_PREFIX, API_ROUTERS
from app.routing import include_flat
from app.web.routes import PAGE_ROUTERS


def _included() -> FastAPI:
    app = FastAPI()
    api = APIRouter(prefix=API_PREFIX)
    for router in API_ROUTERS:
        api.include_router(router)
    pages = APIRouter(include_in_schema=False)
    for router in PAGE_ROUTERS:
        pages.include_router(router)
    app.include_router(api)
    app.include_router(pages)
    return app


def _flat() -> FastAPI:
    app = FastAPI()
    for router in API_ROUTERS:
        include_flat(app.router, router, prefix=API_PREFIX)
    for router in PAGE_ROUTERS:
        include_flat(app.router, router, include_in_schema=False)
    return app


def _document(app: FastAPI) -> dict:
    return get_openapi(title="t", version="1", routes=app.routes)


def test_flat_routes_give_the_openapi_document_of_included_routers():
    included, flat = _document(_included()), _document(_flat())
    assert len(flat["paths"]) > 25
    assert flat == included


def test_flat_routes_are_every_route_of_every_router_with_its_prefix():
    flat = {(r.path, frozenset(r.methods), r.name) for r in _flat().routes}
    expected = {
        (API_PREFIX + r.path, frozenset(r.methods), r.name) for x in API_ROUTERS for r in x.routes
    } | {(r.path, frozenset(r.methods), r.name) for x in PAGE_ROUTERS for r in x.routes}
    default = {
        (r.path, frozenset(getattr(r, "methods", None) or ()), r.name) for r in FastAPI().routes
    }
    assert flat - default == expected


def test_a_router_that_includes_routers_is_refused():
    outer, inner = APIRouter(), APIRouter()

    @inner.get("/x")
    def x() -> dict[str, str]:
        return {}

    outer.include_router(inner)
    with pytest.raises(TypeError, match="path operations only"):
        include_flat(APIRouter(), outer)
