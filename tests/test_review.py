"""Spaced review with fresh numbers: FSRS schedules pinned with fixed clocks, what comes due,
what counts as a review, pitfalls fallen for twice, the exam date.

Golden schedules come from FSRS-6's published default parameters, not from the code: a new item
rated Good starts with stability w2 = 2.3065 days and Easy with w3 = 8.2956 days; at the default
90 % desired retention the next interval equals the stability (rounded to whole days); a wrong
answer waits one learning step (2 minutes here).
"""

from __future__ import annotations

import html
import re
import uuid
from datetime import UTC, date, datetime, timedelta, timezone

import pytest
from sqlalchemy import select

from app.auth.service import as_utc
from app.domain.identity import QuestionId
from app.domain.scheduling import new_state, review
from app.models import PracticeSession, ReviewItem, ReviewLog
from app.practice.sessions import question_id_at

API = "/api/v1"
T0 = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
W2_GOOD_DAYS = 2  # round(2.3065)
W3_EASY_DAYS = 8  # round(8.2956)
LEARNING_STEP = timedelta(minutes=2)


# --- the scheduler itself ---------------------------------------------------------------------


def test_a_new_item_answered_wrong_is_due_after_one_learning_step():
    outcome = review(new_state(1, T0), correct=False, duration_ms=None, now=T0)
    assert outcome.due == T0 + LEARNING_STEP and outcome.rating == 1


def test_a_new_item_answered_right_graduates_with_the_initial_stability():
    good = review(new_state(1, T0), correct=True, duration_ms=30_000, now=T0)
    assert good.due == T0 + timedelta(days=W2_GOOD_DAYS) and good.rating == 3
    assert good.state["stability"] == pytest.approx(2.3065)
    easy = review(new_state(1, T0), correct=True, duration_ms=3_000, now=T0)
    assert easy.due == T0 + timedelta(days=W3_EASY_DAYS) and easy.rating == 4
    hard = review(new_state(1, T0), correct=True, duration_ms=200_000, now=T0)
    assert hard.rating == 2 and hard.due < good.due


def test_schedules_are_reproducible_for_a_fixed_clock():
    runs = []
    for _ in range(2):
        state, now, dues = new_state(7, T0), T0, []
        for correct in (False, True, True, True, False, True):
            outcome = review(state, correct=correct, duration_ms=None, now=now)
            state, now = outcome.state, outcome.due
            dues.append(outcome.due)
        runs.append(dues)
    assert runs[0] == runs[1]
    # Right answers push the item further out each time; a lapse brings it back within minutes.
    gaps = [b - a for a, b in zip([T0, *runs[0]], runs[0], strict=False)]
    assert gaps[0] == LEARNING_STEP and gaps[2] > gaps[1] and gaps[3] > gaps[2]
    assert gaps[4] == LEARNING_STEP


def test_an_exam_date_pulls_a_late_review_before_the_exam():
    exam = (T0 + timedelta(days=5)).date()
    outcome = review(
        new_state(1, T0), correct=True, duration_ms=3_000, now=T0, exam_date=exam, item_key="k"
    )
    eve = datetime.combine(exam, datetime.min.time(), tzinfo=UTC) - timedelta(hours=12)
    assert T0 < outcome.due <= eve  # Easy would have been 8 days out, after the exam
    near = review(new_state(1, T0), correct=False, duration_ms=None, now=T0, exam_date=exam)
    assert near.due == T0 + LEARNING_STEP  # already before the exam: unchanged


# --- through the API --------------------------------------------------------------------------


@pytest.fixture
def auth(client):
    token = client.post(f"{API}/learners").json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


def ask(client, point="optimizer-memory", seed=1):
    return client.get(f"{API}/cards/zero-memory-offload/points/{point}/question?seed={seed}").json()


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


def send(client, auth, body, choice, cid=None):
    response = client.post(
        f"{API}/answers",
        json={
            "token": body["token"],
            "choice_id": choice,
            "client_answer_id": cid or uuid.uuid4().hex,
        },
        headers=auth,
    )
    assert response.status_code == 200, response.text
    return response.json()


