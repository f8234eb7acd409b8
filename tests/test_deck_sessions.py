"""Practice sessions that span the deck (``scope: deck``): reviews due on every card, mistakes on
every card, a mixed session over the cards the learner has started, an exam; the cards
interleaved, each question naming its card, the summary grouped by card, every answer stored
once, another learner's session unknown. The expected cards and counts are worked out here by
hand from the deck's learning order (Megatron 3D, then ZeRO, then Activation Memory)."""

from __future__ import annotations

import html
import re
import typing
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import func, select
from test_api import API, assert_problem, new_learner, variant_of
from test_api_sessions import (
    SESSIONS,
    answer_served,
    get,
    next_question,
    on_postgres,
    send,
    session_variant,
    unknown_to_another_learner,
)
from test_web import csrf, form_fields, shown_variant, wrong_of

from app.api.session_schemas import SessionScope
from app.domain.practice import SCOPES
from app.models import Attempt, PracticeSession
from app.practice.sessions import question_id_at

MEGATRON, ZERO, ACTIVATION = "megatron-3d-pipeline", "zero-memory-offload", "activation-memory"
# A numeric question on each card (its key depends on parameters drawn afresh for a review).
NUMERIC = {
    MEGATRON: ("pipeline-bubble", 2),
    ZERO: ("optimizer-memory", 40),
    ACTIVATION: ("per-layer-formula", 1),
}


@pytest.fixture
def auth(client):
    return new_learner(client)


def deck(client, auth, mode, **fields):
    response = client.post(SESSIONS, json={"scope": "deck", "mode": mode, **fields}, headers=auth)
    assert response.status_code == 201, response.text
    body = response.json()
    assert (body["scope"], body["card_id"], body["mode"]) == ("deck", None, mode)
    return body


def ask(client, card_id, point, seed):
    path = f"{API}/cards/{card_id}/points/{point}/question"
    response = client.get(path, params={"seed": seed})
    assert response.status_code == 200, response.text
    return response.json()


def answer_loose(client, app, auth, card_id, *, right):
    """A question of the card answered outside any session: the question asked."""
    point, seed = NUMERIC[card_id]
    body = ask(client, card_id, point, seed)
    shown = variant_of(app, body)
    assert shown.content.template.kind == "numeric"
    choice = shown.correct_choice_id if right else next(c.id for c in shown.choices if c.pitfall)
    payload = {"token": body["token"], "choice_id": choice, "client_answer_id": uuid.uuid4().hex}
    assert client.post(f"{API}/answers", json=payload, headers=auth).status_code == 200
    return body


def served_all(client, app, auth, session, *, right=lambda position: True):
    """Every question of the session answered in order (right or wrong by ``right``): the
    questions as served."""
    served = []
    for position in range(session["size"]):
        item = next_question(client, auth, session["session_id"])
        assert item["position"] == position
        shown = session_variant(app, item)
        if right(position):
            choice = shown.correct_choice_id
        else:
            choice = next(c.id for c in shown.choices if c.pitfall)
        answer_served(client, auth, item, choice)
        served.append(item)
    return served


def test_the_api_offers_the_scopes_the_web_has():
    assert typing.get_args(SessionScope.__value__) == SCOPES


# --- each deck mode ----------------------------------------------------------------------------


def test_a_deck_review_serves_what_is_due_on_two_cards_with_fresh_numbers(client, app, auth, clock):
    answered = {
        card: answer_loose(client, app, auth, card, right=False) for card in (ZERO, MEGATRON)
    }
    assert_problem(
        client.post(SESSIONS, json={"scope": "deck", "mode": "review"}, headers=auth),
        409,
        "nothing_to_practise",
    )
    clock.advance(minutes=3)  # a wrong answer comes back minutes later (FSRS's learning step)
    session = deck(client, auth, "review")
    assert session["size"] == 2  # one review due on each card
    served = [next_question(client, auth, session["session_id"])]
    answer_served(client, auth, served[0], session_variant(app, served[0]).correct_choice_id)
    served.append(next_question(client, auth, session["session_id"]))
    # In learning order: Megatron 3D, then ZeRO; each the template answered wrong.
    assert [s["question"]["card_id"] for s in served] == [MEGATRON, ZERO]
    for item in served:
        before = answered[item["question"]["card_id"]]
        assert item["question"]["template_id"] == before["template_id"]
        assert item["question"]["seed"] != before["seed"]
        now_params = session_variant(app, item).params
        assert now_params != variant_of(app, before).params  # new numbers
    assert get(client, auth, session["session_id"]).json()["card_id"] is None


