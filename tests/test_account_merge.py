"""An app install's history carried into an account: logging in with the install's token along
claims it once; a retry claims nothing twice; two devices claiming at the same moment lose and
duplicate nothing (SQLite and PostgreSQL)."""

from __future__ import annotations

import threading
from collections import Counter

from conftest import CARD_ID, make_settings
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from test_accounts import API, PASSWORD, register

from app.auth.merging import merge_learner
from app.models import Attempt, Learner, LearnerToken, ReviewItem, ReviewLog


def install(client) -> tuple[str, dict[str, str]]:
    body = client.post(f"{API}/learners").json()
    return body["learner_id"], {"Authorization": f"Bearer {body['access_token']}"}


def answer(client, headers, point: str, seed: int, cid: str, right: bool) -> dict:
    """One answer (one attempt), right or wrong as asked: the key is read from the question
    regenerated on the server, whatever the card's content puts first."""
    question = client.get(
        f"{API}/cards/{CARD_ID}/points/{point}/question?seed={seed}", headers=headers
    ).json()
    state = client.app.state
    shown = state.catalog.variant(state.context.signer.verify(question["token"]).question)
    key = shown.correct_choice_id
    choice = key if right else next(c["id"] for c in question["choices"] if c["id"] != key)
    response = client.post(
        f"{API}/answers",
        headers=headers,
        json={"token": question["token"], "choice_id": choice, "client_answer_id": cid},
    )
    assert response.status_code == 200, response.text
    assert response.json()["correct"] is right
    return response.json()


def log_in(client, email: str, install_headers: dict[str, str] | None = None):
    return client.post(
        f"{API}/auth/token",
        headers=install_headers or {},
        json={"email": email, "password": PASSWORD, "device_name": "phone"},
    )


def client_answer_ids(db, learner_id: str) -> list[str]:
    return list(
        db.scalars(
            select(Attempt.client_answer_id)
            .where(Attempt.learner_id == learner_id)
            .order_by(Attempt.client_answer_id)
        )
    )


def test_logging_in_with_an_install_token_claims_its_history_once(client, db):
    install_id, install_headers = install(client)
    answer(client, install_headers, "offload", 1, "i-1", right=False)
    answer(client, install_headers, "optimizer-memory", 2, "i-2", right=True)
    mine = db.scalars(select(Attempt.client_answer_id).where(Attempt.learner_id == install_id))
    install_answers = sorted(mine)
    db.commit()
    assert register(client, "ada@example.com").status_code == 201

    response = log_in(client, "ada@example.com", install_headers)
    assert response.status_code == 200, response.text
    assert response.json()["claimed_history"] is True
    account = {"Authorization": f"Bearer {response.json()['access_token']}"}
    account_id = client.get(f"{API}/me", headers=account).json()["learner_id"]
    assert client_answer_ids(db, account_id) == install_answers
    listed = client.get(f"{API}/me/attempts", headers=account).json()["items"]
    assert sorted(a["client_answer_id"] for a in listed) == install_answers
    # the install is gone, its token with it
    assert db.get(Learner, install_id) is None
    assert client.get(f"{API}/me", headers=install_headers).status_code == 401

    # the app retries (its first answer lost on the way): nothing is claimed twice
    again = log_in(client, "ada@example.com", install_headers)
    assert again.status_code == 200 and again.json()["claimed_history"] is False
    db.expire_all()
    assert client_answer_ids(db, account_id) == install_answers


def test_an_account_token_along_claims_nothing_and_a_wrong_password_claims_nothing(client, db):
    for email in ("ada@example.com", "bob@example.com"):
        register(client, email)
    ada = {"Authorization": f"Bearer {log_in(client, 'ada@example.com').json()['access_token']}"}
    answer(client, ada, "offload", 3, "ada-1", right=False)
    install_id, install_headers = install(client)
    answer(client, install_headers, "offload", 4, "inst-1", right=False)

    # another account's token along: logged in, nothing moves
    bob = log_in(client, "bob@example.com", ada)
    assert bob.status_code == 200 and bob.json()["claimed_history"] is False
    ada_id = client.get(f"{API}/me", headers=ada).json()["learner_id"]
    assert client_answer_ids(db, ada_id) == ["ada-1"]
    # a wrong password: 401, the install keeps its history and its token
    wrong = client.post(
        f"{API}/auth/token",
        headers=install_headers,
        json={"email": "bob@example.com", "password": "not it at all", "device_name": "x"},
    )
    assert wrong.status_code == 401
    assert client_answer_ids(db, install_id) == ["inst-1"]
    assert client.get(f"{API}/me", headers=install_headers).status_code == 200


def test_the_same_template_in_both_keeps_one_review_item_and_every_rating(client, db):
    register(client, "ada@example.com")
    account = {
        "Authorization": f"Bearer {log_in(client, 'ada@example.com').json()['access_token']}"
    }
    account_id = client.get(f"{API}/me", headers=account).json()["learner_id"]
    install_id, install_headers = install(client)
    # the same question (same seed, so the same template) answered on both: a review item each
    answer(client, account, "offload", 7, "acc-1", right=False)
    answer(client, install_headers, "offload", 7, "inst-1", right=True)
    template = db.scalar(select(Attempt.template_id).where(Attempt.client_answer_id == "acc-1"))
    logs_before = db.scalar(select(func.count()).select_from(ReviewLog))
    db.commit()

    assert log_in(client, "ada@example.com", install_headers).json()["claimed_history"] is True
    db.expire_all()
    items = db.scalars(select(ReviewItem).where(ReviewItem.learner_id == account_id)).all()
    assert Counter((i.card_id, i.template_id) for i in items)[(CARD_ID, template)] == 1
    kept = next(i for i in items if i.template_id == template)
    assert kept.reviews == 2  # one rating each, both kept
    assert db.scalar(select(func.count()).select_from(ReviewLog)) == logs_before
    assert (
        db.scalar(
            select(func.count()).select_from(ReviewLog).where(ReviewLog.review_item_id == kept.id)
        )
        == 2
    )