def wrong(app, body):
    return next(c for c in variant(app, body).choices if c.pitfall is not None)


def due(client, auth, **params):
    response = client.get(f"{API}/me/review/due", params=params, headers=auth)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_wrong_answer_comes_due_within_minutes_with_fresh_numbers(client, app, auth, clock):
    body = ask(client, seed=5)
    send(client, auth, body, wrong(app, body).id)
    assert due(client, auth)["items"] == []
    clock.advance(minutes=2, seconds=1)
    items = due(client, auth)["items"]
    assert [i["template_id"] for i in items] == [body["template_id"]]
    fresh = items[0]["question"]
    assert fresh["template_id"] == body["template_id"] and fresh["point"] == body["point"]
    assert fresh["token"] != body["token"] and fresh["seed"] != body["seed"]
    # Answering the review right schedules it days away (relearning graduates).
    send(client, auth, fresh, variant(app, fresh).correct_choice_id)
    assert due(client, auth)["items"] == []
    clock.advance(days=1, minutes=1)
    assert [i["template_id"] for i in due(client, auth)["items"]] == [body["template_id"]]


def test_only_the_first_answer_to_a_question_rates_the_review(client, app, auth, clock, db):
    body = ask(client, seed=6)
    send(client, auth, body, wrong(app, body).id)
    # A retry of the very same question after seeing the key: stored, not rated Good.
    send(client, auth, body, variant(app, body).correct_choice_id)
    logs = db.scalars(select(ReviewLog)).all()
    assert [log.rating for log in logs] == [1]
    item = db.scalars(select(ReviewItem)).one()
    assert item.reviews == 1 and item.lapses == 1
    clock.advance(minutes=3)
    assert len(due(client, auth)["items"]) == 1


def _two_questions_offering_a_shared_pitfall(client, app, card):
    """(pitfall id, the templates carrying it, two (question, choice) pairs falling for it)."""
    carriers: dict[str, list[str]] = {}
    for template in card.templates():
        for pitfall in template.pitfalls:
            carriers.setdefault(pitfall.id, []).append(template.id)
    shared = {p: ts for p, ts in carriers.items() if len(ts) >= 2}
    if not shared:
        pytest.skip("no pitfall is carried by two templates of this card")
    # Find two questions (of any of the carrying templates) that offer the shared pitfall.
    pitfall_id, templates = next(iter(shared.items()))
    found = []
    for seed in range(2000):
        for point in card.points:
            body = ask(client, point=point.slug, seed=seed)
            if body["template_id"] not in templates:
                continue
            choice = next(
                (c for c in variant(app, body).choices if c.pitfall_id == pitfall_id), None
            )
            if choice is not None:
                found.append((body, choice.id))
        if len(found) >= 2:
            break
    assert len(found) >= 2
    return pitfall_id, templates, found[:2]


def test_a_pitfall_fallen_for_twice_brings_its_templates_forward(client, app, auth, clock, card):
    _, templates, found = _two_questions_offering_a_shared_pitfall(client, app, card)
    send(client, auth, *found[0])
    # One fall brings nothing forward: the answered template itself waits its learning step.
    assert due(client, auth, limit=50)["items"] == []
    send(client, auth, *found[1])
    # Right after the second fall, every template carrying the pitfall is due (not in 2 minutes).
    ids = {i["template_id"] for i in due(client, auth, limit=50)["items"]}
    assert set(templates) - {found[1][0]["template_id"]} <= ids


def test_two_falls_in_one_group_commit_batch_bring_the_pitfall_forward(
    client, app, auth, clock, card
):
    """Answers that arrive together are stored and rated in one transaction: the second fall in
    the batch counts the first one, stored in the same transaction."""
    from app.auth.service import learner_for_token

    _, templates, found = _two_questions_offering_a_shared_pitfall(client, app, card)
    with app.state.sessionmaker() as db:
        learner = learner_for_token(db=db, token=auth["Authorization"][7:])
    pending = _pending_for(app, learner, found, clock())
    _store_batch(app, pending)
    assert all(p.outcome is not None and p.error is None for p in pending)
    ids = {i["template_id"] for i in due(client, auth, limit=50)["items"]}
    assert set(templates) - {found[1][0]["template_id"]} <= ids


