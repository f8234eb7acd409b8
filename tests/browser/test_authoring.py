"""The authoring page in a real browser: an inline parser error at its column as the instructor
types, the preview exactly as learners see it, and publishing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect
from sqlalchemy import select

from app.auth.service import LearnerRef, register
from app.authoring import service
from app.models import Learner

from .helpers import new_email, shot

pytestmark = pytest.mark.browser
CARD = json.loads((Path(__file__).parents[1] / "cards_fixtures" / "kv_cache_card.json").read_text())
PASSWORD = "instructor password"


def log_in_as_instructor(page: Page, live_server) -> None:
    email = new_email()
    with live_server.app.state.sessionmaker() as db:
        register(db=db, email=email, password=PASSWORD, role="instructor")
    page.goto(f"{live_server.url}/login")
    page.fill("#email", email)
    page.fill("#password", PASSWORD)
    page.click("form.account-form button[type=submit]")
    expect(page.locator('header.site a[href^="/instructor"]').first).to_have_text("Instructor")


def test_an_instructor_sees_a_parse_error_at_its_column_previews_and_publishes(
    page: Page, live_server
):
    log_in_as_instructor(page, live_server)
    # The live server is shared with the learner tests, which open the first card: this one sorts
    # last, and is withdrawn at the end.
    card_id = "zz-kv-" + re.sub(r"[^a-z0-9]", "", new_email().split("@")[0])[:10]
    page.goto(f"{live_server.url}/instructor")
    page.fill("#card-id", card_id)
    page.fill("#title-en", "KV cache size")
    page.fill("#title-zh", "KV 缓存大小")
    page.click("text=Create")
    expect(page).to_have_url(re.compile(f"/instructor/cards/{card_id}$"))
    # Give the draft the fixture card's texts and exam point; the template is written below.
    template = CARD["points"][0]["templates"][0]
    with live_server.app.state.sessionmaker() as db:
        actor = db.scalars(select(Learner).where(Learner.role == "instructor")).first()
        ref = LearnerRef(actor.id, actor.kind, actor.role, actor.email)
        document = {**CARD, "id": card_id, "points": [{**CARD["points"][0], "templates": []}]}
        service.save_draft(db=db, actor=ref, card_id=card_id, document=document)
    page.goto(f"{live_server.url}/instructor/cards/{card_id}/templates/new?point=kv-bytes")
    page.fill("#f-id", "kv-total")
    params = "\n".join(
        f"{k} = {', '.join(str(v) for v in spec['values'])}"
        for k, spec in template["params"].items()
    )
    page.fill("#f-params", params)
    # Before the first save, the formulas know the parameters typed so far.
    answer = page.locator("#f-answer")
    error = page.locator("#e-answer")
    answer.fill("kv * spare")
    expect(error).to_contain_text("spare")
    page.fill("#f-params", params + "\nspare = 1, 2")
    expect(error).to_have_text("")
    page.fill("#f-params", params)
    page.fill("#f-stem-en", template["stem"]["en"])
    page.fill("#f-stem-zh", template["stem"]["zh"])
    answer.fill("kv * (layers +")
    expect(error).to_contain_text("column")
    expect(error.locator("mark")).to_have_count(1)
    shot(page, "authoring-inline-error")
    answer.fill("kv")
    expect(error).to_have_text("")
    page.fill("#f-unit", "GB")
    page.fill("#f-sol-en", template["solution"][0]["en"])
    page.fill("#f-sol-zh", template["solution"][0]["zh"])
    page.click("button:has-text('Save template')")
    # Saved with one empty pitfall slot: validation lists what is missing, publishing is blocked.
    expect(page.locator(".problem-list")).to_be_visible()
    for index, pitfall in enumerate(template["pitfalls"]):
        page.goto(f"{live_server.url}/instructor/cards/{card_id}/templates/kv-total")
        page.fill(f"#p{index}-id", pitfall["id"])
        page.fill(f"#p{index}-ten", pitfall["title"]["en"])
        page.fill(f"#p{index}-tzh", pitfall["title"]["zh"])
        page.fill(f"#f-pitfall{index}_formula", pitfall["formula"])
        page.fill(f"#p{index}-een", pitfall["explanation"]["en"])
        page.fill(f"#p{index}-ezh", pitfall["explanation"]["zh"])
        page.click("button:has-text('Save template')")
    expect(page.locator("p.ok", has_text="No problems")).to_be_visible()
    page.click("text=Preview")
    expect(page.locator(".tag.right")).to_have_count(1)
    expect(page.locator(".choice-review li")).to_have_count(4)
    shot(page, "authoring-preview")
    page.goto(f"{live_server.url}/instructor/cards/{card_id}")
    page.click("button:has-text('Publish')")
    expect(page.locator("body")).to_contain_text("Version 1")
    shot(page, "authoring-published")
    # Learners can practise it now.
    page.goto(f"{live_server.url}/cards/{card_id}")
    expect(page.locator("h1")).to_contain_text("KV cache size")
    page.goto(f"{live_server.url}/instructor/cards/{card_id}")
    page.click("button:has-text('Withdraw from learners')")
    expect(page.locator("body")).to_contain_text("Withdrawn")


def test_the_card_page_shows_the_validation_progress_then_the_problems(page: Page, live_server):
    import yaml

    log_in_as_instructor(page, live_server)
    card_id = "zz-zero-" + re.sub(r"[^a-z0-9]", "", new_email().split("@")[0])[:10]
    zero = yaml.safe_load(
        (Path(__file__).parents[2] / "cards" / "zero-memory-offload.yaml").read_text("utf-8")
    )
    document = {**zero, "id": card_id, "points": zero["points"][:2]}
    templates = sum(len(p["templates"]) for p in document["points"])
    with live_server.app.state.sessionmaker() as db:
        actor = db.scalars(select(Learner).where(Learner.role == "instructor")).first()
        ref = LearnerRef(actor.id, actor.kind, actor.role, actor.email)
        service.create_draft(db=db, actor=ref, document=document)
    page.goto(f"{live_server.url}/instructor/cards/{card_id}")
    progress = page.locator("[data-validation]")
    finished = page.locator(".problems", has_text=f"{templates} templates validated in")
    expect(progress.or_(finished)).to_be_visible()
    if progress.count():  # a quick machine may have validated it before the page was read
        expect(page.get_by_role("button", name="Publish")).to_be_disabled()
        expect(progress).to_contain_text(f"of {templates} templates checked", timeout=60_000)
        shot(page, "authoring-validation-progress")
    # The script reloads the page when the job is done: the problems, and publishing allowed.
    expect(page.locator(".problems")).to_contain_text(
        f"{templates} templates validated in", timeout=300_000
    )
    expect(page.locator("[data-validation]")).to_have_count(0)
    expect(page.get_by_role("button", name="Publish")).to_be_enabled()
    shot(page, "authoring-validation-done")


def test_derived_parameters_and_constraints_in_the_editor(page: Page, live_server):
    """A derived parameter typed in its field is a name the formulas may use at once; saved,
    the template draws only the combinations its constraint allows."""
    log_in_as_instructor(page, live_server)
    card_id = "zz-derived-" + re.sub(r"[^a-z0-9]", "", new_email().split("@")[0])[:8]
    with live_server.app.state.sessionmaker() as db:
        actor = db.scalars(select(Learner).where(Learner.role == "instructor")).first()
        ref = LearnerRef(actor.id, actor.kind, actor.role, actor.email)
        service.create_draft(db=db, actor=ref, document={**CARD, "id": card_id})
    page.goto(f"{live_server.url}/instructor/cards/{card_id}/templates/kv-total")
    answer = page.locator("#f-answer")
    error = page.locator("#e-answer")
    answer.fill("kv * per_head / heads")
    expect(error).to_contain_text("per_head")
    page.fill("#f-derived", "per_head = head_dim * 2 | int")
    expect(error).to_have_text("")
    page.fill("#f-constraints", "heads/2 integer")
    answer.fill("kv")
    shot(page, "authoring-derived")
    page.click("button:has-text('Save template')")
    expect(page.locator("#f-derived")).to_have_value("per_head = head_dim * 2 | int")
    expect(page.locator("#f-constraints")).to_have_value("heads/2 integer")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_dashboard_pages_fit_a_phones_width(phone_page: Page, live_server, lang):
    """Nothing on an instructor's pages is wider than a phone: the card page's import form took
    its select's longest option (an exam point's title), 495 px in a 390 px window; a preview's
    worked solution took its longest formula, 469 px. Wide tables and charts scroll inside their
    own boxes."""
    log_in_as_instructor(phone_page, live_server)
    card = "/instructor/cards/zero-memory-offload"
    for path in (
        "/instructor",
        card,
        f"{card}/edit",
        f"{card}/templates/p1-total-16psi",
        f"{card}/preview?template_id=p1-total-16psi",
        f"{card}/analytics",
        "/instructor/classes",
        # A worked solution's long formula scrolls in its own box.
        "/instructor/cards/megatron-3d-pipeline/preview?template_id=p3-mlp-split",
    ):
        phone_page.goto(f"{path}{'&' if '?' in path else '?'}lang={lang}")
        width = phone_page.evaluate("document.documentElement.scrollWidth")
        assert width <= phone_page.viewport_size["width"], (path, width)
    phone_page.goto(f"{card}?lang={lang}")
    shot(phone_page, f"dashboard-card-phone-{lang}")


def test_a_file_that_cannot_be_imported_is_told_at_the_import_form(
    page: Page, live_server, tmp_path
):
    log_in_as_instructor(page, live_server)
    bad = tmp_path / "bank.xml"
    bad.write_bytes(b'<?xml version="1.0"?>\n<!DOCTYPE quiz>\n<quiz></quiz>')
    page.goto(f"{live_server.url}/instructor/cards/zero-memory-offload")
    page.set_input_files("#import-file", str(bad))
    page.select_option("#import-point", "offload")
    page.locator("section[aria-labelledby=import-title] button[type=submit]").click()
    problem = page.locator("#import-file-problem")
    expect(problem).to_contain_text("bank.xml: the file has a document type declaration (DOCTYPE)")
    expect(page.locator("#import-point")).to_have_value("offload")
    expect(page.locator("#import-file")).to_have_attribute(
        "aria-describedby", "import-file-problem"
    )
    # The answer opens at the import form (the action's #import-title), not the page's top.
    assert page.url.endswith("#import-title")
    expect(problem).to_be_in_viewport()
    shot(page, "dashboard-import-refused")


def test_a_file_over_the_import_limit_is_refused_before_it_is_sent(
    page: Page, live_server, tmp_path
):
    """2 MB is the import's limit (app.domain.moodle_import.MAX_BYTES): a larger file is refused
    at its field by the browser, and nothing is sent (the card page stays as it was)."""
    log_in_as_instructor(page, live_server)
    large = tmp_path / "large-bank.xml"
    large.write_bytes(b'<?xml version="1.0"?>\n<quiz>' + b" " * 2_000_000 + b"</quiz>")
    page.goto(f"{live_server.url}/instructor/cards/zero-memory-offload")
    before = page.url
    sent: list[str] = []
    page.on("request", lambda r: sent.append(r.url) if r.method == "POST" else None)
    page.set_input_files("#import-file", str(large))
    page.locator("section[aria-labelledby=import-title] button[type=submit]").click()
    field = page.locator("#import-file")
    assert field.evaluate("f => f.validationMessage") == "The file is larger than 2 MB."
    assert page.url == before and sent == []
    # a file within the limit is let through again
    small = tmp_path / "bank.xml"
    small.write_bytes(b'<?xml version="1.0"?>\n<quiz></quiz>')
    page.set_input_files("#import-file", str(small))
    assert field.evaluate("f => f.validationMessage") == ""