def test_a_deck_review_asks_the_most_overdue_first_when_it_is_smaller(client, app, auth, clock):
    answer_loose(client, app, auth, ACTIVATION, right=False)
    clock.advance(minutes=1)
    answer_loose(client, app, auth, ZERO, right=False)
    clock.advance(minutes=5)
    session = deck(client, auth, "review", size=1)
    assert session["size"] == 1
    assert next_question(client, auth, session["session_id"])["question"]["card_id"] == ACTIVATION


def test_deck_mistakes_come_from_every_card_in_turn(client, app, auth):
    for card in (ACTIVATION, MEGATRON):
        answer_loose(client, app, auth, card, right=False)
    answer_loose(client, app, auth, ZERO, right=True)  # no mistake on ZeRO
    session = deck(client, auth, "mistakes", size=4)
    served = served_all(client, app, auth, session)
    # Two cards with one mistaken template each: two questions each, Megatron first.
    assert [s["question"]["card_id"] for s in served] == [MEGATRON, ACTIVATION] * 2
    # Each from the mistaken template's exam point (its template, or another of its point for a
    # fresh key).
    points = {(s["question"]["card_id"], s["question"]["point"]) for s in served}
    assert points == {(card, NUMERIC[card][0]) for card in (MEGATRON, ACTIVATION)}


def test_a_mixed_deck_session_interleaves_the_cards_started(client, app, auth):
    answer_loose(client, app, auth, ACTIVATION, right=True)
    answer_loose(client, app, auth, ZERO, right=True)
    session = deck(client, auth, "mixed", size=6)
    served = served_all(client, app, auth, session)
    # Megatron 3D is not started: ZeRO and Activation Memory, three each, in turn.
    assert [s["question"]["card_id"] for s in served] == [ZERO, ACTIVATION] * 3
    # Within a card, the rounds of a one-card session: no template twice.
    for card in (ZERO, ACTIVATION):
        ids = [s["question"]["template_id"] for s in served if s["question"]["card_id"] == card]
        assert len(set(ids)) == 3


def test_before_a_first_answer_the_deck_is_every_card(client, app, auth):
    session = deck(client, auth, "mixed", size=5)
    served = [
        s["question"]["card_id"] for s in served_all(client, app, auth, session)
    ]  # 5 over 3 cards: 2, 2, 1 (the leftovers to the first in learning order)
    assert served == [MEGATRON, ZERO, ACTIVATION, MEGATRON, ZERO]


# --- summaries, answers, exams -----------------------------------------------------------------


def test_a_deck_summary_groups_by_card(client, app, auth):
    session = deck(client, auth, "mixed", size=6)
    # Right, wrong, right ... by position: Megatron at 0 and 3, ZeRO at 1 and 4, Activation at
    # 2 and 5 (two each, in turn).
    served = served_all(client, app, auth, session, right=lambda position: position % 2 == 0)
    summary = get(client, auth, session["session_id"], "/summary").json()
    assert summary["session"]["scope"] == "deck" and summary["session"]["over"]
    assert (summary["right"], summary["wrong"], summary["unanswered"]) == (3, 3, 0)
    by_card = [(c["card_id"], c["right"], c["wrong"], c["unanswered"]) for c in summary["cards"]]
    assert by_card == [(MEGATRON, 1, 1, 0), (ZERO, 1, 1, 0), (ACTIVATION, 1, 1, 0)]
    for group in summary["cards"]:
        assert {p["card_id"] for p in group["points"]} == {group["card_id"]}
    assert [p["card_id"] for p in summary["points"]] == [
        p["card_id"] for c in summary["cards"] for p in c["points"]
    ]
    assert [q["card_id"] for q in summary["questions"]] == [
        s["question"]["card_id"] for s in served
    ]
    assert {p["card_id"] for p in summary["pitfalls"]} <= {MEGATRON, ZERO, ACTIVATION}
    assert sum(p["times"] for p in summary["pitfalls"]) == 3


