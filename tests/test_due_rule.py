"""One rule of what is due (app.models.ReviewItem.due_by): a review item is due when its time has
come and its card is offered to learners. A withdrawn card's questions are asked no more (no
session starts on it, the API's due list leaves its items out), so the page header, Today, the
review page, the forecast, the progress tables and the app's Today all leave its items out
alike, and count them again once the card is offered again."""

from __future__ import annotations

import copy
import re
import uuid
from datetime import UTC, datetime

from sqlalchemy import select
from test_authoring import CARD as KV_CARD
from test_authoring import instructor_headers, publish
from test_web import csrf, wrong_of

from app.auth.tokens import issue_token
from app.models import Attempt

API = "/api/v1"
ZERO, MEGATRON = "zero-memory-offload", "megatron-3d-pipeline"
KV = "kv-cache"  # the authoring tests' card, which an instructor can publish anew
POINTS = {ZERO: "optimizer-memory", MEGATRON: "pipeline-bubble", KV: "kv-bytes"}


def answer_wrong(client, app, card_id: str) -> None:
    """A wrong first answer on the web (a browser session's guest): due again in minutes."""
    page = client.get(f"/cards/{card_id}/points/{POINTS[card_id]}/practice?seed=3")
    token = re.search(r'name="token" value="([^"]+)"', page.text).group(1)
    response = client.post(
        "/answers",
        data={
            "csrf_token": csrf(page.text),
            "token": token,
            "choice_id": wrong_of(app, page).id,
            "client_answer_id": uuid.uuid4().hex,
        },
    )
    assert response.status_code == 200, response.text[:400]


def header_count(page: str) -> int:
    """The due count beside "Review" in the page header (no badge: 0)."""
    found = re.search(r'<span class="badge" title="(\d+) due now">(\d+)</span>', page)
    return int(found.group(1)) if found else 0


def counts(client, phone: dict[str, str]) -> dict[str, int]:
    """Every place that says how many reviews are due now, for one learner (the progress tables
    per exam point too)."""
    today = client.get("/")
    review = client.get("/review")
    api = {
        name: client.get(f"{API}/me/{path}", headers=phone)
        for name, path in (
            ("today", "today"),
            ("forecast", "forecast"),
            ("due", "review/due"),
            ("progress", "progress"),
        )
    }
    for response in api.values():  # the due list once failed whole (404) on a withdrawn card
        assert response.status_code == 200, response.text
    return {
        "header": header_count(today.text),
        "header on /review": header_count(review.text),
        "Today": today.context["facts"].due_now,
        "review page": review.context["due_now"],
        "forecast, today": review.context["forecast"].bars[0].count,
        "API today": api["today"].json()["due_now"],
        "API forecast, today": api["forecast"].json()["days"][0]["due"],
        "API due list": len(api["due"].json()["items"]),
        "progress table": sum(row.due for row in review.context["progress"]),
        "API progress": sum(
            point["due"] for card in api["progress"].json()["cards"] for point in card["points"]
        ),
    }


def test_a_withdrawn_card_s_reviews_are_due_nowhere_until_it_is_offered_again(client, app, clock):
    prof = instructor_headers(client, app)
    client.get("/")  # a browser session
    clock.now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)  # nothing else comes due today
    answer_wrong(client, app, ZERO)
    with app.state.sessionmaker() as db:
        learner_id = db.scalar(select(Attempt.learner_id))
        assert learner_id is not None
        phone = {
            "Authorization": f"Bearer {issue_token(db=db, learner_id=learner_id, device_name='phone')}"
        }
    clock.advance(minutes=3)  # the wrong answer's first learning step is over
    assert set(counts(client, phone).values()) == {1}

    withdrawn = client.post(f"{API}/instructor/cards/{ZERO}/withdraw", headers=prof)
    assert withdrawn.status_code == 204, withdrawn.text
    # The learner can review nothing: the review queue serves none of the withdrawn card's items.
    start = client.post(
        f"{API}/me/sessions", json={"scope": "deck", "mode": "review"}, headers=phone
    )
    assert start.status_code == 409 and start.json()["code"] == "nothing_to_practise"
    shown = counts(client, phone)
    assert shown == dict.fromkeys(shown, 0), shown
    page = client.get("/").text
    assert "Nothing is due now" in page and 'name="mode" value="review"' not in page

    answer_wrong(client, app, MEGATRON)  # a card still offered
    clock.advance(minutes=3)
    shown = counts(client, phone)
    assert shown == dict.fromkeys(shown, 1), shown

    offered = client.post(f"{API}/instructor/cards/{ZERO}/offer", headers=prof)
    assert offered.status_code == 204, offered.text
    shown = counts(client, phone)
    assert shown == dict.fromkeys(shown, 2), shown


def test_a_review_of_a_template_its_card_dropped_is_due_nowhere(client, app, clock):
    """A card's new version can drop a template. The learner's review item of it stays (its
    schedule kept should the template come back), but no review can serve it, so it counts
    nowhere: Today offered a review that then found nothing to practise."""
    prof = instructor_headers(client, app)
    assert client.post(f"{API}/instructor/cards", json=KV_CARD, headers=prof).status_code == 201
    assert publish(client, prof, KV_CARD) == 1
    client.get("/")  # a browser session
    clock.now = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)  # nothing else comes due today
    answer_wrong(client, app, KV)
    answer_wrong(client, app, ZERO)
    clock.advance(minutes=3)
    with app.state.sessionmaker() as db:
        learner_id = db.scalar(select(Attempt.learner_id))
        assert learner_id is not None
        phone = {
            "Authorization": f"Bearer {issue_token(db=db, learner_id=learner_id, device_name='phone')}"
        }
    shown = counts(client, phone)
    assert shown == dict.fromkeys(shown, 2), shown

    renamed = copy.deepcopy(KV_CARD)  # version 2 asks the same under a new template id
    (template,) = renamed["points"][0]["templates"]
    template["id"] = "kv-total-v2"
    assert publish(client, prof, renamed) == 2
    shown = counts(client, phone)
    assert shown == dict.fromkeys(shown, 1), shown  # the ZeRO card's item alone
    start = client.post(
        f"{API}/me/sessions", json={"scope": "deck", "mode": "review"}, headers=phone
    )
    assert start.status_code == 201, start.text
    assert start.json()["size"] == 1  # what the header promised, the review serves
