"""Today (``/`` and ``GET /api/v1/me/today``), the learner's time zone (``PATCH /api/v1/me``),
the review forecast and the activity calendar, honest progress on /review and
``/api/v1/me/progress``, and "next review in N days" under a verdict. Answers are given at set
moments of the test clock; the expected figures are worked out here by hand."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, date, datetime, timedelta
from types import SimpleNamespace

import pytest
from sqlalchemy import select, update

from app.auth.service import set_exam_date
from app.domain.identity import QuestionId
from app.models import Learner, ReviewItem
from app.practice.sessions import start_session

API = "/api/v1"
CARD = "zero-memory-offload"
SHANGHAI = "Asia/Shanghai"
# 15:30 UTC on Dec 1 is 23:30 in Shanghai; 16:30 UTC is 00:30 on Dec 2 there.
LATE_DEC_1 = datetime(2026, 12, 1, 15, 30, tzinfo=UTC)
EARLY_DEC_2_SHANGHAI = datetime(2026, 12, 1, 16, 30, tzinfo=UTC)
# 23:00 UTC on Dec 2 is 07:00 on Dec 3 in Shanghai
MORNING_DEC_3_SHANGHAI = datetime(2026, 12, 2, 23, 0, tzinfo=UTC)


@pytest.fixture
def auth(client):
    token = client.post(f"{API}/learners").json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


def ask(client, point="optimizer-memory", seed=1):
    response = client.get(f"{API}/cards/{CARD}/points/{point}/question?seed={seed}")
    assert response.status_code == 200, response.text
    return response.json()


def variant(app, body):
    return app.state.catalog.variant(
        QuestionId(
            body["card_id"],
            body["point"],
            body["template_id"],
            body["template_version"],
            body["seed"],
        )
    )


def answer(client, app, auth, *, right, point="optimizer-memory", seed=1, duration_ms=None):
    body = ask(client, point, seed)
    chosen = variant(app, body)
    choice = chosen.correct_choice_id if right else next(c.id for c in chosen.choices if c.pitfall)
    payload = {"token": body["token"], "choice_id": choice, "client_answer_id": uuid.uuid4().hex}
    if duration_ms is not None:
        payload["duration_ms"] = duration_ms
    response = client.post(f"{API}/answers", json=payload, headers=auth)
    assert response.status_code == 200, response.text
    return body


def me_today(client, auth):
    response = client.get(f"{API}/me/today", headers=auth)
    assert response.status_code == 200, response.text
    return response.json()


def set_zone(client, auth, zone):
    response = client.patch(f"{API}/me", json={"time_zone": zone}, headers=auth)
    assert response.status_code == 200, response.text
    return response.json()


def learner_id(client, auth):
    return client.get(f"{API}/me", headers=auth).json()["learner_id"]


# --- the time zone ----------------------------------------------------------------------------


def test_the_app_sets_the_learner_s_time_zone_and_an_unknown_one_is_a_422(client, auth, db):
    assert client.get(f"{API}/me", headers=auth).json()["time_zone"] is None
    assert set_zone(client, auth, SHANGHAI)["time_zone"] == SHANGHAI
    assert client.get(f"{API}/me", headers=auth).json()["time_zone"] == SHANGHAI
    for bad in ("Mars/Olympus_Mons", "../../etc/passwd", "x" * 65):
        response = client.patch(f"{API}/me", json={"time_zone": bad}, headers=auth)
        assert response.status_code == 422, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
    assert client.patch(f"{API}/me", json={"zone": "UTC"}, headers=auth).status_code == 422
    assert set_zone(client, auth, None)["time_zone"] is None
    stored = db.scalar(select(Learner.time_zone).where(Learner.id == learner_id(client, auth)))
    assert stored is None
    assert client.patch(f"{API}/me", json={"time_zone": "UTC"}).status_code == 401


def test_the_app_sets_the_exam_date_in_the_learner_s_days(client, auth, clock):
    """PATCH /me {"exam_date"}: today or later on the learner's calendar, null for none; each
    field is changed only when sent, and a refused body changes nothing."""
    clock.now = EARLY_DEC_2_SHANGHAI  # Dec 1 in UTC, Dec 2 in Shanghai
    set_zone(client, auth, SHANGHAI)
    past = client.patch(
        f"{API}/me",
        json={"exam_date": "2026-12-01"},
        headers={**auth, "Accept-Language": "zh"},
    )
    assert past.status_code == 400 and past.json()["code"] == "invalid_date"
    assert past.json()["detail"] == "考试日期不能早于今天。"
    saved = client.patch(f"{API}/me", json={"exam_date": "2026-12-02"}, headers=auth)
    assert saved.status_code == 200 and saved.json()["time_zone"] == SHANGHAI  # zone kept
    today = me_today(client, auth)
    assert (today["exam_date"], today["days_to_exam"]) == ("2026-12-02", 0)
    # In UTC it is Dec 1 there: the date of Dec 1 is today, and a zone sent with it counts.
    both = client.patch(
        f"{API}/me", json={"time_zone": None, "exam_date": "2026-12-01"}, headers=auth
    )
    assert both.status_code == 200 and both.json()["time_zone"] is None
    assert me_today(client, auth)["exam_date"] == "2026-12-01"
    refused = client.patch(
        f"{API}/me",
        json={"time_zone": "Mars/Olympus_Mons", "exam_date": "2026-12-09"},
        headers=auth,
    )
    assert refused.status_code == 422
    assert me_today(client, auth)["exam_date"] == "2026-12-01"  # nothing changed
    bad = client.patch(f"{API}/me", json={"exam_date": "next week"}, headers=auth)
    assert bad.status_code == 422 and bad.json()["code"] == "invalid_request"
    slip = client.patch(f"{API}/me", json={"exam_date": "9999-12-31"}, headers=auth)
    assert slip.status_code == 400 and slip.json()["code"] == "invalid_date"
    assert slip.json()["detail"] == "The exam date has to be within 3 years."
    assert me_today(client, auth)["exam_date"] == "2026-12-01"  # nothing changed
    assert client.patch(f"{API}/me", json={"exam_date": None}, headers=auth).status_code == 200
    today = me_today(client, auth)
    assert (today["exam_date"], today["days_to_exam"]) == (None, None)
    assert client.patch(f"{API}/me", json={}, headers=auth).status_code == 200  # nothing sent


# --- Today ------------------------------------------------------------------------------------


def test_today_in_the_learner_s_days(client, app, auth, clock, db):
    set_zone(client, auth, SHANGHAI)
    clock.now = LATE_DEC_1
    answer(client, app, auth, right=False, seed=1)  # due again 2 minutes later
    clock.now = EARLY_DEC_2_SHANGHAI
    answer(client, app, auth, right=True, point="gradient-sharding", seed=2)  # Good: due in 2 days
    me = learner_id(client, auth)
    set_exam_date(db=db, learner_id=me, exam_date=date(2026, 12, 10))
    clock.now = MORNING_DEC_3_SHANGHAI
    today = me_today(client, auth)
    assert today["date"] == "2026-12-03" and today["time_zone"] == SHANGHAI
    # answers on Dec 1 and Dec 2 (Shanghai), none yet on Dec 3: a 2-day streak, still alive
    assert today["streak"] == {"days": 2, "answered_today": False}
    assert today["answers"] == 2 and today["answers_today"] == 0
    # the wrong answer is due (since 15:32 UTC Dec 1); the right one on Dec 3 16:30 UTC, which
    # is 00:30 Dec 4 in Shanghai: not today
    assert today["due_now"] == 1 and today["due_later_today"] == 0
    assert today["own_time"] is False and today["seconds_per_question"] == 60
    assert today["minutes"] == 1  # one question at 60 s
    assert today["exam_date"] == "2026-12-10" and today["days_to_exam"] == 7
    assert today["resume"] is None
    assert today["next"] == {
        "action": "review",
        "scope": "card",
        "card_id": CARD,
        "mode": "review",
        "point": None,
        "session_id": None,
    }

    # in UTC both answers fell on Dec 1, and it is still Dec 2 there: a 1-day streak, alive
    set_zone(client, auth, None)
    utc = me_today(client, auth)
    assert utc["date"] == "2026-12-02" and utc["streak"] == {"days": 1, "answered_today": False}
    assert utc["days_to_exam"] == 8


def test_the_minutes_follow_the_learner_s_median_answer_time(client, app, auth, clock):
    clock.now = LATE_DEC_1
    # five wrong answers taking 20, 30, 40, 50 and 60 s: median 40 s
    for seed, seconds in zip(range(1, 6), (20, 30, 40, 50, 60), strict=True):
        point = ("optimizer-memory", "gradient-sharding", "zero3-communication")[seed % 3]
        answer(client, app, auth, right=False, point=point, seed=seed, duration_ms=seconds * 1000)
    clock.advance(minutes=5)
    today = me_today(client, auth)
    assert today["own_time"] is True and today["seconds_per_question"] == 40
    # every wrong answer rated its template; templates met twice count once
    due = today["due_now"]
    assert 1 <= due <= 5
    assert today["minutes"] == -(-due * 40 // 60)  # ceil(due·40 s / 60)
    # all on Dec 1 (UTC): answered today
    assert today["streak"] == {"days": 1, "answered_today": True} and today["answers_today"] == 5


def test_a_first_visit_is_invited_to_its_first_question(client, auth, clock):
    today = me_today(client, auth)
    assert today["answers"] == 0 and today["due_now"] == 0 and today["streak"]["days"] == 0
    # the deck's first card in learning order (its prerequisites come before it), first point
    deck = client.get(f"{API}/cards").json()
    first_card = deck[0]["id"]
    assert not deck[0]["prerequisites"]
    first = deck[0]["points"][0]["slug"]
    assert today["next"] == {
        "action": "start",
        "scope": "card",
        "card_id": first_card,
        "mode": "point",
        "point": first,
        "session_id": None,
    }
    page = client.get("/")
    assert page.status_code == 200 and page.template.name == "today.html"
    assert "Answer your first question" in page.text
    # A link to the first question, not a form: reading Today sets no cookie for a new visitor.
    assert f'href="/cards/{first_card}/points/' in page.text and "set-cookie" not in page.headers
    # no tiles of zeros for a first visit
    assert "today-facts" not in page.text and "No streak yet" not in page.text


def test_an_unfinished_session_is_resumed_when_nothing_is_due(client, app, auth, clock, db):
    me = learner_id(client, auth)
    row = start_session(
        db=db,
        catalog=app.state.catalog,
        learner_id=me,
        card_id=CARD,
        mode="card",
        seed_secret=b"s" * 32,
        size=4,
        now=clock.now,
    )
    today = me_today(client, auth)
    assert today["resume"] == {
        "session_id": row.id,
        "scope": "card",
        "card_id": CARD,
        "mode": "card",
        "answered": 0,
        "size": 4,
        "url": f"/sessions/{row.id}",
    }
    assert today["next"]["action"] == "resume" and today["next"]["session_id"] == row.id
    # an exam whose time is up is not offered
    clock.advance(seconds=1)
    start_session(
        db=db,
        catalog=app.state.catalog,
        learner_id=me,
        card_id=CARD,
        mode="exam",
        seed_secret=b"s" * 32,
        size=1,
        now=clock.now,
    )
    clock.advance(minutes=2)
    assert me_today(client, auth)["resume"]["session_id"] == row.id


def test_the_today_page_shows_the_same_facts_with_one_start_button(client, app, clock, db):
    client.get("/")  # a browser session
    clock.now = LATE_DEC_1
    page = client.get(f"/cards/{CARD}/points/optimizer-memory/practice?seed=1")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    token = re.search(r'name="token" value="([^"]+)"', page.text).group(1)
    body = {"card_id": CARD, "point": "optimizer-memory"}
    chosen = variant(
        app,
        {**body, **_identity(app, token)},
    )
    wrong = next(c.id for c in chosen.choices if c.pitfall)
    client.post(
        "/answers",
        data={"csrf_token": csrf, "token": token, "choice_id": wrong, "client_answer_id": "a1"},
    )
    clock.advance(minutes=3)
    page = client.get("/")
    assert page.template.name == "today.html"
    facts = page.context["facts"]
    assert facts.due_now == 1 and facts.minutes == 1 and facts.streak.days == 1
    text = page.text
    assert "1 review due now" in text and "About 1 minute" in text
    assert len(re.findall(r"<button", text)) == 1  # one Start button
    assert 'name="mode" value="review"' in text
    # exam-point titles link to practising that point
    assert f'href="/cards/{CARD}/points/optimizer-memory/practice"' in text
    zh = client.get("/?lang=zh").text
    assert "1 道题待复习" in zh and "大约 1 分钟" in zh


def _identity(app, token):
    ctx = app.state.context
    question = ctx.signer.verify(token, ctx.catalog).question
    return {
        "template_id": question.template_id,
        "template_version": question.template_version,
        "seed": question.seed,
    }


# --- the forecast and the activity calendar ---------------------------------------------------


def test_forecast_and_activity_in_the_learner_s_days(client, app, auth, clock):
    set_zone(client, auth, SHANGHAI)
    clock.now = LATE_DEC_1
    answer(client, app, auth, right=False, seed=1)
    clock.now = EARLY_DEC_2_SHANGHAI
    answer(client, app, auth, right=True, point="gradient-sharding", seed=2)
    clock.now = MORNING_DEC_3_SHANGHAI
    forecast = client.get(f"{API}/me/forecast", headers=auth).json()
    days = forecast["days"]
    assert len(days) == 14 and days[0] == {"date": "2026-12-03", "due": 1}  # overdue
    assert days[1] == {"date": "2026-12-04", "due": 1}  # 00:30 Dec 4 in Shanghai
    assert sum(d["due"] for d in days) == 2
    activity = client.get(f"{API}/me/activity", headers=auth).json()["days"]
    assert activity[-1] == {"date": "2026-12-03", "answers": 0}
    assert activity[-2] == {"date": "2026-12-02", "answers": 1}
    assert activity[-3] == {"date": "2026-12-01", "answers": 1}
    assert activity[0]["date"] == "2026-06-08"  # the Monday 25 weeks before Nov 30
    assert len(activity) == 25 * 7 + 4


# --- honest progress --------------------------------------------------------------------------


def test_progress_is_honest_and_in_the_card_s_order(client, app, auth, clock, db, card):
    clock.now = LATE_DEC_1
    last = card.points[-1].slug
    first = card.points[0].slug
    for seed in range(1, 4):  # the last exam point: three wrong answers
        answer(client, app, auth, right=False, point=last, seed=seed)
    answer(client, app, auth, right=True, point=first, seed=7)
    # the right answer's item: put its last review 10 days back with S = 2.3065 (a first Good)
    me = learner_id(client, auth)
    item = db.scalars(
        select(ReviewItem).where(ReviewItem.learner_id == me, ReviewItem.point == first)
    ).one()
    assert item.state["state"] == 2  # Review
    state = dict(item.state)
    state["stability"] = 2.3065
    state["last_review"] = (LATE_DEC_1 - timedelta(days=10)).isoformat()
    db.execute(update(ReviewItem).where(ReviewItem.id == item.id).values(state=state))
    db.commit()
    cards = client.get(f"{API}/me/progress", headers=auth).json()["cards"]
    points = cards[0]["points"]
    assert [p["point"] for p in points] == [first, last]  # the card's order
    # (1 + 0.98035·10/2.3065)^-0.1542 = 0.77437 (FSRS-6's curve, w20 = 0.1542), to 3 decimals
    assert points[0]["retention"] == 0.774
    assert points[0]["reviewed"] == 1 and points[0]["learning"] == 0
    # three wrong answers: no figure, not 100 %
    assert points[1]["share_right"] == 0 and points[1]["retention"] is None
    assert points[1]["learning"] >= 1 and points[1]["reviewed"] == 0
    pitfalls = cards[0]["pitfalls"]
    assert pitfalls and all(p["state"] in ("falling", "avoided") for p in pitfalls)
    assert any(p["state"] == "falling" and p["chosen"] >= 1 for p in pitfalls)

    page = client.get("/review", headers={})
    assert page.status_code == 200  # a browser without the app's learner: empty progress
    assert "100%" not in page.text


def _right(client, auth, question, chosen):
    response = client.post(
        f"{API}/answers",
        json={
            "token": question["token"],
            "choice_id": chosen.correct_choice_id,
            "client_answer_id": uuid.uuid4().hex,
        },
        headers=auth,
    )
    assert response.status_code == 200, response.text


def _shows(chosen, pitfall_id):
    return any(c.pitfall is not None and c.pitfall.id == pitfall_id for c in chosen.choices)


def test_a_pitfall_avoided_three_times_after_a_fall_is_fixed(client, app, auth, clock, card):
    clock.now = LATE_DEC_1
    body = answer(client, app, auth, right=False, seed=11)
    fallen = next(c for c in variant(app, body).choices if c.pitfall).pitfall.id
    template = body["template_id"]
    offering = card.templates_offering(fallen)
    # Right answers on templates carrying that pitfall: one question that did not show it (the
    # learner could not fall for it: it does not count) and three that did.
    shown = hidden = 0
    for seed in range(12, 400):
        if shown == 3 and hidden == 1:
            break
        question = ask(client, offering[template], seed)
        if question["template_id"] not in offering:
            continue
        chosen = variant(app, question)
        if _shows(chosen, fallen) and shown < 3:
            shown += 1
        elif not _shows(chosen, fallen) and hidden < 1:
            hidden += 1
        else:
            continue
        _right(client, auth, question, chosen)
    assert (shown, hidden) == (3, 1)
    pitfalls = client.get(f"{API}/me/progress", headers=auth).json()["cards"][0]["pitfalls"]
    row = next(p for p in pitfalls if p["pitfall_id"] == fallen)
    assert row["state"] == "fixed" and row["chosen"] == 1 and row["offered"] == 4


def test_only_the_pitfalls_a_question_showed_were_offered(client, app, auth, clock, card):
    """A question shows a few of its template's pitfalls: the others were not avoided."""
    clock.now = LATE_DEC_1
    body = answer(client, app, auth, right=True, seed=5)
    shown = {c.pitfall.id for c in variant(app, body).choices if c.pitfall is not None}
    template = card.template(body["template_id"])
    assert len(shown) == 3 and len(template.pitfalls) > 3
    pitfalls = client.get(f"{API}/me/progress", headers=auth).json()["cards"][0]["pitfalls"]
    assert {p["pitfall_id"]: (p["state"], p["offered"], p["chosen"]) for p in pitfalls} == {
        pitfall_id: ("avoided", 1, 0) for pitfall_id in shown
    }


