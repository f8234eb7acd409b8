"""No question page is wider than a phone: a long identifier in a stem or a choice
(``MixedPrecisionPolicy(param_dtype=torch.bfloat16)``,
``PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True``) once made Chromium lay the page out 470-500
px wide and zoom it out, so taps landed beside their targets."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page

from .helpers import CARD_ID, LiveServer

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
