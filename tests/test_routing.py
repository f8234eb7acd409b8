"""Routes registered flat (app.routing.include_flat) serve and document the API exactly as the
same routers included the framework's way would."""

import json
import uuid

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
    assert {r.path for r in plain if routing._plain_handler(r)} == {
        f"{API_PREFIX}/cards/{{card_id}}/points/{{point}}/question",
        f"{API_PREFIX}/cards/{{card_id}}/question",
        f"{API_PREFIX}/answers",
    }
    monkeypatch.setattr(routing, "_plain_handler", lambda route: None)
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


def _answer_cases(question: dict, client_answer_id: str) -> list[tuple[str, dict]]:
    """(name, keyword arguments of ``client.post``) for one fresh question of one learner."""
    token = question["token"]
    first, second = (c["id"] for c in question["choices"][:2])
    good = {"token": token, "choice_id": first, "client_answer_id": client_answer_id}
    raw = json.dumps(good).encode()
    return [
        ("good", {"json": good}),
        ("good, another choice", {"json": {**good, "choice_id": second}}),
        ("good, zh", {"json": good, "params": {"lang": "zh"}}),
        ("unknown choice", {"json": {**good, "choice_id": "z"}}),
        ("extra fields", {"json": {**good, "extra": 1, "duration_ms": 1200}}),
        ("empty object", {"json": {}}),
        ("wrong types", {"json": {**good, "choice_id": 5, "duration_ms": "x"}}),
        ("bad time", {"json": {**good, "answered_at": "yesterday"}}),
        ("bad id", {"json": {**good, "client_answer_id": "not a valid id"}}),
        ("tampered token", {"json": {**good, "token": token[:-3] + "abc"}}),
        ("a list", {"json": [good]}),
        ("a string", {"json": "answer"}),
        ("null", {"content": b"null", "headers": {"Content-Type": "application/json"}}),
        ("broken JSON", {"content": raw[:-5], "headers": {"Content-Type": "application/json"}}),
        (
            "not UTF-8",
            {"content": b'{"a": "\xff\xfe"}', "headers": {"Content-Type": "application/json"}},
        ),
        ("empty body", {"content": b"", "headers": {"Content-Type": "application/json"}}),
        ("no body, no type", {}),
        ("JSON without a type", {"content": raw}),
        ("JSON as text", {"content": raw, "headers": {"Content-Type": "text/plain"}}),
        ("JSON+suffix type", {"content": raw, "headers": {"Content-Type": "application/x+json"}}),
        (
            "JSON with charset",
            {"content": raw, "headers": {"Content-Type": "application/json; charset=utf-8"}},
        ),
        (
            "form type",
            {
                "content": b"token=x",
                "headers": {"Content-Type": "application/x-www-form-urlencoded"},
            },
        ),
        ("bad lang and body", {"json": {**good, "choice_id": 5}, "params": {"lang": "fr"}}),
    ]


def test_the_answer_post_answers_exactly_as_fastapi_s_own_handler(
    tmp_path, db_url, cards, monkeypatch
):
    """The answer POST's own body and parameter handling (PlainParamsRoute) against FastAPI's
    handler: the same status and body for good answers, replays, malformed JSON, missing and
    wrong fields, other content types, an empty body, a bad query value beside a bad body, and
    with no bearer token or a bad one. Each app's learner answers the same question (the same
    seed) afresh, so both answers are first answers."""
    from conftest import make_settings
    from fastapi.testclient import TestClient

    import app.routing as routing
    from app.main import create_app

    plain_app = create_app(make_settings(tmp_path / "plain", db_url), cards=cards)
    monkeypatch.setattr(routing, "_plain_handler", lambda route: None)
    fastapi_app = create_app(make_settings(tmp_path / "fastapi", db_url), cards=cards)
    seeds = iter(range(1000, 100000))
    cases = len(_answer_cases({"token": "", "choices": [{"id": "a"}, {"id": "b"}]}, ""))
    compared = 0
    with TestClient(plain_app) as ours, TestClient(fastapi_app) as theirs:
        learners = {id(c): c.post(f"{API_PREFIX}/learners").json()["token"] for c in (ours, theirs)}
        for bearer_kind in ("own", "none", "unknown"):
            for case in range(cases):
                seed = next(seeds)
                results = []
                for client in (ours, theirs):
                    own = {"Authorization": f"Bearer {learners[id(client)]}"}
                    question = client.get(
                        f"{API_PREFIX}/cards/{CARD}/points/1/question?seed={seed}", headers=own
                    ).json()
                    name, request = _answer_cases(question, str(uuid.uuid4()))[case]
                    headers = dict(request.pop("headers", {}))
                    if bearer_kind == "own":
                        headers.update(own)
                    elif bearer_kind == "unknown":
                        headers["Authorization"] = "Bearer nobody"
                    sent = [client.post(f"{API_PREFIX}/answers", headers=headers, **request)]
                    if name == "good":  # and its replay
                        sent.append(
                            client.post(f"{API_PREFIX}/answers", headers=headers, **request)
                        )
                    results.append(
                        [(r.status_code, _comparable(_without_ids(r.json()))) for r in sent]
                    )
                assert results[0] == results[1], (bearer_kind, name)
                compared += 1
    assert cases == 23 and compared == 3 * cases


