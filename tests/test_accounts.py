"""Accounts and roles: register, tokens per device, login limits, web sessions, guest merge,
log out (here and everywhere), change password, and a learner never reading another's data."""

from __future__ import annotations

import html
import re
import subprocess
import sys

import pytest
from argon2 import PasswordHasher
from conftest import ROOT
from sqlalchemy import func, select

from app.domain.identity import QuestionId
from app.models import Attempt, Learner, LearnerToken, ReviewItem, ReviewLog, WebSession

API = "/api/v1"
CARD = "zero-memory-offload"
PASSWORD = "correct horse battery"


def register(client, email="ada@example.com", password=PASSWORD):
    return client.post(f"{API}/auth/register", json={"email": email, "password": password})


def token(client, email="ada@example.com", password=PASSWORD, device="phone"):
    return client.post(
        f"{API}/auth/token", json={"email": email, "password": password, "device_name": device}
    )


def bearer(client, **kwargs):
    response = token(client, **kwargs)
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


def csrf(page_text: str) -> str:
    return re.search(r'name="csrf_token" value="([^"]+)"', page_text).group(1)


def hidden(page_text: str) -> dict[str, str]:
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page_text))
    return {k: html.unescape(v) for k, v in fields.items()}


# --- the API ----------------------------------------------------------------------------------


def test_register_then_a_token_per_device(client, db):
    created = register(client)
    assert created.status_code == 201
    assert created.json()["email"] == "ada@example.com" and created.json()["role"] == "learner"
    body = token(client).json()
    assert body["token_type"] == "bearer" and len(body["access_token"]) >= 40
    headers = {"Authorization": f"Bearer {body['access_token']}"}
    me = client.get(f"{API}/me", headers=headers).json()
    assert me["kind"] == "account" and me["email"] == "ada@example.com"
    stored = db.scalars(select(Learner).where(Learner.email == "ada@example.com")).one()
    assert stored.password_hash.startswith("$argon2id$")
    assert PasswordHasher().verify(stored.password_hash, PASSWORD)
    # Tokens are stored hashed: the database never holds the token itself.
    assert body["access_token"] not in {t.token_hash for t in db.scalars(select(LearnerToken))}


def test_email_is_unique_case_insensitively_and_passwords_have_a_minimum(client, db):
    assert register(client, "Bob@Example.com").status_code == 201
    again = register(client, "bob@example.COM", "another password")
    assert again.status_code == 201  # the same answer: app.auth.signup; the owner is emailed
    assert token(client, email="bob@example.com", password="another password").status_code == 401
    assert db.scalar(select(func.count()).select_from(Learner)) == 1
    short = register(client, "c@example.com", "short")
    assert short.status_code == 400 and short.json()["code"] == "weak_password"
    bad = register(client, "not-an-email", PASSWORD)
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_email"


def test_unknown_email_and_wrong_password_get_the_same_answer(client):
    register(client)
    wrong_password = token(client, password="wrong wrong wrong")
    unknown = token(client, email="nobody@example.com")
    assert wrong_password.status_code == unknown.status_code == 401
    a, b = wrong_password.json(), unknown.json()
    assert a["code"] == b["code"] == "wrong_credentials" and a["detail"] == b["detail"]


def test_a_learner_who_mistypes_three_times_still_logs_in(client):
    register(client)
    codes = [token(client, password=f"wrong-{i}-xxxx").status_code for i in range(3)]
    assert codes == [401] * 3
    assert token(client).status_code == 200  # the right password, at once: not locked out


def test_guessing_a_password_is_throttled_with_retry_after(client):
    register(client)
    codes = [token(client, password=f"wrong-{i}-xxxx").status_code for i in range(10)]
    assert codes == [401] * 10
    limited = token(client)  # even the right password, now
    assert limited.status_code == 429 and limited.json()["code"] == "rate_limited"
    assert int(limited.headers["retry-after"]) >= 60
    # The web form says so too, inline, with Retry-After.
    page = client.get("/login")
    refused = client.post(
        "/login",
        data={"csrf_token": csrf(page.text), "email": "ada@example.com", "password": PASSWORD},
    )
    assert refused.status_code == 429 and "Too many login attempts" in refused.text
    assert int(refused.headers["retry-after"]) >= 60
    # Another account from the same address is still served.
    register(client, "eve@example.com")
    assert token(client, email="eve@example.com").status_code == 200


