"""Question tokens are bound to the learner they were issued to (issue 9, section 5).

A question fetched with a bearer token carries that learner's id in its signed token: answering
it as another learner is 403 ``token_not_yours``, a problem document. A question fetched without
a bearer token is unbound: any learner may answer it (and records their own attempt). Tokens
issued before binding existed (no learner in them, or the v1 list payload) stay gradeable.
Practice-session tokens belong to the session's learner.
"""

from __future__ import annotations

import uuid

from app.auth.service import learner_for_token
from app.models import Attempt
from app.practice.sessions import start_session

API = "/api/v1"
CARD_ID = "zero-memory-offload"
POINT = "optimizer-memory"


def new_learner(client) -> dict[str, str]:
    response = client.post(f"{API}/learners")
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


def learner_id(db, headers) -> str:
    ref = learner_for_token(db=db, token=headers["Authorization"].removeprefix("Bearer "))
    assert ref is not None
    return ref.id


def fetch(client, headers=None, seed=7):
    response = client.get(
        f"{API}/cards/{CARD_ID}/points/{POINT}/question", params={"seed": seed}, headers=headers
    )
    assert response.status_code == 200, response.text
    return response.json()


def answer(client, headers, token, choice="a", client_answer_id=None):
    return client.post(
        f"{API}/answers",
        json={
            "token": token,
            "choice_id": choice,
            "client_answer_id": client_answer_id or str(uuid.uuid4()),
        },
        headers=headers,
    )


def assert_not_yours(response):
    assert response.status_code == 403, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] == "token_not_yours" and body["status"] == 403


def test_a_question_fetched_with_a_bearer_token_is_answered_by_its_learner_only(client, db):
    alice, bob = new_learner(client), new_learner(client)
    question = fetch(client, alice)
    assert_not_yours(answer(client, bob, question["token"]))
    ok = answer(client, alice, question["token"])
    assert ok.status_code == 200, ok.text
    # Bob's refused answer stored nothing; Alice's attempt is hers.
    rows = db.query(Attempt).all()
    assert [r.learner_id for r in rows] == [learner_id(db, alice)]


def test_binding_is_checked_before_the_replay_of_a_stored_answer(client):
    alice, bob = new_learner(client), new_learner(client)
    token = fetch(client, alice)["token"]
    answer_id = str(uuid.uuid4())
    assert answer(client, alice, token, client_answer_id=answer_id).status_code == 200
    replay = answer(client, alice, token, client_answer_id=answer_id)
    assert replay.status_code == 200 and replay.json()["replayed"] is True
    assert_not_yours(answer(client, bob, token, client_answer_id=answer_id))


def test_an_anonymous_question_is_unbound_and_each_learner_records_their_own_attempt(client, db):
    alice, bob = new_learner(client), new_learner(client)
    token = fetch(client)["token"]
    for who in (alice, bob):
        response = answer(client, who, token)
        assert response.status_code == 200, response.text
    owners = {r.learner_id for r in db.query(Attempt).all()}
    assert owners == {learner_id(db, alice), learner_id(db, bob)}
    # Both are first answers for their own learner: binding does not mix their reviews.
    assert all(r.first_answer for r in db.query(Attempt).all())


def test_the_random_point_and_batch_routes_bind_too(client):
    alice, bob = new_learner(client), new_learner(client)
    one = client.get(f"{API}/cards/{CARD_ID}/question", headers=alice).json()
    assert_not_yours(answer(client, bob, one["token"]))
    batch = client.get(f"{API}/cards/{CARD_ID}/questions", params={"count": 2}, headers=alice)
    assert batch.status_code == 200
    for item in batch.json()["items"]:
        assert_not_yours(answer(client, bob, item["token"]))
        assert answer(client, alice, item["token"]).status_code == 200


def test_the_offline_batch_refuses_another_learners_token_item_by_item(client):
    alice, bob = new_learner(client), new_learner(client)
    mine, theirs = fetch(client, bob, seed=1), fetch(client, alice, seed=2)
    items = [
        {"token": t["token"], "choice_id": "a", "client_answer_id": str(uuid.uuid4())}
        for t in (mine, theirs)
    ]
    response = client.post(f"{API}/answers/batch", json={"answers": items}, headers=bob)
    assert response.status_code == 200, response.text
    first, second = response.json()["results"]
    assert "attempt_id" in first
    assert second["status"] == 403 and second["code"] == "token_not_yours"


