"""One answer path: the web form, the API's single answers and its batches store an answer the
same way (the same attempt, the same rating) and exactly once under concurrent duplicates.

Golden values come from the product's rules, not from the code under test: a wrong first answer
rates Again (1) and comes back two minutes later; a retry is stored but rates nothing."""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid
from datetime import timedelta

import httpx
from conftest import CARD_ID
from sqlalchemy import select
from test_web import form_fields, practise

from app.auth.service import as_utc
from app.domain.generation import generate_for_point
from app.models import Attempt, ReviewItem, ReviewLog

API = "/api/v1"
POINT = "optimizer-memory"
SEED = 31
AGAIN = 1


def api_learner(client) -> dict[str, str]:
    return {"Authorization": f"Bearer {client.post(f'{API}/learners').json()['access_token']}"}


def api_token(client, auth) -> str:
    response = client.get(
        f"{API}/cards/{CARD_ID}/points/{POINT}/question", params={"seed": SEED}, headers=auth
    )
    return response.json()["token"]


def via_web(client, choice, key):
    """The web form (its own visitor: the client's cookie)."""
    page = practise(client, seed=SEED)
    data = {**form_fields(page.text), "choice_id": choice, "client_answer_id": key}
    data.pop("shown_at", None)  # no time taken: as the API's answers here
    response = client.post("/answers", data=data, follow_redirects=False)
    assert response.status_code == 303, response.text
    return int(response.headers["location"].split("/answers/")[1].split("?")[0])


def via_single(client, auth, choice, key):
    body = {"token": api_token(client, auth), "choice_id": choice, "client_answer_id": key}
    response = client.post(f"{API}/answers", json=body, headers=auth)
    assert response.status_code == 200, response.text
    return response.json()["attempt_id"]


def via_batch(client, auth, choice, key):
    body = {"token": api_token(client, auth), "choice_id": choice, "client_answer_id": key}
    response = client.post(f"{API}/answers/batch", json={"answers": [body]}, headers=auth)
    assert response.status_code == 200, response.text
    (result,) = response.json()["results"]
    return result["attempt_id"]


def stored(db, attempt_id):
    """An attempt and its learner's review items and logs, without what names the rows."""
    db.commit()
    attempt = db.get(Attempt, attempt_id)
    columns = {
        c.key: getattr(attempt, c.key)
        for c in Attempt.__table__.columns
        if c.key not in ("id", "learner_id", "client_answer_id", "created_at")
    }
    items = db.scalars(select(ReviewItem).where(ReviewItem.learner_id == attempt.learner_id)).all()
    schedule = sorted(
        (
            i.template_id,
            i.point,
            as_utc(i.due_at),
            i.reviews,
            i.lapses,
            {k: v for k, v in i.state.items() if k != "card_id"},
        )  # fmt: skip
        for i in items
    )
    logs = sorted(
        (log.rating, as_utc(log.reviewed_at), as_utc(log.due_after), log.attempt_id == attempt_id)
        for log in db.scalars(
            select(ReviewLog).where(ReviewLog.review_item_id.in_([i.id for i in items]))
        )
    )
    return columns, as_utc(attempt.created_at), schedule, logs


def test_the_same_answer_through_each_entry_point_stores_the_same_attempt_and_rating(
    client, app, clock, card, db
):
    variant = generate_for_point(card, POINT, SEED)
    wrong = next(c for c in variant.choices if c.pitfall is not None)
    right = variant.correct_choice_id
    single, batch = api_learner(client), api_learner(client)
    firsts = [
        via_web(client, wrong.id, uuid.uuid4().hex),
        via_single(client, single, wrong.id, uuid.uuid4().hex),
        via_batch(client, batch, wrong.id, uuid.uuid4().hex),
    ]
    results = [stored(db, attempt_id) for attempt_id in firsts]
    assert results[0] == results[1] == results[2]
    columns, created_at, schedule, logs = results[0]
    now = clock()
    assert created_at == now
    assert (columns["template_id"], columns["seed"], columns["choice_id"]) == (
        variant.id.template_id, SEED, wrong.id,
    )  # fmt: skip
    assert columns["correct"] is False and columns["first_answer"] is True
    assert columns["pitfall_id"] == wrong.pitfall.id and columns["duration_ms"] is None
    ((template, point, due, reviews, lapses, _),) = schedule
    assert (template, point, due, reviews, lapses) == (
        variant.id.template_id, POINT, now + timedelta(minutes=2), 1, 1,
    )  # fmt: skip
    assert logs == [(AGAIN, now, now + timedelta(minutes=2), True)]

    # A retry (another client_answer_id): stored, not a first answer, rates nothing.
    retries = [
        via_web(client, right, uuid.uuid4().hex),
        via_single(client, single, right, uuid.uuid4().hex),
        via_batch(client, batch, right, uuid.uuid4().hex),
    ]
    again = [stored(db, attempt_id) for attempt_id in retries]
    assert again[0] == again[1] == again[2]
    columns, _, retry_schedule, retry_logs = again[0]
    assert columns["first_answer"] is False and columns["correct"] is True
    assert retry_schedule == schedule
    assert retry_logs == [(AGAIN, now, now + timedelta(minutes=2), False)]