def _pending_for(app, learner, questions, now):
    """Writer input for ``learner`` answering ``questions`` ((body, choice id) pairs)."""
    from app.practice.answers import Submission, prepare

    ctx = app.state.context
    pending = []
    for body, choice in questions:
        token = ctx.signer.sign(variant(app, body).id)
        submission = Submission(token, choice, uuid.uuid4().hex)
        content = ctx.signer.verify(token, ctx.catalog)
        pending.append(prepare(ctx, learner, submission, now, content, None))
    return pending


def _store_batch(app, items):
    """What the answer writer does with one batch (without its thread)."""
    from app.db import write_transaction
    from app.practice.answers import store_batch

    with app.state.sessionmaker() as db, write_transaction(db):
        store_batch(db, items)


def _schedule(db, learner_id):
    """A learner's review items and rating logs, without what names the rows (ids)."""
    items = {
        item.template_id: (
            item.point,
            as_utc(item.due_at),
            item.reviews,
            item.lapses,
            {k: v for k, v in item.state.items() if k != "card_id"},
        )
        for item in db.scalars(select(ReviewItem).where(ReviewItem.learner_id == learner_id))
    }
    logs = [
        (by_id[log.review_item_id], log.rating, as_utc(log.due_after))
        for by_id in [
            {
                i.id: i.template_id
                for i in db.scalars(select(ReviewItem).where(ReviewItem.learner_id == learner_id))
            }
        ]
        for log in db.scalars(select(ReviewLog).order_by(ReviewLog.id))
        if log.review_item_id in by_id
    ]
    return items, logs


def test_a_batch_rates_exactly_as_its_answers_one_after_the_other(client, app, clock, card, db):
    """Group commit changes how answers are stored, not what they mean: one learner's answers
    written as one batch leave the same review items and logs as another learner's same
    answers written one at a time (a repeated question, right and wrong answers, a pitfall
    fallen for twice that brings its other templates forward)."""
    _batch_rates_as_one_by_one(client, app, clock, card, db)


@pytest.mark.postgres
def test_a_batch_rates_exactly_as_its_answers_one_after_the_other_postgres(
    pg_url, tmp_path, cards, card
):
    """The same on PostgreSQL, whose keyed reads take arrays (unnest) and lock the items."""
    import dataclasses

    from conftest import FakeClock, make_settings
    from fastapi.testclient import TestClient

    from app.cli import migrate
    from app.main import create_app

    migrate(pg_url)
    app = create_app(make_settings(tmp_path, pg_url), cards=cards)
    clock = FakeClock(T0)
    app.state.context = dataclasses.replace(app.state.context, clock=clock)
    with TestClient(app) as client, app.state.sessionmaker() as db:
        _batch_rates_as_one_by_one(client, app, clock, card, db)
    app.state.engine.dispose()


