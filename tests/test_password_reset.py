"""Password reset by email: a real SMTP server in this process receives the email, the test
follows its link. Links work once, within an hour; unknown addresses get the same answer; a
reset signs out every web session and device token; requests are rate-limited."""

from __future__ import annotations

import re
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email import message_from_bytes, policy
from email.message import EmailMessage
from urllib.parse import urlsplit

import pytest
from aiosmtpd.controller import Controller
from conftest import make_settings
from fastapi.testclient import TestClient
from sqlalchemy import func, select, update
from test_accounts import API, PASSWORD, bearer, csrf, register, token

from app.models import PasswordReset, WebSession

NEW_PASSWORD = "a brand new passphrase"


class Inbox:
    """What the SMTP server received (aiosmtpd's handler)."""

    def __init__(self) -> None:
        self.messages: list[EmailMessage] = []
        self.arrived = threading.Condition()

    async def handle_DATA(self, server, session, envelope) -> str:  # noqa: N802 - aiosmtpd's name
        message = message_from_bytes(envelope.original_content, policy=policy.default)
        with self.arrived:
            self.messages.append(message)  # type: ignore[arg-type]
            self.arrived.notify_all()
        return "250 OK"

    def wait_for(self, count: int, timeout_s: float = 20.0) -> list[EmailMessage]:
        with self.arrived:
            self.arrived.wait_for(lambda: len(self.messages) >= count, timeout_s)
        assert len(self.messages) >= count, f"{len(self.messages)} emails, {count} expected"
        return self.messages


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def inbox() -> Iterator[tuple[Inbox, int]]:
    handler = Inbox()
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    try:
        yield handler, port
    finally:
        controller.stop()


@pytest.fixture
def settings(tmp_path, db_url, inbox):
    _, port = inbox
    return make_settings(
        tmp_path,
        db_url,
        smtp_host="127.0.0.1",
        smtp_port=port,
        smtp_security="none",
        mail_from="infracards <no-reply@example.com>",
    )


@pytest.fixture
def mails(inbox) -> Inbox:
    return inbox[0]


def link_in(message: EmailMessage) -> str:
    body = message.get_content()
    found = re.search(r"http://testserver(/password-reset/\S+)", body)
    assert found, body
    return found.group(1)


def without_form_values(page: str) -> str:
    return re.sub(r'name="csrf_token" value="[^"]+"|value="[^"]*@example.com"', "", page)


def ask_on_the_web(client, email: str) -> object:
    page = client.get("/password-reset")
    return client.post("/password-reset", data={"csrf_token": csrf(page.text), "email": email})


def test_a_reset_link_is_emailed_and_sets_a_new_password_once(client, app, mails, db):
    register(client, "ada@example.com")
    phone = bearer(client, email="ada@example.com")
    other = TestClient(app)
    page = other.get("/login")
    other.post(
        "/login",
        data={"csrf_token": csrf(page.text), "email": "ada@example.com", "password": PASSWORD},
    )
    assert other.get("/account").status_code == 200

    asked = ask_on_the_web(client, "Ada@Example.com ")
    assert asked.status_code == 200 and "If an account uses this address" in asked.text
    message = mails.wait_for(1)[0]
    assert message["To"] == "ada@example.com" and message["From"].endswith("<no-reply@example.com>")
    assert message["Subject"] == "Reset your infracards password"
    link = link_in(message)
    token_in_link = urlsplit(link).path.rsplit("/", 1)[1]
    # Only the token's hash is stored.
    db.commit()
    stored = db.scalars(select(PasswordReset.token_hash)).all()
    assert len(stored) == 1 and token_in_link not in stored[0]

    form = client.get(link)
    assert form.status_code == 200 and 'name="new"' in form.text
    assert form.headers["cache-control"] == "no-store"
    assert "signs out every browser and app" in form.text
    weak = client.post(link, data={"csrf_token": csrf(form.text), "new": "        "})
    assert weak.status_code == 400 and "not only spaces" in weak.text  # the link still works
    done = client.post(link, data={"csrf_token": csrf(form.text), "new": NEW_PASSWORD})
    assert done.status_code == 200 and "Your password was changed" in done.text

    # The old password is gone, the new one works; every session and token was signed out.
    assert token(client, email="ada@example.com").status_code == 401
    assert token(client, email="ada@example.com", password=NEW_PASSWORD).status_code == 200
    assert client.get(f"{API}/me", headers=phone).status_code == 401
    assert other.get("/account", follow_redirects=False).status_code == 303
    db.commit()
    assert db.scalar(select(func.count()).select_from(WebSession)) == 0

    # Used once: the same link is refused, by the page and by the form.
    again = client.get(link)
    assert again.status_code == 404 and "expired or was already used" in again.text
    reused = client.post(link, data={"csrf_token": csrf(form.text), "new": "yet another one!"})
    assert reused.status_code == 400 and "expired or was already used" in reused.text
    assert token(client, email="ada@example.com", password="yet another one!").status_code == 401