def test_every_answer_of_a_deck_session_is_stored_once(client, app, auth, db):
    session = deck(client, auth, "mixed", size=2)
    item = next_question(client, auth, session["session_id"])
    shown = session_variant(app, item)
    wrong = next(c.id for c in shown.choices if c.pitfall)
    body = {"token": item["question"]["token"], "choice_id": wrong, "client_answer_id": "deck-1"}
    path = f"{SESSIONS}/{session['session_id']}/answers"
    first = client.post(path, json=body, headers=auth).json()
    again = client.post(path, json=body, headers=auth).json()  # a retried request
    other = send(client, auth, session["session_id"], item["question"]["token"],
                 shown.correct_choice_id).json()  # fmt: skip
    assert first["attempt_id"] == again["attempt_id"] == other["attempt_id"]
    assert other["correct"] is False  # the position keeps its first answer
    stored = db.scalars(
        select(Attempt).where(Attempt.practice_session_id == session["session_id"])
    ).all()
    assert [(a.card_id, a.position, a.choice_id) for a in stored] == [
        (item["question"]["card_id"], 0, wrong)
    ]
    assert get(client, auth, session["session_id"]).json()["answered"] == 1


def test_a_deck_exam_tells_nothing_until_it_ends_then_is_listed_on_the_deck(
    client, app, auth, clock
):
    exam = deck(client, auth, "exam", size=2)
    started = datetime.fromisoformat(exam["started_at"]).replace(tzinfo=UTC)
    deadline = datetime.fromisoformat(exam["deadline_at"]).replace(tzinfo=UTC)
    assert deadline - started == timedelta(seconds=2 * 90)
    first = next_question(client, auth, exam["session_id"])
    assert first["question"]["seed"] is None
    stored = answer_served(client, auth, first, session_variant(app, first).correct_choice_id)
    assert stored["feedback"] is None
    assert_problem(get(client, auth, exam["session_id"], "/summary"), 409, "exam_running")
    second = next_question(client, auth, exam["session_id"])
    assert {first["question"]["card_id"], second["question"]["card_id"]} == {MEGATRON, ZERO}
    answer_served(client, auth, second, session_variant(app, second).correct_choice_id)
    summary = get(client, auth, exam["session_id"], "/summary").json()
    assert [(c["card_id"], c["right"]) for c in summary["cards"]] == [(MEGATRON, 1), (ZERO, 1)]
    on_deck = client.get(f"{API}/me/exams", headers=auth).json()
    assert [(e["session_id"], e["right"], e["size"]) for e in on_deck] == [
        (exam["session_id"], 2, 2)
    ]
    on_card = client.get(f"{API}/me/exams", params={"card_id": ZERO}, headers=auth).json()
    assert on_card == []


def test_a_deck_sessions_answers_sync_with_their_cards(client, app, auth):
    session = deck(client, auth, "mixed", size=2)
    served = served_all(client, app, auth, session)
    changes = client.get(f"{API}/me/changes", headers=auth).json()
    synced = {(a["card_id"], a["template_id"]) for a in changes["attempts"]}
    assert synced == {(s["question"]["card_id"], s["question"]["template_id"]) for s in served}


# --- refusals ----------------------------------------------------------------------------------


def test_another_learners_deck_session_is_unknown(client, app, auth):
    unknown_to_another_learner(client, auth, deck(client, auth, "mixed", size=2))


@pytest.mark.parametrize(
    "fields",
    [
        {"scope": "deck", "mode": "point"},
        {"scope": "deck", "mode": "card"},
        {"scope": "deck", "mode": "mixed", "card_id": ZERO},
        {"scope": "card", "mode": "mixed", "card_id": ZERO},
        {"mode": "card"},
        {"scope": "everything", "mode": "mixed"},
    ],
)
def test_a_scope_without_its_modes_or_card_is_a_422_problem(client, auth, fields):
    assert_problem(client.post(SESSIONS, json=fields, headers=auth), 422, "invalid_request")


def test_deck_mistakes_need_mistakes(client, app, auth):
    answer_loose(client, app, auth, ZERO, right=True)
    refused = client.post(SESSIONS, json={"scope": "deck", "mode": "mistakes"}, headers=auth)
    assert_problem(refused, 409, "nothing_to_practise")


# --- sessions stored before the deck -----------------------------------------------------------


def test_a_plan_stored_without_cards_is_read_as_its_sessions_card(app, card):
    template = card.templates()[0]
    row = PracticeSession(
        id="old",
        learner_id="someone",
        card_id=card.id,
        mode="card",
        plan=[{"point": template.point, "template_id": template.id, "template_version": 1}],
    )
    identity = question_id_at(row, 0, b"secret")
    assert (identity.card_id, identity.template_id) == (card.id, template.id)
    assert row.scope == "card"


