"""The dashboard's forms in a real browser: a second tab saving over a draft changed in the first
is refused with what it typed kept and a way to open the draft as it is now; a Parameters line
that does not read comes back at its field with the typing; and a form saved unchanged (the
browser sends its textareas' lines with CRLF) changes nothing in the draft."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import BrowserContext, Page, expect
from sqlalchemy import select

from app.auth.service import LearnerRef
from app.authoring import service
from app.models import Learner

from .helpers import new_email, shot
from .test_authoring import CARD, log_in_as_instructor

pytestmark = pytest.mark.browser


def kv_draft(live_server) -> str:
    """A draft of the fixture card under a new id (never published: learners never see it)."""
    card_id = "zz-draft-" + re.sub(r"[^a-z0-9]", "", new_email().split("@")[0])[:10]
    with live_server.app.state.sessionmaker() as db:
        actor = db.scalars(select(Learner).where(Learner.role == "instructor")).first()
        ref = LearnerRef(actor.id, actor.kind, actor.role, actor.email)
        service.create_draft(db=db, actor=ref, document={**CARD, "id": card_id})
    return card_id


def stored(live_server, card_id: str) -> dict:
    with live_server.app.state.sessionmaker() as db:
        return service.get_draft(db=db, card_id=card_id).document


def test_a_second_tab_is_refused_with_its_typing_kept(
    page: Page, context: BrowserContext, live_server
):
    log_in_as_instructor(page, live_server)
    card_id = kv_draft(live_server)
    edit = f"{live_server.url}/instructor/cards/{card_id}/edit"
    page.goto(edit)
    second = context.new_page()
    second.goto(edit)
    # The first tab saves; the second, opened before, then saves what it typed.
    page.fill("#f-definition-en", "Saved in the first tab.")
    page.click("text=Save card")
    expect(page).to_have_url(re.compile(f"/instructor/cards/{card_id}$"))
    second.fill("#f-definition-en", "Typed in the second tab.")
    second.click("text=Save card")
    alert = second.locator(".draft-conflict")
    expect(alert).to_contain_text("The draft changed since this page was opened")
    expect(second.locator("#f-definition-en")).to_have_value("Typed in the second tab.")
    link = alert.locator("a")
    expect(link).to_have_attribute("target", "_blank")
    shot(second, "authoring-draft-changed-in-another-tab")
    assert stored(live_server, card_id)["definition"]["en"] == "Saved in the first tab."
    with context.expect_page() as opened:
        link.click()
    expect(opened.value.locator("#f-definition-en")).to_have_value("Saved in the first tab.")
    # The same in Chinese.
    second.goto(edit + "?lang=zh")
    page.goto(edit + "?lang=zh")
    page.fill("#f-definition-en", "Saved in the first tab again.")
    page.click("form.card-form button[type=submit]")
    expect(page).to_have_url(re.compile(f"/instructor/cards/{card_id}"))
    second.fill("#f-definition-en", "又一次在第二个标签页中输入。")
    second.click("form.card-form button[type=submit]")
    expect(second.locator(".draft-conflict")).to_contain_text("草稿已被改动")
    expect(second.locator("#f-definition-en")).to_have_value("又一次在第二个标签页中输入。")
    shot(second, "authoring-draft-changed-in-another-tab-zh")
    assert stored(live_server, card_id)["definition"]["en"] == "Saved in the first tab again."


def test_a_parameters_line_that_does_not_read_comes_back_with_the_typing(page: Page, live_server):
    log_in_as_instructor(page, live_server)
    card_id = kv_draft(live_server)
    page.goto(f"{live_server.url}/instructor/cards/{card_id}/templates/new?point=kv-bytes")
    page.fill("#f-id", "kv-typed")
    page.fill("#f-params", "layers = 24, 32\npsi: 1, 2")
    page.fill("#f-stem-en", "A stem typed before the slip: {layers} layers?")
    page.fill("#f-sol-en", "Step one.\nStep two.")
    page.click("text=Save template")
    problem = page.locator("#f-params ~ .field-problem").first
    expect(problem).to_contain_text("parameters, line 2")
    expect(page.locator("#f-params")).to_have_value("layers = 24, 32\npsi: 1, 2")
    expect(page.locator("#f-stem-en")).to_have_value(
        "A stem typed before the slip: {layers} layers?"
    )
    expect(page.locator("#f-sol-en")).to_have_value("Step one.\nStep two.\n")
    shot(page, "authoring-parameters-line-refused-as-typed")
    assert "kv-typed" not in str(stored(live_server, card_id))


def test_saving_the_card_form_unchanged_in_a_browser_changes_nothing(page: Page, live_server):
    log_in_as_instructor(page, live_server)
    card_id = kv_draft(live_server)
    with live_server.app.state.sessionmaker() as db:
        actor = db.scalars(select(Learner).where(Learner.role == "instructor")).first()
        ref = LearnerRef(actor.id, actor.kind, actor.role, actor.email)
        document = {**CARD, "id": card_id}
        document["definition"] = {"en": "One paragraph.\n\nAnother.", "zh": "一段。\n\n另一段。"}
        service.save_draft(db=db, actor=ref, card_id=card_id, document=document)
    before = stored(live_server, card_id)
    page.goto(f"{live_server.url}/instructor/cards/{card_id}/edit")
    page.click("text=Save card")
    expect(page).to_have_url(re.compile(f"/instructor/cards/{card_id}$"))
    after = stored(live_server, card_id)
    assert after["definition"] == before["definition"]
    assert "\r" not in str(after)