def test_a_typed_answer_offered_every_pitfall_of_its_template(client, app, auth, clock, card):
    """Asked without choices, any pitfall's value could have been typed (and is recognised)."""
    clock.now = LATE_DEC_1
    question = client.get(
        f"{API}/cards/{CARD}/points/zero-stage-memory/question",
        params={"seed": 724, "mode": "typed"},
    ).json()
    assert question["template_id"] == "p2-zero2-per-rank"
    # 2Ψ + 14Ψ/N_d with Ψ = 1.3B, N_d = 32: 3.16875e9 bytes (tests/test_typed_answers.py)
    response = client.post(
        f"{API}/answers",
        json={
            "token": question["token"],
            "value": "3.17",
            "unit": "GB",
            "client_answer_id": uuid.uuid4().hex,
        },
        headers=auth,
    )
    assert response.json()["correct"] is True
    template = card.template("p2-zero2-per-rank")
    pitfalls = client.get(f"{API}/me/progress", headers=auth).json()["cards"][0]["pitfalls"]
    assert {p["pitfall_id"]: (p["state"], p["offered"]) for p in pitfalls} == {
        p.id: ("avoided", 1) for p in template.pitfalls
    }


# --- the web pages ----------------------------------------------------------------------------


def _web_answer(client, app, *, right, point="optimizer-memory", seed=1):
    page = client.get(f"/cards/{CARD}/points/{point}/practice?seed={seed}")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    token = re.search(r'name="token" value="([^"]+)"', page.text).group(1)
    chosen = variant(app, {"card_id": CARD, "point": point, **_identity(app, token)})
    choice = chosen.correct_choice_id if right else next(c.id for c in chosen.choices if c.pitfall)
    response = client.post(
        "/answers",
        data={
            "csrf_token": csrf,
            "token": token,
            "choice_id": choice,
            "client_answer_id": uuid.uuid4().hex,
        },
    )
    assert response.status_code == 200, response.text
    return response


