"""The JSON API as a mobile client uses it: cards, questions, answers, mistakes, errors."""

from __future__ import annotations

import base64
import json
import uuid

import pytest
from conftest import CARD_ID, TEST_SECRET
from sqlalchemy import func, select

from app.domain.cards import Card
from app.domain.generation import generate_for_point
from app.models import Attempt, LearnerToken
from app.services.questions import MAX_SEED, QuestionRef, QuestionSigner

API = "/api/v1"


def question(client, point=1, seed=None, **params):
    query = {"seed": seed, **params} if seed is not None else params
    response = client.get(f"{API}/cards/{CARD_ID}/points/{point}/question", params=query)
    assert response.status_code == 200, response.text
    return response.json()


def answer(client, token, choice_id, client_answer_id=None, **kwargs):
    body = {
        "token": token,
        "choice_id": choice_id,
        "client_answer_id": client_answer_id or str(uuid.uuid4()),
    }
    return client.post(f"{API}/answers", json=body, **kwargs)


def wrong_choice(card: Card, point: int, seed: int) -> str:
    variant = generate_for_point(card, point, seed)
    return next(c.id for c in variant.choices if c.pitfall is not None)


def right_choice(card: Card, point: int, seed: int) -> str:
    return generate_for_point(card, point, seed).correct_choice_id


# --- cards ------------------------------------------------------------------------------------


def test_cards_list_has_the_zero_card_with_its_exam_points(client, card):
    response = client.get(f"{API}/cards")
    assert response.status_code == 200
    listed = {c["id"]: c for c in response.json()}
    assert listed[CARD_ID]["title"] == card.title.en
    assert [p["number"] for p in listed[CARD_ID]["points"]] == [p.number for p in card.points]
    assert all(set(p) == {"number", "title"} for p in listed[CARD_ID]["points"])


def test_card_detail_is_the_whole_card_in_the_asked_language(client, card):
    body = client.get(f"{API}/cards/{CARD_ID}").json()
    assert body["definition"] == card.definition.en
    assert body["use_cases"] == card.use_cases.en
    assert body["problems_solved"] == card.problems_solved.en
    assert [f["id"] for f in body["formulas"]] == list(card.formulas)
    assert [p["explanation"] for p in body["points"]] == [p.explanation.en for p in card.points]
    assert any("zero_demo" in c["command"] for c in body["demo"]["commands"])
    zh = client.get(f"{API}/cards/{CARD_ID}", params={"lang": "zh"}).json()
    assert zh["title"] == card.title.zh
    assert zh["points"][0]["title"] == card.points[0].title.zh


@pytest.mark.parametrize(
    "path",
    [
        f"{API}/cards/no-such-card",
        f"{API}/cards/no-such-card/points/1/question",
        f"{API}/cards/{CARD_ID}/points/99/question",
        f"{API}/cards/no-such-card/question",
        f"{API}/no-such-route",
    ],
)
def test_unknown_cards_points_and_routes_are_404_with_a_message(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("application/json")
    assert isinstance(response.json()["detail"], str) and response.json()["detail"]


# --- questions --------------------------------------------------------------------------------


def test_a_question_has_the_documented_shape(client, card):
    body = question(client, point=1, seed=12345)
    assert set(body) >= {
        "token",
        "card_id",
        "point",
        "template_id",
        "template_version",
        "seed",
        "params",
        "stem",
        "choices",
    }
    assert body["card_id"] == CARD_ID and body["point"] == 1 and body["seed"] == 12345
    variant = generate_for_point(card, 1, 12345)
    assert body["template_id"] == variant.template_id
    assert body["params"] == variant.params
    assert body["stem"] == variant.stem.en
    for shown, choice in zip(body["choices"], variant.choices, strict=True):
        assert set(shown) == {"id", "text", "value", "unit"}
        assert shown["id"] == choice.id and shown["text"] == choice.text.en
        assert (shown["value"] is None) == (choice.value is None)
        assert (shown["unit"] is None) == (choice.value is None)


def test_the_same_seed_gives_the_same_question(client):
    first, second = question(client, 1, seed=7), question(client, 1, seed=7)
    first.pop("token"), second.pop("token")
    assert first == second


def test_without_a_seed_the_server_picks_one_in_range(client):
    seeds = {question(client, 1)["seed"] for _ in range(5)}
    assert all(0 <= s <= MAX_SEED for s in seeds) and len(seeds) > 1


def test_nothing_in_a_question_reveals_the_correct_choice(client, card):
    seed = 99
    body = question(client, 1, seed=seed)
    variant = generate_for_point(card, 1, seed)
    flat = json.dumps({k: v for k, v in body.items() if k != "token"})
    assert "pitfall" not in flat and "correct" not in flat
    payload = body["token"].split(".")[0]
    decoded = base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)).decode()
    assert json.loads(decoded) == [CARD_ID, 1, variant.template_id, variant.template_version, seed]