def test_an_answer_sent_singly_replays_in_a_batch_and_the_other_way_round(client, card, db):
    auth = api_learner(client)
    choice = generate_for_point(card, POINT, SEED).choices[0].id
    first, second = uuid.uuid4().hex, uuid.uuid4().hex
    assert via_batch(client, auth, choice, first) == via_single(client, auth, "b", first)
    assert via_single(client, auth, choice, second) == via_batch(client, auth, "c", second)
    db.commit()
    assert len(db.scalars(select(Attempt)).all()) == 2
    # The same id from another learner is that learner's problem: 409, whichever way it comes.
    other = api_learner(client)
    body = {"token": api_token(client, other), "choice_id": choice, "client_answer_id": first}
    assert client.post(f"{API}/answers", json=body, headers=other).status_code == 409
    batch = client.post(f"{API}/answers/batch", json={"answers": [body]}, headers=other)
    assert batch.json()["results"][0]["code"] == "answer_id_reused"


def concurrently(app, client, requests):
    """``requests`` ((method, url, kwargs)) sent at once, with the client's cookies."""

    async def send_all():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://testserver", cookies=client.cookies
        ) as c:
            return await asyncio.gather(*(c.request(m, u, **kw) for m, u, kw in requests))

    # A thread of its own: a test run earlier in this process (the browser tests' driver) may
    # have left an event loop running in this one.
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, send_all()).result()


def count(db, key):
    db.commit()
    return len(db.scalars(select(Attempt).where(Attempt.client_answer_id == key)).all())


def test_concurrent_duplicates_of_a_web_form_store_one_attempt(client, app, card, db):
    page = practise(client, seed=SEED)
    key = uuid.uuid4().hex
    data = {**form_fields(page.text), "choice_id": "a", "client_answer_id": key}
    responses = concurrently(app, client, [("POST", "/answers", {"data": data})] * 8)
    assert {r.status_code for r in responses} == {303}
    assert len({r.headers["location"] for r in responses}) == 1
    assert count(db, key) == 1


def test_concurrent_duplicates_of_an_api_answer_store_one_attempt(client, app, db):
    auth = api_learner(client)
    key = uuid.uuid4().hex
    body = {"token": api_token(client, auth), "choice_id": "a", "client_answer_id": key}
    responses = concurrently(
        app, client, [("POST", f"{API}/answers", {"json": body, "headers": auth})] * 8
    )
    assert {r.status_code for r in responses} == {200}
    assert len({r.json()["attempt_id"] for r in responses}) == 1
    assert sorted(r.json()["replayed"] for r in responses) == [False] + [True] * 7
    assert count(db, key) == 1


def test_concurrent_duplicate_batches_store_each_answer_once(client, app, db):
    auth = api_learner(client)
    token = api_token(client, auth)
    keys = [uuid.uuid4().hex for _ in range(5)]
    answers = [{"token": token, "choice_id": "abcd"[i % 4], "client_answer_id": k}
               for i, k in enumerate(keys)]  # fmt: skip
    body = {"answers": answers + answers[:2]}  # duplicates inside a batch too
    responses = concurrently(
        app, client, [("POST", f"{API}/answers/batch", {"json": body, "headers": auth})] * 4
    )
    assert {r.status_code for r in responses} == {200}
    ids = [[item["attempt_id"] for item in r.json()["results"]] for r in responses]
    assert all(each == ids[0] for each in ids) and ids[0][5:] == ids[0][:2]
    assert len(set(ids[0])) == 5
    assert [count(db, key) for key in keys] == [1] * 5
    # One question: its first answer is the only first answer, and the only rating.
    assert len(db.scalars(select(Attempt).where(Attempt.first_answer.is_(True))).all()) == 1
    assert len(db.scalars(select(ReviewLog)).all()) == 1