def test_a_deck_session_is_stored_without_a_card(client, auth, db):
    session = deck(client, auth, "mixed", size=3)
    row = db.get(PracticeSession, session["session_id"])
    assert row.card_id is None
    assert [entry["card_id"] for entry in row.plan] == [MEGATRON, ZERO, ACTIVATION]
    assert db.scalar(select(func.count()).select_from(PracticeSession)) == 1


# --- Today, the card list and the pages ----------------------------------------------------------


def web_answer(client, app, card_id, *, right):
    """A question of the card answered on its web page (the visitor's cookie): its variant."""
    point, seed = NUMERIC[card_id]
    page = client.get(f"/cards/{card_id}/points/{point}/practice", params={"seed": seed})
    fields = form_fields(page.text)
    shown = app.state.catalog.variant(app.state.context.signer.verify(fields["token"]).question)
    choice = shown.correct_choice_id if right else next(c.id for c in shown.choices if c.pitfall)
    response = client.post("/answers", data={**fields, "choice_id": choice})
    assert response.status_code == 200, response.text[:300]
    return shown


def deck_forms(page: str) -> dict[str, str]:
    """The deck's start buttons of a page: their label -> mode."""
    forms = re.findall(
        r'<form class="start" method="post" action="/sessions"[^>]*>(.*?)</form>', page, re.S
    )
    found = {}
    for form in forms:
        if 'name="scope" value="deck"' in form:
            mode = re.search(r'name="mode" value="(\w+)"', form).group(1)
            label = re.search(r"<button[^>]*>([^<]+)</button>", form).group(1)
            found[html.unescape(label)] = mode
    return found


def test_today_offers_the_deck_once_two_cards_have_something_to_do(client, app, auth, clock):
    answer_loose(client, app, auth, ZERO, right=False)
    clock.advance(minutes=3)
    one = client.get(f"{API}/me/today", headers=auth).json()["next"]
    assert (one["action"], one["scope"], one["card_id"]) == ("review", "card", ZERO)
    answer_loose(client, app, auth, MEGATRON, right=False)
    clock.advance(minutes=3)
    today = client.get(f"{API}/me/today", headers=auth).json()
    assert today["due_now"] == 2
    assert today["next"] == {
        "action": "review",
        "scope": "deck",
        "card_id": None,
        "mode": "review",
        "point": None,
        "session_id": None,
    }
    session = deck(client, auth, "review")
    resume = client.get(f"{API}/me/today", headers=auth).json()["resume"]
    assert (resume["session_id"], resume["scope"], resume["card_id"]) == (
        session["session_id"],
        "deck",
        None,
    )


def test_the_pages_offer_the_deck_and_run_a_deck_review(client, app, clock):
    today = client.get("/")
    assert deck_forms(today.text) == {}  # a new visitor: one card to start with
    web_answer(client, app, ZERO, right=False)
    assert deck_forms(client.get("/cards").text) == {}  # one card started: nothing deck-wide
    web_answer(client, app, ACTIVATION, right=False)
    clock.advance(minutes=3)
    cards = deck_forms(client.get("/cards").text)
    assert cards == {
        "Review everything due": "review",
        "Practise the deck": "mixed",
        "Timed exam on the deck": "exam",
        "My mistakes on every card": "mistakes",
    }
    today = client.get("/")
    # The Start button reviews the deck; the deck's section below does not offer it twice.
    assert deck_forms(today.text) == cards
    assert today.text.count(">Review everything due</button>") == 1
    start = today.text.split('id="next-title"')[1].split("</section>")[0]
    assert 'name="scope" value="deck"' in start and "Review everything due" in start
    assert deck_forms(client.get("/review").text) == {"Review everything due": "review"}
    zh = deck_forms(client.get("/cards", params={"lang": "zh"}).text)
    assert zh == {
        "复习全部到期的题": "review",
        "练习整套卡组": "mixed",
        "整套卡组限时考试": "exam",
        "所有卡片上的错题": "mistakes",
    }
    client.get("/", params={"lang": "en"})

    page = client.post(
        "/sessions", data={"csrf_token": csrf(today.text), "scope": "deck", "mode": "review"}
    )
    assert page.status_code == 200 and page.template.name == "practice.html"
    seen = []
    for _ in range(2):
        state = page.context["state"]
        assert state.row.card_id is None
        card = page.context["card"]
        seen.append(card.id)
        assert f"From the card {card.title.en.split('$')[0]}" in html.unescape(page.text)
        shown = shown_variant(app, page)
        feedback = client.post(
            "/answers", data={**form_fields(page.text), "choice_id": shown.correct_choice_id}
        )
        next_url = re.search(r'class="button" href="([^"]+)"', feedback.text).group(1)
        page = client.get(html.unescape(next_url))
    assert seen == [ZERO, ACTIVATION]  # learning order: ZeRO before Activation Memory
    assert page.template.name == "summary.html"
    assert page.context["card"] is None
    groups = [(c.card_id, c.right) for c in page.context["summary"].cards]
    assert groups == [(ZERO, 1), (ACTIVATION, 1)]
    assert page.text.count('class="scores card-scores"') == 2
    assert "Back to the cards" in page.text