def test_the_login_limits_count_failures_per_pair_account_and_address():
    from app.auth.ratelimit import PER_ACCOUNT, PER_ADDRESS, PER_PAIR, LoginLimiter

    limiter = LoginLimiter()
    for _ in range(PER_PAIR.amount - 1):
        limiter.failed(email="a@x.io", address="1.1.1.1")
    assert limiter.check(email="a@x.io", address="1.1.1.1") is None
    limiter.succeeded(email="a@x.io", address="1.1.1.1")  # a right password forgets the pair's
    for _ in range(PER_PAIR.amount - 1):
        limiter.failed(email="a@x.io", address="1.1.1.1")
    assert limiter.check(email="a@x.io", address="1.1.1.1") is None
    limiter.failed(email="a@x.io", address="1.1.1.1")
    assert limiter.check(email="a@x.io", address="1.1.1.1") >= 1
    assert limiter.check(email="a@x.io", address="2.2.2.2") is None  # the learner elsewhere
    # Guessing one account from many addresses: the per-account limit.
    for i in range(PER_ACCOUNT.amount - PER_PAIR.amount):
        limiter.failed(email="a@x.io", address=f"10.0.0.{i}")
    assert limiter.check(email="a@x.io", address="3.3.3.3") >= 1
    # Many accounts from one address: the per-address limit.
    for i in range(PER_ADDRESS.amount):
        assert limiter.check(email=f"u{i}@x.io", address="4.4.4.4") is None
        limiter.failed(email=f"u{i}@x.io", address="4.4.4.4")
    assert limiter.check(email="new@x.io", address="4.4.4.4") >= 1


def test_login_is_rate_limited_per_address(client):
    codes = [token(client, email=f"u{i}@example.com").status_code for i in range(31)]
    assert codes[:30] == [401] * 30 and codes[30] == 429


def test_devices_are_listed_and_revocable_one_by_one(client):
    register(client)
    phone, tablet = bearer(client, device="phone"), bearer(client, device="tablet")
    devices = client.get(f"{API}/me/tokens", headers=phone).json()
    assert [d["device_name"] for d in devices] == ["phone", "tablet"]
    assert [d["current"] for d in devices] == [True, False]
    tablet_id = devices[1]["id"]
    assert client.delete(f"{API}/me/tokens/{tablet_id}", headers=phone).status_code == 204
    assert client.get(f"{API}/me", headers=tablet).status_code == 401
    assert client.get(f"{API}/me", headers=phone).status_code == 200
    assert client.delete(f"{API}/me/tokens/{tablet_id}", headers=phone).status_code == 404
    assert client.delete(f"{API}/me/token", headers=phone).status_code == 204
    assert client.get(f"{API}/me", headers=phone).status_code == 401


def test_anonymous_app_installs_keep_working(client):
    created = client.post(f"{API}/learners")
    assert created.status_code == 201
    headers = {"Authorization": f"Bearer {created.json()['access_token']}"}
    assert client.get(f"{API}/me", headers=headers).json()["kind"] == "app"


# --- a learner never reads another's data -----------------------------------------------------

READ_ROUTES = [
    "/me",
    "/me/attempts",
    "/me/mistakes",
    "/me/pitfalls",
    "/me/progress",
    "/me/review/due",
    "/me/tokens",
]


def test_every_me_route_shows_only_the_callers_data(client, app, clock):
    alice = {"Authorization": f"Bearer {client.post(f'{API}/learners').json()['access_token']}"}
    bob = {"Authorization": f"Bearer {client.post(f'{API}/learners').json()['access_token']}"}
    q = client.get(f"{API}/cards/{CARD}/points/offload/question?seed=4").json()
    variant = app.state.catalog.variant(
        QuestionId(q["card_id"], q["point"], q["template_id"], q["template_version"], q["seed"])
    )
    wrong = next(c.id for c in variant.choices if c.pitfall is not None)
    client.post(
        f"{API}/answers",
        headers=alice,
        json={"token": q["token"], "choice_id": wrong, "client_answer_id": "alice-1"},
    )
    clock.advance(minutes=5)
    for route in READ_ROUTES:
        mine = client.get(API + route, headers=alice)
        theirs = client.get(API + route, headers=bob)
        assert mine.status_code == theirs.status_code == 200, route
        assert "alice-1" not in theirs.text and q["template_id"] not in theirs.text, route
        assert client.get(API + route).status_code == 401, route
    assert "alice-1" in client.get(f"{API}/me/attempts", headers=alice).text
    assert "alice-1" in client.get(f"{API}/me/mistakes", headers=alice).text
    alice_token = client.get(f"{API}/me/tokens", headers=alice).json()[0]["id"]
    assert client.delete(f"{API}/me/tokens/{alice_token}", headers=bob).status_code == 404
    assert client.get(f"{API}/me", headers=alice).status_code == 200


