"""Exams that end themselves, summaries that list the questions, and the edge states, in a real
browser at 1280 and 390 px wide, in English and Chinese: the countdown reaching 0 opens the
results, the exam's button reads Submit, a question answered again says the first answer counts,
"My mistakes only" with no mistakes offers practice; no serious or critical axe-core violation."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, timedelta

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect

from app.models import PracticeSession

from .helpers import CARD_ID, TEXTS, LiveServer, shot

pytestmark = pytest.mark.browser

AXE = Axe()
SIZES = {"desktop": {"width": 1280, "height": 900}, "phone": {"width": 390, "height": 844}}
# The learner's browser reports its zone (static/timezone.js); end times read in it.
ZONES = {"en": "Europe/London", "zh": "Asia/Shanghai"}
SAYS = {
    "en": {
        "submit": "Submit",
        "check": "Check answer",
        "exam": "Timed exam",
        "mistakes_only": "My mistakes only",
        "nothing": "Nothing to practise here",
        "no_mistakes": "No mistakes to practise yet: answer some questions first.",
        "whole_card": "Practise the whole card",
        "not_answered": "Not answered",
        "questions": "The questions",
        "already": "Already answered: your first answer counts ({choice}).",
        "offset": {"Europe/London": "GMT+00:00", "Asia/Shanghai": "GMT+08:00"},
    },
    "zh": {
        "submit": "提交",
        "check": "提交答案",
        "exam": "限时考试",
        "mistakes_only": "只练错题",
        "nothing": "这里没有可练习的题",
        "no_mistakes": "还没有错题可练，先做几道题吧。",
        "whole_card": "练习整张卡片",
        "not_answered": "未作答",
        "questions": "各题回顾",
        "already": "这道题已经作答过：以你第一次的答案为准（{choice}）。",
        "offset": {"Europe/London": "GMT+00:00", "Asia/Shanghai": "GMT+08:00"},
    },
}


@pytest.fixture(params=[("en", "desktop"), ("zh", "desktop"), ("en", "phone"), ("zh", "phone")],
                ids=lambda p: f"{p[0]}-{p[1]}")  # fmt: skip
def learner(request: pytest.FixtureRequest, browser: Browser, live_server: LiveServer) -> Iterator:
    """A new guest's page in a language, at a width, in a time zone."""
    lang, size = request.param
    phone = size == "phone"
    context = browser.new_context(
        base_url=live_server.url,
        viewport=SIZES[size],
        device_scale_factor=2 if phone else 1,
        is_mobile=phone,
        has_touch=phone,
        locale="zh-CN" if lang == "zh" else "en-US",
        timezone_id=ZONES[lang],
    )
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.goto(f"/?lang={lang}")  # remembered for the next pages
    yield page, lang, f"{lang}-{size}"
    context.close()


def blocking(page: Page) -> list[str]:
    results = AXE.run(page)
    return [
        f"[{v['impact']}] {v['id']}: {v['help']} — "
        + "; ".join(" ".join(map(str, n["target"])) for n in v["nodes"][:3])
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]


def start_exam(page: Page, lang: str, size: int) -> None:
    """The card page's Timed exam, with ``size`` questions (the select offers 5 to 40)."""
    page.goto(f"/cards/{CARD_ID}")
    form = page.locator("form.start").filter(
        has=page.get_by_role("button", name=SAYS[lang]["exam"], exact=True)
    )
    form.locator("select[name=size]").evaluate(
        f"s => {{ s.add(new Option('{size}', '{size}')); s.value = '{size}'; }}"
    )
    form.get_by_role("button").click()
    expect(page).to_have_url(re.compile(r"/sessions/[^/?]+(\?|$)"))


def test_the_countdown_reaching_zero_opens_the_results(learner, live_server: LiveServer) -> None:
    page, lang, name = learner
    says = SAYS[lang]
    start_exam(page, lang, 1)
    expect(page.locator("form.question button[type=submit]")).to_have_text(says["submit"])
    # The end on the learner's clock.
    expect(page.locator(".countdown .muted")).to_contain_text(says["offset"][ZONES[lang]])
    assert not blocking(page)
    shot(page, f"exam-{name}-question")
    variant, right = live_server.answer_key(page)
    # The server's clock moves to 6 s before the deadline; the page counts the rest itself.
    session_id = re.search(r"/sessions/([^/?]+)", page.url).group(1)
    with live_server.app.state.sessionmaker() as db:
        deadline = db.get(PracticeSession, session_id).deadline_at.replace(tzinfo=UTC)
    live_server.clock.advance(deadline - timedelta(seconds=6) - live_server.clock())
    page.reload()
    seconds = int(page.locator("#countdown").get_attribute("data-seconds") or "0")
    assert 0 < seconds <= 6
    page.wait_for_url(re.compile(r"/summary"), timeout=15_000)
    expect(page.locator("h1")).to_have_text(TEXTS[lang]["summary"])
    expect(page.locator(".score-line")).to_contain_text(
        TEXTS[lang]["score"].format(right=0, size=1)
    )
    line = page.locator("li.question-line")
    expect(line).to_have_count(1)
    expect(line.locator(".tag")).to_have_text(says["not_answered"])
    expect(line.locator("dd.key .choice-id")).to_have_text(right.id)
    expect(page.locator(".past-exams tr.past-exam")).to_have_count(1)
    # The exam point's title keeps its room on a phone (390 px: 21 % of the table in Chinese and
    # 30 % in English when the counts took 6rem each; now 71 % and 36 %, "unanswered" the
    # widest English heading), and the table stays within the screen.
    table = page.locator("table.card-scores").first.bounding_box()
    title = page.locator("table.card-scores tbody th").first.bounding_box()
    assert table and title and title["width"] >= 0.34 * table["width"], (title, table)
    assert table["x"] + table["width"] <= page.viewport_size["width"]
    assert not blocking(page)
    shot(page, f"exam-{name}-ended-by-itself")