def test_an_unknown_address_gets_the_same_answer_and_no_email(client, app, mails):
    register(client, "known@example.com")
    unknown = ask_on_the_web(client, "nobody@example.com")
    known = ask_on_the_web(client, "known@example.com")
    assert unknown.status_code == known.status_code == 200
    assert without_form_values(unknown.text) == without_form_values(known.text)
    api_unknown = client.post(f"{API}/auth/password-reset", json={"email": "nobody2@example.com"})
    api_known = client.post(f"{API}/auth/password-reset", json={"email": "known@example.com"})
    assert api_unknown.status_code == api_known.status_code == 202
    assert api_unknown.content == api_known.content == b""
    app.state.mailer.wait()
    assert [m["To"] for m in mails.wait_for(2)] == ["known@example.com", "known@example.com"]


def test_the_request_does_not_wait_for_the_mail_server(client, app, mails, monkeypatch):
    """Sending happens in the mail thread: a slow SMTP server does not slow the answer."""
    register(client, "slow@example.com")
    real_send = app.state.mailer.send

    def slow_send(message):
        time.sleep(1.5)
        real_send(message)

    monkeypatch.setattr(app.state.mailer, "send", slow_send)
    started = time.monotonic()
    answer = client.post(f"{API}/auth/password-reset", json={"email": "slow@example.com"})
    assert answer.status_code == 202 and time.monotonic() - started < 1.0
    assert mails.wait_for(1)[0]["To"] == "slow@example.com"


def test_an_expired_link_is_refused(client, mails, db):
    register(client, "late@example.com")
    ask_on_the_web(client, "late@example.com")
    link = link_in(mails.wait_for(1)[0])
    db.execute(update(PasswordReset).values(expires_at=datetime.now(UTC) - timedelta(seconds=1)))
    db.commit()
    page = client.get(link)
    assert page.status_code == 404 and "expired or was already used" in page.text
    form = client.get("/password-reset")
    refused = client.post(link, data={"csrf_token": csrf(form.text), "new": NEW_PASSWORD})
    assert refused.status_code == 400 and "expired or was already used" in refused.text
    assert token(client, email="late@example.com", password=NEW_PASSWORD).status_code == 401


def test_a_link_expires_an_hour_after_it_was_sent(client, mails, db):
    register(client, "hour@example.com")
    ask_on_the_web(client, "hour@example.com")
    mails.wait_for(1)
    db.commit()
    row = db.scalars(select(PasswordReset)).one()
    assert 59 * 60 <= (row.expires_at - row.created_at).total_seconds() <= 3600


def test_the_api_resets_with_the_emailed_token(client, mails):
    register(client, "app@example.com")
    phone = bearer(client, email="app@example.com")
    asked = client.post(f"{API}/auth/password-reset?lang=zh", json={"email": "app@example.com"})
    assert asked.status_code == 202
    message = mails.wait_for(1)[0]
    assert message["Subject"] == "重置你的 infracards 密码"  # in the app's language
    assert "一小时内有效" in message.get_content()
    link = link_in(message)
    assert link.endswith("?lang=zh")
    secret = urlsplit(link).path.rsplit("/", 1)[1]
    weak = client.post(
        f"{API}/auth/password-reset/confirm", json={"token": secret, "password": "short"}
    )
    assert weak.status_code == 400 and weak.json()["code"] == "weak_password"
    done = client.post(
        f"{API}/auth/password-reset/confirm", json={"token": secret, "password": NEW_PASSWORD}
    )
    assert done.status_code == 204
    assert client.get(f"{API}/me", headers=phone).status_code == 401
    reused = client.post(
        f"{API}/auth/password-reset/confirm", json={"token": secret, "password": NEW_PASSWORD}
    )
    assert reused.status_code == 400 and reused.json()["code"] == "invalid_reset_link"
    forged = client.post(
        f"{API}/auth/password-reset/confirm", json={"token": "x" * 43, "password": NEW_PASSWORD}
    )
    assert forged.status_code == 400 and forged.json()["code"] == "invalid_reset_link"
    assert token(client, email="app@example.com", password=NEW_PASSWORD).status_code == 200


def test_reset_requests_are_rate_limited_per_address_and_per_client(client, mails):
    register(client, "many@example.com")
    codes = [
        client.post(f"{API}/auth/password-reset", json={"email": "many@example.com"}).status_code
        for _ in range(4)
    ]
    assert codes == [202, 202, 202, 429]
    mails.wait_for(3)
    refused = ask_on_the_web(client, "many@example.com")
    assert refused.status_code == 429 and "Too many password reset requests" in refused.text
    assert int(refused.headers["retry-after"]) >= 60
    # Per client: five requests so far (a refused one counts for the client); five more
    # addresses from this client, then its limit.
    codes = [
        client.post(f"{API}/auth/password-reset", json={"email": f"o{i}@example.com"}).status_code
        for i in range(6)
    ]
    assert codes == [202] * 5 + [429]
    bad = client.post(f"{API}/auth/password-reset", json={"email": "not an address"})
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_email"


def test_without_an_smtp_server_the_link_is_logged_in_development(tmp_path, db_url, cards, caplog):
    from app.main import create_app

    app = create_app(make_settings(tmp_path, db_url, environment="development"), cards=cards)
    with TestClient(app) as client:
        register(client, "dev@example.com")
        with caplog.at_level("WARNING", logger="app.mail"):
            client.post(f"{API}/auth/password-reset", json={"email": "dev@example.com"})
            app.state.mailer.wait()
    logged = "\n".join(r.getMessage() for r in caplog.records if r.name == "app.mail")
    assert "SMTP_HOST is not set" in logged
    assert re.search(r"http://testserver/password-reset/[\w-]{40,}", logged)
