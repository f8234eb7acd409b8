"""Repeats that give the key away (issue 22, section 4), as a learner meets them on the web pages
and through the API: a session, a batch or "practise again" never hands back a key the learner
saw in their last 10 answers, goes round every template before repeating one, and practises a
numbers question again with a new model."""

from __future__ import annotations

import uuid
from fractions import Fraction

from conftest import CARD_ID, CARDS_DIR
from test_web import csrf, form_fields, practise, shown_variant, wrong_of

API = "/api/v1"
POINT = "optimizer-memory"
RECENT = 10
PSI_VALUES = {Fraction(int(v)) for v in (1.3e9, 7e9, 7.5e9, 13e9, 70e9, 175e9)}
# Seeds of the point's permalink questions (the seed picks the template, then its numbers).


def _first_seed(template_id: str, psi: str | None = None) -> int:
    """The first permalink seed of the point that asks ``template_id`` (about a model of
    ``psi`` parameters): seeds map to templates and numbers by the card's current version."""
    from app.domain.cards import read_card
    from app.domain.generation import generate_for_point

    # Read, not validated: a seed's question does not depend on validation, and this runs as
    # the module is collected, in every worker.
    card = read_card(CARDS_DIR / f"{CARD_ID}.yaml")
    for seed in range(10_000):
        variant = generate_for_point(card, POINT, seed)
        if variant.id.template_id == template_id and psi in (None, variant.params.get("psi")):
            return seed
    raise AssertionError(f"no seed asks {template_id} {psi or ''}")


STATEMENT_SEED = _first_seed("p1-name-the-terms")  # a statement with one key sentence
# p1-pure-bf16-adamw for a 175B model: 8 bytes x 175e9 = 1400 GB
BF16_175B_SEED = _first_seed("p1-pure-bf16-adamw", "175000000000")


def key(variant) -> str:
    """What the feedback showed as the answer."""
    return variant.choice(variant.correct_choice_id).text.en


def assert_no_key_within_ten(keys):
    for at, shown in enumerate(keys):
        assert shown not in keys[max(0, at - RECENT) : at], (at, shown, keys)


def answer_in_session(client, app, page, count):
    """Answer ``count`` questions of the session ``page`` shows; their variants, in order."""
    url = str(page.url)
    variants = []
    for _ in range(count):
        variant = shown_variant(app, page)
        variants.append(variant)
        data = {**form_fields(page.text), "choice_id": variant.correct_choice_id}
        assert client.post("/answers", data=data, follow_redirects=False).status_code == 303
        page = client.get(url)
    return variants


def start(client, **fields):
    page = client.get(f"/cards/{CARD_ID}")
    data = {"csrf_token": csrf(page.text), "card_id": CARD_ID, **fields}
    response = client.post("/sessions", data=data)
    assert response.status_code == 200 and "/sessions/" in str(response.url), response.text[:300]
    return response


def answer_wrong_then_practise_again(client, app, seed):
    """Answer the permalink question of ``seed`` wrong, then press "Practise again with new
    numbers" on its feedback: the variant answered and the retry session's first page."""
    page = practise(client, seed=seed)
    answered = shown_variant(app, page)
    data = {**form_fields(page.text), "choice_id": wrong_of(app, page).id}
    feedback = client.post("/answers", data=data)
    assert "Practise again with new numbers" in feedback.text
    again = feedback.text.split("Practise again with new numbers")[0].rsplit("<form", 1)[1]
    fields = form_fields(again)
    assert fields["mode"] == "mistakes" and fields["templates"] == answered.id.template_id
    response = client.post("/sessions", data=fields)
    assert response.status_code == 200, response.text[:300]
    return answered, response


# --- the web pages ----------------------------------------------------------------------------


def test_a_point_session_shows_every_template_once_then_no_key_seen_in_the_last_ten(client, app):
    point_templates = 9
    first = answer_in_session(client, app, start(client, mode="point", point=POINT), 10)
    assert len({v.id.template_id for v in first[:point_templates]}) == point_templates
    keys = [key(v) for v in first]
    assert_no_key_within_ten(keys)  # Q10 is not Q5's statement again
    for _ in range(3):  # the same learner's next sessions, one after another
        variants = answer_in_session(client, app, start(client, mode="point", point=POINT), 10)
        keys += [key(v) for v in variants]
    assert_no_key_within_ten(keys)


def test_practise_again_on_a_statement_serves_other_questions_of_its_point(client, app):
    answered, page = answer_wrong_then_practise_again(client, app, STATEMENT_SEED)
    assert answered.kind == "statement"
    variants = answer_in_session(client, app, page, 3)
    assert all(v.id.template_id != answered.id.template_id for v in variants)
    assert all(v.id.point == POINT for v in variants)
    assert_no_key_within_ten([key(answered)] + [key(v) for v in variants])


def test_practise_again_on_numbers_asks_about_another_model_each_time(client, app):
    for _ in range(3):  # three learners
        client.cookies.clear()
        answered, page = answer_wrong_then_practise_again(client, app, BF16_175B_SEED)
        assert answered.params["psi"] == "175000000000" and key(answered) == "1400 GB"
        variants = answer_in_session(client, app, page, 3)
        assert {v.id.template_id for v in variants} == {answered.id.template_id}
        models = [Fraction(v.params["psi"]) for v in [answered, *variants]]
        assert len(set(models)) == 4  # 175B, then three other sizes
        assert all(key(v) != "1400 GB" for v in variants)


