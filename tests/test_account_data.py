"""My data: the export holds every row of the learner (and no hash); deleting removes every row
of every table with a learner id (SQLite and PostgreSQL) and signs out every session and token.
Also the sign-up form's inline refusals, the exam date's, and the guest's invitation."""

from __future__ import annotations

import json

import pytest
from conftest import CARD_ID, make_settings
from fastapi.testclient import TestClient
from sqlalchemy import func, inspect, select, text
from test_accounts import (
    API,
    PASSWORD,
    answer_wrong_on_the_web,
    bearer,
    csrf,
    hidden,
    register,
)

from app.analytics.classes import create_class
from app.auth.learner_data import LEARNER_TABLES
from app.auth.service import register as register_account
from app.models import (
    Attempt,
    AuditEntry,
    CardDraft,
    Learner,
    LearnerMerge,
    PasswordReset,
    PracticeSession,
    ReviewItem,
    ReviewLog,
)


def answer_by_api(client, headers, point: str, seed: int, cid: str, wrong: bool = True):
    q = client.get(f"{API}/cards/{CARD_ID}/points/{point}/question?seed={seed}").json()
    choice = q["choices"][0]["id"] if not wrong else q["choices"][-1]["id"]
    answered = client.post(
        f"{API}/answers",
        headers=headers,
        json={"token": q["token"], "choice_id": choice, "client_answer_id": cid},
    )
    assert answered.status_code == 200, answered.text
    return answered.json()


def learner_with_everything(client, app, db, email: str) -> tuple[str, dict[str, str]]:
    """An account with attempts, reviews and their log, a session, tokens, an app install merged
    into it, a web session, a class it joined and one it owns, a reset link, a draft it saved and
    an audit entry."""
    register(client, email)
    headers = bearer(client, email=email)
    bearer(client, email=email, device="tablet")
    # An app install signed in to the account (merged: its id is kept for its questions).
    install = client.post(f"{API}/learners").json()["access_token"]
    merged = client.post(
        f"{API}/auth/token",
        headers={"Authorization": f"Bearer {install}"},
        json={"email": email, "password": PASSWORD, "device_name": "old phone"},
    )
    assert merged.json()["claimed_history"] is True
    name = email.split("@")[0]
    answer_by_api(client, headers, "offload", 1, f"{name}-1")
    answer_by_api(client, headers, "optimizer-memory", 2, f"{name}-2")
    page = client.get("/login")
    client.post(
        "/login", data={"csrf_token": csrf(page.text), "email": email, "password": PASSWORD}
    )
    answer_wrong_on_the_web(client, app, db)  # a practice session, on the web
    learner_id = db.scalars(select(Learner.id).where(Learner.email == email)).one()
    owner = register_account(db=db, email=f"prof-{email}", password=PASSWORD, role="instructor")
    theirs = create_class(db=db, owner_id=owner.id, name="Their class")
    page = client.get("/classes/join")
    joined = client.post(
        "/classes/join", data={"csrf_token": csrf(page.text), "code": theirs.join_code}
    )
    assert joined.status_code in (200, 303), joined.text[:300]
    create_class(db=db, owner_id=learner_id, name="Own class")
    client.post(f"{API}/auth/password-reset", json={"email": email})
    app.state.mailer.wait()
    db.add(CardDraft(card_id=f"draft-{name}", document={}, updated_by=learner_id))
    db.add(AuditEntry(actor_id=learner_id, actor_email=email, action="save", card_id="x"))
    db.commit()
    return learner_id, headers


def learner_rows(db, learner_id: str, item_ids: list[int]) -> dict[str, int]:
    """Rows naming the learner in every table with a foreign key to learners (read from the
    database itself), and the review logs of their review items."""
    inspector = inspect(db.get_bind())
    counts = {}
    for table in inspector.get_table_names():
        for fk in inspector.get_foreign_keys(table):
            if fk["referred_table"] == "learners":
                (column,) = fk["constrained_columns"]
                counts[f"{table}.{column}"] = db.scalar(
                    text(f'SELECT count(*) FROM "{table}" WHERE "{column}" = :id'),
                    {"id": learner_id},
                )
    counts["review_logs"] = (
        db.scalar(
            select(func.count())
            .select_from(ReviewLog)
            .where(ReviewLog.review_item_id.in_(item_ids))
        )
        if item_ids
        else 0
    )
    counts["learners"] = db.scalar(
        select(func.count()).select_from(Learner).where(Learner.id == learner_id)
    )
    db.commit()
    return counts


