""" "Type the answer" in a real browser, at 1280 px and 390 px, in English and Chinese: a numeric
question asks for a number and a unit, bad input is refused beside the field (nothing stored), a
pitfall's value is diagnosed as that pitfall with its explanation and the worked solution."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import func, select

from app.domain.units import format_number, get_unit
from app.models import Attempt

from .helpers import CARD_ID, TEXTS, LiveServer, choose, shot

pytestmark = pytest.mark.browser

TYPED = {
    "en": {
        "mode": "Type the answer",
        "value": "Your answer",
        "unit": "Unit",
        "comma": "Use a decimal point, not a comma: 3.17, not 3,17.",
        "hint": "Graded to 3 significant figures",
        "gives": "is the value the pitfall “{title}",
        "solution": "Worked solution",
    },
    "zh": {
        "mode": "输入答案",
        "value": "你的答案",
        "unit": "单位",
        "comma": "请用小数点，不要用逗号：输入 3.17，而不是 3,17。",
        "hint": "按 3 位有效数字评分",
        "gives": "正是误区「{title}",
        "solution": "解题步骤",
    },
}


def attempts(live_server: LiveServer) -> int:
    with live_server.app.state.sessionmaker() as db:
        return int(db.scalar(select(func.count()).select_from(Attempt)) or 0)


def typed_session(page: Page, live_server: LiveServer, lang: str, width: int) -> None:
    texts, typed = TEXTS[lang], TYPED[lang]
    page.goto(f"/cards/{CARD_ID}?lang={lang}")
    page.locator("#modes").get_by_role("button", name=typed["mode"], exact=True).click()
    expect(page).to_have_url(re.compile(r"/sessions/[^/?]+(\?|$)"))
    session_url = page.url
    # Statements keep their choices: answer them, and type the key of a whole-number question
    # (a count of GPUs), until a question graded at significant figures asks to be typed.
    for _ in range(20):
        variant, right = live_server.answer_key(page)
        if not page.locator("form.question input[name=value]").count():
            choose(page, right.id, lang)
        elif get_unit(variant.content.template.unit or "1").whole:
            assert right.value is not None  # the key as shown, in its unit (a whole count)
            page.get_by_label(typed["value"]).fill(str(round(right.value)))
            page.get_by_role("button", name=texts["check"]).click()
        else:
            break
        page.goto(session_url)
    value = page.get_by_label(typed["value"])
    unit = page.locator("form.question select[name=unit]")
    expect(value).to_be_visible()
    expect(page.locator("form.question input[name=choice_id]")).to_have_count(0)
    expect(page.locator("#typed-hint")).to_contain_text(typed["hint"])
    box = page.locator(".typed-answer").bounding_box()  # the fields fit the window
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width
    shot(page, f"{lang}-typed-{width}-01-question")

    # A decimal comma: refused beside the field, in the page's language; nothing stored.
    before = attempts(live_server)
    value.fill("3,17")
    page.get_by_role("button", name=texts["check"]).click()
    expect(page.locator("form.question .error")).to_have_text(typed["comma"])
    expect(page.get_by_label(typed["value"])).to_have_value("3,17")
    expect(page.get_by_label(typed["value"])).to_have_attribute("aria-invalid", "true")
    assert attempts(live_server) == before
    shot(page, f"{lang}-typed-{width}-02-refused")

    # A pitfall's value, typed in the question's unit: diagnosed as that pitfall.
    variant, _ = live_server.answer_key(page)
    pitfall = variant.content.pitfalls[0]
    assert pitfall.value is not None and pitfall.pitfall is not None
    question_unit = variant.content.template.unit
    assert question_unit is not None
    spec = get_unit(question_unit)
    number = format_number(pitfall.value / spec.scale, 0 if spec.whole else 6)
    page.get_by_label(typed["value"]).fill(number)
    expect(page.get_by_label(typed["unit"])).to_be_visible()
    unit.select_option(question_unit)
    page.get_by_role("button", name=texts["check"]).click()
    expect(page.locator(".verdict h1")).to_have_text(texts["wrong"])
    title = pitfall.pitfall.title.get(lang).split("$")[0]  # before any math (MathML on pages)
    expect(page.locator(".verdict")).to_contain_text(typed["gives"].format(title=title))
    expect(page.locator("section.pitfall h3")).to_have_text(texts["why_wrong"])
    expect(page.locator("section.solution h2")).to_have_text(typed["solution"])
    expect(page.locator("section.all-choices")).to_have_count(0)
    assert attempts(live_server) == before + 1
    shot(page, f"{lang}-typed-{width}-03-pitfall")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_type_the_answer_on_a_desktop(page: Page, live_server: LiveServer, lang: str) -> None:
    typed_session(page, live_server, lang, 1280)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_type_the_answer_on_a_phone(phone_page: Page, live_server: LiveServer, lang: str) -> None:
    typed_session(phone_page, live_server, lang, 390)
