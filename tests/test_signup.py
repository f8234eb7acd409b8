"""Signing up tells nobody which addresses have accounts: the API and the web answer a taken
address as they answer a new one (same status, same body, the same work), create nothing for it
and email its owner instead (a real SMTP server receives it); an app still signs up and gets
its token at once."""

from __future__ import annotations

import test_password_reset as smtp
from sqlalchemy import func, select
from test_accounts import API, PASSWORD, csrf, register, token
from test_password_reset import Inbox, link_in, without_form_values

from app.auth import accounts
from app.auth.ratelimit import SIGNUP_NOTICES_PER_EMAIL
from app.models import Learner

OTHER_PASSWORD = "somebody else's password"
# A real SMTP server (aiosmtpd) in this process, and the app's settings to send to it.
inbox = smtp.inbox
settings = smtp.settings
mails = smtp.mails


def sign_up_on_the_web(client, email: str, password: str = OTHER_PASSWORD):
    page = client.get("/signup")
    return client.post(
        "/signup", data={"csrf_token": csrf(page.text), "email": email, "password": password}
    )


def test_a_taken_address_gets_the_same_answer_and_its_owner_an_email(
    client, app, mails: Inbox, db, monkeypatch
):
    assert register(client, "ada@example.com").status_code == 201
    hashed = []
    real_hash = accounts.hash_password
    monkeypatch.setattr(accounts, "hash_password", lambda p: hashed.append(p) or real_hash(p))

    new = register(client, "New@Example.com", OTHER_PASSWORD)
    taken = register(client, "ADA@example.com", OTHER_PASSWORD)
    assert new.status_code == taken.status_code == 201
    assert new.headers["content-type"] == taken.headers["content-type"]
    assert new.json() == {"email": "new@example.com", "role": "learner"}
    assert taken.json() == {"email": "ada@example.com", "role": "learner"}
    assert hashed == [OTHER_PASSWORD, OTHER_PASSWORD]  # the same work either way

    # The new address has its account, and the app its token at once, as before.
    assert token(client, email="new@example.com", password=OTHER_PASSWORD).status_code == 200
    # The taken one is unchanged: its owner's password only.
    assert token(client, email="ada@example.com", password=OTHER_PASSWORD).status_code == 401
    assert token(client, email="ada@example.com").status_code == 200
    db.commit()
    assert db.scalar(select(func.count()).select_from(Learner)) == 2

    # Its owner hears of it, with a way in; the new address gets no email.
    app.state.mailer.wait()
    (message,) = mails.wait_for(1)
    assert message["To"] == "ada@example.com"
    assert message["Subject"] == "Someone tried to sign up with your address"
    body = message.get_content()
    assert "already has an account, so no new one was created" in body
    assert "http://testserver/login\r\n" in body
    reset = client.get(link_in(message))
    assert reset.status_code == 200 and 'name="new"' in reset.text

    # In the language the sign-up was made in.
    register_zh = client.post(
        f"{API}/auth/register?lang=zh", json={"email": "new@example.com", "password": PASSWORD}
    )
    assert register_zh.json() == {"email": "new@example.com", "role": "learner"}
    zh = mails.wait_for(2)[1]
    assert zh["To"] == "new@example.com" and zh["Subject"] == "有人尝试用你的邮箱注册"
    assert "/login?lang=zh" in zh.get_content() and "?lang=zh" in link_in(zh)

    # Nobody can fill the owner's inbox: a few sign-ups an hour are told (every sign-up with the
    # address counts, the one that created the account too: the same work), the answer unchanged.
    for _ in range(SIGNUP_NOTICES_PER_EMAIL.amount + 2):
        assert register(client, "ada@example.com", OTHER_PASSWORD).json() == taken.json()
    app.state.mailer.wait()
    to_ada = [m for m in mails.messages if m["To"] == "ada@example.com"]
    assert len(to_ada) == SIGNUP_NOTICES_PER_EMAIL.amount - 1


def test_the_sign_up_page_answers_a_taken_address_as_a_new_one(client, app, mails: Inbox, db):
    register(client, "ada@example.com")
    new = sign_up_on_the_web(client, "gus@example.com")
    taken = sign_up_on_the_web(client, "ada@example.com")
    assert new.status_code == taken.status_code == 200
    assert without_form_values(new.text) == without_form_values(taken.text)
    assert 'value="gus@example.com"' in new.text and 'name="password"' in new.text
    assert "If this address is new here, your account is ready" in new.text
    assert mails.wait_for(1)[0]["To"] == "ada@example.com"
    zh = client.get("/signup?lang=zh")
    assert zh.status_code == 200
    answered = client.post(
        "/signup?lang=zh",
        data={"csrf_token": csrf(zh.text), "email": "zhu@example.com", "password": PASSWORD},
    )
    assert "如果这个邮箱是新注册的，你的账号已经建好" in answered.text


def test_the_api_no_longer_documents_a_taken_address(client):
    spec = client.get("/openapi.json").json()
    responses = spec["paths"][f"{API}/auth/register"]["post"]["responses"]
    assert "409" not in responses and set(responses) >= {"201", "400"}
    assert "email_taken" not in str(spec)


def test_signing_up_answers_with_a_redirect_so_a_reload_signs_up_nobody_again(
    client, app, mails: Inbox
):
    """The login form after signing up was rendered at the POST's address: reloading it sent
    the form again, and for a taken address emailed its owner once more. It is a 303 to the
    login page, which shows the address and the message once."""
    register(client, "ada@example.com")
    page = client.get("/signup?lang=zh")
    answered = client.post(
        "/signup",
        data={"csrf_token": csrf(page.text), "email": "ada@example.com", "password": PASSWORD},
        follow_redirects=False,
    )
    assert answered.status_code == 303 and answered.headers["location"] == "/login?lang=zh"
    login = client.get(answered.headers["location"])
    assert 'value="ada@example.com"' in login.text
    assert "如果这个邮箱是新注册的，你的账号已经建好" in login.text
    again = client.get("/login")  # a reload: the plain login form, nothing sent again
    assert 'value="ada@example.com"' not in again.text
    assert "如果这个邮箱是新注册的" not in again.text
    assert [m["To"] for m in mails.wait_for(1)] == ["ada@example.com"]
