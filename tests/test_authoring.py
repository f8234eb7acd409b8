"""Authoring through the API: an instructor writes a small card unrelated to ZeRO (its own
parameters), sees every problem located, fixes it, publishes, and learners practise it; edits
make new versions while old attempts and tokens keep working; learners get 403 everywhere."""

from __future__ import annotations

import copy
import json
import re
import time
import uuid
from datetime import datetime, timedelta
from pathlib import Path

import jsonschema_rs
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.auth.service import register
from app.domain.identity import QuestionId
from app.models import AuditEntry, CardVersion

API = "/api/v1"
CARD = json.loads((Path(__file__).parent / "cards_fixtures" / "kv_cache_card.json").read_text())
PASSWORD = "instructor password"


def instructor_headers(client, app, email="prof@example.com"):
    with app.state.sessionmaker() as db:
        register(db=db, email=email, password=PASSWORD, role="instructor")
    token = client.post(
        f"{API}/auth/token", json={"email": email, "password": PASSWORD, "device_name": "laptop"}
    ).json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


def learner_headers(client):
    return {"Authorization": f"Bearer {client.post(f'{API}/learners').json()['access_token']}"}


@pytest.fixture
def prof(client, app):
    return instructor_headers(client, app)


def broken_card():
    card = copy.deepcopy(CARD)
    template = card["points"][0]["templates"][0]
    template["answer"] = "kv * (layers +"
    template["pitfalls"][1]["formula"] = "kv / batchh"
    template["stem"]["zh"] = "KV 缓存有多少 {=kv:parsecs} ？"
    return card


def kv_bytes(p):
    """The KV cache in bytes, computed here: K and V, 2 bytes each, per layer, head, token."""
    return 2 * 2 * p["layers"] * p["heads"] * p["head_dim"] * p["seq"] * p["batch"]


def test_validation_lists_every_problem_with_its_template_field_and_position(client, prof):
    problems = client.post(f"{API}/instructor/cards/validate", json=broken_card(), headers=prof)
    assert problems.status_code == 200, problems.text
    found = problems.json()["problems"]
    errors = [p for p in found if p["severity"] == "error"]
    assert all(p["template_id"] == "kv-total" for p in errors)
    # The first compile error of the template is located in its formula, column included.
    answer = next(p for p in errors if p["field"] == "answer")
    assert answer["position"] is not None and answer["position"] >= 0
    shape = client.post(
        f"{API}/instructor/cards/validate",
        json={**CARD, "points": [{"number": 1, "slug": "x", "templates": []}]},
        headers=prof,
    ).json()["problems"]
    assert len(shape) >= 3  # title, explanation missing, templates too short: all listed
    assert {p["field"] for p in shape} >= {"points.0.title", "points.0.explanation"}


@pytest.mark.parametrize(
    ("where", "text", "misspelled"),
    [
        ("stem", "A model with {layers} layers and a batch of {batch_size}", "{batch_size}"),
        ("stem", "Sequences of {seq} tokens, $b = {batchh}$", "{batchh}"),
        ("explanation", "{valeu} forgets a factor: {answer}.", "{valeu}"),
        ("explanation", "Twice the cache: {answr}.", "{answr}"),
    ],
)
def test_a_misspelled_placeholder_is_an_error_at_its_column(client, prof, where, text, misspelled):
    column = text.index(misspelled) + 1  # counted from 1, as formula errors are
    card = copy.deepcopy(CARD)
    template = card["points"][0]["templates"][0]
    if where == "stem":
        template["stem"]["en"] = text
    else:
        template["pitfalls"][0]["explanation"]["zh"] = text
    found = client.post(f"{API}/instructor/cards/validate", json=card, headers=prof).json()
    errors = [p for p in found["problems"] if p["severity"] == "error"]
    assert len(errors) == 1, errors
    (error,) = errors
    assert error["template_id"] == "kv-total" and error["position"] == column
    assert "unknown placeholder" in error["message"] and "{layers}" in error["message"]