def test_a_random_point_question_for_the_whole_card(client, card):
    body = client.get(f"{API}/cards/{CARD_ID}/question", params={"seed": 3}).json()
    assert body["point"] in {p.number for p in card.points}


@pytest.mark.parametrize("seed", ["-1", str(MAX_SEED + 1), "abc", "1.5"])
def test_seeds_out_of_range_are_422(client, seed):
    response = client.get(f"{API}/cards/{CARD_ID}/points/1/question", params={"seed": seed})
    assert response.status_code == 422
    assert "seed" in response.json()["detail"]


def test_the_seed_bounds_are_accepted(client):
    assert question(client, 1, seed=0)["seed"] == 0
    assert question(client, 1, seed=MAX_SEED)["seed"] == MAX_SEED


def test_lang_zh_and_unknown_languages(client, card):
    body = question(client, 1, seed=5, lang="zh")
    assert body["stem"] == generate_for_point(card, 1, 5).stem.zh
    response = client.get(f"{API}/cards", params={"lang": "fr"})
    assert response.status_code == 422 and "lang" in response.json()["detail"]


# --- answers ----------------------------------------------------------------------------------


def test_a_wrong_answer_names_the_pitfall_and_shows_the_worked_solution(client, card):
    seed = 4242
    body = question(client, 1, seed=seed)
    variant = generate_for_point(card, 1, seed)
    wrong = next(c for c in variant.choices if c.pitfall is not None)
    response = answer(client, body["token"], wrong.id)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["correct"] is False
    assert result["choice_id"] == wrong.id
    assert result["correct_choice_id"] == variant.correct_choice_id
    assert result["pitfall"] == {
        "id": wrong.pitfall.id,
        "title": wrong.pitfall.title.en,
        "explanation": wrong.explanation.en,
    }
    assert result["explanation"]
    assert result["solution"] == [step.en for step in variant.solution] and result["solution"]


def test_a_right_answer_has_no_pitfall(client, card):
    last = card.points[-1].number
    body = question(client, last, seed=8)
    result = answer(client, body["token"], right_choice(card, last, 8)).json()
    assert result["correct"] is True and result["pitfall"] is None
    assert result["correct_choice_id"] == result["choice_id"]


def test_answer_texts_follow_lang(client, card):
    body = question(client, 1, seed=21)
    wrong = wrong_choice(card, 1, 21)
    result = answer(client, body["token"], wrong, params={"lang": "zh"}).json()
    variant = generate_for_point(card, 1, 21)
    assert result["pitfall"]["title"] == variant.choice(wrong).pitfall.title.zh
    assert result["solution"] == [s.zh for s in variant.solution]


def test_the_same_client_answer_id_twice_stores_one_attempt_and_replays_the_result(
    client, card, db
):
    body = question(client, 1, seed=31)
    key = str(uuid.uuid4())
    first = answer(client, body["token"], wrong_choice(card, 1, 31), key)
    second = answer(client, body["token"], wrong_choice(card, 1, 31), key)
    assert first.status_code == second.status_code == 200
    assert first.json() == second.json()
    assert db.scalar(select(func.count()).select_from(Attempt)) == 1


def test_the_same_client_answer_id_for_another_answer_is_409(client, card):
    key = str(uuid.uuid4())
    body = question(client, 1, seed=31)
    assert answer(client, body["token"], wrong_choice(card, 1, 31), key).status_code == 200
    other_choice = answer(client, body["token"], right_choice(card, 1, 31), key)
    assert other_choice.status_code == 409 and "client_answer_id" in other_choice.json()["detail"]
    other_question = answer(client, question(client, 1, seed=32)["token"], "a", key)
    assert other_question.status_code == 409