def check_delete_removes_every_row(client, app, db) -> None:
    learner_id, headers = learner_with_everything(client, app, db, "gone@example.com")
    other = TestClient(app)
    _, others_headers = learner_with_everything(other, app, db, "stays@example.com")
    item_ids = list(db.scalars(select(ReviewItem.id).where(ReviewItem.learner_id == learner_id)))
    before = learner_rows(db, learner_id, item_ids)
    # Every table with a learner id is known to the deletion, and this learner has rows in each.
    assert {k for k in before if "." in k} == {f"{t}.{c}" for t, c in LEARNER_TABLES.items()}
    assert all(before.values()), before
    others_before = db.scalar(select(func.count()).select_from(Attempt))
    db.commit()  # no read transaction left open: SQLite would keep showing its snapshot

    unconfirmed = client.delete(f"{API}/me", headers=headers)
    assert unconfirmed.status_code == 401 and learner_rows(db, learner_id, item_ids) == before
    deleted = client.request("DELETE", f"{API}/me", headers=headers, json={"password": PASSWORD})
    assert deleted.status_code == 204
    after = learner_rows(db, learner_id, item_ids)
    assert set(after.values()) == {0}, after
    assert client.get(f"{API}/me", headers=headers).status_code == 401
    assert client.get("/account", follow_redirects=False).status_code == 303  # the web session
    # The other learner keeps everything; the drafts and audit entries stay, unnamed.
    assert other.get(f"{API}/me", headers=others_headers).status_code == 200
    assert db.scalar(select(func.count()).select_from(Attempt)) == others_before - 3
    assert db.scalar(select(func.count()).select_from(CardDraft)) == 2
    assert db.scalar(select(func.count()).select_from(AuditEntry)) == 2
    assert db.scalar(select(func.count()).select_from(PasswordReset)) == 1


def test_deleting_me_removes_every_row_of_mine(client, app, db):
    check_delete_removes_every_row(client, app, db)


def test_deleting_me_on_postgres_removes_every_row_of_mine(pg_url, tmp_path, cards):
    from app.cli import migrate
    from app.main import create_app

    migrate(pg_url)
    app = create_app(make_settings(tmp_path, pg_url), cards=cards)
    with TestClient(app) as client, app.state.sessionmaker() as db:
        check_delete_removes_every_row(client, app, db)


def test_the_export_holds_the_rows_created(client, app, db):
    learner_id, headers = learner_with_everything(client, app, db, "mine@example.com")
    zoned = client.patch(f"{API}/me", json={"time_zone": "Asia/Shanghai"}, headers=headers)
    assert zoned.status_code == 200, zoned.text
    response = client.get(f"{API}/me/export", headers=headers)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert response.headers["content-disposition"].startswith(
        'attachment; filename="infracards-my-data-'
    )
    document = response.json()
    assert "hash" not in response.text and PASSWORD not in response.text
    assert document["learner"]["email"] == "mine@example.com"
    assert document["learner"]["learner_id"] == learner_id
    assert document["learner"]["time_zone"] == "Asia/Shanghai"
    merges = db.scalars(select(LearnerMerge).where(LearnerMerge.account_id == learner_id)).all()
    assert [m["learner_id"] for m in document["merged_learners"]] == [m.merged_id for m in merges]
    assert len(merges) == 1 and document["running_exams"] == []
    attempts = db.scalars(
        select(Attempt).where(Attempt.learner_id == learner_id).order_by(Attempt.id)
    ).all()
    assert [a["attempt_id"] for a in document["attempts"]] == [a.id for a in attempts]
    assert [a["client_answer_id"] for a in document["attempts"]][:2] == [
        "mine-1",
        "mine-2",
    ]
    assert [a["correct"] for a in document["attempts"]] == [a.correct for a in attempts]
    assert [m["attempt_id"] for m in document["mistakes"]] == [
        a.id for a in attempts if not a.correct
    ]
    items = db.scalars(select(ReviewItem).where(ReviewItem.learner_id == learner_id)).all()
    assert sorted(r["template_id"] for r in document["reviews"]) == sorted(
        i.template_id for i in items
    )
    logs = db.scalar(
        select(func.count())
        .select_from(ReviewLog)
        .join(ReviewItem, ReviewItem.id == ReviewLog.review_item_id)
        .where(ReviewItem.learner_id == learner_id)
    )
    assert sum(len(r["log"]) for r in document["reviews"]) == logs >= 1
    sessions = db.scalars(
        select(PracticeSession.id).where(PracticeSession.learner_id == learner_id)
    ).all()
    assert [s["session_id"] for s in document["sessions"]] == list(sessions)
    assert sorted(d["device_name"] for d in document["devices"]) == ["old phone", "phone", "tablet"]
    assert [c["name"] for c in document["classes"]] == ["Their class"]
    db.commit()
    # The web download is the same document.
    web = client.get("/account/export")
    assert web.status_code == 200 and "attachment" in web.headers["content-disposition"]
    web_document = json.loads(web.text)
    assert web_document["attempts"] == document["attempts"]
    assert web_document["learner"] == document["learner"]


