"""An app polling the learner's progress and Today sends If-None-Match: unchanged, it gets a 304
without a body; after an answer, the new body and a new ETag. One learner's body is private."""

from __future__ import annotations

import uuid

import pytest
from test_api import variant_of

API = "/api/v1"
CARD = "zero-memory-offload"


def new_learner(client) -> dict[str, str]:
    token = client.post(f"{API}/learners").json()["access_token"]
    return {"Authorization": f"Bearer {token}"}


def answer_one(client, headers) -> None:
    question = client.get(
        f"{API}/cards/zero-memory-offload/questions", params={"count": 1}, headers=headers
    ).json()["items"][0]
    stored = client.post(
        f"{API}/answers",
        json={
            "token": question["token"],
            "choice_id": question["choices"][0]["id"],
            "client_answer_id": str(uuid.uuid4()),
        },
        headers=headers,
    )
    assert stored.status_code == 200, stored.text


@pytest.mark.parametrize("path", ["/me/progress", "/me/today"])
def test_an_unchanged_body_is_a_304_and_an_answer_changes_the_etag(client, path):
    headers = new_learner(client)
    first = client.get(f"{API}{path}", headers=headers)
    etag = first.headers["ETag"]
    assert first.status_code == 200 and etag.startswith('"') and len(etag) == 34
    assert first.headers["Cache-Control"] == "private, no-cache"
    assert "Authorization" in first.headers["Vary"]
    same = client.get(f"{API}{path}", headers={**headers, "If-None-Match": etag})
    assert same.status_code == 304 and same.content == b"" and same.headers["ETag"] == etag
    other = client.get(f"{API}{path}", headers={**headers, "If-None-Match": '"stale", ' + etag})
    assert other.status_code == 304  # a list of ETags, one of them current
    answer_one(client, headers)
    changed = client.get(f"{API}{path}", headers={**headers, "If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["ETag"] != etag
    assert changed.json() != first.json()


def test_another_learners_etag_is_not_this_ones_body(client):
    one, two = new_learner(client), new_learner(client)
    answer_one(client, one)
    etag = client.get(f"{API}/me/progress", headers=one).headers["ETag"]
    theirs = client.get(f"{API}/me/progress", headers={**two, "If-None-Match": etag})
    assert theirs.status_code == 200 and theirs.headers["ETag"] != etag


def test_the_spec_documents_the_304_and_the_etag(client):
    spec = client.get("/openapi.json").json()
    for path in ("/me/progress", "/me/today", "/cards/{card_id}"):
        responses = spec["paths"][f"{API}{path}"]["get"]["responses"]
        assert "304" in responses and "ETag" in responses["200"]["headers"], path


def test_a_weak_or_wildcard_if_none_match_is_a_304(client):
    """RFC 9110: If-None-Match compares weakly (a proxy that compresses marks ETags W/), and *
    matches whatever is there."""
    headers = new_learner(client)
    for path in ("/me/progress", f"/cards/{CARD}"):
        etag = client.get(f"{API}{path}", headers=headers).headers["ETag"]
        for sent in (f"W/{etag}", "*", f'W/"stale", W/{etag}'):
            again = client.get(f"{API}{path}", headers={**headers, "If-None-Match": sent})
            assert again.status_code == 304, (path, sent)
        stale = client.get(f"{API}{path}", headers={**headers, "If-None-Match": 'W/"stale"'})
        assert stale.status_code == 200


def test_progress_keeps_its_etag_while_only_time_passes(client, app, clock):
    """The retention of questions answered right falls as time passes: shown to a tenth of a
    percent, a minute later the body (and its ETag) is the same."""
    headers = new_learner(client)
    question = client.get(
        f"{API}/cards/{CARD}/points/optimizer-memory/question", params={"seed": 40}
    ).json()
    body = {
        "token": question["token"],
        "choice_id": variant_of(app, question).correct_choice_id,
        "client_answer_id": str(uuid.uuid4()),
    }
    assert client.post(f"{API}/answers", json=body, headers=headers).json()["correct"]
    clock.advance(seconds=3600)
    first = client.get(f"{API}/me/progress", headers=headers)
    points = [p for c in first.json()["cards"] for p in c["points"] if p["retention"] is not None]
    assert points and all(p["retention"] == round(p["retention"], 3) for p in points)
    clock.advance(seconds=60)
    same = client.get(
        f"{API}/me/progress", headers={**headers, "If-None-Match": first.headers["ETag"]}
    )
    assert same.status_code == 304