def _without_ids(value):
    if isinstance(value, dict):
        return {k: v for k, v in value.items() if k not in ("attempt_id", "client_answer_id")}
    return value


def test_a_plain_route_leaves_what_only_fastapi_applies_to_fastapi():
    """Included with include_router (its inclusion's dependencies live in a context only
    FastAPI's handler applies) or while dependency overrides are set, a PlainParamsRoute is
    served by FastAPI's handler: the guard runs, the override is used."""
    from typing import Annotated

    from fastapi import Depends, HTTPException, Query, Request, Response
    from fastapi.responses import JSONResponse
    from fastapi.testclient import TestClient
    from pydantic import BaseModel

    from app.routing import PlainParamsRoute, plain_dependency

    class Body(BaseModel):
        a: int

    @plain_dependency
    async def lang(request: Request, lang: Annotated[str | None, Query()] = None) -> str:
        return lang or "-"

    async def guard() -> None:
        raise HTTPException(403, "the guard ran")

    def app_with(included: bool) -> FastAPI:
        app = FastAPI()
        router = APIRouter(route_class=PlainParamsRoute)

        @router.post("/p")
        async def endpoint(body: Body, shown: Annotated[str, Depends(lang)]) -> Response:
            return JSONResponse({"a": body.a, "lang": shown})

        if included:
            app.include_router(router, dependencies=[Depends(guard)])
        else:
            include_flat(app.router, router)
        return app

    flat = app_with(included=False)
    with TestClient(flat) as client:
        assert client.post("/p?lang=zh", json={"a": 1}).json() == {"a": 1, "lang": "zh"}

        async def overridden(request: Request, lang: str | None = None) -> str:
            return "overridden"

        flat.dependency_overrides[lang] = overridden
        assert client.post("/p", json={"a": 2}).json() == {"a": 2, "lang": "overridden"}
        flat.dependency_overrides.clear()
        assert client.post("/p", json={"a": 3}).json() == {"a": 3, "lang": "-"}
    with TestClient(app_with(included=True)) as client:
        refused = client.post("/p", json={"a": 1})
        assert refused.status_code == 403 and refused.json() == {"detail": "the guard ran"}


# --- plain routes served directly (app.routing.DirectRoutes) ----------------------------------


def _direct_routes(app: FastAPI):
    """The app's DirectRoutes middleware (its stack is built by the first request)."""
    from app.routing import DirectRoutes

    assert isinstance(app.state.direct_routes, DirectRoutes)
    return app.state.direct_routes


def test_the_question_and_answer_routes_skip_the_router_unless_overrides_are_set(client, app):
    """The plain routes that no earlier route could take are served past FastAPI's router; the
    router serves them again while dependency overrides are set, and serves every other route
    (a method the route lacks, a trailing slash) as before."""
    from app.deps import get_settings_dep

    question = f"{API_PREFIX}/cards/{CARD}/points/1/question"
    assert client.get("/healthz").status_code == 200
    direct = _direct_routes(app)
    assert {route.path for _, route, _ in direct.direct_routes()} == {
        f"{API_PREFIX}/cards/{{card_id}}/points/{{point}}/question",
        f"{API_PREFIX}/cards/{{card_id}}/question",
        f"{API_PREFIX}/answers",
    }
    route = next(r for _, r, _ in direct.direct_routes() if r.path.endswith("{point}/question"))
    handled = []
    original = route.handle

    async def spy(scope, receive, send):
        handled.append(scope["path"])
        await original(scope, receive, send)

    route.handle = spy
    assert client.get(f"{question}?seed=1").status_code == 200
    assert handled == []
    app.dependency_overrides[get_settings_dep] = lambda: app.state.settings
    try:
        assert client.get(f"{question}?seed=1").status_code == 200
    finally:
        app.dependency_overrides.clear()
    assert handled == [question]
    refused = client.post(question)
    assert refused.status_code == 405 and refused.headers["allow"] == "GET"
    assert refused.headers["content-type"] == "application/problem+json"
    redirected = client.get(f"{question}/", follow_redirects=False)
    assert redirected.status_code == 307 and redirected.headers["location"].endswith(question)


def _headers(response) -> dict[str, str]:
    skip = {"x-request-id", "content-length", "date"}
    return {k: v for k, v in response.headers.items() if k not in skip}


