"""Delta sync: an app that was offline fetches what changed in one call. Every attempt and review
item comes once per change, pages walk everything in change order, changes made later (a new
answer, a dismissed mistake, an exam's end, a claimed install) come after the cursor, and a
cursor of another learner starts again (SQLite and PostgreSQL)."""

from __future__ import annotations

from conftest import CARD_ID, make_settings
from fastapi.testclient import TestClient
from sqlalchemy import select
from test_account_merge import answer, install, log_in
from test_accounts import API, register
from test_exams import past_the_deadline

from app.models import Attempt, ReviewItem
from app.practice.sessions import load_session, question_at, start_session


def changes(client, headers, cursor=None, **params):
    query = {"cursor": cursor, **params} if cursor else params
    response = client.get(f"{API}/me/changes", headers=headers, params=query)
    assert response.status_code == 200, response.text
    return response.json()


def sync_all(client, headers, cursor=None, limit=200) -> tuple[list[dict], list[dict], str]:
    """Every page until ``more`` is false: (attempts, review items, the last cursor)."""
    attempts, items = [], []
    while True:
        page = changes(client, headers, cursor, limit=limit)
        attempts += page["attempts"]
        items += page["review_items"]
        cursor = page["next_cursor"]
        if not page["more"]:
            return attempts, items, cursor


def test_a_first_sync_sends_everything_once_and_then_only_what_changed(client, db):
    _, headers = install(client)
    for n, (point, seed) in enumerate([("offload", 1), ("optimizer-memory", 2), ("offload", 3)]):
        answer(client, headers, point, seed, f"a-{n}", right=n == 1)
    stored = sorted(db.scalars(select(Attempt.client_answer_id)))
    templates = sorted(db.scalars(select(ReviewItem.template_id)))
    db.commit()

    attempts, items, cursor = sync_all(client, headers)
    assert sorted(a["client_answer_id"] for a in attempts) == stored
    assert sorted(i["template_id"] for i in items) == templates
    assert all(i["due_at"] and i["reviews"] >= 1 for i in items)

    quiet = changes(client, headers, cursor)
    assert quiet == {**quiet, "attempts": [], "review_items": [], "more": False, "reset": False}
    assert quiet["next_cursor"] == cursor

    late = answer(client, headers, "optimizer-memory", 9, "late", right=False)
    page = changes(client, headers, cursor)
    assert [a["client_answer_id"] for a in page["attempts"]] == ["late"]
    assert page["attempts"][0]["attempt_id"] == late["attempt_id"]
    template = page["attempts"][0]["template_id"]
    assert [i["template_id"] for i in page["review_items"]] == [template]


def test_small_pages_walk_every_change_once_in_order(client, db):
    _, headers = install(client)
    for n in range(7):
        answer(client, headers, "offload", 20 + n, f"p-{n}", right=False)
    stored = sorted(db.scalars(select(Attempt.id)))
    db.commit()
    attempts, items, _ = sync_all(client, headers, limit=2)
    assert [a["attempt_id"] for a in attempts] == stored  # each once, oldest change first
    assert len({(i["card_id"], i["template_id"]) for i in items}) == len(items)


def test_a_dismissed_mistake_comes_again_dismissed(client, db):
    _, headers = install(client)
    wrong = answer(client, headers, "offload", 31, "w-1", right=False)
    _, _, cursor = sync_all(client, headers)
    row = db.get(Attempt, wrong["attempt_id"])
    point, pitfall, template = row.point, row.pitfall_id, row.template_id
    db.commit()
    dismissed = client.post(
        f"{API}/me/mistakes/dismiss",
        headers=headers,
        json={"card_id": CARD_ID, "point": point, "pitfall_id": pitfall, "template_id": template},
    )
    assert dismissed.status_code == 200 and dismissed.json() == {"dismissed": 1}
    page = changes(client, headers, cursor)
    assert [(a["attempt_id"], a["dismissed"]) for a in page["attempts"]] == [
        (wrong["attempt_id"], True)
    ]