def _batch_rates_as_one_by_one(client, app, clock, card, db):
    from app.auth.service import LearnerRef
    from app.models import Learner

    _, templates, falls = _two_questions_offering_a_shared_pitfall(client, app, card)
    # Two questions of each point, each of a template no other question here has (a template
    # answered twice would be a second rating of one review item).
    used = {body["template_id"] for body, _ in falls}
    others = []
    for point in card.points:
        taken = 0
        for seed in range(3, 200):
            body = ask(client, point=point.slug, seed=seed)
            if body["template_id"] not in used:
                used.add(body["template_id"])
                others.append(body)
                taken += 1
            if taken == 2:
                break
    questions = [
        (others[0], variant(app, others[0]).correct_choice_id),
        falls[0],
        (others[1], wrong(app, others[1]).id),
        (others[0], wrong(app, others[0]).id),  # a retry: stored, not rated
        falls[1],
        *((body, variant(app, body).correct_choice_id) for body in others[2:6]),
    ]
    ids = [client.post(f"{API}/learners").json()["learner_id"] for _ in range(2)]
    refs = []
    for learner_id in ids:
        learner = db.get(Learner, learner_id)
        refs.append(LearnerRef(id=learner.id, kind=learner.kind, role=learner.role))
    db.commit()
    one_by_one = _pending_for(app, refs[0], questions, clock())
    for item in one_by_one:
        _store_batch(app, [item])
    together = _pending_for(app, refs[1], questions, clock())
    _store_batch(app, together)
    assert all(p.error is None for p in one_by_one + together)
    assert [p.outcome.replayed for p in together] == [False] * len(questions)
    expected = _schedule(db, ids[0])
    assert _schedule(db, ids[1]) == expected
    # The pitfall rule did fire: the other templates carrying it are due now.
    items, logs = expected
    assert len(logs) == len(questions) - 1  # the retry rates nothing
    forward = set(templates) - {falls[1][0]["template_id"]}
    assert forward and all(items[t][1] <= clock() for t in forward)


def test_due_reviews_paginate_with_a_cursor(client, app, auth, clock, card):
    for index, point in enumerate(card.points):
        body = ask(client, point=point.slug, seed=100 + index)
        send(client, auth, body, wrong(app, body).id)
    clock.advance(minutes=5)
    first = due(client, auth, limit=2)
    assert len(first["items"]) == 2 and first["next_cursor"]
    rest = due(client, auth, limit=50, cursor=first["next_cursor"])
    seen = [i["template_id"] for i in first["items"] + rest["items"]]
    assert len(seen) == len(set(seen)) == len(card.points)
    assert rest["next_cursor"] is None


def test_the_next_page_of_due_reviews_survives_reviewing_the_page_before(
    client, app, auth, clock, card
):
    """An app reviews what the first page gave, then asks for the next page: the cursor's own
    item is no longer due (reviewed), yet the page goes on where the first one stopped."""
    _next_page_after_reviewing(client, app, auth, clock, card)


@pytest.mark.postgres
def test_the_next_page_of_due_reviews_survives_reviewing_the_page_before_postgres(
    pg_url, tmp_path, cards, card
):
    """The same on PostgreSQL (timestamptz in the cursor's comparison)."""
    import dataclasses

    from conftest import FakeClock, make_settings
    from fastapi.testclient import TestClient

    from app.cli import migrate
    from app.main import create_app

    migrate(pg_url)
    app = create_app(make_settings(tmp_path, pg_url), cards=cards)
    clock = FakeClock(T0)
    app.state.context = dataclasses.replace(app.state.context, clock=clock)
    with TestClient(app) as client:
        token = client.post(f"{API}/learners").json()["access_token"]
        _next_page_after_reviewing(client, app, {"Authorization": f"Bearer {token}"}, clock, card)
    app.state.engine.dispose()


def _next_page_after_reviewing(client, app, auth, clock, card):
    wrong_first = []
    for index, point in enumerate(card.points):
        body = ask(client, point=point.slug, seed=100 + index)
        send(client, auth, body, wrong(app, body).id)
        wrong_first.append(body["template_id"])
        clock.advance(seconds=1)  # each due one second after the one before: most overdue first
    clock.advance(minutes=5)
    first = due(client, auth, limit=2)
    assert [i["template_id"] for i in first["items"]] == wrong_first[:2]
    for item in first["items"]:  # reviewed right: due again in days
        send(client, auth, item["question"], variant(app, item["question"]).correct_choice_id)
    rest = due(client, auth, limit=50, cursor=first["next_cursor"])
    assert [i["template_id"] for i in rest["items"]] == wrong_first[2:]
    assert rest["next_cursor"] is None
    # A cursor of the earlier kind (an item's id alone) still reads while its item is due.
    page = due(client, auth, limit=1)
    legacy = due(client, auth, limit=50, cursor=str(_item_id(app, page["items"][0])))
    assert [i["template_id"] for i in legacy["items"]] == wrong_first[3:]


