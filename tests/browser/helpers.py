"""What the browser tests share: the test server's handle, screenshots, the texts a learner reads,
and the steps of the main flow."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from fastapi import FastAPI
from playwright.sync_api import Page, expect

from app.domain.generation import Choice, Variant
from app.models import PracticeSession
from app.practice.questions import regenerate
from app.practice.sessions import question_id_at

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "test-artifacts" / "screenshots"
CARD_ID = "zero-memory-offload"
PASSWORD = "correct horse battery"

# What a learner reads, in each language (asserted as shown, not looked up in the app's tables).
TEXTS = {
    "en": {
        "html_lang": "en",
        "cards": "Cards",
        "today": "Today",
        "practise": "Practise",
        "position": "Question {n} / {of}",
        "check": "Check answer",
        "wrong": "Not quite",
        "correct": "Correct",
        "pitfall": "Pitfall: ",
        "why_wrong": "Why this reasoning fails",
        "the_answer": "the answer",
        "your_choice": "your choice",
        "log_in": "Log in",
        "sign_up": "Sign up",
        "email": "Email",
        "password": "Password",
        "signed_in_as": "Signed in as",
        "account": "Account",
        "mistakes": "My mistakes",
        "review": "Review",
        "due_today": "Due today",
        "nothing_due": "Nothing is due now",
        "due_now": "due now",
        "start_review": "Review what is due",
        "next": "Next question",
        "exam": "Timed exam",
        "time_left": "Time left",
        "summary": "Session summary",
        "score": "Score: {right} / {size}",
        "switch": "中文",
    },
    "zh": {
        "html_lang": "zh-Hans",
        "cards": "卡片",
        "today": "今天",
        "practise": "练习",
        "position": "第 {n} 题，共 {of} 题",
        "check": "提交答案",
        "wrong": "回答错误",
        "correct": "回答正确",
        "pitfall": "误区：",
        "why_wrong": "为什么这种推理不对",
        "the_answer": "正确答案",
        "your_choice": "你的选择",
        "log_in": "登录",
        "sign_up": "注册",
        "email": "邮箱",
        "password": "密码",
        "signed_in_as": "当前账号",
        "account": "账号",
        "mistakes": "我的错题",
        "review": "复习",
        "due_today": "今日待复习",
        "nothing_due": "目前没有要复习的题",
        "due_now": "道待复习",
        "start_review": "复习到期的题",
        "next": "下一题",
        "exam": "限时考试",
        "time_left": "剩余时间",
        "summary": "本次练习小结",
        "score": "得分：{right} / {size}",
        "switch": "English",
    },
}


class FakeClock:
    """Real time plus an offset the tests move forward (the app's reviews and sessions use it)."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, delta: timedelta) -> None:
        self.offset += delta

    def advance_to(self, hour: int, minute: int = 0) -> None:
        """Forward to the next hh:mm UTC, the guests' time zone: for a test whose outcome depends
        on the time of day (a review due "later today" is due tomorrow near midnight)."""
        now = self()
        then = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
        self.advance((then if then > now else then + timedelta(days=1)) - now)


@dataclass
class LiveServer:
    url: str
    app: FastAPI
    clock: FakeClock

    def answer_key(self, page: Page) -> tuple[Variant, Choice]:
        """The variant on a session's question page and its right choice, computed server-side.

        The page shows no seed (it comes from the server secret); the test reproduces the question
        from the session's plan, as the grader does, to know which choice to pick.
        """
        token = page.locator("form.question input[name=token]").input_value()
        ctx = self.app.state.context
        position = ctx.signer.verify(token, ctx.catalog).position
        assert position is not None, "not a practice-session question"
        with self.app.state.sessionmaker() as db:
            row = db.get(PracticeSession, position.session_id)
            assert row is not None
            identity = question_id_at(row, position.position, ctx.seed_secret)
        variant = regenerate(ctx.catalog, identity)
        (right,) = [c for c in variant.choices if c.correct]
        return variant, right

    def wrong_choice(self, page: Page) -> tuple[Variant, Choice]:
        variant, _ = self.answer_key(page)
        return variant, next(c for c in variant.choices if not c.correct)

    def point_number(self, slug: str) -> int:
        card = self.app.state.catalog.latest(CARD_ID)
        point = card.point_by_slug(slug)
        assert point is not None
        return int(point.number)


def shot(page: Page, name: str) -> Path:
    """A full-page screenshot under test-artifacts/screenshots/ (kept for people to look at)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{re.sub(r'[^A-Za-z0-9_.-]+', '-', name)}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def new_email() -> str:
    return f"learner-{uuid.uuid4().hex[:12]}@example.org"


# --- steps ------------------------------------------------------------------------------------


def nav(page: Page):
    return page.locator("header.site nav")


def open_card(page: Page, lang: str) -> None:
    """From Today's card list (in the language last chosen), open the ZeRO card by its link."""
    page.goto("/")
    expect(page.locator("h1")).to_have_text(TEXTS[lang]["today"])
    page.locator(f"ul.cards a[href*='/cards/{CARD_ID}']").first.click()
    expect(page).to_have_url(re.compile(rf"/cards/{CARD_ID}"))


def start_first_point(page: Page, lang: str) -> None:
    """On the card page, the "Practise" button of the first exam point."""
    page.locator("article.point").first.get_by_role(
        "button", name=TEXTS[lang]["practise"], exact=True
    ).click()
    expect(page).to_have_url(re.compile(r"/sessions/[^/?]+(\?|$)"))


def choose(page: Page, choice_id: str, lang: str) -> None:
    page.locator(f"form.question input[name=choice_id][value='{choice_id}']").check()
    page.get_by_role("button", name=TEXTS[lang]["check"]).click()


def expect_position(page: Page, lang: str, n: int, of: int) -> None:
    expect(page.locator(".session-bar .position")).to_have_text(
        TEXTS[lang]["position"].format(n=n, of=of)
    )


def log_in_after_sign_up(page: Page, lang: str, email: str) -> None:
    """Sign-up answers alike whether or not the address has an account (it tells no one which
    addresses do): the login form, the address filled in; the new account logs in."""
    texts = TEXTS[lang]
    expect(page.locator("h1")).to_have_text(texts["log_in"])
    expect(page.locator("main [role=status]")).to_be_visible()
    expect(page.get_by_label(texts["email"])).to_have_value(email)
    page.get_by_label(texts["password"], exact=True).fill(PASSWORD)
    page.locator("main").get_by_role("button", name=texts["log_in"], exact=True).click()


def sign_up(page: Page, lang: str, email: str) -> None:
    """From the header: Log in, then the page's Sign up link, then the form."""
    texts = TEXTS[lang]
    nav(page).get_by_role("link", name=texts["log_in"], exact=True).click()
    page.locator("main").get_by_role("link", name=texts["sign_up"], exact=True).click()
    expect(page.locator("h1")).to_have_text(texts["sign_up"])
    page.get_by_label(texts["email"]).fill(email)
    page.get_by_label(texts["password"], exact=True).fill(PASSWORD)
    page.locator("main").get_by_role("button", name=texts["sign_up"]).click()
    log_in_after_sign_up(page, lang, email)
    account = nav(page).get_by_role("link", name=texts["account"], exact=True)
    expect(account).to_be_visible()
    back = page.url
    account.click()
    expect(page.locator("main")).to_contain_text(f"{texts['signed_in_as']} {email}")
    page.goto(back)
