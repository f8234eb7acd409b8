"""The OpenAPI document as client generators read it: unique names, stable operationIds, shared
enums, the security each route really asks for, every status and header the server sends.

What a generator makes of it is tests/test_generated_client.py; that the server answers as the
document says, tests/test_api_schema.py (schemathesis)."""

from __future__ import annotations

import json
import re

import pytest

from app.api.openapi import OPERATION_IDS

API = "/api/v1"
CAMEL_CASE = re.compile(r"^[a-z]+(?:[A-Z][a-z0-9]*)+$|^[a-z]+$")
QUESTION_ROUTES = (
    f"{API}/cards/{{card_id}}/points/{{point}}/question",
    f"{API}/cards/{{card_id}}/question",
    f"{API}/cards/{{card_id}}/questions",
)


@pytest.fixture
def spec(client) -> dict:
    return client.get("/openapi.json").json()


def operations(spec: dict):
    for path, methods in spec["paths"].items():
        for method, operation in methods.items():
            yield path, method.upper(), operation


def test_every_operation_has_its_short_stable_id(spec):
    named = {
        f"{method} {path.removeprefix(API)}": op["operationId"]
        for path, method, op in operations(spec)
    }
    assert named == OPERATION_IDS  # every route named here, none named that is gone
    ids = list(named.values())
    assert len(set(ids)) == len(ids)
    assert all(CAMEL_CASE.match(i) for i in ids), [i for i in ids if not CAMEL_CASE.match(i)]
    assert named["GET /cards/{card_id}/points/{point}/question"] == "getQuestion"
    assert named["POST /answers"] == "createAnswer" and named["GET /cards"] == "listCards"


def test_every_schema_has_a_name_of_its_own(spec):
    schemas = spec["components"]["schemas"]
    assert not [name for name in schemas if "__" in name]  # FastAPI's module-qualified names
    titles = [s.get("title", name) for name, s in schemas.items()]
    assert len(set(titles)) == len(titles)
    assert {"PitfallPublic", "PitfallStatsPublic", "PointPublic", "PointStatsPublic"} <= set(
        schemas
    )


def test_shared_enums_are_components(spec):
    assert spec["components"]["schemas"]["Lang"]["enum"] == ["en", "zh"]
    assert spec["components"]["schemas"]["QuestionMode"]["enum"] == ["choices", "typed"]
    assert spec["components"]["schemas"]["AnalyticsScope"]["enum"] == ["first_answers", "earliest"]
    assert spec["components"]["schemas"]["SessionMode"]["enum"] == [
        "point",
        "card",
        "mistakes",
        "review",
        "exam",
        "mixed",
    ]
    assert spec["components"]["schemas"]["SessionScope"]["enum"] == ["card", "deck"]
    text = json.dumps({**spec, "components": {}})
    assert '"enum": ["en", "zh"]' not in text and '"enum": ["choices", "typed"]' not in text
    (lang,) = [p for p in spec["paths"][f"{API}/cards"]["get"]["parameters"] if p["name"] == "lang"]
    assert {"$ref": "#/components/schemas/Lang"} in lang["schema"]["anyOf"]


def test_batch_items_are_typed_and_results_discriminated(spec):
    schemas = spec["components"]["schemas"]
    items = schemas["AnswerBatchCreate"]["properties"]["answers"]["items"]
    assert items == {"$ref": "#/components/schemas/AnswerCreate"}
    results = schemas["AnswerBatchPublic"]["properties"]["results"]["items"]
    assert results["discriminator"]["propertyName"] == "outcome"
    assert set(results["discriminator"]["mapping"]) == {"stored", "withheld", "problem"}
    for name in (
        "AnswerBatchStoredPublic",
        "AnswerBatchWithheldPublic",
        "AnswerBatchProblemPublic",
    ):
        assert {"outcome", "client_answer_id"} <= set(schemas[name]["required"]), name


