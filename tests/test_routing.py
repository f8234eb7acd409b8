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


def test_apps_made_alike_share_their_path_operations_and_serve_and_document_alike(
    tmp_path, db_url, cards
):
    """Making the path operations is most of making an app: a second app made alike takes the
    first one's, which hold nothing of either app."""
    from conftest import make_settings
    from fastapi.routing import APIRoute
    from fastapi.testclient import TestClient

    from app.main import create_app

    first = create_app(make_settings(tmp_path / "1", db_url), cards=cards)
    second = create_app(make_settings(tmp_path / "2", db_url), cards=cards)
    operations = [[r for r in a.routes if isinstance(r, APIRoute)] for a in (first, second)]
    assert len(operations[0]) > 100
    own = {a.path for a, b in zip(*operations, strict=True) if a is not b}
    assert own == {"/healthz", "/readyz", "/docs"}  # each app's own
    shared = [r for r in operations[0] if r.path not in own]
    assert all(r.dependency_overrides_provider is None for r in shared)
    assert first.openapi() == second.openapi()
    for app in (first, second):
        with TestClient(app) as client:
            bearer = client.post(f"{API_PREFIX}/learners").json()["access_token"]
            me = client.get(f"{API_PREFIX}/me", headers={"Authorization": f"Bearer {bearer}"})
            assert me.status_code == 200  # each app's own database and secret
            assert client.get("/cards").status_code == 200


def test_an_app_with_other_body_limits_gets_path_operations_of_its_own(tmp_path, db_url, cards):
    from conftest import make_settings
    from fastapi.testclient import TestClient

    from app.main import create_app

    small = create_app(make_settings(tmp_path / "s", db_url, max_body_bytes=2048), cards=cards)
    usual = create_app(make_settings(tmp_path / "u", db_url), cards=cards)
    body = json.dumps({"email": "x@example.com", "password": "p" * 4000})
    with TestClient(small) as to_small, TestClient(usual) as to_usual:
        headers = {"Content-Type": "application/json"}
        refused = to_small.post(f"{API_PREFIX}/auth/register", content=body, headers=headers)
        assert refused.status_code == 413 and refused.json()["limit_bytes"] == 2048
        # The same request on the app made alongside it is read (and refused for its password).
        read = to_usual.post(f"{API_PREFIX}/auth/register", content=body, headers=headers)
        assert read.status_code == 422


# --- hot routes ---------------------------------------------------------------------------------

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


def _documented_only(app: FastAPI) -> FastAPI:
    """``app`` with its hot routes taken out: FastAPI's path operations that document them
    serve those paths instead."""
    from app.routing import HotRoute

    app.router.routes[:] = [r for r in app.router.routes if not isinstance(r, HotRoute)]
    return app


def _two_apps(tmp_path, db_url, cards) -> tuple[FastAPI, FastAPI]:
    """The app as served, and the same app served by the path operations that document its
    hot routes."""
    from conftest import make_settings

    from app.main import create_app

    served = create_app(make_settings(tmp_path / "served", db_url), cards=cards)
    documented = create_app(make_settings(tmp_path / "documented", db_url), cards=cards)
    return served, _documented_only(documented)


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


def test_the_hot_routes_come_first_each_documented_by_a_path_operation(app):
    """The three hot routes are the first routes, left out of the OpenAPI document, and each
    has a FastAPI path operation of the same method and path that is in it."""
    from fastapi.routing import APIRoute

    from app.routing import HotRoute

    hot = [r for r in app.router.routes if isinstance(r, HotRoute)]
    assert app.router.routes[: len(hot)] == hot
    assert {(r.path, frozenset(r.methods)) for r in hot} == {
        (f"{API_PREFIX}/cards/{{card_id}}/points/{{point}}/question", frozenset({"GET"})),
        (f"{API_PREFIX}/cards/{{card_id}}/question", frozenset({"GET"})),
        (f"{API_PREFIX}/answers", frozenset({"POST"})),
    }
    document = app.openapi()
    for route in hot:
        (documented,) = [
            r
            for r in app.router.routes
            if isinstance(r, APIRoute) and r.name == route.documented_by
        ]
        assert documented.path == route.path and route.methods == documented.methods
        method = sorted(documented.methods)[0].lower()
        operation = document["paths"][route.path][method]
        assert operation["operationId"] == documented.unique_id
        assert "security" in operation  # a bearer token is read (optional on questions)