# --- the API ----------------------------------------------------------------------------------


def new_learner(client):
    response = client.post(f"{API}/learners")
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


def answer_api(client, headers, question, choice="a"):
    response = client.post(
        f"{API}/answers",
        json={
            "token": question["token"],
            "choice_id": choice,
            "client_answer_id": str(uuid.uuid4()),
        },
        headers=headers,
    )
    assert response.status_code == 200, response.text
    return response.json()


def permalink(client, headers, seed):
    response = client.get(
        f"{API}/cards/{CARD_ID}/points/{POINT}/question", params={"seed": seed}, headers=headers
    )
    assert response.status_code == 200, response.text
    return response.json()


def batch(client, headers=None, **params):
    response = client.get(f"{API}/cards/{CARD_ID}/questions", params=params, headers=headers)
    assert response.status_code == 200, response.text
    return response.json()["items"]


def test_a_batch_goes_round_the_cards_templates_before_repeating_one(client, card):
    everything = sorted(t.id for t in card.templates())
    assert len({q["template_id"] for q in batch(client, count=20)}) == 20
    from app.api.cards import MAX_BATCH

    largest = batch(client, count=min(len(everything), MAX_BATCH))
    assert len({q["template_id"] for q in largest}) == len(largest)  # all different
    assert {q["template_id"] for q in largest} <= set(everything)
    point = [t.id for t in card.point_by_slug(POINT).templates]
    items = batch(client, count=len(point), point=POINT)
    assert sorted(q["template_id"] for q in items) == sorted(point)
    assert {q["point"] for q in items} == {POINT}


def test_a_learners_batch_leaves_out_the_key_they_just_saw(client, card):
    alice = new_learner(client)
    statement = permalink(client, alice, STATEMENT_SEED)
    answer_api(client, alice, statement)
    others = sorted(
        t.id for t in card.point_by_slug(POINT).templates if t.id != statement["template_id"]
    )
    items = batch(client, alice, count=len(others), point=POINT)
    assert sorted(q["template_id"] for q in items) == others


def again(client, headers, attempt_id):
    return client.get(f"{API}/me/attempts/{attempt_id}/again", headers=headers)


def test_practise_again_through_the_api_changes_the_model_every_time(client):
    alice = new_learner(client)
    question = permalink(client, alice, BF16_175B_SEED)
    assert question["template_id"] == "p1-pure-bf16-adamw"
    assert question["params"]["psi"] == "175000000000"
    models = [Fraction(question["params"]["psi"])]
    attempt = answer_api(client, alice, question)
    for _ in range(5):
        response = again(client, alice, attempt["attempt_id"])
        assert response.status_code == 200, response.text
        question = response.json()
        assert question["template_id"] == "p1-pure-bf16-adamw"
        models.append(Fraction(question["params"]["psi"]))
        attempt = answer_api(client, alice, question)
    assert set(models) == PSI_VALUES  # the six model sizes, each once


def test_practise_again_through_the_api_on_a_statement_asks_another_question_of_its_point(
    client,
):
    alice = new_learner(client)
    statement = permalink(client, alice, STATEMENT_SEED)
    attempt = answer_api(client, alice, statement)
    response = again(client, alice, attempt["attempt_id"])
    assert response.status_code == 200, response.text
    question = response.json()
    assert question["point"] == POINT and question["template_id"] != statement["template_id"]
    # Its token is alice's: she answers it.
    answer_api(client, alice, question)


def test_practise_again_is_for_ones_own_answers(client):
    alice, bob = new_learner(client), new_learner(client)
    attempt = answer_api(client, alice, permalink(client, alice, BF16_175B_SEED))
    response = again(client, bob, attempt["attempt_id"])
    assert response.status_code == 404 and response.json()["code"] == "attempt_not_found"
    assert again(client, {}, attempt["attempt_id"]).status_code == 401


def test_a_review_due_through_the_api_asks_about_another_model(client, app, clock, monkeypatch):
    import itertools
    import secrets

    from app.domain.identity import MAX_SEED

    alice = new_learner(client)
    question = permalink(client, alice, BF16_175B_SEED)
    wrong = next(c for c in question["choices"] if c["text"] != "1400 GB")
    answer_api(client, alice, question, wrong["id"])
    clock.advance(minutes=2, seconds=1)
    # Random seeds that start with the very question answered.
    seeds = itertools.count(BF16_175B_SEED)
    real = secrets.randbelow
    monkeypatch.setattr(
        secrets, "randbelow", lambda n: next(seeds) if n == MAX_SEED + 1 else real(n)
    )
    response = client.get(f"{API}/me/review/due", headers=alice)
    assert response.status_code == 200, response.text
    (item,) = response.json()["items"]
    due = item["question"]
    assert due["template_id"] == "p1-pure-bf16-adamw"
    assert due["params"]["psi"] != "175000000000"
