"""An app names each session it starts (client_session_id): the start sent again, its response
lost, starts nothing and gets the first one's session, on SQLite and PostgreSQL, also when both
arrive at once; an id naming another start is refused. A page's start forms carry one each: a
double click starts one session."""

from __future__ import annotations

import html
import re
import uuid

from conftest import CARD_ID
from sqlalchemy import func, select
from test_api import API, assert_problem, new_learner
from test_api_sessions import (
    SESSIONS,
    answer_served,
    next_question,
    on_postgres,
    session_variant,
)

import app.practice.session_starts as session_starts
from app.models import PracticeSession


def post_start(client, auth, client_session_id, mode="exam", **fields):
    body = {"card_id": CARD_ID, "mode": mode, "client_session_id": client_session_id, **fields}
    return client.post(SESSIONS, json=body, headers=auth)


def sessions_stored(app, client_session_id=None):
    with app.state.sessionmaker() as db:
        query = select(func.count()).select_from(PracticeSession)
        if client_session_id is not None:
            query = query.where(PracticeSession.client_session_id == client_session_id)
        return db.scalar(query)


def test_a_start_sent_again_gets_the_first_ones_session_as_it_stands(client, app):
    auth = new_learner(client)
    start_id = str(uuid.uuid4())
    first = post_start(client, auth, start_id, size=3)
    assert first.status_code == 201, first.text
    exam = first.json()
    served = next_question(client, auth, exam["session_id"])
    answer_served(client, auth, served, session_variant(app, served).correct_choice_id)

    again = post_start(client, auth, start_id, size=3)

    assert again.status_code == 200, again.text
    assert again.headers["Location"] == f"{SESSIONS}/{exam['session_id']}"
    body = again.json()
    assert body["session_id"] == exam["session_id"]
    assert body["deadline_at"] == exam["deadline_at"]  # the same exam's clock, not a new one
    assert (body["answered"], body["size"]) == (1, 3)
    assert sessions_stored(app) == 1
    finished = client.post(f"{SESSIONS}/{exam['session_id']}/finish", headers=auth)
    assert finished.status_code == 200, finished.text
    history = client.get(f"{API}/me/exams", params={"card_id": CARD_ID}, headers=auth).json()
    assert len(history) == 1  # one exam in the history, not a second one that ran out unanswered


def test_starts_without_an_id_each_start_a_session(client, app):
    auth = new_learner(client)
    for _ in range(2):
        body = {"card_id": CARD_ID, "mode": "card"}
        assert client.post(SESSIONS, json=body, headers=auth).status_code == 201
    assert sessions_stored(app) == 2


def test_an_id_naming_another_start_is_refused(client, app):
    auth = new_learner(client)
    start_id = str(uuid.uuid4())
    assert post_start(client, auth, start_id, mode="card").status_code == 201

    assert_problem(post_start(client, auth, start_id, mode="exam"), 409, "session_id_reused")
    assert_problem(
        post_start(client, auth, start_id, mode="card", typed=True), 409, "session_id_reused"
    )
    deck = {"scope": "deck", "mode": "mixed", "client_session_id": start_id}
    assert_problem(client.post(SESSIONS, json=deck, headers=auth), 409, "session_id_reused")
    someone_else = new_learner(client)
    refused = post_start(client, someone_else, start_id, mode="card")
    body = assert_problem(refused, 409, "session_id_reused")
    assert "client_session_id" in body["detail"]
    assert sessions_stored(app) == 1


def test_a_malformed_client_session_id_is_a_422_problem(client):
    auth = new_learner(client)
    for bad in ("", "x" * 65, "not a uuid!"):
        assert_problem(post_start(client, auth, bad), 422, "invalid_request")


def start_raced(client, app, monkeypatch):
    """The start sent twice at once: the other request stores the session between this one's
    look-up and its insert (the unique id then refuses this one's row)."""
    real = session_starts.start_session
    raced = []

    def other_request_first(**start):
        if not raced:
            raced.append(real(**start))  # the other request, on its own transaction
        return real(**start)

    monkeypatch.setattr(session_starts, "start_session", other_request_first)
    auth = new_learner(client)
    start_id = str(uuid.uuid4())
    response = post_start(client, auth, start_id, mode="card")
    assert response.status_code == 200, response.text
    assert response.json()["session_id"] == raced[0].id
    assert sessions_stored(app, start_id) == 1


def test_two_starts_at_once_start_one_session(client, app, monkeypatch):
    start_raced(client, app, monkeypatch)


def test_on_postgres_a_start_sent_again_or_at_once_starts_one_session(
    pg_url, tmp_path, cards, monkeypatch
):
    with on_postgres(pg_url, tmp_path, cards) as (app, _clock, client):
        auth = new_learner(client)
        start_id = str(uuid.uuid4())
        first = post_start(client, auth, start_id)
        again = post_start(client, auth, start_id)
        assert (first.status_code, again.status_code) == (201, 200)
        assert again.json()["session_id"] == first.json()["session_id"]
        start_raced(client, app, monkeypatch)


# --- the web's start forms ---------------------------------------------------------------------


def start_forms(page: str) -> list[dict[str, str]]:
    """The hidden fields of each start form on a page."""
    forms = page.split('<form class="start"')[1:]
    return [
        {k: html.unescape(v) for k, v in HIDDEN.findall(form.split("</form>")[0])} for form in forms
    ]


HIDDEN = re.compile(r'<input type="hidden" name="(\w+)" value="([^"]*)"')


def send_form(client, fields):
    response = client.post("/sessions", data=fields, follow_redirects=False)
    assert response.status_code == 303, response.text[:400]
    return response.headers["location"].split("?")[0]


def test_a_double_click_on_a_start_button_starts_one_session(client, app):
    page = client.get(f"/cards/{CARD_ID}").text
    forms = start_forms(page)
    ids = [form["client_session_id"] for form in forms]
    assert len(ids) > 5 and len(set(ids)) == len(ids)  # one id per form shown
    exam = next(form for form in forms if form["mode"] == "exam")

    first, second = send_form(client, exam), send_form(client, exam)

    assert first == second and first.startswith("/sessions/")
    assert sessions_stored(app) == 1


def test_a_start_form_sent_again_once_its_session_is_under_way_starts_a_new_one(client, app):
    page = client.get(f"/cards/{CARD_ID}").text
    mixed = next(form for form in start_forms(page) if form["mode"] == "card")
    first = send_form(client, mixed)
    question = client.get(first).text
    answer = {k: html.unescape(v) for k, v in HIDDEN.findall(question)}
    answered = client.post("/answers", data={**answer, "choice_id": "a"})
    assert answered.status_code == 200, answered.text[:400]

    again = send_form(client, mixed)  # the card page kept open, or the back button

    assert again != first
    assert sessions_stored(app) == 2
