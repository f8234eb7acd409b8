"""The reported card text, read by Chromium's own HTML parser: the learner's pages for a card with
``\\text{<!--><meta http-equiv="refresh" ...>-->}`` (and a link, an image and a script beside it)
in every field neither navigate nor hold any element the card text could have put there."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from playwright.sync_api import Browser, Route
from test_card_markup import HOSTILE, learner_pages

pytestmark = pytest.mark.browser

ORIGIN = "http://infracards.test"
PAYLOAD = (
    HOSTILE[0] + "<!--><a href=https://evil.example/login>x</a><img src=x onerror=alert(1)>-->"
)
INJECTED = (
    "meta[http-equiv], a[href*='evil'], img, iframe, script:not([src]), "
    "script[src*='evil'], [onerror], [onload]"
)


def serving(url: str, body: str, requested: list[str]) -> Callable[[Route], None]:
    """A route handler answering ``url`` with ``body`` and refusing (and noting) anything else."""

    def serve(route: Route) -> None:
        if route.request.url == url:
            route.fulfill(status=200, content_type="text/html", body=body)
        else:
            requested.append(route.request.url)
            route.abort()

    return serve


def test_chromium_finds_no_markup_from_card_text(browser: Browser, tmp_path, db_url):
    pages = learner_pages(tmp_path, db_url, PAYLOAD)
    requested: list[str] = []
    context = browser.new_context(java_script_enabled=True)
    try:
        for name, html_text in pages.items():
            url = f"{ORIGIN}/{name.replace(' ', '-')}"

            page = context.new_page()
            page.route("**/*", serving(url, html_text, requested))
            page.goto(url)
            time.sleep(0.2)  # a meta refresh of 0 s would have navigated by now
            assert page.url == url, name
            assert page.locator(INJECTED).count() == 0, name
            assert "<!---->" not in page.content() or "evil" not in page.content(), name
            page.close()
    finally:
        context.close()
    assert not [u for u in requested if "pwned" in u or "evil" in u or u.endswith("/x")]
