"""The deck in a real browser: the card list in learning order, and each new card practised in
English and Chinese, one question of every exam point answered wrong on purpose, its pitfall
explained with the variant's numbers."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Page, expect

from app.models import PracticeSession
from app.practice.questions import regenerate
from app.practice.sessions import question_id_at

from .helpers import TEXTS, LiveServer, choose, shot

pytestmark = pytest.mark.browser
NEW_CARDS = ("megatron-3d-pipeline", "activation-memory")


def a_wrong_choice(page: Page, live_server: LiveServer) -> str:
    token = page.locator("form.question input[name=token]").input_value()
    ctx = live_server.app.state.context
    position = ctx.signer.verify(token, ctx.catalog).position
    assert position is not None
    with live_server.app.state.sessionmaker() as db:
        row = db.get(PracticeSession, position.session_id)
        identity = question_id_at(row, position.position, ctx.seed_secret)
    variant = regenerate(ctx.catalog, identity)
    return next(c.id for c in variant.choices if not c.correct)


def test_the_card_list_is_in_learning_order(page: Page, live_server: LiveServer) -> None:
    page.goto("/cards")
    hrefs = page.locator("ul.cards li.card-item > a").evaluate_all(
        "links => links.map(a => a.getAttribute('href'))"
    )
    order = [re.search(r"/cards/([a-z0-9-]+)", h).group(1) for h in hrefs]
    assert order.index("megatron-3d-pipeline") < order.index("zero-memory-offload")
    assert order.index("zero-memory-offload") < order.index("activation-memory")
    shot(page, "deck-cards")


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("card_id", NEW_CARDS)
def test_a_new_card_is_practised_point_by_point(
    page: Page, live_server: LiveServer, card_id: str, lang: str
) -> None:
    texts = TEXTS[lang]
    page.goto(f"/cards/{card_id}?lang={lang}")
    expect(page.locator("html")).to_have_attribute("lang", texts["html_lang"])
    expect(page.locator("math").first).to_be_attached()  # the card's formulas as MathML
    shot(page, f"deck-{card_id}-{lang}-card")
    points = page.locator("article.point")
    count = points.count()
    assert count == 5
    for number in range(count):
        page.goto(f"/cards/{card_id}?lang={lang}")
        page.locator("article.point").nth(number).get_by_role(
            "button", name=texts["practise"], exact=True
        ).click()
        expect(page).to_have_url(re.compile(r"/sessions/[^/?]+(\?|$)"))
        stem = page.locator("legend.stem")
        expect(stem).not_to_be_empty()
        assert "{" not in stem.inner_text() and "$" not in stem.inner_text()
        if number == 0:
            shot(page, f"deck-{card_id}-{lang}-question")
        choose(page, a_wrong_choice(page, live_server), lang)
        expect(page.locator(".verdict h1")).to_have_text(texts["wrong"])
        expect(page.locator("section.pitfall h2")).to_contain_text(texts["pitfall"])
        explanation = " ".join(page.locator("section.pitfall p").all_inner_texts())
        assert explanation.strip() and "{" not in explanation
        if number == 0:
            shot(page, f"deck-{card_id}-{lang}-feedback")