def test_a_full_page_of_due_reviews_says_that_more_wait(client, app, auth, clock, cards):
    """limit=100 (the largest page) with 101 items due: the page says a next one waits."""
    learner_id = client.get(f"{API}/me", headers=auth).json()["learner_id"]
    templates = [
        (card_id, t.point, t.id) for card_id, card in cards.items() for t in card.templates()
    ][:101]
    assert len(templates) == 101
    with app.state.sessionmaker() as db, db.begin():
        for index, (card_id, point, template_id) in enumerate(templates):
            due_at = clock() - timedelta(hours=1) + timedelta(seconds=index)
            db.add(
                ReviewItem(
                    learner_id=learner_id,
                    card_id=card_id,
                    point=point,
                    template_id=template_id,
                    state=new_state(index + 1, due_at),
                    due_at=due_at,
                )
            )
    first = due(client, auth, limit=100)
    assert [i["template_id"] for i in first["items"]] == [t for _, _, t in templates[:100]]
    assert first["next_cursor"]
    rest = due(client, auth, limit=100, cursor=first["next_cursor"])
    assert [i["template_id"] for i in rest["items"]] == [templates[100][2]]
    assert rest["next_cursor"] is None


def _item_id(app, item):
    with app.state.sessionmaker() as db:
        return db.scalars(
            select(ReviewItem.id).where(ReviewItem.template_id == item["template_id"])
        ).one()


def test_progress_counts_first_answers_share_right_due_and_retention(client, app, auth, clock):
    one = ask(client, point="optimizer-memory", seed=1)
    two = ask(client, point="optimizer-memory", seed=2)
    send(client, auth, one, variant(app, one).correct_choice_id)
    send(client, auth, two, wrong(app, two).id)
    clock.advance(minutes=3)
    cards = client.get(f"{API}/me/progress", headers=auth).json()["cards"]
    point = next(p for p in cards[0]["points"] if p["point"] == "optimizer-memory")
    assert point["attempts"] == 2 and point["share_right"] == 0.5
    assert point["due"] == 1  # the wrong one, two minutes later
    # Both questions are still learning in FSRS (a first right answer is not yet in its Review
    # state): no retention figure rather than an optimistic one.
    assert point["retention"] is None and point["learning"] >= 1


def test_the_exam_date_is_saved_and_spreads_reviews_before_it(client, app, clock, db):
    page = client.get("/review")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    exam = (clock.now + timedelta(days=4)).date()
    response = client.post(
        "/review/exam-date", data={"csrf_token": csrf, "exam_date": exam.isoformat()}
    )
    assert response.status_code == 200
    assert re.search(r'days-left">(\d+)<', response.text).group(1) == "4"
    # A quick right answer would be due in 8 days (Easy): with the exam in 4 it comes before.
    session_page = client.post(
        "/sessions",
        data={
            "csrf_token": csrf,
            "card_id": "zero-memory-offload",
            "mode": "point",
            "point": "offload",
        },
    )
    assert session_page.status_code == 200
    row = db.scalars(select(PracticeSession)).one()
    identity = question_id_at(row, 0, app.state.context.seed_secret)
    fields = dict(
        re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', session_page.text)
    )
    fields = {k: html.unescape(v) for k, v in fields.items()}
    db.commit()  # end the test's read snapshot
    client.post(
        "/answers",
        data={**fields, "choice_id": app.state.catalog.variant(identity).correct_choice_id},
    )
    item = db.scalars(select(ReviewItem)).one()
    eve = datetime.combine(exam, datetime.min.time(), tzinfo=UTC) - timedelta(hours=12)
    assert clock.now < as_utc(item.due_at) <= eve
    refused = client.post("/review/exam-date", data={"csrf_token": csrf, "exam_date": "2001-01-01"})
    assert refused.status_code == 400