def test_an_answers_two_shapes_are_told_apart_by_outcome(spec):
    """POST /answers and a session's answer are a graded result or, in a running exam, a
    withheld one: a discriminator on ``outcome`` (required in both, as in the batch) lets a
    generated client pick the shape by its tag instead of trying each."""
    schemas = spec["components"]["schemas"]
    for path in (f"{API}/answers", f"{API}/me/sessions/{{session_id}}/answers"):
        body = spec["paths"][path]["post"]["responses"]["200"]["content"]["application/json"]
        union = body["schema"]
        assert union["discriminator"]["propertyName"] == "outcome", path
        assert union["discriminator"]["mapping"] == {
            "stored": "#/components/schemas/AnswerPublic",
            "withheld": "#/components/schemas/AnswerStoredPublic",
        }, path
    assert schemas["AnswerPublic"]["properties"]["outcome"]["const"] == "stored"
    assert schemas["AnswerStoredPublic"]["properties"]["outcome"]["const"] == "withheld"
    for name in ("AnswerPublic", "AnswerStoredPublic"):
        assert "outcome" in schemas[name]["required"], name


def test_each_route_asks_for_the_token_it_takes(spec):
    schemes = spec["components"]["securitySchemes"]
    assert set(schemes) == {"LearnerToken", "InstructorToken"}
    assert all(s["type"] == "http" and s["scheme"] == "bearer" for s in schemes.values())
    for path, method, op in operations(spec):
        security = op.get("security")
        if path in QUESTION_ROUTES:  # answered without a token, bound to it with one
            assert security == [{}, {"LearnerToken": []}], path
        elif path in (f"{API}/auth/token", f"{API}/cards"):  # a token along: claims, progress
            assert security == [{}, {"LearnerToken": []}], path
        elif path.startswith(f"{API}/instructor/"):
            assert security == [{"InstructorToken": []}], path
        elif path.startswith(f"{API}/me") or path.startswith(f"{API}/answers"):
            assert security == [{"LearnerToken": []}], path
        else:
            assert security is None, (method, path)
        if security:
            assert "WWW-Authenticate" in op["responses"]["401"]["headers"], path


def test_statuses_and_headers_the_server_sends_are_documented(spec):
    for path, method, op in operations(spec):
        responses = op["responses"]
        for status, response in responses.items():
            assert "X-Request-ID" in response["headers"], (path, method, status)
        assert "Retry-After" in responses["503"]["headers"], path
        if "429" in responses:
            assert "Retry-After" in responses["429"]["headers"], path
        assert ("413" in responses) == (method in ("POST", "PUT", "PATCH", "DELETE")), path
    card = spec["paths"][f"{API}/cards/{{card_id}}"]["get"]["responses"]
    assert "ETag" in card["304"]["headers"] and "ETag" in card["200"]["headers"]
    headers = spec["components"]["headers"]
    assert headers["Retry-After"]["schema"] == {"type": "integer"}


def test_a_401_with_a_valid_token_is_documented_where_a_password_is_asked(spec):
    """Deleting the account and changing its password answer 401 wrong_credentials to a wrong
    password while the token is fine: the document says so (an app must not sign out then)."""
    for path, method in (("/me", "delete"), ("/me/password", "post")):
        unauthorized = spec["paths"][f"{API}{path}"][method]["responses"]["401"]
        assert "password" in unauthorized["description"], (path, unauthorized)
        assert "WWW-Authenticate" in unauthorized["headers"]
    plain = spec["paths"][f"{API}/me/tokens"]["get"]["responses"]["401"]
    assert plain["description"] == "Missing, unknown, revoked or malformed bearer token."


def test_no_status_a_route_cannot_send_is_documented(spec):
    def statuses(path: str, method: str = "get") -> set[str]:
        return set(spec["paths"][f"{API}{path}"][method]["responses"])

    assert not statuses("/auth/register", "post") & {"401", "404", "409"}
    # New learners are limited (tests/test_new_learner_limits.py sends the 429s).
    assert "429" in statuses("/auth/register", "post") & statuses("/learners", "post")
    assert not statuses("/me") & {"400", "404", "409", "422", "429"}
    assert not statuses("/me/tokens") & {"400", "404", "409", "422", "429"}
    assert not statuses("/answers/batch", "post") & {"403", "409"}  # an item's, not the batch's
    assert not statuses("/me/progress") & {"400", "404"}
    assert statuses("/auth/token", "post") >= {"200", "401", "413", "422", "429", "503"}
    # A session's answer names its session: another learner's is a 404, never a 403.
    assert statuses("/me/sessions", "post") >= {"201", "404", "409", "422"}
    assert "403" not in statuses("/me/sessions/{session_id}/answers", "post")
    assert "409" not in statuses("/me/sessions/{session_id}") | statuses("/me/exams")