def test_another_learner_cannot_replay_someone_elses_answer(client, card):
    key = str(uuid.uuid4())
    body = question(client, 1, seed=77)
    choice = wrong_choice(card, 1, 77)
    assert answer(client, body["token"], choice, key).status_code == 200
    token = client.post(f"{API}/learners").json()["token"]
    response = answer(
        client, body["token"], choice, key, headers={"Authorization": f"Bearer {token}"}
    )
    assert response.status_code == 409


@pytest.mark.parametrize(
    "mangle",
    [
        lambda t: t[:-2] + ("AA" if not t.endswith("AA") else "BB"),  # signature
        lambda t: "x" + t,  # payload
        lambda t: t.split(".")[0],  # no signature
        lambda t: "not-a-token",
    ],
)
def test_tampered_tokens_are_400(client, mangle):
    body = question(client, 1, seed=1)
    response = answer(client, mangle(body["token"]), "a")
    assert response.status_code == 400
    assert "token" in response.json()["detail"]


def test_a_token_signed_with_another_key_is_refused(client, card):
    variant = generate_for_point(card, 1, 1)
    forged = QuestionSigner("another-secret-key-entirely-0123456789", max_age_s=3600).sign(
        QuestionRef(CARD_ID, 1, variant.template_id, variant.template_version, 1)
    )
    assert answer(client, forged, "a").status_code == 400


def test_a_token_for_a_template_version_that_no_longer_exists_is_409(client, card):
    variant = generate_for_point(card, 1, 1)
    stale = QuestionSigner(TEST_SECRET, max_age_s=3600).sign(
        QuestionRef(CARD_ID, 1, variant.template_id, variant.template_version + 1, 1)
    )
    response = answer(client, stale, "a")
    assert response.status_code == 409 and "expired" in response.json()["detail"]


def test_an_old_token_is_409_expired(client, monkeypatch):
    body = question(client, 1, seed=1)
    monkeypatch.setattr(client.app.state.signer, "max_age_s", -1)
    response = answer(client, body["token"], "a")
    assert response.status_code == 409 and "expired" in response.json()["detail"]


def test_an_unknown_choice_is_422_with_the_offered_ids(client):
    body = question(client, 1, seed=1)
    response = answer(client, body["token"], "z")
    assert response.status_code == 422
    assert "unknown choice" in response.json()["detail"]


@pytest.mark.parametrize(
    ("payload", "where"),
    [
        ({}, "token"),
        ({"token": "t", "choice_id": "a"}, "client_answer_id"),
        ({"token": "t", "choice_id": 5, "client_answer_id": "k-123456"}, "choice_id"),
        ({"token": "t", "choice_id": "a", "client_answer_id": "has spaces!"}, "client_answer_id"),
        ({"token": "t", "choice_id": "a", "client_answer_id": "k" * 65}, "client_answer_id"),
        ([], "body"),
    ],
)
def test_malformed_bodies_are_422_with_a_message(client, payload, where):
    response = client.post(f"{API}/answers", json=payload)
    assert response.status_code == 422
    assert where in response.json()["detail"]


