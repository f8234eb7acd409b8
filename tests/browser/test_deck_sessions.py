"""A session on the whole deck in a real browser, in English and Chinese: a learner answers a
question wrong on two cards, and once both come due Today's Start button reviews everything due;
the review asks questions of both cards, each naming its card, and the summary scores each card
on its own."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect

from .helpers import TEXTS, LiveServer, choose, shot
from .test_today import problems_of

pytestmark = pytest.mark.browser

ZERO, MEGATRON = "zero-memory-offload", "megatron-3d-pipeline"
DECK = {
    "en": {
        "review_all": "Review everything due",
        "deck_exam": "Timed exam on the deck",
        "from_card": "From the card",
        "whole_deck": "A session on the whole deck",
        "back": "Back to the cards",
    },
    "zh": {
        "review_all": "复习全部到期的题",
        "deck_exam": "整套卡组限时考试",
        "from_card": "本题来自卡片",
        "whole_deck": "这是一次整套卡组的练习",
        "back": "返回卡片列表",
    },
}


def answer_one_wrong(page: Page, live_server: LiveServer, card_id: str, lang: str) -> None:
    """On the card's page, the first exam point's Practise button, and a wrong answer."""
    page.goto(f"/cards/{card_id}?lang={lang}")
    page.locator("article.point").first.get_by_role(
        "button", name=TEXTS[lang]["practise"], exact=True
    ).click()
    expect(page).to_have_url(re.compile(r"/sessions/[^/?]+(\?|$)"))
    _, wrong = live_server.wrong_choice(page)
    choose(page, wrong.id, lang)
    expect(page.locator(".verdict h1")).to_have_text(TEXTS[lang]["wrong"])


def card_of_question(page: Page) -> str:
    """The card a question page names: its breadcrumb's last link."""
    href = page.locator("p.crumbs a").last.get_attribute("href") or ""
    found = re.search(r"/cards/([a-z0-9-]+)", href)
    assert found, href
    return found.group(1)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_deck_review_from_today_asks_both_cards(
    page: Page, live_server: LiveServer, lang: str
) -> None:
    texts, deck = TEXTS[lang], DECK[lang]
    answer_one_wrong(page, live_server, ZERO, lang)
    answer_one_wrong(page, live_server, MEGATRON, lang)
    live_server.clock.advance(timedelta(minutes=3))  # the wrong answers come due

    page.goto(f"/?lang={lang}")
    expect(page.locator("h1")).to_have_text(texts["today"])
    start = page.locator("section.today-next").get_by_role("button", name=deck["review_all"])
    expect(start).to_be_visible()
    shot(page, f"deck-{lang}-today-review-everything")
    problems = problems_of(page, "today")
    # The deck's own section offers its timed exam, at a laptop's width and a phone's.
    exam = page.locator("section.deck-start").get_by_role("button", name=deck["deck_exam"])
    expect(exam).to_be_visible()
    laptop = page.viewport_size
    assert laptop is not None
    page.set_viewport_size({"width": 390, "height": 844})
    expect(exam).to_be_visible()
    shot(page, f"deck-{lang}-today-phone")
    problems += problems_of(page, "today at a phone's width")
    page.set_viewport_size(laptop)
    start.click()
    expect(page).to_have_url(re.compile(r"/sessions/[^/?]+(\?|$)"))

    cards_asked = []
    for number in range(1, 21):  # a review asks each question due once (at most 20)
        if texts["summary"] in page.locator("h1").inner_text():
            break
        expect(page.locator("p.question-card")).to_contain_text(deck["from_card"])
        cards_asked.append(card_of_question(page))
        if number <= 2:
            shot(page, f"deck-{lang}-question-{number}")
        if number == 1:
            problems += problems_of(page, "a question of the deck")
        _, right = live_server.answer_key(page)
        choose(page, right.id, lang)
        expect(page.locator(".verdict h1")).to_have_text(texts["correct"])
        page.get_by_role("link", name=texts["next"]).click()
    assert set(cards_asked) == {ZERO, MEGATRON}, cards_asked
    # The deck's learning order: Megatron 3D before ZeRO, the first question Megatron's.
    assert cards_asked[0] == MEGATRON

    expect(page.locator("h1")).to_have_text(texts["summary"])
    expect(page.locator("p.lead")).to_contain_text(deck["whole_deck"])
    expect(page.locator("table.card-scores")).to_have_count(2)
    expect(page.locator("table.card-scores").first).to_have_attribute("data-card", MEGATRON)
    size = len(cards_asked)
    expect(page.locator(".score-line")).to_contain_text(
        texts["score"].format(right=size, size=size)
    )
    expect(page.get_by_role("link", name=deck["back"])).to_be_visible()
    shot(page, f"deck-{lang}-summary")
    problems += problems_of(page, "the deck's summary")
    assert not problems, "\n".join(problems)