def test_the_verdict_says_when_the_question_comes_back(client, app, clock):
    clock.now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    wrong = _web_answer(client, app, right=False, seed=3)
    assert "Next review: later today, with new numbers." in wrong.text
    right = _web_answer(client, app, right=True, point="gradient-sharding", seed=4)
    # a first Good: due 2 days later (round(w2 = 2.3065)), Dec 3
    assert "Next review in 2 days (Dec 3, 2026)." in right.text
    zh = client.get(right.url.path + "?lang=zh").text
    assert "2 天后复习（2026年12月3日）。" in zh


def test_the_review_page_draws_the_charts_with_tables(client, app, clock):
    clock.now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    _web_answer(client, app, right=False, seed=3)
    _web_answer(client, app, right=True, point="gradient-sharding", seed=4)
    page = client.get("/review")
    text = page.text
    assert text.count("<svg") >= 2 and 'role="img"' in text
    assert "Reviews in the next 14 days" in text and "Your activity" in text
    assert "The same as a table" in text
    forecast = page.context["forecast"]
    assert [b.count for b in forecast.bars][:3] == [1, 0, 1]  # Dec 1 (09:02), 2, 3 (UTC)
    activity = page.context["activity"]
    assert activity.total == 2 and activity.active_days == 1
    # the progress rows in the card's order, no 100 % for a point answered wrong
    rows = [p.point for p in page.context["progress"]]
    order = [p.slug for p in app.state.catalog.latest(CARD).points]
    assert rows == sorted(rows, key=order.index)
    assert "no figure yet" in text
    assert "2 answers in the last 26 weeks, on 1 day. One square a day" in text
    zh = client.get("/review?lang=zh").text
    assert "未来 14 天的复习" in zh and "暂无数据" in zh
    caption = re.search(r'<figcaption id="activity-caption">(.*?)</figcaption>', zh).group(1)
    assert "，" in caption and "。" in caption and ", " not in caption and ". " not in caption