def test_latex_braces_are_not_placeholders(client, prof):
    card = copy.deepcopy(CARD)
    template = card["points"][0]["templates"][0]
    template["stem"]["en"] += r" ($\frac{k}{s}$, $x^{n}$, $P_{os}$, $\mathrm{d}$, $\frac{1}{p}$)"
    found = client.post(f"{API}/instructor/cards/validate", json=card, headers=prof).json()
    assert [p for p in found["problems"] if p["severity"] == "error"] == []


def test_an_instructor_authors_fixes_publishes_and_a_learner_practises(client, app, prof):
    created = client.post(f"{API}/instructor/cards", json=broken_card(), headers=prof)
    assert created.status_code == 201 and created.json()["card_id"] == "kv-cache"
    assert any(p["severity"] == "error" for p in created.json()["problems"])
    blocked = client.post(f"{API}/instructor/cards/kv-cache/publish", headers=prof)
    assert blocked.status_code == 422 and blocked.json()["code"] == "card_has_errors"
    assert blocked.json()["problems"]
    # Learners do not see a draft.
    assert "kv-cache" not in [c["id"] for c in client.get(f"{API}/cards").json()]

    fixed = client.put(f"{API}/instructor/cards/kv-cache/draft", json=CARD, headers=prof)
    assert fixed.status_code == 200
    assert [p for p in fixed.json()["problems"] if p["severity"] == "error"] == []
    preview = client.get(
        f"{API}/instructor/cards/kv-cache/preview",
        params={"template_id": "kv-total", "seed": 3},
        headers=prof,
    ).json()
    assert sum(c["correct"] for c in preview["choices"]) == 1
    assert all(c["explanation"] for c in preview["choices"] if not c["correct"])
    # The rule behind choices: 4, laid out: 3 distinct pitfalls below the key and 3 above.
    sides = preview["sides"]
    assert (sides["needed"], sides["combinations"], sides["failing"]) == (3, 16, 0)
    first = sides["rows"][0]
    assert first["params"]["layers"] == "24" and (first["below"], first["above"]) == (3, 3)
    assert {c["pitfall_id"]: c["side"] for c in first["pitfalls"]} == {
        "only-keys": -1,  # kv / 2
        "one-sequence": -1,  # kv / batch
        "one-layer": -1,  # kv / layers
        "fp32-bytes": 1,  # 2 kv
        "queries-too": 1,  # 3 kv / 2
        "heads-twice": 1,  # kv * heads
    }
    published = client.post(f"{API}/instructor/cards/kv-cache/publish", headers=prof)
    assert published.status_code == 200 and published.json() == {"version": 1}

    learner = learner_headers(client)
    card = next(c for c in client.get(f"{API}/cards").json() if c["id"] == "kv-cache")
    assert card["points"][0]["slug"] == "kv-bytes"
    question = client.get(
        f"{API}/cards/kv-cache/points/kv-bytes/question", params={"seed": 11}
    ).json()
    params = {k: int(v) for k, v in question["params"].items()}
    expected_gb = kv_bytes(params) / 1e9
    assert all(c["unit"] == "GB" for c in question["choices"])
    # Choices are at least 5 % apart; the displayed value is rounded to a few figures.
    key = next(c for c in question["choices"] if abs(c["value"] / expected_gb - 1) < 0.03)
    graded = client.post(
        f"{API}/answers",
        json={"token": question["token"], "choice_id": key["id"], "client_answer_id": "kv-1"},
        headers=learner,
    ).json()
    assert graded["correct"] is True