def test_an_exams_answers_come_once_it_ends(app, client, db, clock):
    learner_id, headers = install(client)
    ctx = app.state.context
    row = start_session(
        db=db,
        catalog=ctx.catalog,
        learner_id=learner_id,
        card_id=CARD_ID,
        mode="exam",
        seed_secret=ctx.seed_secret,
        size=2,
        now=clock.now,
    )
    _, _, cursor = sync_all(client, headers)
    state = load_session(db=db, learner_id=learner_id, session_id=row.id)
    question = question_at(
        catalog=ctx.catalog, signer=ctx.signer, secret=ctx.seed_secret, state=state, position=0
    )
    db.commit()
    choice = question.variant.choices[0].id
    sent = client.post(
        f"{API}/answers",
        headers=headers,
        json={"token": question.token, "choice_id": choice, "client_answer_id": "exam-0"},
    )
    assert sent.status_code == 200, sent.text
    running = changes(client, headers, cursor)
    assert running["attempts"] == [] and running["review_items"] == []
    cursor = running["next_cursor"]

    past_the_deadline(clock, row)
    ended = changes(client, headers, cursor)
    assert [a["client_answer_id"] for a in ended["attempts"]] == ["exam-0"]
    # its rating (a wrong answer also schedules the templates offering its pitfall)
    with app.state.sessionmaker() as fresh:
        rated = sorted(fresh.scalars(select(ReviewItem.template_id)))
    assert question.variant.id.template_id in rated
    assert sorted(i["template_id"] for i in ended["review_items"]) == rated


def test_a_claimed_install_reaches_the_accounts_other_device_and_its_cursor_resets(client, db):
    register(client, "ada@example.com")
    tablet = {"Authorization": f"Bearer {log_in(client, 'ada@example.com').json()['access_token']}"}
    answer(client, tablet, "offload", 41, "tablet-1", right=False)
    _, _, tablet_cursor = sync_all(client, tablet)

    _, phone = install(client)
    answer(client, phone, "offload", 42, "phone-1", right=False)
    _, _, phone_cursor = sync_all(client, phone)
    claimed = log_in(client, "ada@example.com", phone).json()
    assert claimed["claimed_history"] is True
    phone_account = {"Authorization": f"Bearer {claimed['access_token']}"}

    # the tablet gets the phone's answer as a change after its cursor
    page = changes(client, tablet, tablet_cursor)
    assert [a["client_answer_id"] for a in page["attempts"]] == ["phone-1"]
    assert page["reset"] is False
    # the phone's cursor was the install's: it starts again, with the whole account
    again = changes(client, phone_account, phone_cursor)
    assert again["reset"] is True
    assert sorted(a["client_answer_id"] for a in again["attempts"]) == ["phone-1", "tablet-1"]


def test_a_cursor_that_is_not_one_is_a_400(client):
    _, headers = install(client)
    for bad in ("x", "c1.1.2.3", "c1.a.b.c.d.e", "c9.1.1.1.1.abc"):
        response = client.get(f"{API}/me/changes", headers=headers, params={"cursor": bad})
        assert response.status_code == 400, bad
        assert response.json()["code"] == "invalid_cursor"
    assert client.get(f"{API}/me/changes").status_code == 401


def test_sync_on_postgres(pg_url, tmp_path, cards):
    from app.cli import migrate
    from app.main import create_app

    migrate(pg_url)
    app = create_app(make_settings(tmp_path, pg_url), cards=cards)
    with TestClient(app) as client:
        _, headers = install(client)
        for n in range(5):
            answer(client, headers, "offload", 50 + n, f"pg-{n}", right=False)
        attempts, items, cursor = sync_all(client, headers, limit=2)
        with app.state.sessionmaker() as db:
            stored = sorted(db.scalars(select(Attempt.id)))
        assert sorted(a["attempt_id"] for a in attempts) == stored
        assert len({a["attempt_id"] for a in attempts}) == len(attempts)
        answer(client, headers, "offload", 60, "pg-late", right=False)
        page = changes(client, headers, cursor)
        assert [a["client_answer_id"] for a in page["attempts"]][:1] == ["pg-late"]
        assert page["review_items"] and page["review_items"][0]["reviews"] >= 1
