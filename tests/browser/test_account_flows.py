"""A learner's account, as a person walks it at 1280 px and on a phone, in English and Chinese:
a guest invited to sign up from the session summary, a forgotten password reset through the
link a real SMTP server received, the data downloaded, the account deleted. Every page passes
axe-core (no serious or critical violation); on the phone no page scrolls sideways."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import Browser, Page, expect
from test_password_reset import Inbox, free_port

from app.mail import Mailer

from .conftest import PHONE, _new_context
from .helpers import (
    PASSWORD,
    TEXTS,
    LiveServer,
    choose,
    log_in_after_sign_up,
    nav,
    new_email,
    open_card,
    shot,
    start_first_point,
)
from .test_pages import check_phone_layout

pytestmark = pytest.mark.browser

AXE = Axe()
NEW_PASSWORD = "a new passphrase, typed twice"
WORDS = {
    "en": {
        "invite": "Keep what you practised",
        "forgot": "Forgot your password?",
        "email_me": "Email me a link",
        "sent": "If an account uses this address",
        "new_password": "New password",
        "set": "Set the new password",
        "changed": "Your password was changed",
        "download": "Download my data (JSON)",
        "delete": "Delete my data",
        "your_password": "Your password",
        "delete_all": "Delete everything",
        "deleted": "Your data was deleted",
        "log_out": "Log out",
        "subject": "Reset your infracards password",
    },
    "zh": {
        "invite": "保存你的练习记录",
        "forgot": "忘记密码？",
        "email_me": "给我发送链接",
        "sent": "如果有账号使用这个邮箱",
        "new_password": "新密码",
        "set": "保存新密码",
        "changed": "密码已更改",
        "download": "下载我的数据（JSON）",
        "delete": "删除我的数据",
        "your_password": "你的密码",
        "delete_all": "全部删除",
        "deleted": "你的数据已删除",
        "log_out": "退出登录",
        "subject": "重置你的 infracards 密码",
    },
}


@pytest.fixture
def inbox(live_server: LiveServer) -> Iterator[Inbox]:
    """A real SMTP server in this process; the live server sends its emails there meanwhile."""
    from aiosmtpd.controller import Controller

    handler = Inbox()
    port = free_port()
    controller = Controller(handler, hostname="127.0.0.1", port=port)
    controller.start()
    app = live_server.app
    real = app.state.mailer
    settings = app.state.settings.model_copy(
        update={"smtp_host": "127.0.0.1", "smtp_port": port, "smtp_security": "none"}
    )
    app.state.mailer = Mailer(settings)
    try:
        yield handler
    finally:
        app.state.mailer = real
        controller.stop()


@pytest.fixture(params=["desktop", "phone"])
def any_page(request: pytest.FixtureRequest, browser: Browser, live_server: LiveServer):
    options: dict[str, object] = {"viewport": {"width": 1280, "height": 900}}
    if request.param == "phone":
        options = {"viewport": PHONE, "device_scale_factor": 2, "is_mobile": True}
    context = _new_context(browser, live_server, locale="en-US", **options)
    page = context.new_page()
    yield request.param, page
    context.close()


def check(page: Page, name: str, phone: bool, problems: list[str]) -> None:
    """A screenshot, axe-core, and on the phone the layout."""
    shot(page, name)
    for violation in AXE.run(page).response["violations"]:
        if violation["impact"] in ("serious", "critical"):
            targets = "; ".join(" ".join(map(str, n["target"])) for n in violation["nodes"][:5])
            problems.append(f"{name}: [{violation['impact']}] {violation['id']} — {targets}")
    if phone:
        problems += check_phone_layout(page, name)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_invite_reset_export_and_delete(
    any_page: tuple[str, Page], live_server: LiveServer, inbox: Inbox, lang: str
) -> None:
    size, page = any_page
    phone = size == "phone"
    texts, words = TEXTS[lang], WORDS[lang]
    problems: list[str] = []
    email = new_email()

    # A guest practises, and the summary invites it to keep what it answered.
    page.goto(f"/?lang={lang}")
    open_card(page, lang)
    start_first_point(page, lang)
    session_url = page.url.split("?")[0]
    _, wrong = live_server.wrong_choice(page)
    choose(page, wrong.id, lang)
    page.goto(f"{session_url}/summary")
    invite = page.locator("aside.invite")
    expect(invite).to_contain_text(words["invite"])
    check(page, f"{lang}-{size}-account-01-summary-invite", phone, problems)
    invite.get_by_role("link", name=texts["sign_up"], exact=True).click()
    page.get_by_label(texts["email"]).fill(email)
    page.get_by_label(texts["password"], exact=True).fill(PASSWORD)
    page.locator("main").get_by_role("button", name=texts["sign_up"]).click()
    log_in_after_sign_up(page, lang, email)
    expect(nav(page).get_by_role("link", name=texts["account"], exact=True)).to_be_visible()
    nav(page).get_by_role("link", name=texts["mistakes"]).click()
    expect(page.locator("article.mistake")).to_have_count(1)  # the guest's answer came along

    # Logged out, the password forgotten: the reset link arrives by email.
    nav(page).get_by_role("link", name=texts["account"], exact=True).click()
    page.get_by_role("button", name=words["log_out"], exact=True).click()
    nav(page).get_by_role("link", name=texts["log_in"], exact=True).click()
    page.get_by_role("link", name=words["forgot"]).click()
    page.get_by_label(texts["email"]).fill(email)
    page.get_by_role("button", name=words["email_me"]).click()
    expect(page.locator("main [role=status]")).to_contain_text(words["sent"])
    check(page, f"{lang}-{size}-account-02-reset-sent", phone, problems)
    (message,) = inbox.wait_for(1)
    assert message["To"] == email and message["Subject"] == words["subject"]
    link = re.search(r"http://127\.0\.0\.1:\d+(/password-reset/\S+)", message.get_content())
    assert link, message.get_content()
    page.goto(link.group(1))
    check(page, f"{lang}-{size}-account-03-new-password", phone, problems)
    page.get_by_label(words["new_password"]).fill(NEW_PASSWORD)
    page.get_by_role("button", name=words["set"]).click()
    expect(page.locator("main [role=status]")).to_contain_text(words["changed"])
    check(page, f"{lang}-{size}-account-04-password-changed", phone, problems)
    page.locator("main").get_by_role("link", name=texts["log_in"]).click()
    page.get_by_label(texts["email"]).fill(email)
    page.get_by_label(texts["password"], exact=True).fill(NEW_PASSWORD)
    page.locator("main").get_by_role("button", name=texts["log_in"]).click()
    nav(page).get_by_role("link", name=texts["account"], exact=True).click()
    check(page, f"{lang}-{size}-account-05-account", phone, problems)

    # My data, downloaded: the answer is in it, no password hash.
    with page.expect_download() as download:
        page.get_by_role("link", name=words["download"]).click()
    assert re.fullmatch(
        r"infracards-my-data-\d{4}-\d{2}-\d{2}\.json", download.value.suggested_filename
    )
    document = json.loads(open(download.value.path(), encoding="utf-8").read())
    assert document["learner"]["email"] == email and len(document["attempts"]) == 1
    assert "password_hash" not in json.dumps(document)

    # Deleted, after the password.
    page.get_by_role("link", name=words["delete"]).click()
    check(page, f"{lang}-{size}-account-06-delete-confirm", phone, problems)
    page.get_by_label(words["your_password"]).fill(NEW_PASSWORD)
    page.get_by_role("button", name=words["delete_all"]).click()
    expect(page.locator("h1")).to_have_text(words["deleted"])
    expect(nav(page).get_by_role("link", name=texts["log_in"], exact=True)).to_be_visible()
    check(page, f"{lang}-{size}-account-07-deleted", phone, problems)
    with live_server.app.state.sessionmaker() as db:
        from sqlalchemy import select

        from app.models import Learner

        assert db.scalar(select(Learner.id).where(Learner.email == email)) is None
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_review_page_reads_naturally_on_a_phone(
    phone_page: Page, live_server: LiveServer, lang: str
) -> None:
    """The count due later today is a sentence of its own (今天稍后还有 1 道要复习。), and the progress
    table's column headings stay on one line at 390 px (复习, 记忆保持率)."""
    page = phone_page
    # A wrong answer comes back within minutes: "later today", unless that is past midnight
    # (the full run that crossed 00:00 failed here; at 23:59 it fails every time).
    live_server.clock.advance_to(12)
    page.goto(f"/?lang={lang}")
    open_card(page, lang)
    start_first_point(page, lang)
    _, wrong = live_server.wrong_choice(page)
    choose(page, wrong.id, lang)
    page.goto("/review")
    later = {"en": "1 review comes due later today.", "zh": "今天稍后还有 1 道要复习。"}[lang]
    expect(page.locator("main")).to_contain_text(later)
    # On a phone the progress table stacks: each cell carries its heading as a label
    # (the header row is visually hidden), so no heading can wrap mid-word there.
    table = page.locator("table.progress-table")
    expect(table).to_be_visible()
    shot(page, f"{lang}-phone-review-progress")
    labels = table.locator("tbody td").evaluate_all(
        "tds => tds.map(td => getComputedStyle(td, '::before').content)"
    )
    assert labels and all(label not in ("none", '""') for label in labels), labels
    assert not check_phone_layout(page, "review")