def test_the_review_page_counts_the_pitfalls_a_question_showed(client, app, clock):
    """One wrong answer to a four-choice question: the pitfall chosen, the two others shown
    avoided, and nothing about the pitfalls of its template the question did not show."""
    clock.now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    _web_answer(client, app, right=False, seed=3)
    text = client.get("/review").text
    assert text.count("chosen 1× out of 1 answer that offered it") == 1
    assert text.count("chosen 0× out of 1 answer that offered it") == 2
    assert "2 pitfalls offered and avoided so far" in text
    assert "times out of" not in text
    zh = client.get("/review?lang=zh").text
    assert zh.count("在出现它的 1 次作答中选了 1 次") == 1
    assert zh.count("在出现它的 1 次作答中选了 0 次") == 2


def test_the_card_page_puts_the_practise_buttons_first(client):
    text = client.get(f"/cards/{CARD}").text
    first_button = text.index(">Practise</button>")
    assert first_button < text.index('id="toc-title"') < text.index('id="definition"')


def test_the_account_page_offers_the_time_zone(client, db):
    from test_authoring_web import csrf as csrf_of

    email = f"tz-{uuid.uuid4().hex[:8]}@example.org"
    page = client.get("/signup")
    client.post(
        "/signup",
        data={
            "csrf_token": csrf_of(page.text),
            "email": email,
            "password": "correct horse battery",
        },
    )
    page = client.get("/login")
    client.post(
        "/login",
        data={
            "csrf_token": csrf_of(page.text),
            "email": email,
            "password": "correct horse battery",
        },
    )
    page = client.get("/account")
    assert 'action="/account/time-zone"' in page.text
    response = client.post(
        "/account/time-zone", data={"csrf_token": csrf_of(page.text), "time_zone": SHANGHAI}
    )
    assert response.status_code == 200 and f'value="{SHANGHAI}"' in response.text
    stored = db.scalar(select(Learner.time_zone).where(Learner.email == email))
    assert stored == SHANGHAI
    bad = client.post(
        "/account/time-zone", data={"csrf_token": csrf_of(page.text), "time_zone": "Nowhere/City"}
    )
    assert bad.status_code == 400