def test_the_web_delete_asks_for_the_password_of_an_account(client, app, db):
    register(client, "web@example.com")
    page = client.get("/login")
    client.post(
        "/login",
        data={"csrf_token": csrf(page.text), "email": "web@example.com", "password": PASSWORD},
    )
    account = client.get("/account")
    assert "/account/delete" in account.text and "/account/export" in account.text
    confirm = client.get("/account/delete")
    assert confirm.status_code == 200 and 'name="password"' in confirm.text
    wrong = client.post(
        "/account/delete", data={"csrf_token": csrf(confirm.text), "password": "not it at all"}
    )
    assert wrong.status_code == 401 and "password is not right" in wrong.text
    assert db.scalar(select(func.count()).select_from(Learner)) == 1
    db.commit()
    forged = client.post("/account/delete", data={"csrf_token": "x", "password": PASSWORD})
    assert forged.status_code == 403
    done = client.post(
        "/account/delete", data={"csrf_token": csrf(confirm.text), "password": PASSWORD}
    )
    assert done.status_code == 200 and "Your data was deleted" in done.text
    assert '<a class="button" href="/cards">Cards</a>' in done.text  # it goes where it says
    assert db.scalar(select(func.count()).select_from(Learner)) == 0
    assert client.get("/account", follow_redirects=False).status_code == 303
    assert (
        client.post(
            f"{API}/auth/token",
            json={"email": "web@example.com", "password": PASSWORD, "device_name": "x"},
        ).status_code
        == 401
    )


def test_a_guest_deletes_by_typing_the_word(client, app, db):
    answer_wrong_on_the_web(client, app, db)
    account = client.get("/account")
    assert account.status_code == 200 and "as a guest" in account.text
    confirm = client.get("/account/delete", params={"lang": "zh"})
    assert 'name="confirm"' in confirm.text and "删除" in confirm.text
    refused = client.post(
        "/account/delete", data={"csrf_token": csrf(confirm.text), "confirm": "x"}
    )
    assert refused.status_code == 400 and "删除" in refused.text
    done = client.post(
        "/account/delete", data={"csrf_token": csrf(confirm.text), "confirm": " 删除 "}
    )
    assert done.status_code == 200
    db.commit()
    assert db.scalar(select(func.count()).select_from(Learner)) == 0
    assert db.scalar(select(func.count()).select_from(Attempt)) == 0


def test_an_anonymous_app_install_deletes_itself(client, db):
    created = client.post(f"{API}/learners").json()
    headers = {"Authorization": f"Bearer {created['access_token']}"}
    answer_by_api(client, headers, "offload", 3, "app-1")
    assert client.get(f"{API}/me/export", headers=headers).json()["learner"]["kind"] == "app"
    assert client.delete(f"{API}/me", headers=headers).status_code == 204
    assert client.get(f"{API}/me", headers=headers).status_code == 401
    assert db.scalar(select(func.count()).select_from(Attempt)) == 0
    assert client.delete(f"{API}/me").status_code == 401


