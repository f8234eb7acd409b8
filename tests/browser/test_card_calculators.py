"""The calculators the Activation Memory and Megatron 3D cards declare, in a real browser, in English
and Chinese: opened from the card page, inputs changed (the page re-submits itself), results and
verdicts read, a refused layout shown at its field, the page working without JavaScript, axe-core
clean, screenshots at laptop and phone width."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect

from .conftest import PHONE, _new_context
from .helpers import LiveServer, shot
from .test_maths import AXE, axe_problems

pytestmark = pytest.mark.browser

ACTIVATION = "activation-memory"
MEGATRON = "megatron-3d-pipeline"
# What a reader sees, in each language (asserted as shown, not looked up in the app's tables).
TEXTS = {
    "en": {
        "html_lang": "en",
        "activation": "Activation memory calculator",
        "megatron": "3D layout calculator",
        "fits": "Fits",
        "no_fit": "Does not fit",
        "holds": "Holds",
        "fails": "Does not hold",
        "heads_rule": "Tensor-parallel size: t must divide the attention heads a",
        "calculate": "Calculate",
        "first_stage": "First stage",
    },
    "zh": {
        "html_lang": "zh-Hans",
        "activation": "激活显存计算器",
        "megatron": "3D 并行布局计算器",
        "fits": "放得下",
        "no_fit": "放不下",
        "holds": "成立",
        "fails": "不成立",
        "heads_rule": "张量并行度：t 必须整除注意力头数 a",
        "calculate": "计算",
        "first_stage": "第一个阶段",
    },
}


def value_of(page: Page, output_id: str):
    return page.locator(f"#out-{output_id} td.calc-value")


def open_from_the_card(page: Page, card_id: str, lang: str, title: str) -> None:
    page.goto(f"/cards/{card_id}?lang={lang}")
    page.locator("nav.toc").get_by_role("link", name=title, exact=True).click()
    expect(page).to_have_url(re.compile(rf"/cards/{card_id}/calculator"))
    expect(page.locator("html")).to_have_attribute("lang", TEXTS[lang]["html_lang"])
    expect(page.locator("h1")).to_have_text(title)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_activation_calculator(page: Page, live_server: LiveServer, lang: str) -> None:
    texts = TEXTS[lang]
    open_from_the_card(page, ACTIVATION, lang, texts["activation"])
    verdict = page.locator(".calc-verdict")
    # GPT-3 175B, t = p = 8, nothing saved: 55.6 GB of activations + 43.5 GB of states.
    expect(verdict).to_contain_text(texts["no_fit"])
    expect(verdict).to_contain_text("99.1 GB")
    expect(value_of(page, "per_layer")).to_have_text("579 MB")
    expect(page.locator("figure.calc-chart svg")).to_be_visible()
    shot(page, f"card-calculator-activation-{lang}-default")

    page.select_option("#calc-sp", "on")  # the page re-submits itself on a change
    expect(page).to_have_url(re.compile(r"sp=on"))
    expect(value_of(page, "per_layer")).to_have_text("359 MB")
    expect(verdict).to_contain_text(texts["fits"])
    expect(verdict).to_contain_text("77.9 GB")
    page.select_option("#calc-attention", "flash")
    expect(value_of(page, "per_layer")).to_have_text("107 MB")  # 34·sbh/8: no 5as²b term
    expect(page.locator("#calc-sp")).to_have_value("on")  # the other choices kept

    page.fill("#calc-t", "5")  # 96 heads do not split over 5 GPUs
    errors = page.locator(".calc-errors")
    expect(errors).to_contain_text(texts["heads_rule"])
    expect(page.locator("#calc-t")).to_have_value("5")
    expect(page.locator("#calc-t")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#calc-t-error")).to_contain_text(texts["heads_rule"])
    shot(page, f"card-calculator-activation-{lang}-refused")

    page.fill("#calc-t", "4")
    page.get_by_role("button", name=texts["calculate"]).click()
    expect(errors).to_have_count(0)
    # t = 4 with SP and FlashAttention: 34·sbh/4 = 214 MB a layer.
    expect(value_of(page, "per_layer")).to_have_text("214 MB")
    assert not axe_problems(page, "activation calculator")
    shot(page, f"card-calculator-activation-{lang}-flash")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_megatron_calculator(page: Page, live_server: LiveServer, lang: str) -> None:
    texts = TEXTS[lang]
    open_from_the_card(page, MEGATRON, lang, texts["megatron"])
    expect(value_of(page, "n_d")).to_have_text("24")
    expect(value_of(page, "n_m")).to_have_text("64")
    expect(value_of(page, "bubble")).to_have_text("10.9%")
    expect(page.locator(".calc-verdict")).to_have_count(2)  # replicated, distributed optimizer
    shot(page, f"card-calculator-megatron-{lang}-default")

    page.select_option("#calc-schedule", "interleaved")
    expect(value_of(page, "bubble")).to_have_text("5.47%")
    expect(value_of(page, "bubble_share")).to_have_text("5.19%")

    page.fill("#calc-tp", "16")
    page.fill("#calc-gpus", "3072")
    page.locator("#calc-gpus").press("Enter")
    expect(value_of(page, "n_d")).to_have_text("24")
    expect(value_of(page, "states_whole")).to_have_text("21.9 GB")  # 16 · 175e9 / 128
    failing = page.locator(".calc-check.no-fit")
    expect(failing).to_have_count(1)
    expect(failing).to_contain_text(texts["fails"])
    expect(failing).to_contain_text("t ≤ 8")
    assert not axe_problems(page, "megatron calculator")
    # Each region is named apart (the results section and its table were both "Results").
    found = {v["id"] for v in AXE.run(page).response["violations"]}
    assert "landmark-unique" not in found
    shot(page, f"card-calculator-megatron-{lang}-wide")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_calculators_without_javascript_and_on_a_phone(
    browser: Browser, live_server: LiveServer, lang: str
) -> None:
    texts = TEXTS[lang]
    context = _new_context(browser, live_server, java_script_enabled=False, locale="en-US")
    page = context.new_page()
    page.goto(f"/cards/{ACTIVATION}/calculator?lang={lang}")
    page.select_option("#calc-recompute", "full")  # nothing re-submits without the script
    page.get_by_role("button", name=texts["calculate"]).click()
    expect(page).to_have_url(re.compile(r"recompute=full"))
    expect(value_of(page, "per_layer")).to_have_text("50.3 MB")  # 2·sbh
    context.close()

    phone = _new_context(
        browser,
        live_server,
        viewport=PHONE,
        device_scale_factor=2,
        is_mobile=True,
        has_touch=True,
        locale="en-US",
    )
    page = phone.new_page()
    for card_id in (ACTIVATION, MEGATRON):
        page.goto(f"/cards/{card_id}/calculator?lang={lang}")
        expect(page.locator(".calc-verdict").first).to_be_visible()
        wide = page.evaluate(
            "document.documentElement.scrollWidth > document.documentElement.clientWidth"
        )
        assert not wide, f"{card_id}: the page scrolls sideways on a phone"
        shot(page, f"card-calculator-{card_id}-{lang}-phone")
    phone.close()