# --- the exam day and after it ----------------------------------------------------------------


def _exam_fact(text):
    """The Today page's exam fact, its tags dropped and its spaces joined."""
    fact = re.search(r'<span class="fact-label">(?:Exam|考试)</span>(.*?)</li>', text, re.S)
    return " ".join(re.sub(r"<[^>]+>", " ", fact.group(1)).split())


def test_an_exam_date_gone_by_is_told_as_passed_not_as_today(client, app, clock):
    """The exam was on Dec 3: on Dec 5 Today said 'Exam: Today' and /review '-2 days left'.
    After the day they say it has passed and offer to set the next; on the day itself, today."""
    clock.now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    _web_answer(client, app, right=True, seed=3)
    page = client.get("/review")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    saved = client.post("/review/exam-date", data={"csrf_token": csrf, "exam_date": "2026-12-03"})
    assert saved.status_code == 200
    assert re.search(r'days-left">(\d+)<', saved.text).group(1) == "2"
    assert _exam_fact(client.get("/").text) == "2 days to go Dec 3, 2026"

    clock.now = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)  # the exam day
    assert _exam_fact(client.get("/").text) == "Today Dec 3, 2026"
    review = client.get("/review").text
    assert "Your exam is today (Dec 3, 2026)." in review and "days-left" not in review

    clock.now = datetime(2026, 12, 5, 9, 0, tzinfo=UTC)  # two days after it
    today = client.get("/").text
    assert _exam_fact(today) == "Your exam date has passed Dec 3, 2026. Set your next exam date"
    assert 'href="/review#exam-date"' in today
    review = client.get("/review").text
    assert "days-left" not in review and ">-2<" not in review
    assert "Your exam date (Dec 3, 2026) has passed: set the next one below, or clear it." in review
    zh_today = client.get("/?lang=zh").text
    assert _exam_fact(zh_today) == "考试日期已过 2026年12月3日。 设置下一次考试日期"
    zh_review = client.get("/review?lang=zh").text
    assert (
        "你的考试日期（2026年12月3日）已过：请在下方设置下一次考试日期，或将其清空。" in zh_review
    )