# --- sign-up input, the exam date, the guest's invitation ------------------------------------


def signup(client, email: str, password: str):
    page = client.get("/signup")
    return client.post(
        "/signup", data={"csrf_token": csrf(page.text), "email": email, "password": password}
    )


@pytest.mark.parametrize(
    ("email", "password", "message"),
    [
        ("<script>alert(1)</script>@x.io", PASSWORD, "Enter a valid email address."),
        ("a@localhost", PASSWORD, "Enter a valid email address."),
        ("x" * 250 + "@example.com", PASSWORD, "at most 254 characters"),
        ("ok@example.com", "p" * 1025, "at most 1024 characters"),
        ("ok@example.com", "          ", "not only spaces"),
        ("ok@example.com", "", "at least 8 characters"),
    ],
)
def test_sign_up_refuses_bad_input_inline(client, db, email, password, message):
    refused = signup(client, email, password)
    assert refused.status_code == 400, refused.text[:300]
    assert 'class="error" role="alert"' in refused.text and message in refused.text
    assert "<script>alert" not in refused.text
    assert db.scalar(select(func.count()).select_from(Learner)) == 0


def test_the_api_refuses_a_script_as_an_email(client):
    refused = register(client, "<script>alert(1)</script>@x.io")
    assert refused.status_code == 400 and refused.json()["code"] == "invalid_email"
    blank = register(client, "ok@example.com", " " * 12)
    assert blank.status_code == 400 and blank.json()["code"] == "weak_password"


def test_a_past_exam_date_is_an_inline_error(client, clock):
    page = client.get("/review")
    past = client.post(
        "/review/exam-date", data={"csrf_token": csrf(page.text), "exam_date": "2001-01-01"}
    )
    assert past.status_code == 400 and 'id="exam-date-error"' in past.text
    assert "today or later" in past.text and "<h1>" in past.text
    junk = client.post(
        "/review/exam-date", data={"csrf_token": csrf(page.text), "exam_date": "x" * 40}
    )
    assert junk.status_code == 400 and "as a date" in junk.text


def test_a_guest_is_invited_to_sign_up_after_a_session(client, app, db):
    page = client.get(f"/cards/{CARD_ID}")
    started = client.post(
        "/sessions",
        data={
            "csrf_token": csrf(page.text),
            "card_id": CARD_ID,
            "mode": "point",
            "point": "offload",
        },
    )
    content = app.state.context.signer.verify(hidden(started.text)["token"])
    session_url = f"/sessions/{content.position.session_id}"
    client.post(f"{session_url}/finish", data={"csrf_token": csrf(started.text)})
    summary = client.get(f"{session_url}/summary")
    assert summary.status_code == 200 and 'class="invite"' in summary.text
    assert 'href="/signup"' in summary.text
    # Signed up and logged in: no invitation any more.
    signed_up = signup(client, "invited@example.com", PASSWORD)
    client.post(
        "/login",
        data={
            "csrf_token": csrf(signed_up.text),
            "email": "invited@example.com",
            "password": PASSWORD,
        },
    )
    assert 'class="invite"' not in client.get(f"{session_url}/summary").text


def test_an_account_deletes_itself_only_with_its_password_and_guessing_it_is_throttled(
    client, app, db
):
    """A stolen device token cannot delete the account: the password is asked again, and wrong
    guesses are counted as logins are (429 with Retry-After before the 11th)."""
    learner_id, headers = learner_with_everything(client, app, db, "careful@example.com")

    def delete(password):
        return client.request("DELETE", f"{API}/me", headers=headers, json={"password": password})

    refusals = [delete(f"guess {n}") for n in range(10)]
    assert {r.status_code for r in refusals} == {401}
    assert refusals[0].json()["code"] == "wrong_credentials"
    throttled = delete(PASSWORD)  # even the right password waits now
    assert throttled.status_code == 429 and int(throttled.headers["Retry-After"]) > 0
    db.commit()
    assert db.get(Learner, learner_id) is not None