def publish(client, headers, document):
    assert (
        client.put(
            f"{API}/instructor/cards/{document['id']}/draft", json=document, headers=headers
        ).status_code
        == 200
    )
    response = client.post(f"{API}/instructor/cards/{document['id']}/publish", headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["version"]


def value_edit(card):
    """The card with one pitfall's values changed: 'heads-twice' becomes kv * heads / 2."""
    edited = copy.deepcopy(card)
    pitfall = edited["points"][0]["templates"][0]["pitfalls"][5]
    assert pitfall["id"] == "heads-twice" and pitfall["formula"] == "kv*heads"
    pitfall["formula"] = "kv*heads/2"
    return edited


def test_a_value_edit_makes_version_2_while_version_1_attempts_and_tokens_still_work(
    client, app, prof
):
    client.post(f"{API}/instructor/cards", json=CARD, headers=prof)
    assert publish(client, prof, CARD) == 1
    learner = learner_headers(client)
    old = client.get(f"{API}/cards/kv-cache/points/kv-bytes/question", params={"seed": 5}).json()
    outstanding = client.get(
        f"{API}/cards/kv-cache/points/kv-bytes/question", params={"seed": 6}
    ).json()
    client.post(
        f"{API}/answers",
        headers=learner,
        json={"token": old["token"], "choice_id": "a", "client_answer_id": "v1-answer"},
    )

    edited = value_edit(CARD)
    edited["points"][0]["templates"][0]["stem"]["en"] = (
        "How many GB does the KV cache of {batch} sequences take?"
    )
    assert publish(client, prof, edited) == 2
    versions = client.get(f"{API}/instructor/cards/kv-cache/versions", headers=prof).json()
    assert [v["version"] for v in versions] == [1, 2]
    diff = client.get(
        f"{API}/instructor/cards/kv-cache/diff", params={"from": 1, "to": 2}, headers=prof
    ).json()
    [change] = diff["changes"]
    assert {k: change[k] for k in ("template_id", "change", "fields")} == {
        "template_id": "kv-total",
        "change": "changed",
        "fields": ["pitfalls", "stem"],
    }
    assert (change["from_version"], change["to_version"]) == (1, 2)
    assert change["revision"]["kind"] == "major"
    fresh = client.get(f"{API}/cards/kv-cache/points/kv-bytes/question", params={"seed": 5}).json()
    assert fresh["template_version"] == 2 and fresh["stem"].startswith("How many GB")
    # The version-1 attempt still displays, with its own stem.
    history = client.get(f"{API}/me/attempts", headers=learner).json()["items"]
    assert history[0]["template_version"] == 1 and history[0]["stem"] == old["stem"]
    # And a token handed out before the edit still grades, as version 1.
    variant = app.state.catalog.variant(
        QuestionId("kv-cache", "kv-bytes", "kv-total", 1, outstanding["seed"])
    )
    graded = client.post(
        f"{API}/answers",
        headers=learner,
        json={
            "token": outstanding["token"],
            "choice_id": variant.correct_choice_id,
            "client_answer_id": "v1-late",
        },
    )
    assert graded.status_code == 200 and graded.json()["correct"] is True
    # Republishing unchanged content keeps the template's version.
    assert publish(client, prof, edited) == 3
    assert (
        client.get(f"{API}/cards/kv-cache/points/kv-bytes/question?seed=1").json()[
            "template_version"
        ]
        == 2
    )


def analytics_attempts(client, headers, template_id="kv-total"):
    """The attempts the default analytics count for a template (current versions only)."""
    found = client.get(f"{API}/instructor/cards/kv-cache/analytics", headers=headers).json()
    template = next(t for t in found["templates"] if t["template_id"] == template_id)
    return template["stats"]["attempts"]


def test_a_wording_edit_is_a_minor_revision_that_keeps_attempts_and_tokens(client, app, prof):
    """A stem reworded (every key and pitfall value the same) publishes version 1.1: questions
    keep version 1, a token handed out before grades as before, the default analytics keep the
    attempts answered before; a value edit after it starts version 2 and its own statistics."""
    client.post(f"{API}/instructor/cards", json=CARD, headers=prof)
    assert publish(client, prof, CARD) == 1
    learner = learner_headers(client)
    answered = client.get(
        f"{API}/cards/kv-cache/points/kv-bytes/question", params={"seed": 5}
    ).json()
    outstanding = client.get(
        f"{API}/cards/kv-cache/points/kv-bytes/question", params={"seed": 6}
    ).json()
    client.post(
        f"{API}/answers",
        headers=learner,
        json={"token": answered["token"], "choice_id": "a", "client_answer_id": "before"},
    )
    assert analytics_attempts(client, prof) == 1

    reworded = copy.deepcopy(CARD)
    template = reworded["points"][0]["templates"][0]
    template["stem"]["en"] = template["stem"]["en"].replace("How large is", "What size is")
    template["pitfalls"][0]["title"]["en"] = "Counted the keys, not the values"
    assert publish(client, prof, reworded) == 2
    stored = app.state.live_catalog.catalog.latest("kv-cache").template("kv-total")
    assert (stored.version, stored.revision, stored.version_label) == (1, 1, "1.1")
    diff = client.get(
        f"{API}/instructor/cards/kv-cache/diff", params={"from": 1, "to": 2}, headers=prof
    ).json()
    [change] = diff["changes"]
    assert change["revision"]["kind"] == "minor" and change["revision"]["reasons"] == []
    assert (change["from_label"], change["to_label"]) == ("1", "1.1")

    # The same seed asks the same numbers in the new words, under version 1.
    fresh = client.get(f"{API}/cards/kv-cache/points/kv-bytes/question", params={"seed": 5}).json()
    assert fresh["template_version"] == 1 and "What size is" in fresh["stem"]
    assert fresh["choices"] == answered["choices"]
    # The token handed out before the edit grades: its key is the one the card computes.
    params = {k: int(v) for k, v in outstanding["params"].items()}
    scale = {"MB": 1e6, "GB": 1e9, "TB": 1e12}
    # Choices are at least 5 % apart; the displayed value is rounded to a few figures.
    key = next(
        c["id"]
        for c in outstanding["choices"]
        if abs(c["value"] * scale[c["unit"]] / kv_bytes(params) - 1) < 0.03
    )
    graded = client.post(
        f"{API}/answers",
        headers=learner,
        json={"token": outstanding["token"], "choice_id": key, "client_answer_id": "after"},
    )
    assert graded.status_code == 200, graded.text
    assert graded.json()["correct"] is True
    # Both attempts count in the default analytics (version 1 is still the current one).
    assert analytics_attempts(client, prof) == 2

    # Another rewording is 1.2; a value edit is version 2, counted on its own.
    reworded["points"][0]["templates"][0]["stem"]["zh"] += " "
    client.put(f"{API}/instructor/cards/kv-cache/draft", json=reworded, headers=prof)
    before = client.get(f"{API}/instructor/cards/kv-cache/draft/diff", headers=prof).json()
    assert before["from"] == 2 and before["changes"][0]["revision"]["kind"] == "minor"
    assert publish(client, prof, reworded) == 3
    latest = app.state.live_catalog.catalog.latest("kv-cache").template("kv-total")
    assert latest.version_label == "1.2"
    assert publish(client, prof, value_edit(reworded)) == 4
    latest = app.state.live_catalog.catalog.latest("kv-cache").template("kv-total")
    assert latest.version_label == "2"
    assert analytics_attempts(client, prof) == 0
    diff = client.get(
        f"{API}/instructor/cards/kv-cache/diff", params={"from": 3, "to": 4}, headers=prof
    ).json()
    [change] = diff["changes"]
    assert change["revision"]["kind"] == "major"
    # Which value changed, for which parameters: heads-twice was kv * heads, now half of it.
    [first, *_] = change["revision"]["value_changes"]
    assert first["pitfall_id"] == "heads-twice"
    assert first["params"] == "{layers=24, heads=16, head_dim=128, seq=2048, batch=4}"
    kv = kv_bytes({"layers": 24, "heads": 16, "head_dim": 128, "seq": 2048, "batch": 4})
    assert (first["before"], first["after"]) == (
        f"{kv * 16 / 1e9:.3g} GB",
        f"{kv * 8 / 1e9:.3g} GB",
    )


def test_moving_a_card_to_generator_2_gives_every_template_a_new_version(client, app, prof):
    """Instructors never set versions: a draft that moves its card to generator 2 publishes
    every template under a new version (other variants for the same seeds), the diff says
    why, a question handed out before still grades as it was shown, and new ones are drawn
    from the BLAKE2b stream."""
    from app.domain.generation import HashDraws, seeded

    assert "generator" not in CARD
    client.post(f"{API}/instructor/cards", json=CARD, headers=prof)
    assert publish(client, prof, CARD) == 1
    learner = learner_headers(client)
    before = client.get(
        f"{API}/cards/kv-cache/points/kv-bytes/question", params={"seed": 7}, headers=learner
    ).json()
    assert before["template_version"] == 1

    moved = copy.deepcopy(CARD)
    moved["generator"] = 2
    assert publish(client, prof, moved) == 2
    diff = client.get(
        f"{API}/instructor/cards/kv-cache/diff", params={"from": 1, "to": 2}, headers=prof
    ).json()
    template_ids = [t["id"] for p in CARD["points"] for t in p["templates"]]
    assert [
        (c["template_id"], c["fields"], c["from_version"], c["to_version"], c["details"])
        for c in diff["changes"]
    ] == [
        (template_id, ["generator"], 1, 2, [{"field": "generator", "before": 1, "after": 2}])
        for template_id in sorted(template_ids)
    ]
    assert {c["revision"]["kind"] for c in diff["changes"]} == {"major"}
    after = client.get(f"{API}/cards/kv-cache/points/kv-bytes/question", params={"seed": 7}).json()
    assert after["template_version"] == 2
    latest = app.state.live_catalog.catalog.latest("kv-cache")
    assert {(t.version, t.generator) for t in latest.templates()} == {(2, 2)}
    assert isinstance(seeded("k", latest.templates()[0].generator), HashDraws)

    shown = {c["id"]: c["text"] for c in before["choices"]}
    for index, choice_id in enumerate(shown):
        graded = client.post(
            f"{API}/answers",
            headers=learner,
            json={
                "token": before["token"],
                "choice_id": choice_id,
                "client_answer_id": f"gen-{index}",
            },
        )
        assert graded.status_code == 200, graded.text
        assert {c["id"]: c["text"] for c in graded.json()["choices"]} == shown
    # Publishing the same draft again changes nothing: the templates keep version 2.
    assert publish(client, prof, moved) == 3
    republished = client.get(f"{API}/cards/kv-cache/points/kv-bytes/question?seed=7").json()
    assert republished["template_version"] == 2
    assert republished["choices"] == after["choices"]


def test_withdrawing_a_card_hides_it_from_learners_but_keeps_its_history(client, app, prof):
    client.post(f"{API}/instructor/cards", json=CARD, headers=prof)
    publish(client, prof, CARD)
    learner = learner_headers(client)
    q = client.get(f"{API}/cards/kv-cache/points/kv-bytes/question?seed=2").json()
    client.post(
        f"{API}/answers",
        headers=learner,
        json={"token": q["token"], "choice_id": "b", "client_answer_id": "w-1"},
    )
    assert client.post(f"{API}/instructor/cards/kv-cache/withdraw", headers=prof).status_code == 204
    assert "kv-cache" not in [c["id"] for c in client.get(f"{API}/cards").json()]
    assert client.get(f"{API}/cards/kv-cache/points/kv-bytes/question").status_code == 404
    assert client.get(f"{API}/me/attempts", headers=learner).json()["items"][0]["stem"] == q["stem"]
    assert client.post(f"{API}/instructor/cards/kv-cache/offer", headers=prof).status_code == 204
    assert "kv-cache" in [c["id"] for c in client.get(f"{API}/cards").json()]


def test_retiring_a_template_publishes_a_version_without_it(client, app, prof):
    card = copy.deepcopy(CARD)
    second = copy.deepcopy(card["points"][0]["templates"][0])
    second["id"] = "kv-total-long"
    second["stem"]["en"] = "Long prompts: " + second["stem"]["en"]
    card["points"][0]["templates"].append(second)
    client.post(f"{API}/instructor/cards", json=card, headers=prof)
    publish(client, prof, card)
    retired = client.post(
        f"{API}/instructor/cards/kv-cache/templates/kv-total-long/retire", headers=prof
    )
    assert retired.status_code == 200 and retired.json() == {"version": 2}
    seen = {
        client.get(f"{API}/cards/kv-cache/points/kv-bytes/question?seed={s}").json()["template_id"]
        for s in range(20)
    }
    assert seen == {"kv-total"}
    last = client.post(f"{API}/instructor/cards/kv-cache/templates/kv-total/retire", headers=prof)
    assert last.status_code == 409 and last.json()["code"] == "point_would_be_empty"


def test_every_authoring_action_is_in_the_audit_log(client, app, prof, db):
    client.post(f"{API}/instructor/cards", json=CARD, headers=prof)
    publish(client, prof, CARD)
    client.post(f"{API}/instructor/cards/kv-cache/withdraw", headers=prof)
    db.commit()
    entries = db.scalars(select(AuditEntry).order_by(AuditEntry.id)).all()
    assert [e.action for e in entries] == ["create_draft", "save_draft", "publish", "withdraw"]
    assert all(e.actor_email == "prof@example.com" and e.at is not None for e in entries)
    # What changed, not the document before and after (the versions are in card_versions).
    assert entries[1].before is None and entries[1].after is None
    assert entries[1].changes == {"from": "draft", "patch": []}  # saved unchanged
    assert entries[2].version == 1 and entries[2].before is None and entries[2].after is None
    assert entries[2].changes == {"from_version": None, "to_version": 1}
    listed = client.get(f"{API}/instructor/cards/kv-cache/audit", headers=prof).json()
    assert [e["action"] for e in listed] == ["withdraw", "publish", "save_draft", "create_draft"]


def test_a_card_id_is_taken_once(client, prof):
    assert client.post(f"{API}/instructor/cards", json=CARD, headers=prof).status_code == 201
    again = client.post(f"{API}/instructor/cards", json=CARD, headers=prof)
    assert again.status_code == 409 and again.json()["code"] == "card_exists"
    zero = client.post(f"{API}/instructor/cards", json={"id": "zero-memory-offload"}, headers=prof)
    assert zero.status_code == 409


def instructor_routes(app):
    """Every instructor operation the API describes (the OpenAPI document lists them all)."""
    for path, operations in app.openapi()["paths"].items():
        if path.startswith(f"{API}/instructor"):
            for method in operations:
                yield method.upper(), path


def test_learners_and_anonymous_callers_get_403_or_401_on_every_instructor_route(client, app):
    learner = learner_headers(client)
    routes = sorted(set(instructor_routes(app)))
    assert len(routes) >= 12
    for method, path in routes:
        url = path.replace("{card_id}", "kv-cache").replace("{template_id}", "kv-total")
        response = client.request(
            method,
            url,
            headers=learner,
            json=CARD,
            params={"template_id": "kv-total", "from": 1, "to": 2, "format": "apkg"},
        )
        assert response.status_code == 403, (method, path, response.status_code)
        assert response.json()["code"] == "instructor_only"
        assert client.request(method, url, json=CARD).status_code == 401, (method, path)


def test_another_server_process_sees_a_publication_without_a_restart(
    client, app, prof, settings, cards
):
    from app.main import create_app

    other = create_app(settings, cards=cards)
    other.state.live_catalog.every = 0.05  # its refresher checks the database this often
    with TestClient(other) as second:
        assert "kv-cache" not in [c["id"] for c in second.get(f"{API}/cards").json()]
        client.post(f"{API}/instructor/cards", json=CARD, headers=prof)
        publish(client, prof, CARD)
        deadline = time.monotonic() + 10
        while "kv-cache" not in [c["id"] for c in second.get(f"{API}/cards").json()]:
            assert time.monotonic() < deadline, "the second process never served it"
            time.sleep(0.05)
        assert second.get(f"{API}/cards/kv-cache/points/kv-bytes/question").status_code == 200


def test_bad_documents_are_4xx_never_500(app):
    with TestClient(app, raise_server_exceptions=False) as client:
        prof = instructor_headers(client, app, email=f"p{uuid.uuid4().hex[:6]}@example.com")
        for body in (
            [],
            "text",
            {"id": 5},
            {"id": "x" * 500},
            {"points": "nope"},
            {**CARD, "version": "two"},
        ):
            for method, url in (
                ("POST", f"{API}/instructor/cards/validate"),
                ("POST", f"{API}/instructor/cards"),
                ("PUT", f"{API}/instructor/cards/kv-cache/draft"),
            ):
                response = client.request(method, url, json=body, headers=prof)
                assert 200 <= response.status_code < 500, (method, url, body, response.status_code)


# --- what the instructor API answers, as its OpenAPI description says ------------------------


def declared_schema(client, path: str, method: str, status: str) -> jsonschema_rs.Validator:
    """The schema /openapi.json declares for one response, its references resolvable."""
    spec = client.get("/openapi.json").json()
    response = spec["paths"][f"{API}{path}"][method]["responses"][status]
    (content,) = response["content"].values()
    return jsonschema_rs.validator_for({**content["schema"], "components": spec["components"]})


def test_a_card_with_errors_is_refused_with_the_422_its_schema_declares(client, app, prof):
    client.post(f"{API}/instructor/cards", json=broken_card(), headers=prof)
    blocked = client.post(f"{API}/instructor/cards/kv-cache/publish", headers=prof)
    assert blocked.status_code == 422 and blocked.json()["code"] == "card_has_errors"
    publishing = declared_schema(client, "/instructor/cards/{card_id}/publish", "post", "422")
    publishing.validate(blocked.json())
    assert blocked.json()["problems"][0]["field"] == "answer"
    # Retiring a template publishes the latest version without it: a version published before
    # a check existed (its formula broken here) is refused the same way, as documented.
    card = copy.deepcopy(CARD)
    second = copy.deepcopy(card["points"][0]["templates"][0])
    second["id"] = "kv-total-long"
    card["points"][0]["templates"].append(second)
    client.put(f"{API}/instructor/cards/kv-cache/draft", json=card, headers=prof)
    assert client.post(f"{API}/instructor/cards/kv-cache/publish", headers=prof).status_code == 200
    with app.state.sessionmaker() as db:
        stored = db.get(CardVersion, ("kv-cache", 1))
        document = copy.deepcopy(stored.document)
        document["points"][0]["templates"][0]["answer"] = "kv * (layers +"
        stored.document = document
        db.commit()
    retired = client.post(
        f"{API}/instructor/cards/kv-cache/templates/kv-total-long/retire", headers=prof
    )
    assert retired.status_code == 422 and retired.json()["code"] == "card_has_errors"
    retiring = declared_schema(
        client, "/instructor/cards/{card_id}/templates/{template_id}/retire", "post", "422"
    )
    retiring.validate(retired.json())
    # A malformed request to either is a 422 too, and matches the same declaration.
    malformed = client.post(f"{API}/instructor/cards/{'x' * 200}/publish", headers=prof)
    assert malformed.status_code == 422
    publishing.validate(malformed.json())


def datetimes_in(value: object) -> list[str]:
    """Every string in a JSON value that reads as a date and time."""
    if isinstance(value, dict):
        return [found for item in value.values() for found in datetimes_in(item)]
    if isinstance(value, list):
        return [found for item in value for found in datetimes_in(item)]
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?.*", value):
        return [value]
    return []


def test_instructor_timestamps_carry_their_offset(client, prof, db_url):
    assert db_url.startswith("sqlite")  # whose DateTime reads naive datetimes back
    client.post(f"{API}/instructor/cards", json=CARD, headers=prof)
    draft = client.get(f"{API}/instructor/cards/kv-cache/draft", headers=prof).json()
    publish(client, prof, CARD)
    client.put(f"{API}/instructor/cards/kv-cache/draft", json=CARD, headers=prof)
    answers = [
        draft,
        client.get(f"{API}/instructor/cards/kv-cache/draft", headers=prof).json(),
        client.get(f"{API}/instructor/cards/kv-cache/audit", headers=prof).json(),
        client.get(f"{API}/instructor/cards/kv-cache/versions", headers=prof).json(),
    ]
    found = [moment for answer in answers for moment in datetimes_in(answer)]
    assert len(found) >= 6, found  # the drafts' updated_at, 4 audit entries, a version
    for moment in found:
        assert datetime.fromisoformat(moment).utcoffset() == timedelta(0), moment
