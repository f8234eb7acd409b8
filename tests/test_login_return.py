"""A dashboard page asked for before logging in: the login page, then that page.

An instructor following a link to an analytics page (a colleague's message, a bookmark) while
signed out used to get a 403 "log in with an instructor account" with no way back to the page.
"""

from __future__ import annotations

import html
import re
from urllib.parse import quote

import pytest
from conftest import CARD_ID

from app.auth.service import register

PASSWORD = "correct horse battery"
PAGE = f"/instructor/cards/{CARD_ID}/analytics?attempts=all&days=7"


def csrf(text: str) -> str:
    return html.unescape(re.search(r'name="csrf_token" value="([^"]+)"', text).group(1))


def hidden_next(text: str) -> str | None:
    found = re.search(r'<input type="hidden" name="next" value="([^"]*)">', text)
    return html.unescape(found.group(1)) if found else None


def log_in(client, email: str, next_: str | None):
    page = client.get("/login", params={"next": next_} if next_ is not None else None)
    data = {"csrf_token": csrf(page.text), "email": email, "password": PASSWORD}
    if next_ is not None:
        data["next"] = next_
    return client.post("/login", data=data, follow_redirects=False)


def test_a_signed_out_instructor_goes_to_log_in_and_comes_back_to_the_page(client, app):
    with app.state.sessionmaker() as db:
        register(db=db, email="prof@example.com", password=PASSWORD, role="instructor")
    asked = client.get(PAGE, follow_redirects=False)
    assert asked.status_code == 303
    assert asked.headers["location"] == "/login?next=" + quote(PAGE, safe="")
    login = client.get(asked.headers["location"])
    assert login.status_code == 200 and hidden_next(login.text) == PAGE
    # A wrong password keeps the way back.
    wrong = client.post(
        "/login",
        data={
            "csrf_token": csrf(login.text),
            "email": "prof@example.com",
            "password": "not it at all",
            "next": PAGE,
        },
        follow_redirects=False,
    )
    assert wrong.status_code == 401 and hidden_next(wrong.text) == PAGE
    signed_in = log_in(client, "prof@example.com", PAGE)
    assert signed_in.status_code == 303 and signed_in.headers["location"] == PAGE
    assert client.get(PAGE).status_code == 200


def test_the_way_to_log_in_keeps_the_language(client):
    asked = client.get("/instructor?lang=zh", follow_redirects=False)
    assert asked.status_code == 303
    assert asked.headers["location"] == "/login?next=%2Finstructor&lang=zh"
    assert "登录" in client.get(asked.headers["location"]).text


def test_a_learner_and_a_form_post_still_get_the_refusal(client, app):
    # Not signed in, a POST is refused as before: a redirect would lose the form.
    page = client.get("/login")
    posted = client.post(
        f"/instructor/cards/{CARD_ID}/publish",
        data={"csrf_token": csrf(page.text)},
        follow_redirects=False,
    )
    assert posted.status_code == 403
    with app.state.sessionmaker() as db:
        register(db=db, email="ada@example.com", password=PASSWORD, role="learner")
    assert log_in(client, "ada@example.com", None).headers["location"] == "/"
    refused = client.get("/instructor", follow_redirects=False)
    assert refused.status_code == 403 and "log in with an instructor account" in refused.text


@pytest.mark.parametrize(
    "next_",
    [
        "//evil.example/instructor",
        "https://evil.example/",
        "/\\evil.example",
        "\\\\evil.example",
        "/instructor\r\nSet-Cookie: x=1",
        "instructor",
        "/" + "a" * 2000,
    ],
)
def test_the_login_page_never_sends_anyone_off_the_site(client, app, next_):
    with app.state.sessionmaker() as db:
        register(db=db, email="prof@example.com", password=PASSWORD, role="instructor")
    assert hidden_next(client.get("/login", params={"next": next_}).text) is None
    signed_in = log_in(client, "prof@example.com", next_)
    assert signed_in.status_code == 303 and signed_in.headers["location"] == "/"
