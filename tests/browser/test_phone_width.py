"""No question page is wider than a phone: a long identifier in a stem or a choice
(``MixedPrecisionPolicy(param_dtype=torch.bfloat16)``,
``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``) once made Chromium lay the page out 470-500
px wide and zoom it out, so taps landed beside their targets."""

from __future__ import annotations

import re
from datetime import UTC, timedelta

import pytest
from playwright.sync_api import Page, expect

from app.models import PracticeSession

from .helpers import CARD_ID, LiveServer, shot

pytestmark = pytest.mark.browser

SEEDS = range(30)  # every point's templates come round within these, the reported ones included


def test_every_question_fits_a_phones_width(phone_page: Page, live_server: LiveServer):
    card = live_server.app.state.catalog.latest(CARD_ID)
    too_wide = []
    for point in card.points:
        for seed in SEEDS:
            phone_page.goto(f"/cards/{CARD_ID}/points/{point.slug}/practice?seed={seed}")
            width = phone_page.evaluate("() => window.innerWidth")
            if width > 390:
                too_wide.append((point.slug, seed, width))
    assert too_wide == []


def test_a_feedback_page_with_a_wide_formula_fits_a_phones_width(
    phone_page: Page, live_server: LiveServer
):
    """The worked solution of Megatron's tensor-parallel question writes
    GeLU(X1A1+X2A2) ≠ GeLU(X1A1)+GeLU(X2A2) inline: wider than 390 px, it scrolls on its own."""
    for lang in ("en", "zh"):
        phone_page.goto(
            f"/cards/megatron-3d-pipeline/points/tensor-parallel-communication/practice"
            f"?seed=7&lang={lang}"
        )
        phone_page.locator("input[name=choice_id]").first.check()
        phone_page.locator("form.question button[type=submit]").click()
        phone_page.wait_for_url("**/answers/**")
        assert "GeLU" in phone_page.locator(".solution").inner_text()
        assert phone_page.evaluate("() => window.innerWidth") <= 390, lang
        assert phone_page.evaluate("() => document.documentElement.scrollWidth") <= 390, lang
    shot(phone_page, "phone-feedback-wide-formula-zh")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_exams_results_fit_a_phones_width_whatever_its_exam_points(
    phone_page: Page, live_server: LiveServer, lang: str
):
    """An exam's results list its exam points by title beside three counts. One long word in a
    title ("communication") or one formula ($sbh(34 + 5as/h)$) made the table wider than a
    390 px screen (by 0.5-9 px, whichever exam point the exam drew). An exam of five questions
    on a card asks one per exam point, so every title of every card is checked here."""
    page = phone_page
    for card in live_server.app.state.catalog.cards():
        page.goto(f"/cards/{card.id}?lang={lang}")
        form = page.locator("form.start:has(input[name=mode][value=exam])")
        form.locator("select[name=size]").select_option("5")
        form.locator("button[type=submit]").click()
        page.wait_for_url(re.compile(r"/sessions/[^/?]+(\?|$)"))
        session_id = re.search(r"/sessions/([^/?]+)", page.url).group(1)
        with live_server.app.state.sessionmaker() as db:
            deadline = db.get(PracticeSession, session_id).deadline_at.replace(tzinfo=UTC)
        live_server.clock.advance(deadline + timedelta(seconds=1) - live_server.clock())
        page.goto(f"/sessions/{session_id}/summary")
        expect(page.locator("table.card-scores tbody tr")).to_have_count(len(card.points))
        table = page.locator("table.card-scores").bounding_box()
        assert table and table["x"] + table["width"] <= 390, (card.id, lang, table)
        assert page.evaluate("() => document.documentElement.scrollWidth") <= 390, card.id
        shot(page, f"phone-exam-results-{card.id}-{lang}")