def test_request_bodies_show_examples(spec):
    for path, method, op in operations(spec):
        body = op.get("requestBody")
        if body is None:
            continue
        if "application/json" not in body["content"]:  # a file upload (a Moodle import)
            assert list(body["content"]) == ["multipart/form-data"], (method, path)
            continue
        ref = body["content"]["application/json"]["schema"].get("$ref")
        if ref is None:
            continue  # a free card document (instructor routes)
        schema = spec["components"]["schemas"][ref.rsplit("/", 1)[1]]
        assert schema.get("examples"), (method, path)


def test_both_token_answers_name_the_token_access_token(spec, client):
    schemas = spec["components"]["schemas"]
    for name in ("LearnerCreatedPublic", "TokenPublic"):
        assert (
            "access_token" in schemas[name]["required"]
            and "token" not in schemas[name]["properties"]
        )
    created = client.post(f"{API}/learners")
    assert created.status_code == 201 and created.headers["X-Request-ID"]
    assert set(created.json()) == {"learner_id", "access_token", "token_type"}


def test_what_the_server_sends_is_what_the_document_says(spec, client):
    """A request of each kind the document adds to the routes: its status is documented for the
    operation, with every header documented as required on it."""
    json_body = {"Content-Type": "application/json"}
    token = client.post(f"{API}/learners").json()["access_token"]
    card = client.get(f"{API}/cards/zero-memory-offload")
    cases = [
        ("GET", "/cards/{card_id}", client.get(f"{API}/cards/zero-memory-offload")),
        (
            "GET",
            "/cards/{card_id}",
            client.get(
                f"{API}/cards/zero-memory-offload", headers={"If-None-Match": card.headers["ETag"]}
            ),
        ),
        ("GET", "/me", client.get(f"{API}/me")),
        (
            "POST",
            "/learners",
            client.post(f"{API}/learners", content=b"x" * (2**20 + 1), headers=json_body),
        ),
        (
            "POST",
            "/answers/batch",
            client.post(
                f"{API}/answers/batch",
                content=b"\x1e\xff",
                headers={**json_body, "Authorization": f"Bearer {token}"},
            ),
        ),
        (
            "GET",
            "/cards/{card_id}/question",
            client.get(
                f"{API}/cards/zero-memory-offload/question", headers={"Authorization": "Bearer x"}
            ),
        ),
    ]
    cases.append(
        (
            "POST",
            "/me/sessions",
            client.post(
                f"{API}/me/sessions",
                json={"card_id": "zero-memory-offload", "mode": "exam"},
                headers={"Authorization": f"Bearer {token}"},
            ),
        )
    )
    assert [c[2].status_code for c in cases] == [200, 304, 401, 413, 400, 401, 201]
    for method, path, response in cases:
        documented = spec["paths"][f"{API}{path}"][method.lower()]["responses"]
        described = documented[str(response.status_code)]
        for name, header in described.get("headers", {}).items():
            if "$ref" in header:
                header = spec["components"]["headers"][name]
            if header.get("required"):
                assert response.headers.get(name), (path, response.status_code, name)


def test_the_problem_members_a_client_reads_are_documented(client):
    """A client generated from the document keeps what the problems carry: the field at fault,
    every validation error, the body limit."""
    spec = client.get("/openapi.json").json()
    documented = set(spec["components"]["schemas"]["ProblemPublic"]["properties"])
    token = client.post(f"{API}/learners").json()["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    typed = client.get(
        f"{API}/cards/zero-memory-offload/points/optimizer-memory/question",
        params={"seed": 40, "mode": "typed"},
    ).json()
    bad_value = client.post(
        f"{API}/answers",
        json={"token": typed["token"], "value": "abc", "unit": "GB", "client_answer_id": "p-1"},
        headers=auth,
    )
    invalid = client.post(f"{API}/answers", json={"token": 5}, headers=auth)
    too_large = client.post(
        f"{API}/answers",
        content=b'{"token": "' + b"x" * (2 << 20) + b'"}',
        headers={**auth, "Content-Type": "application/json"},
    )
    for response, member in ((bad_value, "field"), (invalid, "errors"), (too_large, "limit_bytes")):
        body = response.json()
        assert member in body, (response.status_code, body)
        assert set(body) <= documented, set(body) - documented