def test_a_deck_session_with_nothing_to_practise_offers_the_deck(client):
    card_page = client.get(f"/cards/{ZERO}")
    form = {"csrf_token": csrf(card_page.text), "scope": "deck", "mode": "mistakes"}
    page = client.post("/sessions", data=form)
    assert page.status_code == 200 and page.template.name == "nothing_to_practise.html"
    assert "No mistakes to practise yet" in page.text
    assert deck_forms(page.text) == {"Practise the deck": "mixed"}
    refused = client.post("/sessions", data={**form, "mode": "point"})
    assert refused.status_code == 400  # a mode the deck has not (InvalidInput)


def test_a_deck_exam_on_the_web_ends_with_the_decks_past_exams(client, app):
    card_page = client.get(f"/cards/{ZERO}")
    form = {"csrf_token": csrf(card_page.text), "scope": "deck", "mode": "exam", "size": "3"}
    page = client.post("/sessions", data=form)
    assert page.template.name == "practice.html" and 'id="countdown"' in page.text
    for _ in range(3):
        shown = shown_variant(app, page)
        page = client.post(
            "/answers", data={**form_fields(page.text), "choice_id": shown.correct_choice_id}
        )
        assert "verdict" not in page.text  # no feedback before the end
    assert page.template.name == "summary.html"
    assert [c.card_id for c in page.context["summary"].cards] == [MEGATRON, ZERO, ACTIVATION]
    assert "Your exams on the deck" in page.text
    assert [e.right for e in page.context["past_exams"]] == [3]


def test_on_postgres_a_deck_review_runs_to_its_summary(pg_url, tmp_path, cards):
    with on_postgres(pg_url, tmp_path, cards) as (app, clock, client):
        auth = new_learner(client)
        for card in (ACTIVATION, ZERO):
            answer_loose(client, app, auth, card, right=False)
        clock.advance(minutes=3)
        session = deck(client, auth, "review")
        served = served_all(client, app, auth, session)
        assert [s["question"]["card_id"] for s in served] == [ZERO, ACTIVATION]
        summary = get(client, auth, session["session_id"], "/summary").json()
        assert [(c["card_id"], c["right"]) for c in summary["cards"]] == [
            (ZERO, 1),
            (ACTIVATION, 1),
        ]
        exam = deck(client, auth, "exam", size=1)
        served_all(client, app, auth, exam)
        exams = client.get(f"{API}/me/exams", headers=auth).json()
        assert [e["session_id"] for e in exams] == [exam["session_id"]]


def test_a_running_exams_wrong_answers_are_no_mistakes_to_offer_yet(client, app):
    web_answer(client, app, ZERO, right=False)  # a mistake on ZeRO
    card_page = client.get(f"/cards/{MEGATRON}")
    form = {"csrf_token": csrf(card_page.text), "card_id": MEGATRON, "mode": "exam", "size": "2"}
    page = client.post("/sessions", data=form)
    for number in range(2):
        wrong = wrong_of(app, page).id
        page = client.post("/answers", data={**form_fields(page.text), "choice_id": wrong})
        if number == 0:  # the exam runs: its wrong answer is not told, not even as an offer
            offers = deck_forms(client.get("/cards").text)
            assert "My mistakes on every card" not in offers
            assert "Practise the deck" in offers  # two cards started tells nothing
    assert page.template.name == "summary.html"  # over: now it may be told
    assert "My mistakes on every card" in deck_forms(client.get("/cards").text)
