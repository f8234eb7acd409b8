"""Today and the review page in a real browser, at 1280 px and 390 px, in English and Chinese: a
new guest's first visit, a learner with reviews due and a streak (the test clock moved a day), the
charts; no serious or critical axe-core violation, no sideways scrolling on a phone; and the card
page's first Practise button within the first screen."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from .helpers import CARD_ID, SCREENSHOTS, TEXTS, LiveServer, choose, shot, start_first_point

pytestmark = pytest.mark.browser

AXE = Axe()
BLOCKING = ("serious", "critical")
SIZES = {"desktop": (1280, 800), "phone": (390, 844)}
TODAY = {
    "en": {
        "today": "Today",
        "first": "Answer your first question",
        "start_review": "Start the review",
        "streak": "Streak",
        "forecast": "Reviews in the next 14 days",
        "activity": "Your activity",
        "table": "The same as a table",
    },
    "zh": {
        "today": "今天",
        "first": "回答第一道题",
        "start_review": "开始复习",
        "streak": "连续学习",
        "forecast": "未来 14 天的复习",
        "activity": "你的练习记录",
        "table": "以表格查看",
    },
}


@pytest.fixture(params=list(SIZES))
def sized(request, browser: Browser, live_server: LiveServer) -> Iterator[tuple[Page, str]]:
    width, height = SIZES[request.param]
    phone = request.param == "phone"
    context = browser.new_context(
        base_url=live_server.url,
        viewport={"width": width, "height": height},
        device_scale_factor=2 if phone else 1,
        is_mobile=phone,
        has_touch=phone,
        locale="en-US",
        timezone_id="Asia/Shanghai",
    )
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page, request.param
    context.close()


def problems_of(page: Page, name: str) -> list[str]:
    found = []
    for violation in AXE.run(page).response["violations"]:
        if violation["impact"] in BLOCKING:
            targets = "; ".join(" ".join(map(str, n["target"])) for n in violation["nodes"][:5])
            found.append(f"{name}: [{violation['impact']}] {violation['id']}: {targets}")
    width = page.evaluate("() => document.documentElement.scrollWidth")
    viewport = page.viewport_size
    assert viewport is not None
    if width > viewport["width"]:
        found.append(f"{name}: scrolls sideways ({width} px > {viewport['width']} px)")
    return found


def in_first_screen(page: Page, locator) -> bool:
    box = locator.bounding_box()
    viewport = page.viewport_size
    assert box is not None and viewport is not None
    return box["y"] >= 0 and box["y"] + box["height"] <= viewport["height"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_today_for_a_new_guest(sized: tuple[Page, str], lang: str) -> None:
    page, size = sized
    page.goto(f"/?lang={lang}")
    texts = TODAY[lang]
    expect(page.locator("h1")).to_have_text(texts["today"])
    start = page.get_by_role("link", name=texts["first"])
    expect(start).to_be_visible()
    assert in_first_screen(page, start), "the first question's button is below the first screen"
    # no tiles of zeros on a first visit
    expect(page.locator(".today-facts")).to_have_count(0)
    # exam-point titles are links to practise them, the deck's first card (learning order) first
    first_card = page.locator("ol.point-links a").first.get_attribute("href")
    first_card = re.search(r"/cards/([a-z0-9-]+)/points/[^/]+/practice", first_card).group(1)
    shot(page, f"{lang}-{size}-today-first-visit")
    problems = problems_of(page, "today")
    assert not problems, "\n".join(problems)
    start.click()  # the first question of exam point 1 (its answer starts the learner's history)
    expect(page).to_have_url(re.compile(rf"/cards/{first_card}/points/[^/]+/practice"))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_card_page_s_first_practise_button_is_in_the_first_screen(
    sized: tuple[Page, str], lang: str
) -> None:
    page, size = sized
    page.goto(f"/cards/{CARD_ID}?lang={lang}")
    first = page.get_by_role("button", name=TEXTS[lang]["practise"], exact=True).first
    box = first.bounding_box()
    assert box is not None
    assert in_first_screen(page, first), f"the first Practise button's top is at {box['y']} px"
    # the first screen only (the whole card at 390 px is a 26,000 px tall image)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{lang}-{size}-card-first-screen.png"))
    problems = problems_of(page, "card")
    assert not problems, "\n".join(problems)


def pick(page: Page, choice_id: str, lang: str, phone: bool) -> None:
    if not phone:
        choose(page, choice_id, lang)
        return
    page.locator(f"input[name=choice_id][value='{choice_id}']").tap()
    page.get_by_role("button", name=TEXTS[lang]["check"]).tap()


def answer_wrong_then_right(page: Page, live_server: LiveServer, lang: str, phone: bool) -> None:
    """On the card page: practise the first exam point, one wrong answer and one right."""
    page.goto(f"/cards/{CARD_ID}?lang={lang}")
    start_first_point(page, lang)
    _, wrong = live_server.wrong_choice(page)
    pick(page, wrong.id, lang, phone)
    expect(page.locator(".verdict h1")).to_have_text(TEXTS[lang]["wrong"])
    expect(page.locator(".next-review")).to_be_visible()
    page.get_by_role("link", name=TEXTS[lang]["next"]).click()
    _, right = live_server.answer_key(page)
    pick(page, right.id, lang, phone)
    expect(page.locator(".verdict h1")).to_have_text(TEXTS[lang]["correct"])
    expect(page.locator(".next-review")).to_contain_text(re.compile(r"\d"))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_today_with_reviews_due_and_a_streak_then_the_charts(
    sized: tuple[Page, str], live_server: LiveServer, lang: str
) -> None:
    page, size = sized
    texts = TODAY[lang]
    phone = size == "phone"
    answer_wrong_then_right(page, live_server, lang, phone)  # day 1
    live_server.clock.advance(timedelta(days=1))
    answer_wrong_then_right(page, live_server, lang, phone)  # day 2
    live_server.clock.advance(timedelta(minutes=3))  # the wrong ones are due
    page.goto(f"/?lang={lang}")
    expect(page.locator("h1")).to_have_text(texts["today"])
    start = page.get_by_role("button", name=texts["start_review"])
    expect(start).to_be_visible()
    assert in_first_screen(page, start)
    streak = page.locator(".fact").filter(has_text=texts["streak"])
    expect(streak.locator(".fact-value")).to_have_text("2")
    shot(page, f"{lang}-{size}-today-due-and-streak")
    problems = problems_of(page, "today")

    page.goto(f"/review?lang={lang}")
    expect(page.get_by_role("heading", name=texts["forecast"])).to_be_visible()
    expect(page.get_by_role("heading", name=texts["activity"])).to_be_visible()
    expect(page.locator("figure.chart svg")).to_have_count(2)
    expect(page.locator("figure.chart svg rect.bar").first).to_be_visible()
    shot(page, f"{lang}-{size}-review-charts")
    problems += problems_of(page, "review")
    page.get_by_text(texts["table"]).first.click()
    expect(page.locator("details.chart-table table").first).to_be_visible()
    problems += problems_of(page, "review with the table open")
    assert not problems, "\n".join(problems)

    page.goto(f"/?lang={lang}")
    page.get_by_role("button", name=texts["start_review"]).click()
    expect(page).to_have_url(re.compile(r"/sessions/[^/?]+"))