def test_a_summary_lists_the_questions_and_an_answer_again_says_the_first_counts(
    learner, live_server: LiveServer
) -> None:
    page, lang, name = learner
    says = SAYS[lang]
    start_exam(page, lang, 2)
    _, right = live_server.answer_key(page)
    # The same question open in a second tab (as Back would show it).
    other = page.context.new_page()
    other.goto(page.url)
    page.locator(f"input[name=choice_id][value='{right.id}']").check()
    page.get_by_role("button", name=says["submit"]).click()
    expect(page.locator(".session-bar .position")).to_contain_text("2")
    variant, wrong = live_server.wrong_choice(page)
    other.locator(f"input[name=choice_id][value='{wrong.id}']").check()
    other.get_by_role("button", name=says["submit"]).click()
    notice = other.locator("p.notice")
    expect(notice).to_contain_text(right.id.upper())
    shot(other, f"exam-{name}-answered-again")
    other.close()
    page.reload()
    page.locator(f"input[name=choice_id][value='{wrong.id}']").check()
    page.get_by_role("button", name=says["submit"]).click()
    page.wait_for_url(re.compile(r"/summary"))
    lines = page.locator("li.question-line")
    expect(lines).to_have_count(2)
    expect(lines.nth(0).locator(".tag")).to_have_text(TEXTS[lang]["correct"])
    expect(lines.nth(1).locator(".tag")).to_have_text(TEXTS[lang]["wrong"])
    expect(lines.nth(1).locator("dd.chosen .choice-id")).to_have_text(wrong.id)
    expect(lines.nth(1).locator("dd.pitfall-name")).not_to_be_empty()
    expect(page.locator("#questions")).to_have_text(says["questions"])
    assert page.locator("li.question-line .stem").first.inner_text().strip()
    assert not blocking(page)
    shot(page, f"exam-{name}-summary-questions")
    # Each answered question opens again.
    lines.nth(1).locator(".see-again a").click()
    expect(page.locator(".verdict h1")).to_have_text(TEXTS[lang]["wrong"])


def test_back_in_an_exam_restores_no_choice_onto_the_next_question(learner, live_server) -> None:
    """Every question of an exam is at one address: Back after answering shows the next one,
    and the browser must not put the answered question's choice on it (a Submit would record
    an answer the learner never chose)."""
    page, lang, name = learner
    start_exam(page, lang, 2)
    _, right = live_server.answer_key(page)
    page.locator(f"input[name=choice_id][value='{right.id}']").check()
    page.get_by_role("button", name=SAYS[lang]["submit"]).click()
    expect(page.locator(".session-bar .position")).to_contain_text("2")
    page.go_back()
    expect(page.locator("input[name=choice_id]").first).to_be_visible()
    expect(page.locator("input[name=choice_id]:checked")).to_have_count(0)
    shot(page, f"exam-{name}-back")


def test_my_mistakes_only_without_mistakes_offers_practice(learner) -> None:
    page, lang, name = learner
    says = SAYS[lang]
    page.goto(f"/cards/{CARD_ID}")
    page.get_by_role("button", name=says["mistakes_only"], exact=True).click()
    expect(page.locator("h1")).to_have_text(says["nothing"])
    expect(page.locator("p.notice")).to_have_text(says["no_mistakes"])
    assert not blocking(page)
    shot(page, f"empty-{name}-no-mistakes")
    page.get_by_role("button", name=says["whole_card"]).click()
    expect(page.locator("form.question button[type=submit]")).to_have_text(says["check"])


def test_a_question_answered_again_in_practice_shows_the_counted_choice(
    learner, live_server: LiveServer
) -> None:
    page, lang, name = learner
    says = SAYS[lang]
    page.goto(f"/cards/{CARD_ID}")
    page.locator("article.point").first.get_by_role(
        "button", name=TEXTS[lang]["practise"], exact=True
    ).click()
    _, right = live_server.answer_key(page)
    _, wrong = live_server.wrong_choice(page)
    other = page.context.new_page()
    other.goto(page.url)
    page.locator(f"input[name=choice_id][value='{right.id}']").check()
    page.get_by_role("button", name=says["check"]).click()
    expect(page.locator(".verdict h1")).to_have_text(TEXTS[lang]["correct"])
    other.locator(f"input[name=choice_id][value='{wrong.id}']").check()
    other.get_by_role("button", name=says["check"]).click()
    expect(other.locator("p.notice")).to_have_text(says["already"].format(choice=right.id.upper()))
    expect(other.locator(".verdict h1")).to_have_text(TEXTS[lang]["correct"])
    expect(other.locator("ul.choice-review li.is-chosen .choice-id")).to_have_text(right.id)
    assert not blocking(other)
    shot(other, f"practice-{name}-answered-again")
    other.close()
