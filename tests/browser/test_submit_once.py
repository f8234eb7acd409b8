"""A start button and an answer button in a real browser (static/submit_once.js): double-clicked,
each is disabled (its form aria-busy) while its request is on its way, and the server gets one
request: one session starts, one answer is stored. Back from the question, the card page comes
from the back/forward cache with its buttons enabled again.

The server holds each request a moment (the use case it calls waits), so that the page is seen
mid-submission. Playwright, and DevTools at times, wait for a pending navigation before they read
a page, so the page records what it saw itself (RECORD_SUBMITS), for the next page to read."""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Playwright, expect
from sqlalchemy import func, select

import app.web.practice as web_practice
from app.models import Attempt, PracticeSession

from .conftest import CHROMIUM, CHROMIUM_ARGS
from .helpers import CARD_ID, SCREENSHOTS, TEXTS, LiveServer

pytestmark = pytest.mark.browser

QUESTION_URL = re.compile(r"/sessions/([^/?]+)(\?|$)")
HOLD_S = 10  # the longest the server holds a request (a failing test lets it go sooner)

# Every form submitted on the tab, as the page saw it (kept in sessionStorage, so that the next
# page reads it): whether static/submit_once.js prevented it (a second press before the button
# went grey) and, for one sent, whether its button was disabled and its form aria-busy in the
# moments after, while the server held its request.
RECORD_SUBMITS = """
window.addEventListener("submit", event => {
  const form = event.target, button = event.submitter;
  const read = () => JSON.parse(sessionStorage.getItem("submits") || "[]");
  const submits = read();
  const path = new URL(form.action).pathname;
  const at = submits.push({action: path, prevented: event.defaultPrevented}) - 1;
  sessionStorage.setItem("submits", JSON.stringify(submits));
  if (event.defaultPrevented || !button) return;
  const start = Date.now();
  (function look() {
    if (!button.disabled && Date.now() - start < 2000) return setTimeout(look, 10);
    const now = read();
    Object.assign(now[at], {disabled: button.disabled, busy: form.getAttribute("aria-busy")});
    sessionStorage.setItem("submits", JSON.stringify(now));
  })();
});
"""


class Held:
    """The requests that reached a use case, each held until :meth:`release`."""

    def __init__(self) -> None:
        self.calls = 0
        self.gate = threading.Event()

    def release(self) -> None:
        self.gate.set()


