"""What a learner does, in a real browser: fall for a pitfall, keep it by signing up, meet it in the
mistake book and again, with new numbers, when it comes due; a timed exam with a score per point;
the same in Chinese; everything with the keyboard alone."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from playwright.sync_api import Page, expect

from .helpers import (
    CARD_ID,
    TEXTS,
    LiveServer,
    choose,
    expect_position,
    nav,
    new_email,
    open_card,
    shot,
    sign_up,
    start_first_point,
)

pytestmark = pytest.mark.browser


def fold(text: str) -> str:
    """Whitespace folded: inline MathML reads as its characters on lines of their own."""
    return re.sub(r"\s+", " ", text).strip()


def paragraphs(page: Page, selector: str) -> str:
    """The text of a block's paragraphs, whitespace folded."""
    return fold(" ".join(page.locator(selector).all_inner_texts()))


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_pitfall_mistake_book_and_review_with_fresh_numbers(
    page: Page, live_server: LiveServer, lang: str
) -> None:
    texts = TEXTS[lang]
    if lang == "zh":
        # Reached as a learner would: the header's language switch, then remembered.
        page.goto("/")
        nav(page).get_by_role("link", name=TEXTS["en"]["switch"]).click()
        expect(page).to_have_url(re.compile(r"lang=zh"))
    open_card(page, lang)
    expect(page.locator("html")).to_have_attribute("lang", texts["html_lang"])
    shot(page, f"{lang}-flow-01-card")
    start_first_point(page, lang)
    expect_position(page, lang, 1, 10)
    expect(page.locator(".session-bar progress")).to_be_visible()
    shot(page, f"{lang}-flow-02-question")

    # A guest answers wrong on purpose.
    variant, wrong = live_server.wrong_choice(page)
    _, right = live_server.answer_key(page)
    first_stem = page.locator("legend.stem").inner_text()
    choose(page, wrong.id, lang)
    expect(page).to_have_url(re.compile(r"/answers/\d+"))
    expect(page.locator(".verdict h1")).to_have_text(texts["wrong"])
    pitfall_heading = page.locator("section.pitfall h2")
    expect(pitfall_heading).to_contain_text(texts["pitfall"])
    pitfall_title = fold(pitfall_heading.inner_text()).removeprefix(texts["pitfall"].strip())
    pitfall_title = pitfall_title.strip()
    assert pitfall_title, "the feedback names the pitfall"
    expect(page.locator("section.pitfall h3")).to_have_text(texts["why_wrong"])
    explanation = paragraphs(page, "section.pitfall p")
    assert explanation
    # Every choice is shown: the chosen one and the answer tagged, the others with their pitfall.
    chosen = page.locator("ul.choice-review li.is-chosen")
    expect(chosen).to_contain_text(texts["your_choice"])
    expect(chosen.locator(".choice-id")).to_have_text(wrong.id)
    answer = page.locator("ul.choice-review li.is-answer")
    expect(answer).to_contain_text(texts["the_answer"])
    expect(answer.locator(".choice-id")).to_have_text(right.id)
    expect(page.locator("ul.choice-review li")).to_have_count(len(variant.choices))
    shot(page, f"{lang}-flow-03-feedback-wrong")

    # Signing up keeps what the guest answered.
    email = new_email()
    sign_up(page, lang, email)
    shot(page, f"{lang}-flow-04-account")

    nav(page).get_by_role("link", name=texts["mistakes"]).click()
    expect(page.locator("article.mistake")).to_have_count(1)
    mistake = page.locator("article.mistake")
    assert fold(mistake.locator("h2").inner_text()) == f"1× {pitfall_title}"
    expect(mistake.locator("h3")).to_have_text(texts["why_wrong"])
    assert paragraphs(page, "article.mistake > p:not(.muted)") == explanation
    shot(page, f"{lang}-flow-05-mistakes")

    # Not due yet; FSRS's first learning step is a minute.
    nav(page).get_by_role("link", name=texts["review"]).click()
    expect(page.locator("h1")).to_have_text(texts["due_today"])
    expect(page.locator("main")).to_contain_text(texts["nothing_due"])
    expect(nav(page).locator(".badge")).to_have_count(0)

    live_server.clock.advance(timedelta(minutes=2))
    page.reload()
    expect(page.locator(".due-line")).to_contain_text(f"1 {texts['due_now']}")
    expect(nav(page).locator(".badge")).to_have_text("1")
    shot(page, f"{lang}-flow-06-review-due")
    page.get_by_role("button", name=texts["start_review"]).click()
    expect_position(page, lang, 1, 1)
    fresh, fresh_right = live_server.answer_key(page)
    # The same trap (template) with new numbers (another seed).
    assert fresh.id.template_id == variant.id.template_id
    assert fresh.id.seed != variant.id.seed
    if fresh.params != variant.params:
        assert page.locator("legend.stem").inner_text() != first_stem
    shot(page, f"{lang}-flow-07-review-question")
    choose(page, fresh_right.id, lang)
    expect(page.locator(".verdict h1")).to_have_text(texts["correct"])
    expect(page.locator("section.pitfall")).to_have_count(0)
    # A right choice is tagged in the right answer's colours, not the wrong one's (red).
    colours = "e => [getComputedStyle(e).color, getComputedStyle(e).backgroundColor]"
    chosen = page.locator("li.is-chosen .tag.chosen")
    assert chosen.evaluate(colours) == page.locator("li.is-chosen .tag.right").evaluate(colours)
    shot(page, f"{lang}-flow-08-feedback-right")

    nav(page).get_by_role("link", name=texts["review"]).click()
    expect(page.locator("main")).to_contain_text(texts["nothing_due"])
    expect(nav(page).locator(".badge")).to_have_count(0)