def test_an_exam_date_years_away_is_refused_and_days_left_are_grouped(client, clock):
    """9999-12-31 was taken as an exam date: the review page then said '2912104 days left'
    (the Today page grouped it). An exam more than 3 years away is a typing slip: refused with
    the reason; the days left are written as numbers are on every page."""
    page = client.get("/review")
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1)
    refused = client.post("/review/exam-date", data={"csrf_token": csrf, "exam_date": "9999-12-31"})
    assert refused.status_code == 400
    assert "The exam date has to be within 3 years." in refused.text
    assert "days-left" not in refused.text
    exam = (clock.now + timedelta(days=1095)).date()  # 3 × 365 days: the furthest taken
    taken = client.post(
        "/review/exam-date", data={"csrf_token": csrf, "exam_date": exam.isoformat()}
    )
    assert taken.status_code == 200
    assert re.search(r'days-left">([^<]+)<', taken.text).group(1) == "1,095"
    zh = client.get("/review?lang=zh")
    assert 'days-left">1,095<' in zh.text
    refused_zh = client.post(
        "/review/exam-date?lang=zh", data={"csrf_token": csrf, "exam_date": "9999-12-31"}
    )
    assert "考试日期须在 3 年之内。" in refused_zh.text


# --- the exam day is the learner's ------------------------------------------------------------

KIRITIMATI = timezone(timedelta(hours=14))  # Pacific/Kiritimati: UTC+14 all year, no DST


def test_a_review_pulled_before_the_exam_comes_before_the_exam_day_in_the_learner_s_zone():
    """The exam day starts at the learner's midnight: in Kiritimati (UTC+14) Dec 4 starts at
    10:00 UTC on Dec 3, and the latest review is 12 hours earlier, 22:00 UTC on Dec 2. Counted
    from UTC's midnight it was 12:00 UTC on Dec 3, 02:00 on the exam day there."""
    now = datetime(2026, 12, 1, 0, 0, tzinfo=UTC)
    exam = date(2026, 12, 4)
    eve = datetime(2026, 12, 4, tzinfo=KIRITIMATI) - timedelta(hours=12)
    assert eve == datetime(2026, 12, 2, 22, 0, tzinfo=UTC)
    for key in (f"item-{n}" for n in range(50)):
        outcome = review(
            new_state(1, now),
            correct=True,
            duration_ms=3_000,  # Easy: 8 days, after the exam
            now=now,
            exam_date=exam,
            item_key=key,
            zone_name="Pacific/Kiritimati",
        )
        assert now < outcome.due <= eve, key
    # Los Angeles (UTC-8): Dec 4 starts at 08:00 UTC, the eve is 20:00 UTC on Dec 3.
    outcome = review(
        new_state(1, now),
        correct=True,
        duration_ms=3_000,
        now=datetime(2026, 12, 3, 19, 0, tzinfo=UTC),
        exam_date=exam,
        item_key="k",
        zone_name="America/Los_Angeles",
    )
    assert (
        datetime(2026, 12, 3, 19, 0, tzinfo=UTC)
        < outcome.due
        <= datetime(2026, 12, 3, 20, 0, tzinfo=UTC)
    )


def test_the_exam_day_of_a_learner_in_kiritimati_starts_at_their_midnight(client, app, clock, db):
    """Through the API: a learner in Kiritimati answers at 11:00 on Dec 3 (their clock) with the
    exam on Dec 4; the review is put before 22:00 UTC on Dec 2 (12 hours before their exam day),
    not on the exam day."""
    token = client.post(f"{API}/learners").json()["access_token"]
    auth = {"Authorization": f"Bearer {token}"}
    clock.now = datetime(2026, 12, 2, 21, 0, tzinfo=UTC)  # 11:00 on Dec 3 in Kiritimati
    response = client.patch(
        f"{API}/me",
        json={"time_zone": "Pacific/Kiritimati", "exam_date": "2026-12-04"},
        headers=auth,
    )
    assert response.status_code == 200, response.text
    body = ask(client, seed=3)
    send(client, auth, body, variant(app, body).correct_choice_id)
    item = db.scalars(select(ReviewItem)).one()
    eve = datetime(2026, 12, 4, tzinfo=KIRITIMATI) - timedelta(hours=12)
    assert clock.now < as_utc(item.due_at) <= eve