def two_devices_claim_at_once(app, client, db) -> None:
    """Two installs (one of them claiming twice, as a double-sent request) claim into one
    account at the same moment; every answer and rating lands once."""
    register(client, "ada@example.com")
    account = {
        "Authorization": f"Bearer {log_in(client, 'ada@example.com').json()['access_token']}"
    }
    account_id = client.get(f"{API}/me", headers=account).json()["learner_id"]
    answer(client, account, "offload", 11, "acc-1", right=False)
    installs = []
    for name in ("a", "b"):
        install_id, headers = install(client)
        for n, seed in enumerate((11, 12, 13)):  # seed 11: the template the account has too
            answer(client, headers, "offload", seed, f"{name}-{n}", right=n % 2 == 0)
        installs.append(install_id)
    expected = sorted(
        db.scalars(
            select(Attempt.client_answer_id).where(Attempt.learner_id.in_([account_id, *installs]))
        )
    )
    templates = set(
        db.scalars(
            select(ReviewItem.template_id).where(ReviewItem.learner_id.in_([account_id, *installs]))
        )
    )
    logs_before = db.scalar(select(func.count()).select_from(ReviewLog))
    reviews_before = db.scalar(select(func.sum(ReviewItem.reviews)))
    db.commit()

    start = threading.Barrier(3)
    results: list[bool] = []
    errors: list[BaseException] = []

    def claim(source: str) -> None:
        try:
            with app.state.sessionmaker() as own:
                start.wait(timeout=10)
                results.append(merge_learner(db=own, source_id=source, target_id=account_id))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=claim, args=(s,)) for s in (installs[0], *installs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    assert sorted(results) == [False, True, True]  # the double-sent claim moved nothing
    db.expire_all()
    assert client_answer_ids(db, account_id) == expected
    items = db.scalars(select(ReviewItem).where(ReviewItem.learner_id == account_id)).all()
    assert sorted(i.template_id for i in items) == sorted(templates)  # one per template
    assert db.scalar(select(func.count()).select_from(ReviewLog)) == logs_before
    assert db.scalar(select(func.sum(ReviewItem.reviews))) == reviews_before
    for install_id in installs:
        assert db.get(Learner, install_id) is None
        assert not db.scalars(
            select(LearnerToken).where(LearnerToken.learner_id == install_id)
        ).all()


def test_two_devices_claiming_at_once_lose_and_duplicate_nothing(app, client, db):
    two_devices_claim_at_once(app, client, db)


def test_two_devices_claiming_at_once_on_postgres(pg_url, tmp_path, cards):
    from app.cli import migrate
    from app.main import create_app

    migrate(pg_url)
    app = create_app(make_settings(tmp_path, pg_url), cards=cards)
    with TestClient(app) as client, app.state.sessionmaker() as db:
        two_devices_claim_at_once(app, client, db)


def test_questions_downloaded_before_signing_in_are_the_accounts_to_answer(client, db):
    """The offline flow: download a batch as an install, answer one, sign in (the install is
    merged and its token stops working), then send the queue with the account's token: every
    answer is stored (the one sent before is a replay), singly and in a batch."""
    _install_id, install_headers = install(client)
    batch = client.get(
        f"{API}/cards/{CARD_ID}/questions", params={"count": 4}, headers=install_headers
    ).json()["items"]
    first = {"token": batch[0]["token"], "choice_id": "a", "client_answer_id": "q-0"}
    sent = client.post(f"{API}/answers", json=first, headers=install_headers)
    assert sent.status_code == 200, sent.text
    assert register(client, "offline@example.com").status_code == 201
    signed_in = log_in(client, "offline@example.com", install_headers)
    assert signed_in.json()["claimed_history"] is True
    account = {"Authorization": f"Bearer {signed_in.json()['access_token']}"}
    assert client.get(f"{API}/me", headers=install_headers).status_code == 401

    queue = [first] + [
        {"token": q["token"], "choice_id": "b", "client_answer_id": f"q-{i}"}
        for i, q in enumerate(batch[1:3], start=1)
    ]
    results = client.post(f"{API}/answers/batch", json={"answers": queue}, headers=account)
    assert results.status_code == 200, results.text
    assert [(r["outcome"], r["replayed"]) for r in results.json()["results"]] == [
        ("stored", True),
        ("stored", False),
        ("stored", False),
    ]
    assert results.json()["results"][0]["attempt_id"] == sent.json()["attempt_id"]
    last = {"token": batch[3]["token"], "choice_id": "c", "client_answer_id": "q-3"}
    single = client.post(f"{API}/answers", json=last, headers=account)
    assert single.status_code == 200 and single.json()["replayed"] is False
    account_id = client.get(f"{API}/me", headers=account).json()["learner_id"]
    assert client_answer_ids(db, account_id) == ["q-0", "q-1", "q-2", "q-3"]

    # Another account, another install: the merged install's questions are not theirs.
    other_install = install(client)[1]
    assert register(client, "other@example.com").status_code == 201
    other = log_in(client, "other@example.com", other_install).json()["access_token"]
    stolen = {"token": batch[3]["token"], "choice_id": "c", "client_answer_id": "s-1"}
    refused = client.post(
        f"{API}/answers", json=stolen, headers={"Authorization": f"Bearer {other}"}
    )
    assert refused.status_code == 403 and refused.json()["code"] == "token_not_yours"