def test_the_question_routes_answer_exactly_as_their_documented_path_operations(
    tmp_path, db_url, cards
):
    """The question routes as served (app.routing.HotRoute) against the FastAPI path operations
    that document them: the same status and body for good and bad values, absent, empty,
    repeated and unknown parameters, several errors at once, a bearer token or a bad one."""
    from fastapi.testclient import TestClient

    served, documented = _two_apps(tmp_path, db_url, cards)
    with TestClient(served) as ours, TestClient(documented) as theirs:
        token = ours.post(f"{API_PREFIX}/learners").json()["access_token"]
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


def test_the_answer_post_answers_exactly_as_its_documented_path_operation(tmp_path, db_url, cards):
    """The answer POST as served (app.routing.HotRoute) against the FastAPI path operation that
    documents it: the same status and body for good answers, replays, malformed JSON, missing
    and wrong fields, other content types, an empty body, a bad query value beside a bad body,
    and with no bearer token or a bad one. Each app's learner answers the same question (the
    same seed) afresh, so both answers are first answers."""
    from fastapi.testclient import TestClient

    served, documented = _two_apps(tmp_path, db_url, cards)
    seeds = iter(range(1000, 100000))
    cases = len(_answer_cases({"token": "", "choices": [{"id": "a"}, {"id": "b"}]}, ""))
    compared = 0
    with TestClient(served) as ours, TestClient(documented) as theirs:
        learners = {
            id(c): c.post(f"{API_PREFIX}/learners").json()["access_token"] for c in (ours, theirs)
        }
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


def _headers(response) -> dict[str, str]:
    skip = {"x-request-id", "content-length", "date"}
    return {k: v for k, v in response.headers.items() if k not in skip}


def test_the_hot_routes_send_the_headers_of_their_documented_path_operations(
    tmp_path, db_url, cards
):
    """Served by a hot route or by the path operation that documents it, a question and its
    errors carry the same headers (security headers, content type), and so do a method the
    route lacks (405 with Allow) and a trailing slash (a redirect)."""
    from fastapi.testclient import TestClient

    served, documented = _two_apps(tmp_path, db_url, cards)
    question = f"{API_PREFIX}/cards/{CARD}/points/1/question"
    with TestClient(served) as ours, TestClient(documented) as theirs:
        for url in PLAIN_GETS:
            mine, reference = ours.get(url), theirs.get(url)
            assert (mine.status_code, _headers(mine)) == (
                reference.status_code,
                _headers(reference),
            ), url
        for client in (ours, theirs):
            refused = client.post(question)
            assert refused.status_code == 405 and refused.headers["allow"] == "GET, HEAD"
            assert refused.headers["content-type"] == "application/problem+json"
            redirected = client.get(f"{question}/", follow_redirects=False)
            assert redirected.status_code == 307
            assert redirected.headers["location"].endswith(question)
            assert client.get(f"{API_PREFIX}/answers").status_code == 405
            head = client.head(question)  # as its GET, without the body
            assert head.status_code == 200 and head.content == b""


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
        b"a=1=2&b==&c",
        b"&&",
        b"seed=12&lang=en-US&seed=13",
    ],
)
def test_query_values_are_what_starlette_s_query_params_give(query_string):
    from starlette.datastructures import QueryParams

    from app.routing import query_values

    theirs = QueryParams(query_string)
    ours = query_values(query_string)
    assert set(ours) == set(theirs.keys())
    assert all(ours[key] == theirs.get(key) for key in ours)


def _sample_path(path: str) -> str:
    """``path`` with a value in each parameter (digits where its converter takes only those)."""
    import re

    return re.sub(r"\{(\w+)(?::(\w+))?\}", lambda m: "1" if m.group(2) == "int" else "x1", path)


def test_every_route_is_the_first_to_match_its_own_requests(app):
    """Starlette serves a request by the first route that matches it, and the practice loop's
    pages are registered ahead of the API's routes (they are tried in order): no route is
    shadowed by one registered before it, so the order changes nothing but speed."""
    from starlette.routing import Match

    from app.routing import HotRoute

    documented = {
        (r.path, m): r.documented_by for r in app.router.routes if isinstance(r, HotRoute)
        for m in r.methods
    }  # fmt: skip
    checked = 0
    for route in app.router.routes:
        methods = getattr(route, "methods", None)
        if not methods or isinstance(route, HotRoute):
            continue
        for method in sorted(methods - {"HEAD"}):
            path = _sample_path(route.path)
            scope = {"type": "http", "method": method, "path": path, "root_path": "",
                     "query_string": b"", "headers": []}  # fmt: skip
            first = next(r for r in app.router.routes if r.matches(scope)[0] is Match.FULL)
            if isinstance(first, HotRoute):
                assert documented[(route.path, method)] == route.name, (method, path)
            else:
                assert first is route, (method, path, first.path)
            checked += 1
    assert checked > 100