def test_timed_exam_of_five_ends_with_a_score_per_point(
    page: Page, live_server: LiveServer
) -> None:
    texts = TEXTS["en"]
    page.goto(f"/cards/{CARD_ID}")
    exam_form = page.locator("form.start").filter(
        has=page.get_by_role("button", name=texts["exam"])
    )
    # The card page starts 20; a learner with a size choice would pick 5.
    exam_form.evaluate(
        "form => form.insertAdjacentHTML('beforeend', '<input type=hidden name=size value=5>')"
    )
    exam_form.get_by_role("button").click()

    expected: dict[int, list[int]] = {}  # point number -> [right, wrong]
    pitfalls = 0
    for n in range(1, 6):
        expect_position(page, "en", n, 5)
        countdown = page.locator(".countdown")
        expect(countdown).to_contain_text(texts["time_left"])
        minutes, seconds = re.search(r"(\d+):(\d\d)", countdown.inner_text()).groups()
        assert 0 < int(minutes) * 60 + int(seconds) <= 5 * 90
        expect(page.locator(".verdict")).to_have_count(0)  # no feedback until the end
        if n == 1:
            shot(page, "en-exam-question")
        variant, right = live_server.answer_key(page)
        answer_right = n <= 3
        pick = right if answer_right else next(c for c in variant.choices if not c.correct)
        tally = expected.setdefault(live_server.point_number(variant.id.point), [0, 0])
        tally[0 if answer_right else 1] += 1
        pitfalls += 0 if answer_right else 1
        # An exam's button submits (no feedback before the end).
        page.locator(f"form.question input[name=choice_id][value='{pick.id}']").check()
        page.get_by_role("button", name="Submit", exact=True).click()

    expect(page).to_have_url(re.compile(r"/summary"))
    expect(page.locator("h1")).to_have_text(texts["summary"])
    expect(page.locator(".score-line")).to_contain_text(texts["score"].format(right=3, size=5))
    rows = page.locator("table.scores tbody tr.point-score")
    shown: dict[int, list[int]] = {}
    for i in range(rows.count()):
        row = rows.nth(i)
        number = int(re.match(r"\s*(\d+)\.", row.locator("th").inner_text()).group(1))
        cells = row.locator("td").all_inner_texts()
        shown[number] = [int(cells[0]), int(cells[1])]
    assert {k: v for k, v in shown.items() if v != [0, 0]} == expected
    counts = page.locator("ul.pitfall-counts .count").all_inner_texts()
    assert sum(int(c.rstrip("×")) for c in counts) == pitfalls
    shot(page, "en-exam-summary")

    # After the end, each answer's feedback can be opened.
    page.locator("ol.question-lines .see-again a").nth(3).click()
    expect(page.locator(".verdict h1")).to_have_text(texts["wrong"])
    expect(page.locator("section.pitfall h2")).to_contain_text(texts["pitfall"])


def test_keyboard_only(page: Page, live_server: LiveServer) -> None:
    """Tab, Space, arrows and Enter: skip link, start a practice, choose, submit, go on."""
    texts = TEXTS["en"]
    page.goto(f"/cards/{CARD_ID}")

    def focused(js: str) -> object:
        return page.evaluate(f"() => {{ const el = document.activeElement; return {js}; }}")

    def tab_to(js: str, limit: int = 80) -> None:
        for _ in range(limit):
            page.keyboard.press("Tab")
            if focused(js):
                return
        raise AssertionError(f"Tab never reached an element where {js}")

    def outline_shown() -> bool:
        return bool(
            focused(
                "getComputedStyle(el).outlineStyle !== 'none' && "
                "parseFloat(getComputedStyle(el).outlineWidth) >= 2"
            )
        )

    page.keyboard.press("Tab")
    assert focused("el.classList.contains('skip')"), "the first Tab reaches the skip link"
    expect(page.locator("a.skip")).to_be_in_viewport()
    tab_to("el.tagName === 'BUTTON' && el.closest('article.point') !== null")
    assert focused("el.textContent.trim()") == texts["practise"]
    assert outline_shown(), "a focused button shows its focus"
    page.keyboard.press("Enter")
    expect_position(page, "en", 1, 10)

    _, right = live_server.answer_key(page)
    tab_to("el.type === 'radio'")
    assert outline_shown(), "a focused choice shows its focus"
    page.keyboard.press("Space")
    for _ in range(8):
        if page.locator("input[name=choice_id]:checked").get_attribute("value") == right.id:
            break
        page.keyboard.press("ArrowDown")
    expect(page.locator("input[name=choice_id]:checked")).to_have_value(right.id)
    page.keyboard.press("Tab")
    assert focused("el.textContent.trim()") == texts["check"]
    page.keyboard.press("Enter")
    expect(page.locator(".verdict h1")).to_have_text(texts["correct"])
    shot(page, "en-keyboard-feedback")

    tab_to(f"el.tagName === 'A' && el.textContent.trim() === {texts['next']!r}")
    page.keyboard.press("Enter")
    expect_position(page, "en", 2, 10)