# --- answers sent later from offline ----------------------------------------------------------


def test_an_offline_answer_counts_on_the_day_it_was_given_not_the_day_it_arrived(
    client, app, auth, clock, monkeypatch
):
    """An app answers offline at 22:00 on Dec 2 (Shanghai) and sends it at 09:00 on Dec 3 with
    its answered_at. The streak, today's answers and the activity calendar counted it on Dec 3,
    the day it arrived: Dec 2 looked empty, the streak of Dec 1 and 2 read 1 day."""
    import app.practice.questions as questions

    # question tokens are stamped with the process clock: the test's clock here
    monkeypatch.setattr(questions, "time", SimpleNamespace(time=lambda: clock.now.timestamp()))
    set_zone(client, auth, SHANGHAI)
    clock.now = LATE_DEC_1  # 23:30 on Dec 1 in Shanghai
    answer(client, app, auth, right=True, seed=1)
    clock.now = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)  # 09:00 on Dec 2: the app fetches
    body = ask(client, point="gradient-sharding", seed=2)
    clock.now = datetime(2026, 12, 3, 1, 0, tzinfo=UTC)  # 09:00 on Dec 3: back online
    sent = client.post(
        f"{API}/answers",
        json={
            "token": body["token"],
            "choice_id": variant(app, body).correct_choice_id,
            "client_answer_id": uuid.uuid4().hex,
            "answered_at": "2026-12-02T22:00:00+08:00",
        },
        headers=auth,
    )
    assert sent.status_code == 200, sent.text
    today = me_today(client, auth)
    assert today["date"] == "2026-12-03"
    assert today["streak"] == {"days": 2, "answered_today": False}
    assert today["answers"] == 2 and today["answers_today"] == 0
    days = client.get(f"{API}/me/activity", headers=auth).json()["days"]
    assert days[-3:] == [
        {"date": "2026-12-01", "answers": 1},
        {"date": "2026-12-02", "answers": 1},
        {"date": "2026-12-03", "answers": 0},
    ]