def test_a_body_that_is_not_json_is_422(client):
    response = client.post(
        f"{API}/answers", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert response.status_code == 422
    assert response.json()["detail"].startswith("invalid request")


# --- learners and mistakes --------------------------------------------------------------------


def test_bearer_learners_keep_their_own_mistakes(client, card, db):
    created = client.post(f"{API}/learners")
    assert created.status_code == 201
    token = created.json()["token"]
    auth = {"Authorization": f"Bearer {token}"}
    assert db.scalar(select(LearnerToken.token_hash)) != token  # stored hashed
    me = client.get(f"{API}/me", headers=auth).json()
    assert me == {"learner_id": created.json()["learner_id"], "kind": "app"}

    body = question(client, 1, seed=55)
    assert answer(client, body["token"], wrong_choice(card, 1, 55), headers=auth).status_code == 200
    mine = client.get(f"{API}/me/mistakes", headers=auth).json()
    assert [m["seed"] for m in mine] == [55]
    # The cookie guest of the same client is another learner.
    assert client.get(f"{API}/me/mistakes").json() == []


def test_unknown_revoked_or_malformed_credentials_are_401(client):
    token = client.post(f"{API}/learners").json()["token"]
    auth = {"Authorization": f"Bearer {token}"}
    assert client.get(f"{API}/me", headers={"Authorization": "Bearer nope"}).status_code == 401
    response = client.get(f"{API}/me", headers={"Authorization": "Basic Zm9vOmJhcg=="})
    assert response.status_code == 401 and response.headers["www-authenticate"] == "Bearer"
    assert client.delete(f"{API}/me/token", headers=auth).status_code == 204
    assert client.get(f"{API}/me", headers=auth).status_code == 401
    assert client.delete(f"{API}/me/token", headers=auth).status_code == 401
    assert client.delete(f"{API}/me/token").status_code == 401


def test_mistakes_list_the_wrong_attempts_with_their_pitfall_and_question(client, card):
    answered = []
    numbers = [p.number for p in card.points]
    for i, seed in enumerate((101, 102, 103)):
        point = numbers[i % len(numbers)]
        body = question(client, point, seed=seed)
        choice = wrong_choice(card, point, seed)
        assert answer(client, body["token"], choice).status_code == 200
        answered.append((point, seed, choice))
    right = question(client, numbers[-1], seed=104)
    answer(client, right["token"], right_choice(card, numbers[-1], 104))

    mistakes = client.get(f"{API}/me/mistakes").json()
    assert [(m["point"], m["seed"], m["choice_id"]) for m in reversed(mistakes)] == answered
    newest = mistakes[0]
    variant = generate_for_point(card, answered[-1][0], 103)
    chosen = variant.choice(newest["choice_id"])
    assert newest["stem"] == variant.stem.en
    assert newest["choice_text"] == chosen.text.en
    assert newest["correct_choice_id"] == variant.correct_choice_id
    assert newest["pitfall"]["id"] == chosen.pitfall.id
    assert newest["pitfall"]["title"] == chosen.pitfall.title.en
    assert newest["answered_at"].endswith(("Z", "+00:00"))

    counts = client.get(f"{API}/me/pitfalls").json()
    assert sum(c["count"] for c in counts) == 3
    assert client.get(f"{API}/me/mistakes", params={"limit": 1}).json() == mistakes[:1]
    assert client.get(f"{API}/me/mistakes", params={"limit": 0}).status_code == 422


def test_openapi_documents_the_endpoints_and_the_bearer_scheme(client):
    spec = client.get("/openapi.json").json()
    for path in (
        "/api/v1/cards",
        "/api/v1/cards/{card_id}",
        "/api/v1/cards/{card_id}/points/{number}/question",
        "/api/v1/answers",
        "/api/v1/me/mistakes",
        "/api/v1/learners",
    ):
        assert path in spec["paths"], path
    assert spec["components"]["securitySchemes"]["LearnerToken"]["scheme"] == "bearer"
    docs = client.get("/docs")
    assert docs.status_code == 200
    # The docs page works offline: its assets are served here, not from a CDN.
    assert "cdn" not in docs.text.lower() and "/docs-assets/swagger-ui-bundle.js" in docs.text
    assert client.get("/docs-assets/swagger-ui-bundle.js").status_code == 200
    # The HTML pages are not part of the API description.
    assert "/answers" not in spec["paths"]


ODD_GETS = [
    f"{API}/cards/%00",
    f"{API}/cards/{'x' * 5000}",
    f"{API}/cards/ZERO-MEMORY-OFFLOAD",
    f"{API}/cards/{CARD_ID}/points/0/question",
    f"{API}/cards/{CARD_ID}/points/-3/question",
    f"{API}/cards/{CARD_ID}/points/{10**40}/question",
    f"{API}/cards/{CARD_ID}/points/one/question",
    f"{API}/cards/{CARD_ID}/points/1/question?seed=99999999999999999999999",
    f"{API}/cards/{CARD_ID}/points/1/question?seed=",
    f"{API}/cards/{CARD_ID}/points/1/question?lang=",
    f"{API}/me/mistakes?limit=abc",
    f"{API}/me/mistakes?offset=-1",
    f"{API}/me/mistakes?offset=655655455659992154112",
    "/cards/%E4%B8%AD/points/1/practice",
    f"/cards/{CARD_ID}/points/{10**40}/practice",
    f"/cards/{CARD_ID}/practice?point=99",
    f"/cards/{CARD_ID}/practice?seed=-5",
]

ODD_BODIES = [
    {"token": "\u202e\u0000", "choice_id": "a", "client_answer_id": "odd-1"},
    {"token": "a.b.c", "choice_id": "a", "client_answer_id": "odd-2"},
    {"token": ["x"], "choice_id": "a", "client_answer_id": "odd-3"},
    {"token": "t", "choice_id": None, "client_answer_id": "odd-4"},
    {"token": "t" * 5000, "choice_id": "a", "client_answer_id": "odd-5"},
    {"token": "t", "choice_id": "a", "client_answer_id": "odd-6", "extra": {"deep": [1, 2]}},
    "just a string",
    12,
    None,
]


def test_odd_input_gets_a_4xx_with_a_message_never_a_500(app):
    from fastapi.testclient import TestClient

    with TestClient(app, raise_server_exceptions=False) as client:
        for path in ODD_GETS:
            response = client.get(path)
            assert 400 <= response.status_code < 500, (path, response.status_code)
        for body in ODD_BODIES:
            response = client.post(f"{API}/answers", json=body)
            assert 400 <= response.status_code < 500, (body, response.status_code)
            assert response.json()["detail"]
        for content_type in (
            "text/plain",
            "application/x-www-form-urlencoded",
            "multipart/form-data",
        ):
            response = client.post(
                f"{API}/answers", content=b"token=x", headers={"content-type": content_type}
            )
            assert 400 <= response.status_code < 500, (content_type, response.status_code)
        assert (
            client.post(
                "/answers",
                content=b"\xff\xfe",
                headers={"content-type": "application/x-www-form-urlencoded"},
            ).status_code
            == 403
        )


def test_openapi_describes_the_real_error_bodies_and_optional_token(client):
    spec = client.get("/openapi.json").json()
    schemas = spec["components"]["schemas"]
    assert schemas["HTTPValidationError"]["properties"]["detail"]["type"] == "string"
    assert "ValidationError" not in schemas
    mistakes = spec["paths"]["/api/v1/me/mistakes"]["get"]
    assert mistakes["security"] == [{"LearnerToken": []}, {}]
    assert "401" in mistakes["responses"]
    assert spec["paths"]["/api/v1/me/token"]["delete"]["security"] == [{"LearnerToken": []}]
    # What the spec says is what a 422 really looks like.
    body = client.get(f"{API}/cards?lang=fr").json()
    assert isinstance(body["detail"], str) and set(body["errors"][0]) == {"loc", "type", "message"}


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_cookie_learners_answer_only_with_a_json_content_type(client, db, content_type):
    """A cross-site page can send a cookie-carrying POST without a preflight only with these
    content types (or none at all): the API must not read them as JSON, so it records nothing."""
    client.get(f"/cards/{CARD_ID}/points/1/practice")  # the browser has a guest cookie
    body = question(client, 1, seed=8)
    payload = json.dumps(
        {"token": body["token"], "choice_id": "a", "client_answer_id": str(uuid.uuid4())}
    ).encode()
    request = client.build_request("POST", f"{API}/answers", content=payload)
    assert "content-type" not in request.headers
    if content_type:
        request.headers["content-type"] = content_type
    response = client.send(request)
    assert response.status_code == 422
    assert db.scalar(select(func.count()).select_from(Attempt)) == 0
    assert answer(client, body["token"], "a").status_code == 200  # with JSON it works


def test_question_tokens_are_not_interchangeable_with_session_cookies(client):
    from app.web.session import COOKIE_NAME

    client.get(f"/cards/{CARD_ID}/points/1/practice")
    cookie = client.cookies.get(COOKIE_NAME)
    assert answer(client, cookie, "a").status_code == 400
    token = question(client, 1, seed=1)["token"]
    client.cookies.set(COOKIE_NAME, token)
    me = client.get(f"{API}/me")
    assert me.status_code == 200 and me.json()["kind"] == "guest"
    assert "set-cookie" in me.headers  # a new guest, not a learner made from the token