@pytest.fixture
def held_starts(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    held, real = Held(), web_practice.start_session_from_page

    def start(**kwargs: Any) -> Any:  # in the server's threadpool
        held.calls += 1
        held.gate.wait(HOLD_S)
        return real(**kwargs)

    monkeypatch.setattr(web_practice, "start_session_from_page", start)
    yield held
    held.release()


@pytest.fixture
def held_answers(monkeypatch: pytest.MonkeyPatch) -> Iterator[Held]:
    held, real = Held(), web_practice.answer_question_async

    async def answer(**kwargs: Any) -> Any:  # on the server's event loop
        held.calls += 1
        for _ in range(HOLD_S * 50):
            if held.gate.is_set():
                break
            await asyncio.sleep(0.02)
        return await real(**kwargs)

    monkeypatch.setattr(web_practice, "answer_question_async", answer)
    yield held
    held.release()


def sent(page: Page, action: str) -> list[dict[str, Any]]:
    """The submissions to ``action`` the tab let go (not prevented), as RECORD_SUBMITS saw them."""
    submits = json.loads(page.evaluate("sessionStorage.getItem('submits') || '[]'"))
    return [s for s in submits if s["action"] == action and not s["prevented"]]


def count(live_server: LiveServer, table: Any, *where: Any) -> int:
    with live_server.app.state.sessionmaker() as db:
        return int(db.scalar(select(func.count()).select_from(table).where(*where)) or 0)


def point_shot(page: Page, name: str) -> None:
    """A screenshot of the card page's first exam point, its start buttons in view."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("article.point").first.screenshot(path=str(SCREENSHOTS / f"{name}.png"))


def first_start(page: Page):
    """The card page's first "Practise" button (its exam point's start form)."""
    return page.locator("article.point").first.get_by_role(
        "button", name=TEXTS["en"]["practise"], exact=True
    )


def test_a_double_click_starts_one_session_and_stores_one_answer(
    page: Page, live_server: LiveServer, held_starts: Held, held_answers: Held
) -> None:
    page.context.add_init_script(RECORD_SUBMITS)
    page.goto(f"/cards/{CARD_ID}")
    button = first_start(page)
    form = button.locator("xpath=ancestor::form")
    start_id = form.locator("input[name=client_session_id]").input_value()

    button.dblclick()
    time.sleep(0.5)  # the page looks at its button meanwhile
    held_starts.release()
    expect(page).to_have_url(QUESTION_URL)
    on_its_way = {"prevented": False, "disabled": True, "busy": "true"}
    assert sent(page, "/sessions") == [{"action": "/sessions", **on_its_way}]
    assert held_starts.calls == 1
    assert count(live_server, PracticeSession, PracticeSession.client_session_id == start_id) == 1

    found = QUESTION_URL.search(page.url)
    assert found is not None
    _, right = live_server.answer_key(page)
    page.locator(f"form.question input[name=choice_id][value='{right.id}']").check()
    page.get_by_role("button", name=TEXTS["en"]["check"]).dblclick()
    time.sleep(0.5)
    held_answers.release()
    expect(page.locator(".verdict h1")).to_have_text(TEXTS["en"]["correct"])
    assert sent(page, "/answers") == [{"action": "/answers", **on_its_way}]
    assert held_answers.calls == 1
    assert count(live_server, Attempt, Attempt.practice_session_id == found.group(1)) == 1


def test_a_start_on_its_way_looks_busy(page: Page) -> None:
    """How a start on its way looks, seen without leaving the page: the test keeps the form from
    being sent once static/submit_once.js has seen it go."""
    page.goto(f"/cards/{CARD_ID}")
    page.evaluate("window.addEventListener('submit', event => event.preventDefault())")
    button = first_start(page)
    button.click()
    expect(button).to_be_disabled()
    expect(button.locator("xpath=ancestor::form")).to_have_attribute("aria-busy", "true")
    assert button.evaluate("b => getComputedStyle(b).cursor") == "progress"
    point_shot(page, "submit-once-start-busy")


@pytest.fixture
def cached_page(playwright_driver: Playwright, live_server: LiveServer) -> Iterator[Page]:
    """A page in a Chromium that keeps pages in its back/forward cache, as browsers do
    (playwright turns the cache off)."""
    browser: Browser = playwright_driver.chromium.launch(
        executable_path=CHROMIUM,
        args=CHROMIUM_ARGS,
        ignore_default_args=["--disable-back-forward-cache"],
    )
    context = browser.new_context(
        base_url=live_server.url, viewport={"width": 1280, "height": 900}, locale="en-US"
    )
    context.set_default_timeout(10_000)
    # Whether the page shown came from the cache (a restored page runs no init script again).
    context.add_init_script(
        "window.addEventListener('pageshow', e => { window.__restored = e.persisted; });"
    )
    yield context.new_page()
    context.close()
    browser.close()


def test_back_from_the_question_finds_the_start_button_enabled(
    cached_page: Page, live_server: LiveServer
) -> None:
    page = cached_page
    page.goto(f"/cards/{CARD_ID}")
    button = first_start(page)
    button.click()
    expect(page).to_have_url(QUESTION_URL)

    page.go_back(wait_until="commit")  # a page from the cache fires no load event
    page.wait_for_function("window.__restored !== undefined")
    assert page.evaluate("window.__restored") is True, "not restored from the back/forward cache"
    expect(page).to_have_url(re.compile(rf"/cards/{CARD_ID}$"))
    expect(button).to_be_enabled()
    expect(page.locator("form[aria-busy]")).to_have_count(0)
    point_shot(page, "submit-once-back-enabled")
    button.click()  # and it starts a session again
    expect(page).to_have_url(QUESTION_URL)


def test_without_javascript_the_start_still_posts(
    browser: Browser, live_server: LiveServer
) -> None:
    context = browser.new_context(base_url=live_server.url, java_script_enabled=False)
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.goto(f"/cards/{CARD_ID}")
    first_start(page).dblclick()
    expect(page).to_have_url(QUESTION_URL)
    expect(page.get_by_role("button", name=TEXTS["en"]["check"])).to_be_enabled()
    context.close()