def test_attempts_and_mistakes_paginate_with_client_answer_ids(client, app):
    headers = {"Authorization": f"Bearer {client.post(f'{API}/learners').json()['access_token']}"}
    sent = []
    for seed in range(7):
        q = client.get(f"{API}/cards/{CARD}/points/optimizer-memory/question?seed={seed}").json()
        cid = f"page-{seed}"
        choice = "a"
        client.post(
            f"{API}/answers",
            headers=headers,
            json={"token": q["token"], "choice_id": choice, "client_answer_id": cid},
        )
        sent.append(cid)
    seen, cursor = [], None
    while True:
        params = {"limit": 3, **({"cursor": cursor} if cursor else {})}
        page = client.get(f"{API}/me/attempts", params=params, headers=headers).json()
        seen += [i["client_answer_id"] for i in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == list(reversed(sent))
    mistakes = client.get(f"{API}/me/mistakes?limit=100", headers=headers).json()["items"]
    assert all(not m["correct"] for m in mistakes)
    assert client.get(f"{API}/me/attempts?cursor=abc", headers=headers).status_code == 400


# --- the web: sign up keeps the guest's history, log in merges it -----------------------------


def answer_wrong_on_the_web(client, app, db, point="offload"):
    page = client.get(f"/cards/{CARD}")
    started = client.post(
        "/sessions",
        data={"csrf_token": csrf(page.text), "card_id": CARD, "mode": "point", "point": point},
    )
    assert started.status_code == 200, started.text[:300]
    fields = hidden(started.text)
    token = fields["token"]
    content = app.state.context.signer.verify(token)
    from app.models import PracticeSession
    from app.practice.sessions import question_id_at

    db.commit()
    row = db.get(PracticeSession, content.position.session_id)
    identity = question_id_at(row, content.position.position, app.state.context.seed_secret)
    variant = app.state.catalog.variant(identity)
    wrong = next(c for c in variant.choices if c.pitfall is not None)
    feedback = client.post("/answers", data={**fields, "choice_id": wrong.id})
    assert feedback.status_code == 200 and "verdict wrong" in feedback.text
    db.commit()
    return wrong


def test_signing_up_then_logging_in_keeps_the_guests_attempts_and_reviews(client, app, db):
    answer_wrong_on_the_web(client, app, db)
    page = client.get("/signup")
    response = client.post(
        "/signup",
        data={"csrf_token": csrf(page.text), "email": "gus@example.com", "password": PASSWORD},
    )
    # The login form: signing up never signs in (it says nothing of an address's account).
    assert response.status_code == 200 and 'value="gus@example.com"' in response.text
    assert 'action="/login"' in response.text
    logged_in = client.post(
        "/login",
        data={"csrf_token": csrf(response.text), "email": "gus@example.com", "password": PASSWORD},
    )
    assert logged_in.status_code == 200
    db.commit()
    account = db.scalars(select(Learner).where(Learner.email == "gus@example.com")).one()
    assert account.kind == "account" and "gus@example.com" in client.get("/account").text
    assert (
        db.scalar(select(func.count()).select_from(Attempt).where(Attempt.learner_id == account.id))
        == 1
    )
    assert (
        db.scalar(
            select(func.count()).select_from(ReviewItem).where(ReviewItem.learner_id == account.id)
        )
        == 1
    )
    assert 'class="mistake"' in client.get("/mistakes").text


def test_logging_in_merges_a_guest_into_the_account(client, app, db):
    register(client, "mia@example.com")
    # Earlier, on this account: one review item via the API.
    headers = bearer(client, email="mia@example.com")
    q = client.get(f"{API}/cards/{CARD}/points/optimizer-memory/question?seed=3").json()
    client.post(
        f"{API}/answers",
        headers=headers,
        json={"token": q["token"], "choice_id": "a", "client_answer_id": "mia-api"},
    )
    # Now a guest browser practises, then logs in.
    answer_wrong_on_the_web(client, app, db, point="offload")
    guest_id = db.scalars(select(Learner.id).where(Learner.kind == "guest")).one()
    before = db.scalar(select(func.count()).select_from(Attempt))
    logs_before = db.scalar(select(func.count()).select_from(ReviewLog))
    page = client.get("/login")
    response = client.post(
        "/login",
        data={"csrf_token": csrf(page.text), "email": "mia@example.com", "password": PASSWORD},
    )
    assert response.status_code == 200
    db.commit()
    account = db.scalars(select(Learner).where(Learner.email == "mia@example.com")).one()
    assert db.get(Learner, guest_id) is None
    assert (
        db.scalar(select(func.count()).select_from(Attempt).where(Attempt.learner_id == account.id))
        == before
    )
    items = db.scalars(select(ReviewItem).where(ReviewItem.learner_id == account.id)).all()
    assert len(items) == 2
    assert db.scalar(select(func.count()).select_from(ReviewLog)) == logs_before


def test_login_rotates_the_session_and_logout_ends_it(client, db):
    register(client, "rot@example.com")
    page = client.get("/login")
    client.post(
        "/login",
        data={"csrf_token": csrf(page.text), "email": "rot@example.com", "password": PASSWORD},
    )
    first = client.cookies.get("infracards_session")
    assert first
    account = client.get("/account")
    assert "rot@example.com" in account.text
    client.post("/logout", data={"csrf_token": csrf(account.text)})
    assert client.cookies.get("infracards_session") is None
    assert client.get("/account", follow_redirects=False).status_code == 303
    db.commit()
    assert db.scalar(select(func.count()).select_from(WebSession)) == 0


def test_log_out_everywhere_ends_every_session_and_token(client, app, db):
    from fastapi.testclient import TestClient

    register(client, "all@example.com")
    headers = bearer(client, email="all@example.com")
    other = TestClient(app)
    for browser in (client, other):
        page = browser.get("/login")
        browser.post(
            "/login",
            data={"csrf_token": csrf(page.text), "email": "all@example.com", "password": PASSWORD},
        )
    page = client.get("/account")
    client.post("/logout-everywhere", data={"csrf_token": csrf(page.text)})
    assert other.get("/account", follow_redirects=False).status_code == 303
    assert client.get(f"{API}/me", headers=headers).status_code == 401


def test_changing_the_password_signs_out_the_others(client, app):
    from fastapi.testclient import TestClient

    register(client, "pw@example.com")
    other = TestClient(app)
    for browser in (client, other):
        page = browser.get("/login")
        browser.post(
            "/login",
            data={"csrf_token": csrf(page.text), "email": "pw@example.com", "password": PASSWORD},
        )
    page = client.get("/account")
    wrong = client.post(
        "/account/password",
        data={"csrf_token": csrf(page.text), "current": "nope", "new": "another good one"},
    )
    assert wrong.status_code == 401 and "not right" in wrong.text
    done = client.post(
        "/account/password",
        data={"csrf_token": csrf(page.text), "current": PASSWORD, "new": "another good one"},
        follow_redirects=False,
    )
    # Redirected to the account page, which says so: reloading it sends no form again (it
    # refused the old password as "not right").
    assert done.status_code == 303 and done.headers["location"] == "/account?changed=password"
    for _reload in range(2):
        shown = client.get(done.headers["location"])
        assert "Password changed" in shown.text and "not right" not in shown.text
    assert "Password changed" not in client.get("/account").text
    assert client.get("/account").status_code == 200  # this browser stays in
    assert other.get("/account", follow_redirects=False).status_code == 303
    assert token(client, email="pw@example.com", password="another good one").status_code == 200


def test_a_password_change_in_chinese_comes_back_in_chinese(client):
    register(client, "pw-zh@example.com")
    page = client.get("/login")
    client.post(
        "/login",
        data={"csrf_token": csrf(page.text), "email": "pw-zh@example.com", "password": PASSWORD},
    )
    page = client.get("/account?lang=zh")
    done = client.post(
        "/account/password?lang=zh",
        data={"csrf_token": csrf(page.text), "current": PASSWORD, "new": "another good one"},
        follow_redirects=False,
    )
    assert done.headers["location"] == "/account?changed=password&lang=zh"
    assert "密码已修改" in client.get(done.headers["location"]).text


def test_guessing_the_current_password_is_throttled(client):
    register(client, "guess@example.com")
    page = client.get("/login")
    client.post(
        "/login",
        data={"csrf_token": csrf(page.text), "email": "guess@example.com", "password": PASSWORD},
    )
    page = client.get("/account")
    tries = [
        client.post(
            "/account/password",
            data={"csrf_token": csrf(page.text), "current": f"guess {n}", "new": "a good new one"},
        )
        for n in range(11)
    ]
    assert [t.status_code for t in tries] == [401] * 10 + [429]
    assert int(tries[-1].headers["Retry-After"]) > 0


def test_an_app_changes_the_password_and_signs_out_the_other_devices(client):
    """POST /api/v1/me/password: the current password confirmed (throttled as logins are), this
    device's token kept, the account's other tokens and web sessions signed out."""
    register(client, "app-pw@example.com")
    phone = bearer(client, email="app-pw@example.com", device="phone")
    tablet = bearer(client, email="app-pw@example.com", device="tablet")
    page = client.get("/login")
    client.post(
        "/login",
        data={"csrf_token": csrf(page.text), "email": "app-pw@example.com", "password": PASSWORD},
    )
    change = f"{API}/me/password"
    wrong = client.post(
        change,
        json={"current_password": "nope", "new_password": "another good one"},
        headers={**phone, "Accept-Language": "zh"},
    )
    assert wrong.status_code == 401 and wrong.json()["code"] == "wrong_credentials"
    assert wrong.json()["detail"] == "当前密码不正确。"
    weak = client.post(
        change, json={"current_password": PASSWORD, "new_password": "short"}, headers=phone
    )
    assert weak.status_code == 400 and weak.json()["code"] == "weak_password"
    done = client.post(
        change,
        json={"current_password": PASSWORD, "new_password": "another good one"},
        headers=phone,
    )
    assert done.status_code == 204 and done.content == b""
    assert client.get(f"{API}/me", headers=phone).status_code == 200  # this device stays in
    assert client.get(f"{API}/me", headers=tablet).status_code == 401
    assert client.get("/account", follow_redirects=False).status_code == 303
    assert token(client, email="app-pw@example.com").status_code == 401
    assert token(client, email="app-pw@example.com", password="another good one").status_code == (
        200
    )
    install = {"Authorization": f"Bearer {client.post(f'{API}/learners').json()['access_token']}"}
    anonymous = client.post(
        change, json={"current_password": "", "new_password": "another good one"}, headers=install
    )
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "wrong_credentials"


def test_guessing_the_current_password_through_the_api_is_throttled(client):
    register(client, "app-guess@example.com")
    phone = bearer(client, email="app-guess@example.com")
    tries = [
        client.post(
            f"{API}/me/password",
            json={"current_password": f"guess {n}", "new_password": "a good new one"},
            headers=phone,
        )
        for n in range(11)
    ]
    assert [t.status_code for t in tries] == [401] * 10 + [429]
    assert int(tries[-1].headers["Retry-After"]) > 0


def test_forms_need_the_csrf_token_and_get_changes_nothing(client, db):
    register(client, "csrf@example.com")
    refused = client.post("/login", data={"email": "csrf@example.com", "password": PASSWORD})
    assert refused.status_code == 403
    for path in ("/logout", "/logout-everywhere", "/sessions", "/answers", "/review/exam-date"):
        assert client.post(path, data={"csrf_token": "forged"}).status_code == 403, path
    for path in ("/logout", "/logout-everywhere", "/signup", "/login"):
        client.get(path)
    db.commit()
    assert db.scalar(select(func.count()).select_from(WebSession)) == 0


def test_a_web_session_cookie_is_httponly_and_samesite_lax(client):
    response = client.get(f"/cards/{CARD}")
    cookie = response.headers["set-cookie"]
    assert "infracards_session=" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie


# --- the first instructor ---------------------------------------------------------------------


def test_create_user_makes_an_instructor_from_the_command_line(db_url, db, tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "create-user",
            "--email",
            "prof@example.com",
            "--password-stdin",
            "--role",
            "instructor",
            "--database-url",
            db_url,
        ],
        input=PASSWORD + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert "created instructor prof@example.com" in result.stdout
    db.commit()
    learner = db.scalars(select(Learner).where(Learner.email == "prof@example.com")).one()
    assert learner.role == "instructor" and learner.kind == "account"
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "create-user",
            "--email",
            "prof@example.com",
            "--password-stdin",
            "--database-url",
            db_url,
        ],
        input=PASSWORD + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert (
        again.returncode == 1 and again.stderr.count("\n") == 1 and "already exists" in again.stderr
    )
    assert "Traceback" not in again.stderr


@pytest.mark.parametrize("password", ["", "short"])
def test_create_user_refuses_a_missing_or_weak_password(db_url, password):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "app.cli",
            "create-user",
            "--email",
            "x@example.com",
            "--password-stdin",
            "--database-url",
            db_url,
        ],
        input=password + "\n",
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    assert result.returncode == 1 and result.stderr.startswith("error: ")
    assert "Traceback" not in result.stderr
