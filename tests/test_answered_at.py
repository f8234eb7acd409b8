"""An offline answer's ``answered_at`` is kept between its question's issue and its arrival.

A device clock that is off (or a moment at the edge of the calendar: year 1 at UTC+14, which no
database stores) must neither fail the answer nor block an offline queue that resends it: the
server keeps the moment within what it knows for certain."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, timezone

from conftest import CARD_ID
from sqlalchemy import select

from app.auth.service import as_utc
from app.domain.practice import answered_within
from app.models import Attempt

API = "/api/v1"
POINT = "optimizer-memory"

ISSUED = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
ARRIVED = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def test_a_claimed_moment_inside_the_interval_is_kept():
    claimed = datetime(2026, 12, 1, 16, 30, tzinfo=timezone(timedelta(hours=8)))  # 08:30 UTC
    assert answered_within(claimed, ISSUED, ARRIVED) == datetime(2026, 12, 1, 8, 30, tzinfo=UTC)


def test_a_moment_before_the_question_is_its_issue_and_after_the_arrival_is_the_arrival():
    assert answered_within(datetime(2026, 11, 30, tzinfo=UTC), ISSUED, ARRIVED) == ISSUED
    assert answered_within(datetime(2099, 6, 1, tzinfo=UTC), ISSUED, ARRIVED) == ARRIVED


def test_calendar_edges_and_naive_moments_do_not_fail():
    year_one = datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=14)))
    last_day = datetime(9999, 12, 31, 23, 59, 59, tzinfo=timezone(timedelta(hours=-12)))
    assert answered_within(year_one, ISSUED, ARRIVED) == ISSUED
    assert answered_within(last_day, ISSUED, ARRIVED) == ARRIVED
    naive = datetime(2026, 12, 1, 8, 45)  # taken as UTC
    assert answered_within(naive, ISSUED, ARRIVED) == datetime(2026, 12, 1, 8, 45, tzinfo=UTC)
    assert answered_within(None, ISSUED, ARRIVED) is None


def _learner(client) -> dict[str, str]:
    return {"Authorization": f"Bearer {client.post(f'{API}/learners').json()['access_token']}"}


def _question(client, auth, seed: int) -> dict:
    response = client.get(
        f"{API}/cards/{CARD_ID}/points/{POINT}/question", params={"seed": seed}, headers=auth
    )
    assert response.status_code == 200, response.text
    return response.json()


def _stored(db, client_answer_id: str) -> datetime:
    row = db.execute(
        select(Attempt.answered_at).where(Attempt.client_answer_id == client_answer_id)
    ).scalar_one()
    return as_utc(row)


def test_an_answer_dated_out_of_the_calendar_is_stored_at_its_question_issue(client, db):
    auth = _learner(client)
    before = datetime.fromtimestamp(int(time.time()), UTC)  # tokens are stamped in seconds
    question = _question(client, auth, 7)
    body = {
        "token": question["token"],
        "choice_id": question["choices"][0]["id"],
        "client_answer_id": "edge-of-time-1",
        "answered_at": "0001-01-01T00:00:00+14:00",
    }
    first = client.post(f"{API}/answers", json=body, headers=auth)
    assert first.status_code == 200, first.text
    after = datetime.now(UTC)
    assert before <= _stored(db, "edge-of-time-1") <= after
    again = client.post(f"{API}/answers", json=body, headers=auth)  # the queue resends it
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert again.json()["attempt_id"] == first.json()["attempt_id"]


def test_a_batch_with_one_answer_from_the_far_future_stores_all_of_them(client, db):
    auth = _learner(client)
    answers = []
    for index in range(4):
        question = _question(client, auth, 100 + index)
        answers.append(
            {
                "token": question["token"],
                "choice_id": question["choices"][0]["id"],
                "client_answer_id": f"far-future-{index}",
                "answered_at": "9999-12-31T23:59:59-12:00" if index == 2 else None,
            }
        )
    sent = datetime.now(UTC)
    response = client.post(f"{API}/answers/batch", json={"answers": answers}, headers=auth)
    assert response.status_code == 200, response.text
    assert [r["outcome"] for r in response.json()["results"]] == ["stored"] * 4
    assert sent <= _stored(db, "far-future-2") <= datetime.now(UTC)  # its arrival
    listed = client.get(f"{API}/me/attempts", headers=auth).json()["items"]
    assert len(listed) == 4
    assert all(item["answered_at"] < "2100" for item in listed)
