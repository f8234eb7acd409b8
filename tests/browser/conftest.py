"""Browser tests: the app served by uvicorn in a thread, driven by Debian's Chromium (playwright).

One server per xdist worker, on a fresh migrated SQLite file and a clock the tests can move
forward (a wrong answer comes due after FSRS's first learning step); one Chromium per worker and a
new browser context (a new guest: no cookies) per test. Screenshots go to
``test-artifacts/screenshots/``.

``playwright install`` cannot work here (it downloads): the tests use ``/usr/bin/chromium``
(``make test`` installs Debian's ``chromium`` and CJK fonts when missing); without it they fail,
saying so, rather than skip.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import threading
import time
from collections.abc import Iterator

import pytest
import uvicorn
from conftest import make_settings
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, sync_playwright

from app.cli import migrate

from .helpers import FakeClock, LiveServer, shot

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
PHONE = {"width": 390, "height": 844}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory, cards: dict) -> Iterator[LiveServer]:
    from app.main import create_app

    folder = tmp_path_factory.mktemp("browser")
    url = f"sqlite:///{folder / 'infracards.db'}"
    migrate(url)
    app = create_app(make_settings(folder, url), cards=cards)
    clock = FakeClock()
    app.state.context = dataclasses.replace(app.state.context, clock=clock)
    port = _free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="live-server", daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            pytest.fail("the test server did not start")
        time.sleep(0.02)
    yield LiveServer(url=f"http://127.0.0.1:{port}", app=app, clock=clock)
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture(scope="session")
def playwright_driver() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="session")
def browser(playwright_driver: Playwright) -> Iterator[Browser]:
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(
            f"the browser tests need Chromium at {CHROMIUM}: run `make test` (it installs Debian's "
            "chromium and fonts-noto-cjk when missing) or `apt-get install -y chromium "
            "fonts-noto-cjk`; `playwright install` cannot work here",
            pytrace=False,
        )
    browser = playwright_driver.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield browser
    browser.close()


def _new_context(browser: Browser, live_server: LiveServer, **options: object) -> BrowserContext:
    context = browser.new_context(base_url=live_server.url, **options)  # type: ignore[arg-type]
    context.set_default_timeout(10_000)
    return context


@pytest.fixture
def context(browser: Browser, live_server: LiveServer) -> Iterator[BrowserContext]:
    """A new browser (no cookies: a new guest) with an English desktop window."""
    context = _new_context(
        browser, live_server, viewport={"width": 1280, "height": 900}, locale="en-US"
    )
    yield context
    context.close()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    report = yield
    if report.when == "call":
        item.stash[_FAILED] = report.failed
    return report


_FAILED = pytest.StashKey[bool]()


def _shot_if_failed(request: pytest.FixtureRequest, page: Page) -> None:
    """A failed test leaves the page it failed on, as FAILED-<test>.png."""
    if request.node.stash.get(_FAILED, False) and not page.is_closed():
        shot(page, f"FAILED-{request.node.name}")


@pytest.fixture
def page(request: pytest.FixtureRequest, context: BrowserContext) -> Iterator[Page]:
    page = context.new_page()
    yield page
    _shot_if_failed(request, page)


@pytest.fixture
def phone_page(
    request: pytest.FixtureRequest, browser: Browser, live_server: LiveServer
) -> Iterator[Page]:
    context = _new_context(
        browser,
        live_server,
        viewport=PHONE,
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
        locale="en-US",
    )
    page = context.new_page()
    yield page
    _shot_if_failed(request, page)
    context.close()
