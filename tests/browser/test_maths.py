"""Maths that every reader gets, at 1280 and 390 px in English and Chinese: headings name their
formulas (Chromium's accessibility tree), the demo's chart reads on a phone and opens on its own,
and the pages holding formulas, the chart and the calculator's table pass axe-core."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Browser, Page, expect

from .conftest import PHONE, _new_context
from .helpers import (
    CARD_ID,
    SCREENSHOTS,
    TEXTS,
    LiveServer,
    choose,
    shot,
    start_first_point,
)
from .test_pages import AXE, BLOCKING

pytestmark = pytest.mark.browser

WIDTHS = {"desktop": {"width": 1280, "height": 900}, "phone": PHONE}
CALCULATOR = f"/cards/{CARD_ID}/calculator?psi=70B&n_d=64&gpu_gb=80&stage=3&offload=optimizer"
# The card's zero3-communication title ends in $16\Psi \to \frac{16\Psi}{N_d}$: its words, by hand.
FORMULA_WORDS = {
    "en": "16 Psi to 16 Psi over N sub d",
    "zh": "16 Psi 变为 N 下标 d 分之 16 Psi",
}


@pytest.fixture(params=list(WIDTHS))
def sized_page(request: pytest.FixtureRequest, browser: Browser, live_server: LiveServer):
    phone = request.param == "phone"
    context = _new_context(
        browser,
        live_server,
        viewport=WIDTHS[request.param],
        device_scale_factor=2 if phone else 1,
        is_mobile=phone,
        has_touch=phone,
        locale="en-US",
    )
    page = context.new_page()
    page.width_name = request.param  # type: ignore[attr-defined]
    yield page
    context.close()


def axe_problems(page: Page, name: str) -> list[str]:
    found = []
    for violation in AXE.run(page).response["violations"]:
        if violation["impact"] in BLOCKING:
            targets = "; ".join(" ".join(map(str, n["target"])) for n in violation["nodes"][:5])
            found.append(f"{name}: [{violation['impact']}] {violation['id']} — {targets}")
    return found


def headings_missing_their_formulas(page: Page) -> list[str]:
    """Headings whose accessible name (Chromium's) leaves out a formula they show."""
    missing = []
    for heading in page.locator("main :is(h1, h2, h3)").all():
        labels = heading.locator("math").evaluate_all(
            "ms => ms.map(m => m.getAttribute('aria-label'))"
        )
        if not labels:
            continue
        name = heading.aria_snapshot()
        if not all(label and label in name for label in labels):
            missing.append(f"{name!r} lacks one of {labels}")
    return missing


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_formulas_headings_chart_and_calculator_read_for_everyone(
    sized_page: Page, live_server: LiveServer, lang: str
) -> None:
    page, width = sized_page, sized_page.width_name  # type: ignore[attr-defined]
    problems: list[str] = []

    page.goto(f"/cards/{CARD_ID}?lang={lang}")
    heading = page.get_by_role("heading", name=re.compile(re.escape(FORMULA_WORDS[lang])))
    expect(heading).to_have_count(1)
    assert "\\" not in page.title() and "<" not in page.title()
    problems += headings_missing_their_formulas(page)
    problems += axe_problems(page, "card")
    # The card page is long (25,000 px on a phone): its exam point with the formula is enough.
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("article.point", has=heading).screenshot(
        path=str(SCREENSHOTS / f"maths-{lang}-{width}-card-point.png")
    )

    page.goto(f"/cards/{CARD_ID}/run-it-yourself")
    expect(page.locator("dl.commands")).to_contain_text("make demo")
    problems += axe_problems(page, "run-it-yourself")
    shot(page, f"maths-{lang}-{width}-run-it")

    page.goto(CALCULATOR)
    expect(page.locator(".calc-source").first).to_be_visible()
    problems += [
        f"calculator: a source is cut or off screen: {text!r}"
        for text in page.locator(".calc-source").evaluate_all(
            """cells => cells.filter(c => {
                const box = c.getBoundingClientRect();
                return box.width < 150 || box.right > document.documentElement.clientWidth
                    || c.scrollWidth > c.clientWidth + 1;
            }).map(c => c.textContent.trim().slice(0, 40))"""
        )
    ]
    problems += axe_problems(page, "calculator")
    shot(page, f"maths-{lang}-{width}-calculator")

    page.goto(f"/cards/{CARD_ID}")
    start_first_point(page, lang)
    wrong = next(c for c in live_server.wrong_choice(page)[0].choices if c.pitfall)
    choose(page, wrong.id, lang)
    expect(page.locator(".verdict h1")).to_have_text(TEXTS[lang]["wrong"])
    problems += headings_missing_their_formulas(page)
    page.goto("/mistakes")
    options = page.locator("form.filters option").all_text_contents()
    assert len(options) > 2 and not [o for o in options if "\\" in o or "$" in o]
    problems += headings_missing_their_formulas(page)
    problems += axe_problems(page, "mistakes")
    shot(page, f"maths-{lang}-{width}-mistakes")
    assert not problems, "\n".join(problems)


def test_the_chart_reads_on_a_phone_and_opens_on_its_own(
    phone_page: Page, live_server: LiveServer
) -> None:
    page = phone_page
    page.goto(f"/cards/{CARD_ID}/run-it-yourself")
    image = page.locator("figure.demo-chart img")
    expect(image).to_be_visible()
    shown = image.evaluate("img => img.getBoundingClientRect().width")
    assert shown <= PHONE["width"]
    link = page.locator("figure.demo-chart figcaption a")
    href = link.get_attribute("href")
    assert href and href.endswith("/chart.svg")
    response = page.goto(href)
    assert response is not None and response.headers["content-type"].startswith("image/svg+xml")
    drawn = page.evaluate(
        """() => {
            const svg = document.documentElement;
            const heights = [...svg.querySelectorAll('text')].map(t => t.getBBox().height);
            return {width: svg.viewBox.baseVal.width, smallest: Math.min(...heights),
                    count: heights.length};
        }"""
    )
    assert drawn["count"] > 20
    # A text's box in the chart's units, times the scale the page shows it at, in CSS px.
    assert drawn["smallest"] * shown / drawn["width"] >= 10, (drawn, shown)
