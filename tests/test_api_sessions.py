"""Practice sessions through the JSON API: every mode starts on its scope and serves its questions
in order, answers go through the one answer path, an exam tells nothing before its end and
refuses answers after it, and a summary counts what was answered."""

from __future__ import annotations

import typing
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import pytest
from conftest import CARD_ID
from test_api import API, assert_problem, new_learner, question, variant_of

from app.api.session_schemas import SessionMode
from app.domain.practice import MODES
from app.models import PracticeSession
from app.practice.sessions import EXAM_GRACE, question_id_at

SESSIONS = f"{API}/me/sessions"
NUMERIC_POINT, NUMERIC_SEED = "optimizer-memory", 40  # a numeric template (tests/test_web.py)


@pytest.fixture
def auth(client):
    return new_learner(client)


def start(client, auth, mode, **fields):
    response = client.post(
        SESSIONS, json={"card_id": CARD_ID, "mode": mode, **fields}, headers=auth
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert response.headers["Location"] == f"{SESSIONS}/{body['session_id']}"
    return body


def next_question(client, auth, session_id):
    response = client.get(f"{SESSIONS}/{session_id}/question", headers=auth)
    assert response.status_code == 200, response.text
    return response.json()


def session_variant(app, served):
    """The variant a session question is, regenerated from the session's plan (an exam's question
    shows no seed)."""
    if served["question"]["seed"] is not None:
        return variant_of(app, served["question"])
    with app.state.sessionmaker() as db:
        row = db.get(PracticeSession, served["session_id"])
        identity = question_id_at(row, served["position"], app.state.context.seed_secret)
    return app.state.catalog.variant(identity)


def send(client, auth, session_id, token, choice_id=None, **extra):
    body = {"token": token, "client_answer_id": str(uuid.uuid4()), **extra}
    if choice_id is not None:
        body["choice_id"] = choice_id
    return client.post(f"{SESSIONS}/{session_id}/answers", json=body, headers=auth)


def answer_served(client, auth, served, choice_id):
    response = send(client, auth, served["session_id"], served["question"]["token"], choice_id)
    assert response.status_code == 200, response.text
    return response.json()


def get(client, auth, session_id, what=""):
    return client.get(f"{SESSIONS}/{session_id}{what}", headers=auth)


def a_wrong_answer(client, app, auth):
    """A wrong answer on a numeric template (outside any session): its template id."""
    loose = question(client, point=NUMERIC_POINT, seed=NUMERIC_SEED)
    variant = variant_of(app, loose)
    wrong = next(c.id for c in variant.choices if c.pitfall is not None)
    body = {"token": loose["token"], "choice_id": wrong, "client_answer_id": str(uuid.uuid4())}
    assert client.post(f"{API}/answers", json=body, headers=auth).status_code == 200
    return loose["template_id"]


def test_the_api_offers_the_modes_the_web_has():
    assert typing.get_args(SessionMode.__value__) == MODES


# --- each mode serves its scope ------------------------------------------------------------------


def test_a_point_session_serves_that_exam_point_in_order_then_is_over(client, app, card, auth):
    slug = card.points[2].slug
    session = start(client, auth, "point", point=slug, size=3)
    assert (session["mode"], session["point"], session["size"]) == ("point", slug, 3)
    assert session["answered"] == 0 and not session["over"] and session["deadline_at"] is None
    for position in range(3):
        served = next_question(client, auth, session["session_id"])
        assert served["position"] == position and served["size"] == 3
        assert served["question"]["point"] == slug and served["question"]["seed"] is not None
        # The same question until it is answered (its token may be signed a second later).
        again = next_question(client, auth, session["session_id"])
        for field in ("template_id", "template_version", "seed", "stem", "choices"):
            assert again["question"][field] == served["question"][field], field
        answer = answer_served(client, auth, served, session_variant(app, served).correct_choice_id)
        assert answer["correct"] is True and answer["explanation"]  # feedback at once
    state = get(client, auth, session["session_id"]).json()
    assert state["answered"] == 3 and state["over"] and state["ended_at"]
    assert_problem(get(client, auth, session["session_id"], "/question"), 409, "session_over")


def test_a_point_session_without_a_point_practises_the_first(client, card, auth):
    session = start(client, auth, "point")
    assert session["point"] == card.points[0].slug and session["size"] == 10


def test_a_card_session_serves_the_whole_card(client, card, auth):
    session = start(client, auth, "card", size=2)
    served = next_question(client, auth, session["session_id"])
    assert served["question"]["card_id"] == CARD_ID
    assert served["question"]["mode"] == "choices" and served["question"]["choices"]
    assert start(client, auth, "card")["size"] == 20


def test_a_typed_session_asks_numeric_questions_without_choices(client, app, auth):
    """A typed session asks its numeric questions without choices; a statement drawn in it is
    still asked with its choices (a statement cannot be typed)."""
    session = start(client, auth, "point", point=NUMERIC_POINT, size=8, typed=True)
    assert session["typed"] is True
    typed = 0
    for _ in range(8):
        served = next_question(client, auth, session["session_id"])
        question = served["question"]
        if session_variant(app, served).kind == "numeric":
            assert question["mode"] == "typed" and question["choices"] == []
            assert question["typed_units"]
            unit = question["typed_units"][0]
            response = send(client, auth, session["session_id"], question["token"], None,
                            value="1", unit=unit)  # fmt: skip
            typed += 1
        else:
            assert question["mode"] == "choices" and question["choices"]
            first = question["choices"][0]["id"]
            response = send(client, auth, session["session_id"], question["token"], first)
        assert response.status_code == 200, response.text
    assert typed >= 1  # the point is mostly numeric: 8 draws hold at least one


def test_mistakes_and_review_need_something_to_practise(client, app, auth, clock):
    for mode in ("mistakes", "review"):
        refused = client.post(SESSIONS, json={"card_id": CARD_ID, "mode": mode}, headers=auth)
        assert_problem(refused, 409, "nothing_to_practise")
    template = a_wrong_answer(client, app, auth)
    # A wrong answer comes back for review minutes later (FSRS), with new numbers.
    clock.advance(minutes=3)
    review = start(client, auth, "review")
    assert review["size"] == 1
    served = next_question(client, auth, review["session_id"])
    assert served["question"]["template_id"] == template
    assert served["question"]["seed"] != NUMERIC_SEED
    mistakes = start(client, auth, "mistakes", size=2)
    for _ in range(2):
        served = next_question(client, auth, mistakes["session_id"])
        assert served["question"]["template_id"] == template
        assert served["question"]["seed"] != NUMERIC_SEED  # new numbers
        answer_served(client, auth, served, session_variant(app, served).correct_choice_id)


def test_mistakes_of_named_templates_only(client, app, auth):
    template = a_wrong_answer(client, app, auth)
    session = start(client, auth, "mistakes", templates=[template], size=1)
    assert next_question(client, auth, session["session_id"])["question"]["template_id"] == template
    refused = client.post(
        SESSIONS,
        json={"card_id": CARD_ID, "mode": "mistakes", "templates": ["p9-not-a-mistake"]},
        headers=auth,
    )
    assert_problem(refused, 409, "nothing_to_practise")


# --- a timed exam --------------------------------------------------------------------------------


def test_an_exam_withholds_everything_until_it_ends(client, app, auth, clock):
    exam = start(client, auth, "exam", size=2)
    started = datetime.fromisoformat(exam["started_at"]).replace(tzinfo=UTC)
    deadline = datetime.fromisoformat(exam["deadline_at"]).replace(tzinfo=UTC)
    assert deadline - started == timedelta(seconds=2 * 90)
    assert exam["seconds_left"] == 180 and exam["results_withheld"]
    served = next_question(client, auth, exam["session_id"])
    assert served["question"]["seed"] is None and served["seconds_left"] == 180
    variant = session_variant(app, served)
    wrong = next(c.id for c in variant.choices if c.pitfall is not None)
    clock.advance(seconds=30)
    stored = answer_served(client, auth, served, wrong)
    assert stored["stored"] is True and stored["feedback"] is None and "correct" not in stored
    assert_problem(get(client, auth, exam["session_id"], "/summary"), 409, "exam_running")
    assert get(client, auth, exam["session_id"]).json()["seconds_left"] == 150
    second = next_question(client, auth, exam["session_id"])
    assert second["position"] == 1
    answer_served(client, auth, second, session_variant(app, second).correct_choice_id)

    # Every question answered: the exam is over and tells its results.
    state = get(client, auth, exam["session_id"]).json()
    assert state["over"] and not state["results_withheld"]
    summary = get(client, auth, exam["session_id"], "/summary").json()
    assert (summary["right"], summary["wrong"], summary["unanswered"]) == (1, 1, 0)
    assert summary["seconds"] == 30
    first = summary["questions"][0]
    assert first["choice_id"] == wrong and not first["correct"]
    assert first["correct_choice_id"] == variant.correct_choice_id
    assert first["pitfall"]["id"] == variant.choice(wrong).pitfall.id
    exams = client.get(f"{API}/me/exams", params={"card_id": CARD_ID}, headers=auth).json()
    assert [(e["session_id"], e["right"], e["size"]) for e in exams] == [(exam["session_id"], 1, 2)]


def test_a_running_exams_wrong_answer_is_no_mistake_to_practise_until_it_ends(client, app, auth):
    """A mistakes session started beside a running exam (another tab, the app) would serve the
    template answered wrong in it, telling the learner which answer was wrong; it is a mistake
    to practise once the exam ends."""
    exam = start(client, auth, "exam", size=2)
    served = next_question(client, auth, exam["session_id"])
    variant = session_variant(app, served)
    wrong = next(c.id for c in variant.choices if c.pitfall is not None)
    answer_served(client, auth, served, wrong)
    for scope in ({"card_id": CARD_ID}, {"scope": "deck"}):
        refused = client.post(SESSIONS, json={**scope, "mode": "mistakes"}, headers=auth)
        assert_problem(refused, 409, "nothing_to_practise")
    second = next_question(client, auth, exam["session_id"])
    answer_served(client, auth, second, session_variant(app, second).correct_choice_id)
    assert get(client, auth, exam["session_id"]).json()["over"]
    listed = client.get(f"{API}/me/mistakes", headers=auth).json()["items"]
    assert [a["template_id"] for a in listed] == [served["question"]["template_id"]]
    mistakes = start(client, auth, "mistakes")
    practised = next_question(client, auth, mistakes["session_id"])
    # The template answered wrong, or, where its key is among the last answers' (a statement
    # has one key), another template of its exam point in its place (app.domain.selection).
    assert practised["question"]["point"] == served["question"]["point"]


def test_a_positions_second_answer_echoes_its_own_id_and_names_the_first(client, app, auth):
    """A client matches results to what it sent by client_answer_id: a second answer to a
    session's position (another id) is a replay of the first, echoing its own id, with the
    first's attempt_id; through the session route and in a batch."""
    session = start(client, auth, "card", size=2)
    served = next_question(client, auth, session["session_id"])
    token = served["question"]["token"]
    first = send(client, auth, session["session_id"], token, "a", client_answer_id="first-id")
    assert first.status_code == 200 and first.json()["client_answer_id"] == "first-id"
    again = send(client, auth, session["session_id"], token, "b", client_answer_id="second-id")
    assert again.json()["client_answer_id"] == "second-id" and again.json()["replayed"]
    assert again.json()["attempt_id"] == first.json()["attempt_id"]
    batch = client.post(
        f"{API}/answers/batch",
        json={"answers": [{"token": token, "choice_id": "c", "client_answer_id": "third-id"}]},
        headers=auth,
    ).json()["results"]
    assert [(r["client_answer_id"], r["replayed"], r["attempt_id"]) for r in batch] == [
        ("third-id", True, first.json()["attempt_id"])
    ]


def test_the_data_export_withholds_a_running_exams_answers_until_it_ends(client, app, auth):
    """The export tells no more than the exam does while it runs: not its answers (right or
    wrong, the key, the pitfall, the hidden seed), nor the questions still to come."""
    practised = a_wrong_answer(client, app, auth)
    exam = start(client, auth, "exam", size=2)
    served = next_question(client, auth, exam["session_id"])
    variant = session_variant(app, served)
    wrong = next(c.id for c in variant.choices if c.pitfall is not None)
    answer_served(client, auth, served, wrong)

    running = client.get(f"{API}/me/export", headers=auth).json()
    assert running["running_exams"] == [exam["session_id"]]
    assert [a["template_id"] for a in running["attempts"]] == [practised]
    assert [m["template_id"] for m in running["mistakes"]] == [practised]
    (listed,) = [s for s in running["sessions"] if s["session_id"] == exam["session_id"]]
    assert listed["plan"] is None

    second = next_question(client, auth, exam["session_id"])
    answer_served(client, auth, second, session_variant(app, second).correct_choice_id)
    ended = client.get(f"{API}/me/export", headers=auth).json()
    assert ended["running_exams"] == []
    in_exam = [a for a in ended["attempts"] if a["session_id"] == exam["session_id"]]
    assert [(a["choice_id"], a["correct"]) for a in in_exam] == [
        (wrong, False),
        (session_variant(app, second).correct_choice_id, True),
    ]
    assert in_exam[0]["correct_choice_id"] == variant.correct_choice_id
    (listed,) = [s for s in ended["sessions"] if s["session_id"] == exam["session_id"]]
    assert len(listed["plan"]) == 2


def test_an_answer_after_the_exams_end_is_refused_and_not_counted(client, app, auth, clock):
    exam = start(client, auth, "exam", size=3)
    served = next_question(client, auth, exam["session_id"])
    deadline = datetime.fromisoformat(exam["deadline_at"]).replace(tzinfo=UTC)
    clock.now = deadline + EXAM_GRACE + timedelta(seconds=1)
    late = send(client, auth, exam["session_id"], served["question"]["token"], "a")
    body = assert_problem(late, 409, "exam_over")
    assert body["summary_url"] == f"/sessions/{exam['session_id']}/summary"
    asked = assert_problem(get(client, auth, exam["session_id"], "/question"), 409, "exam_over")
    assert asked["summary_url"] == body["summary_url"]  # where the app goes next
    state = get(client, auth, exam["session_id"]).json()
    assert state["over"] and state["seconds_left"] == 0 and state["answered"] == 0
    assert datetime.fromisoformat(state["ended_at"]).replace(tzinfo=UTC) == deadline
    summary = get(client, auth, exam["session_id"], "/summary").json()
    assert (summary["right"], summary["wrong"], summary["unanswered"]) == (0, 0, 3)
    assert summary["seconds"] == 3 * 90 and len(summary["questions"]) == 3
    assert not any(q["answered"] for q in summary["questions"])


def test_an_answer_sent_as_the_clock_ran_out_still_counts(client, app, auth, clock):
    exam = start(client, auth, "exam", size=2)
    served = next_question(client, auth, exam["session_id"])
    clock.now = datetime.fromisoformat(exam["deadline_at"]).replace(tzinfo=UTC) + EXAM_GRACE
    answer_served(client, auth, served, session_variant(app, served).correct_choice_id)
    summary = get(client, auth, exam["session_id"], "/summary").json()
    assert (summary["right"], summary["unanswered"]) == (1, 1)


# --- ending a session, its summary ---------------------------------------------------------------


def test_the_summary_counts_the_answers_given(client, app, card, auth):
    session = start(client, auth, "card", size=4)
    given = []  # (point, right, pitfall id)
    for choose in ("right", "wrong", "wrong"):
        served = next_question(client, auth, session["session_id"])
        variant = session_variant(app, served)
        if choose == "right":
            choice = variant.correct_choice_id
        else:
            choice = next(c.id for c in variant.choices if c.pitfall is not None)
        answer_served(client, auth, served, choice)
        pitfall = variant.choice(choice).pitfall
        given.append((variant.id.point, choose == "right", pitfall.id if pitfall else None))
    # Mid-session: the answers so far, and the state says it runs.
    running = get(client, auth, session["session_id"], "/summary").json()
    assert not running["session"]["over"] and len(running["questions"]) == 3
    finished = client.post(f"{SESSIONS}/{session['session_id']}/finish", headers=auth).json()
    assert finished["over"] and finished["answered"] == 3

    summary = get(client, auth, session["session_id"], "/summary").json()
    assert (summary["right"], summary["wrong"], summary["unanswered"]) == (1, 2, 1)
    per_point: dict[str, list[int]] = {}
    for point, right, _ in given:
        per_point.setdefault(point, [0, 0])[0 if right else 1] += 1
    answered = {p["point"]: [p["right"], p["wrong"]] for p in summary["points"]}
    assert {p: v for p, v in answered.items() if v != [0, 0]} == per_point
    assert sum(p["unanswered"] for p in summary["points"]) == 1
    order = [p.slug for p in card.points]
    assert [p["point"] for p in summary["points"]] == sorted(
        (p["point"] for p in summary["points"]), key=order.index
    )
    fallen: dict[str, int] = {}
    for _, _, pitfall in given:
        if pitfall:
            fallen[pitfall] = fallen.get(pitfall, 0) + 1
    assert {p["pitfall_id"]: p["times"] for p in summary["pitfalls"]} == fallen
    assert [q["answered"] for q in summary["questions"]] == [True, True, True, False]
    assert [q["correct"] for q in summary["questions"]] == [True, False, False, False]
    assert len(summary["wrong_templates"]) == len(
        {q["template_id"] for q in summary["questions"][1:3]}
    )

    # Over: no question, no answer.
    assert_problem(get(client, auth, session["session_id"], "/question"), 409, "session_over")
    with app.state.sessionmaker() as db:
        row = db.get(PracticeSession, session["session_id"])
        assert row.finished_at is not None


def test_an_answer_after_finishing_is_refused(client, app, auth):
    session = start(client, auth, "card", size=3)
    served = next_question(client, auth, session["session_id"])
    client.post(f"{SESSIONS}/{session['session_id']}/finish", headers=auth)
    late = send(client, auth, session["session_id"], served["question"]["token"], "a")
    assert_problem(late, 409, "session_over")
    assert get(client, auth, session["session_id"]).json()["answered"] == 0
    no_question = client.get(
        f"{SESSIONS}/{session['session_id']}/question", params={"lang": "zh"}, headers=auth
    )
    assert (
        assert_problem(no_question, 409, "session_over")["detail"]
        == "本次练习已结束：请查看练习小结。"
    )
    # Finishing again keeps the end it had.
    again = client.post(f"{SESSIONS}/{session['session_id']}/finish", headers=auth).json()
    assert again["ended_at"] == get(client, auth, session["session_id"]).json()["ended_at"]


# --- refusals ------------------------------------------------------------------------------------


def unknown_to_another_learner(client, auth, session):
    """Everything of ``session`` is a 404 to another learner, who answers nothing in it."""
    served = next_question(client, auth, session["session_id"])
    stranger = new_learner(client)
    for what in ("", "/question", "/summary"):
        assert_problem(get(client, stranger, session["session_id"], what), 404, "session_not_found")
    finish = client.post(f"{SESSIONS}/{session['session_id']}/finish", headers=stranger)
    assert_problem(finish, 404, "session_not_found")
    answer = send(client, stranger, session["session_id"], served["question"]["token"], "a")
    assert_problem(answer, 404, "session_not_found")
    assert get(client, auth, session["session_id"]).json()["answered"] == 0


def test_another_learners_session_is_unknown(client, auth):
    unknown_to_another_learner(client, auth, start(client, auth, "card", size=2))
    assert_problem(get(client, auth, "no-such-session"), 404, "session_not_found")


def test_a_session_answers_only_its_own_questions(client, auth):
    one = start(client, auth, "card", size=2)
    other = start(client, auth, "card", size=2)
    served = next_question(client, auth, other["session_id"])
    foreign = send(client, auth, one["session_id"], served["question"]["token"], "a")
    assert_problem(foreign, 422, "question_not_in_session")
    loose = question(client)
    assert_problem(
        send(client, auth, one["session_id"], loose["token"], "a"), 422, "question_not_in_session"
    )
    assert_problem(send(client, auth, one["session_id"], "tampered", "a"), 400, "invalid_token")


@pytest.mark.parametrize(
    "fields",
    [
        {"mode": "marathon"},
        {"mode": "card", "size": 0},
        {"mode": "card", "size": 101},
        {"mode": "card", "point": "optimizer-memory"},
        {"mode": "exam", "templates": ["t"]},
        {"mode": "point", "point": ""},
        {"mode": "mistakes", "templates": []},
        {"mode": "mistakes", "templates": ["x" * 101]},
    ],
)
def test_a_malformed_start_is_a_422_problem(client, auth, fields):
    response = client.post(SESSIONS, json={"card_id": CARD_ID, **fields}, headers=auth)
    assert_problem(response, 422, "invalid_request")


@pytest.mark.parametrize(
    "fields,code",
    [
        ({"card_id": "no-such-card", "mode": "card"}, "card_not_found"),
        ({"card_id": CARD_ID, "mode": "point", "point": "no-such-point"}, "point_not_found"),
    ],
)
def test_an_unknown_card_or_point_is_a_404_problem(client, auth, fields, code):
    assert_problem(client.post(SESSIONS, json=fields, headers=auth), 404, code)


def test_sessions_need_a_learner_token(client):
    response = client.post(SESSIONS, json={"card_id": CARD_ID, "mode": "card"})
    assert_problem(response, 401, response.json()["code"])
    assert response.headers["WWW-Authenticate"] == "Bearer"


@contextmanager
def on_postgres(pg_url, tmp_path, cards):
    """An app on a migrated PostgreSQL database, with a clock the test moves: (app, clock,
    client)."""
    import dataclasses

    from conftest import FakeClock, make_settings
    from fastapi.testclient import TestClient

    from app.cli import migrate
    from app.main import create_app

    migrate(pg_url)
    app = create_app(make_settings(tmp_path, pg_url), cards=cards)
    clock = FakeClock(datetime.now(UTC).replace(microsecond=0))
    app.state.context = dataclasses.replace(app.state.context, clock=clock)
    try:
        with TestClient(app) as client:
            yield app, clock, client
    finally:
        app.state.sessionmaker.kw["bind"].dispose()


def test_on_postgres_an_exam_runs_to_its_summary(pg_url, tmp_path, cards):
    with on_postgres(pg_url, tmp_path, cards) as (app, clock, client):
        auth = new_learner(client)
        exam = start(client, auth, "exam", size=2)
        deadline = datetime.fromisoformat(exam["deadline_at"])
        assert deadline == clock.now + timedelta(seconds=2 * 90)  # in UTC, with its offset
        served = next_question(client, auth, exam["session_id"])
        stored = answer_served(client, auth, served, session_variant(app, served).correct_choice_id)
        assert stored["feedback"] is None
        second = next_question(client, auth, exam["session_id"])
        clock.now = deadline + EXAM_GRACE + timedelta(seconds=1)
        late = send(client, auth, exam["session_id"], second["question"]["token"], "a")
        assert_problem(late, 409, "exam_over")
        for _ in range(2):  # the end is stored once, at the deadline
            summary = get(client, auth, exam["session_id"], "/summary").json()
            assert (summary["right"], summary["wrong"], summary["unanswered"]) == (1, 0, 1)
            assert datetime.fromisoformat(summary["session"]["ended_at"]) == deadline