def test_tokens_issued_before_binding_are_still_gradeable_by_anyone(client, app):
    alice = new_learner(client)
    signer = app.state.context.signer
    question = fetch(client, seed=11)
    # A v2 token without a learner (what every token was before binding).
    from app.domain.identity import QuestionId

    qid = QuestionId(
        CARD_ID,
        question["point"],
        question["template_id"],
        question["template_version"],
        question["seed"],
    )
    assert answer(client, alice, signer.sign(qid)).status_code == 200
    # A v1 token: [card, point number, template, version, seed], with the app's own key.
    legacy = signer._legacy
    old = legacy.dumps(
        [
            CARD_ID,
            question["point_number"],
            question["template_id"],
            question["template_version"],
            question["seed"],
        ]
    )
    response = answer(client, alice, old)
    assert response.status_code == 200, response.text


def test_a_tampered_learner_in_a_token_is_refused_as_invalid(client, app):
    alice = new_learner(client)
    token = fetch(client, alice)["token"]
    payload, sig = token.rsplit(".", 1)
    response = answer(client, alice, payload + "." + ("A" if sig[0] != "A" else "B") + sig[1:])
    assert response.status_code == 400 and response.json()["code"] == "invalid_token"


def test_a_practice_session_token_is_its_learners_only(client, app, db):
    alice, bob = new_learner(client), new_learner(client)
    row = start_session(
        db=db,
        catalog=app.state.context.catalog,
        learner_id=learner_id(db, alice),
        card_id=CARD_ID,
        mode="card",
        seed_secret=app.state.context.seed_secret,
        size=2,
    )
    from app.practice.questions import SessionPosition

    token = app.state.context.signer.sign_position(SessionPosition(row.id, 0))
    assert_not_yours(answer(client, bob, token))
    mine = answer(client, alice, token)
    assert mine.status_code == 200, mine.text


def test_a_question_get_with_an_unknown_bearer_token_is_401(client):
    response = client.get(
        f"{API}/cards/{CARD_ID}/points/{POINT}/question",
        headers={"Authorization": "Bearer not-a-token"},
    )
    assert response.status_code == 401 and response.json()["code"] == "invalid_token"


def test_a_revoked_token_stops_working_at_once_in_the_process_that_revoked_it(client):
    alice = new_learner(client)
    token = fetch(client, alice)["token"]
    assert answer(client, alice, token).status_code == 200  # the bearer token is cached now
    tokens = client.get(f"{API}/me/tokens", headers=alice).json()
    token_id = tokens[0]["id"] if isinstance(tokens, list) else tokens["items"][0]["id"]
    assert client.delete(f"{API}/me/tokens/{token_id}", headers=alice).status_code in (200, 204)
    assert answer(client, alice, token).status_code == 401


def test_a_question_token_s_content_is_the_json_of_its_question_and_learner():
    """QuestionSigner.sign writes its content directly: the same JSON the generic encoder
    writes (quotes, backslashes, non-ASCII and control characters escaped alike), and
    verify reads every field back."""
    import base64
    import json

    from app.domain.identity import QuestionId
    from app.practice.questions import COMPACT_PREFIX, QuestionSigner

    signer = QuestionSigner("k" * 48, max_age_s=60)
    for text in ["zero-memory-offload", 'a"b\\c', "异构卸载", "tab\there\nline", "\u2028x", "'{}'"]:
        question = QuestionId(text, f"p-{text}", f"t-{text}", 7, 2**31 - 1)
        for learner in (None, text, "l" * 32):
            token = signer.sign(question, learner)
            body = token[len(COMPACT_PREFIX) :].split(".")[0]
            raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode("ascii")
            content = json.loads(raw)
            expected = {"q": [text, f"p-{text}", f"t-{text}", 7, 2**31 - 1]}
            if learner is not None:
                expected["l"] = learner
            expected["t"] = content["t"]
            assert raw == json.dumps(expected, separators=(",", ":"))
            verified = signer.verify(token)
            assert verified.question == question and verified.learner_id == learner