def test_directly_served_routes_send_the_router_s_headers(tmp_path, db_url, cards, monkeypatch):
    """Served directly or by FastAPI's router, a question and its errors carry the same
    headers: security headers, content type, Allow."""
    from conftest import make_settings
    from fastapi.testclient import TestClient

    import app.routing as routing
    from app.main import create_app

    direct_app = create_app(make_settings(tmp_path / "direct", db_url), cards=cards)
    monkeypatch.setattr(routing, "_plain_handler", lambda route: None)
    router_app = create_app(make_settings(tmp_path / "router", db_url), cards=cards)
    with TestClient(direct_app) as ours, TestClient(router_app) as theirs:
        for url in PLAIN_GETS:
            mine, reference = ours.get(url), theirs.get(url)
            assert (mine.status_code, _headers(mine)) == (
                reference.status_code,
                _headers(reference),
            ), url
        assert _direct_routes(direct_app).direct_routes()
        assert not _direct_routes(router_app).direct_routes()


@pytest.mark.parametrize(
    ("earlier", "later", "shared"),
    [
        ("/cards/{card_id}", "/cards/{card_id}/question", False),
        ("/cards/{card_id}/points/{point}/question", "/cards/{x}/points/{y}/question", True),
        ("/cards/special/question", "/cards/{card_id}/question", True),
        ("/cards/special/question", "/cards/{card_id}/points", False),
        ("/cards/{card_id}/questions", "/cards/{card_id}/question", False),
        ("/files/{rest:path}", "/files/a/b", True),
        ("/cards/{card_id}.json", "/cards/{card_id}", True),
        ("/", "/cards", False),
    ],
)
def test_may_share_a_path(earlier, later, shared):
    from fastapi.routing import APIRoute
    from starlette.routing import Route

    async def endpoint():  # pragma: no cover - never called
        return None

    route = APIRoute(later, endpoint)
    assert routing_module().may_share_a_path(Route(earlier, endpoint), route) is shared


def test_may_share_a_path_with_mounts_and_websockets():
    from fastapi.routing import APIRoute
    from starlette.routing import Mount, WebSocketRoute

    async def endpoint():  # pragma: no cover - never called
        return None

    share = routing_module().may_share_a_path
    assert share(Mount("/static", app=endpoint), APIRoute("/static/{name}", endpoint))
    assert share(Mount("/{tenant}", app=endpoint), APIRoute("/cards", endpoint))
    assert not share(Mount("/static", app=endpoint), APIRoute("/staticky", endpoint))
    assert not share(WebSocketRoute("/cards", endpoint), APIRoute("/cards", endpoint))


def routing_module():
    import app.routing as routing

    return routing


def test_a_plain_route_an_earlier_route_could_take_is_left_to_the_router():
    """First match wins, as in the router: a plain route behind one that takes the same paths
    is not served directly; one nothing shadows is, with its path parameters converted."""
    from fastapi.responses import JSONResponse
    from fastapi.testclient import TestClient

    from app.routing import DirectRoutes, PlainParamsRoute

    app = FastAPI()
    app.add_middleware(DirectRoutes, fastapi_app=app)

    @app.get("/items/{a}")
    async def first(a: str) -> dict[str, str]:
        return {"served": "first", "a": a}

    plain = APIRouter(route_class=PlainParamsRoute)

    @plain.get("/items/{b}")
    async def shadowed(b: str) -> JSONResponse:  # pragma: no cover - never served
        return JSONResponse({"served": "shadowed"})

    @plain.get("/numbers/{n:int}")
    async def numbers(n: int) -> JSONResponse:
        return JSONResponse({"served": "numbers", "n": n, "type": type(n).__name__})

    include_flat(app.router, plain)
    with TestClient(app) as client:
        assert client.get("/items/x").json() == {"served": "first", "a": "x"}
        assert client.get("/numbers/7").json() == {"served": "numbers", "n": 7, "type": "int"}
        assert client.get("/numbers/x").status_code == 404
        direct = _direct_routes(app)
        assert [route.path for _, route, _ in direct.direct_routes()] == ["/numbers/{n:int}"]

        later = APIRouter(route_class=PlainParamsRoute)

        @later.get("/later/{x}")
        async def added(x: str) -> JSONResponse:
            return JSONResponse({"served": "later", "x": x})

        include_flat(app.router, later)  # after the first requests: worked out again
        assert client.get("/later/y").json() == {"served": "later", "x": "y"}
        assert [r.path for _, r, _ in direct.direct_routes()] == ["/numbers/{n:int}", "/later/{x}"]


@pytest.mark.parametrize(
    "query_string",
    [
        b"",
        b"seed=5",
        b"seed=3&seed=4",
        b"seed=&lang=zh",
        b"seed",
        b"a=1&&b=2&",
        b"lang=z%68&x=a+b&y=%2B%20",
        b"na%6De=%E4%B8%AD&bad=%FF%FE",
        b"semi=1;other=2",
        b"raw=\xe9\xff",
        b"=blank&%=pct",
    ],
)
def test_query_values_are_what_starlette_s_query_params_give(query_string):
    from starlette.datastructures import QueryParams

    from app.routing import query_values

    theirs = QueryParams(query_string)
    ours = query_values(query_string)
    assert set(ours) == set(theirs.keys())
    assert all(ours[key] == theirs.get(key) for key in ours)
