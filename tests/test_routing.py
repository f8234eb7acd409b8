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


# --- plain-parameter routes -------------------------------------------------------------------

CARD = "zero-memory-offload"
PLAIN_GETS = [
    f"{API_PREFIX}/cards/{CARD}/points/1/question?seed=5",
    f"{API_PREFIX}/cards/{CARD}/points/optimizer-memory/question?seed=5&lang=zh",
    f"{API_PREFIX}/cards/{CARD}/question?seed=3",
    f"{API_PREFIX}/cards/{CARD}/question?seed=3&seed=4",
    f"{API_PREFIX}/cards/{CARD}/points/1/question?seed=abc",
    f"{API_PREFIX}/cards/{CARD}/points/1/question?seed=",
    f"{API_PREFIX}/cards/{CARD}/points/1/question?seed=-1",
    f"{API_PREFIX}/cards/{CARD}/points/1/question?seed=99999999999999",
    f"{API_PREFIX}/cards/{CARD}/points/1/question?lang=fr",
    f"{API_PREFIX}/cards/{CARD}/points/1/question?lang=fr&seed=abc",
    f"{API_PREFIX}/cards/{'x' * 101}/points/{'y' * 101}/question?seed=x&lang=x",
    f"{API_PREFIX}/cards/nope/points/1/question",
    f"{API_PREFIX}/cards/{CARD}/points/99/question?seed=1",
    f"{API_PREFIX}/cards/{CARD}/question?unknown=1&seed=7",
]


def _comparable(value):
    """A response body without what differs between two requests (tokens, times, ids)."""
    if isinstance(value, dict):
        return {
            k: _comparable(v)
            for k, v in value.items()
            if k not in ("token", "expires_at", "issued_at", "request_id")
        }
    if isinstance(value, list):
        return [_comparable(v) for v in value]
    return value


def test_plain_param_routes_answer_exactly_as_fastapi_s_own_handler(
    tmp_path, db_url, cards, monkeypatch
):
    """The question routes' own parameter handling (PlainParamsRoute) against FastAPI's handler
    for the same routes: the same status and body for good and bad values, absent, empty,
    repeated and unknown parameters, several errors at once, a bearer token or a bad one."""
    from conftest import make_settings
    from fastapi.testclient import TestClient

    import app.routing as routing
    from app.main import create_app

    plain_app = create_app(make_settings(tmp_path / "plain", db_url), cards=cards)
    plain = [r for r in plain_app.routes if isinstance(r, routing.PlainParamsRoute)]
    assert {r.path for r in plain if routing._plain_handler(r.dependant, r.endpoint)} == {
        f"{API_PREFIX}/cards/{{card_id}}/points/{{point}}/question",
        f"{API_PREFIX}/cards/{{card_id}}/question",
    }
    monkeypatch.setattr(routing, "_plain_handler", lambda dependant, endpoint: None)
    fastapi_app = create_app(make_settings(tmp_path / "fastapi", db_url), cards=cards)
    with TestClient(plain_app) as ours, TestClient(fastapi_app) as theirs:
        token = ours.post(f"{API_PREFIX}/learners").json()["token"]
        header_sets = [{}, {"Authorization": f"Bearer {token}"}, {"Authorization": "Bearer no"}]
        header_sets.append({"Authorization": "Basic x"})
        for headers in header_sets:
            for url in PLAIN_GETS:
                mine, reference = ours.get(url, headers=headers), theirs.get(url, headers=headers)
                assert mine.status_code == reference.status_code, (url, headers)
                if mine.status_code == 200 and "/points/" not in url:
                    # A random exam point (the seed picks the variant within it).
                    assert mine.json().keys() == reference.json().keys()
                    continue
                assert _comparable(mine.json()) == _comparable(reference.json()), (url, headers)
