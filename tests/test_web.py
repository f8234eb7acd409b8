"""The web pages as a learner uses them: read a card, practise in sessions, get feedback, find
mistakes, review; and the security of forms, cookies and markup."""

from __future__ import annotations

import html
import json
import re
from urllib.parse import urlencode

import pytest
from conftest import CARD_ID, make_settings
from fastapi.testclient import TestClient
from sqlalchemy import event, func, select

from app.auth.cookies import COOKIE_NAME
from app.auth.service import end_web_session
from app.main import create_app
from app.models import Attempt, PracticeSession
from app.practice.mistakes import PITFALL_SEPARATOR
from app.practice.sessions import question_id_at

PRACTICE = f"/cards/{CARD_ID}/points/{{point}}/practice"


def form_fields(page: str) -> dict[str, str]:
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page))
    return {k: html.unescape(v) for k, v in fields.items()}


def csrf(page: str) -> str:
    return html.unescape(re.search(r'name="csrf_token" value="([^"]+)"', page).group(1))


def alert(page: str) -> str:
    match = re.search(r'role="alert"[^>]*>([^<]*)<', page)
    return html.unescape(match.group(1)) if match else ""


def plain(text: str) -> str:
    """The part of a text before its first math (which pages render as MathML)."""
    return text.split("$")[0].strip()


def articles(page: str) -> str:
    """The mistake book's entries, without the filter form's options."""
    return html.unescape("".join(page.split("<article")[1:]))


def practise(client, point="optimizer-memory", seed=1, **params):
    response = client.get(PRACTICE.format(point=point), params={"seed": seed, **params})
    assert response.status_code == 200, response.text
    return response


def submit(client, page, choice_id, **changes):
    data = {**form_fields(page.text), "choice_id": choice_id, **changes}
    return client.post("/answers", data={k: v for k, v in data.items() if v is not None})


def attempts(app) -> int:
    with app.state.sessionmaker() as db:
        return db.scalar(select(func.count()).select_from(Attempt))


def shown_variant(app, page):
    """The variant a practice page shows, regenerated from its form's token."""
    content = app.state.context.signer.verify(form_fields(page.text)["token"])
    if content.question is not None:
        return app.state.catalog.variant(content.question)
    with app.state.sessionmaker() as db:
        row = db.get(PracticeSession, content.position.session_id)
    identity = question_id_at(row, content.position.position, app.state.context.seed_secret)
    return app.state.catalog.variant(identity)


def wrong_of(app, page):
    return next(c for c in shown_variant(app, page).choices if c.pitfall is not None)


def start(client, mode="card", **fields):
    page = client.get(f"/cards/{CARD_ID}")
    response = client.post(
        "/sessions",
        data={"csrf_token": csrf(page.text), "card_id": CARD_ID, "mode": mode, **fields},
    )
    assert response.status_code == 200, response.text[:400]
    return response


# --- reading ----------------------------------------------------------------------------------


def test_the_card_list_links_to_each_card(client, card):
    response = client.get("/cards")
    assert response.status_code == 200 and response.template.name == "cards.html"
    assert f'href="/cards/{CARD_ID}"' in response.text
    assert html.escape(card.title.en) in response.text
    # Today lists the cards too, each exam point a link to practise it
    today = client.get("/")
    assert today.status_code == 200 and today.template.name == "today.html"
    assert f'href="/cards/{CARD_ID}"' in today.text
    for point in card.points:
        assert f'href="/cards/{CARD_ID}/points/{point.slug}/practice"' in today.text


def test_the_card_page_has_contents_a_practise_button_per_point_and_the_modes(client, card):
    response = client.get(f"/cards/{CARD_ID}")
    assert response.status_code == 200 and response.template.name == "card.html"
    page = response.text
    assert page.count("<math") >= len(card.formulas)
    assert 'class="toc"' in page
    for point in card.points:
        assert f'href="#{point.slug}"' in page and f'id="{point.slug}"' in page
        assert f'name="point" value="{point.slug}"' in page
    for mode in ("card", "mistakes", "exam"):
        assert f'name="mode" value="{mode}"' in page
    # The demo moved to its own page.
    assert "python -m app.zero_demo" not in page
    assert f'href="/cards/{CARD_ID}/run-it-yourself"' in page


def test_run_it_yourself_shows_the_demo_commands(client):
    page = client.get(f"/cards/{CARD_ID}/run-it-yourself").text
    for command in (
        "python -m app.zero_demo --world-size 4",
        "torchrun --nproc-per-node 8 -m app.zero_demo",
    ):
        assert command in page


def test_pages_run_no_inline_script_and_use_no_cdn(client, app):
    page = start(client, "point", point="offload")
    feedback = submit(client, page, "a")
    for response in (
        client.get("/"),
        client.get(f"/cards/{CARD_ID}"),
        page,
        feedback,
        client.get("/mistakes"),
        client.get("/review"),
    ):
        assert not re.search(r"<script>|<script [^>]*>[^<]", response.text)
        assert not re.search(r'(src|href)="(https?:)?//', response.text)
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert "unsafe" not in response.headers["content-security-policy"]


def test_the_language_switch_shows_chinese_and_is_remembered(client, card):
    page = client.get(f"/cards/{CARD_ID}").text
    assert f'href="/cards/{CARD_ID}?lang=zh"' in page
    zh = client.get(f"/cards/{CARD_ID}", params={"lang": "zh"})
    assert '<html lang="zh-Hans">' in zh.text and "考点" in zh.text
    # Remembered: the next page without ?lang is Chinese too.
    assert '<html lang="zh-Hans">' in client.get("/mistakes").text
    assert '<html lang="en">' in client.get("/mistakes?lang=en").text
    assert '<html lang="en">' in client.get("/").text


def test_accept_language_chooses_the_first_page_language(app):
    with TestClient(app) as fresh:
        page = fresh.get("/", headers={"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.5"}).text
        assert '<html lang="zh-Hans">' in page


@pytest.mark.parametrize(
    "path", ["/cards/no-such-card", f"/cards/{CARD_ID}/points/99/practice", "/nowhere"]
)
def test_unknown_pages_are_404_pages_in_the_pages_language(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert alert(response.text)
    zh = client.get(path, params={"lang": "zh"})
    assert re.search(r"[\u4e00-\u9fff]", alert(zh.text))


def test_bad_query_values_are_plain_word_error_pages(client):
    response = client.get(PRACTICE.format(point=1), params={"seed": "abc"})
    assert response.status_code == 422
    message = alert(response.text)
    assert message and "Input should be" not in message and "query." not in message
    zh = client.get(PRACTICE.format(point=1), params={"seed": "abc", "lang": "zh"})
    assert re.search(r"[\u4e00-\u9fff]", alert(zh.text))


# --- the reference demo's results -------------------------------------------------------------

DEMO = {
    "psi": 1_000_000,
    "world_size": 4,
    "dtype": "bfloat16",
    "backend": "gloo",
    "device": "cpu",
    "command": "python -m app.zero_demo --world-size 4",
    "recorded_at": "2025-01-01T00:00:00Z",
    "results": [
        {
            "stage": 1,
            "offload": "none",
            "bytes_per_rank": {
                "params": 2e6,
                "grads": 2e6,
                "optimizer": 3e6,
                "resident": 7e6,
                "offloaded": 0,
                "total": 7e6,
            },
            "formula_bytes_per_rank": 7e6,
            "comm_elements_per_rank_per_step": 2_000_000,
            "losses": [2.5, 2.0],
            "reference_losses": [2.5, 2.0],
        },
        {"stage": 3, "offload": "cpu", "bytes_per_rank": {"total": 4.5e6}},
    ],
}


def demo_client(tmp_path, db_url, cards, content):
    folder = tmp_path / "cards" / "demo-results"
    folder.mkdir(parents=True)
    (folder / f"{CARD_ID}.json").write_text(content, encoding="utf-8")
    settings = make_settings(tmp_path, db_url, cards_dir=tmp_path / "cards")
    return TestClient(create_app(settings, cards=cards))


def test_run_it_yourself_shows_recorded_demo_results_with_a_readable_date(tmp_path, db_url, cards):
    with demo_client(tmp_path, db_url, cards, json.dumps(DEMO)) as client:
        page = client.get(f"/cards/{CARD_ID}/run-it-yourself").text
        assert '<table class="results">' in page
        assert "7 MB" in page and "4.5 MB" in page and "2,000,000" in page
        assert "2025-01-01" in page and "T00:00:00Z" not in page
        api = client.get(f"/api/v1/cards/{CARD_ID}").json()
        assert api["demo"]["results"]["world_size"] == 4


@pytest.mark.parametrize(
    "content", ["{not json", "[]", '{"results": "nope"}', '{"results": [1, {"stage": 2}]}']
)
def test_malformed_demo_results_never_break_the_pages(tmp_path, db_url, cards, content):
    with demo_client(tmp_path, db_url, cards, content) as client:
        assert client.get(f"/cards/{CARD_ID}").status_code == 200
        assert client.get(f"/cards/{CARD_ID}/run-it-yourself").status_code == 200


# --- single questions (permalinks) ------------------------------------------------------------


def test_a_question_page_is_a_form_and_changes_nothing(client, app):
    page = practise(client, seed=5)
    fields = form_fields(page.text)
    assert {"csrf_token", "token", "client_answer_id", "shown_at"} <= set(fields)
    assert page.text.count('type="radio"') == len(shown_variant(app, page).choices)
    assert "seed" not in page.text.lower().replace("?seed=", "")  # no internal ids shown
    assert attempts(app) == 0


def per_render(page: str) -> str:
    """A page without what each rendering makes afresh (the form's ids, time and token)."""
    return re.sub(r'name="(client_answer_id|shown_at|token)" value="[^"]*"', r"\1", page)


def test_a_learners_question_page_reads_nothing_from_the_database_the_second_time(client, app):
    """The visitor of a page view is remembered for a few seconds (app.auth.visitors): the
    same page read afresh and from memory is the same, down to the header's review badge."""
    page = practise(client, seed=5)
    data = {**form_fields(page.text), "choice_id": wrong_of(app, page).id}
    # Now a learner, with a review coming up; not following the redirect to the feedback page.
    assert client.post("/answers", data=data, follow_redirects=False).status_code == 303
    statements: list[str] = []

    @event.listens_for(app.state.engine, "before_cursor_execute")
    def record(conn, cursor, statement, *args):  # type: ignore[no-untyped-def]
        statements.append(statement)

    try:
        read = practise(client, seed=7)
        assert any("web_sessions" in s for s in statements)  # after a POST: read afresh
        statements.clear()
        for seed in (7, 8, 9):
            remembered = practise(client, seed=seed)
            if seed == 7:
                assert per_render(remembered.text) == per_render(read.text)
        assert not [s for s in statements if "web_sessions" in s or "review_items" in s]
    finally:
        event.remove(app.state.engine, "before_cursor_execute", record)


def test_a_remembered_visitor_is_read_afresh_once_a_review_falls_due(client, app, clock):
    page = practise(client, seed=80)
    submit(client, page, wrong_of(app, page).id)
    assert "badge" not in practise(client, seed=3).text
    assert "badge" not in practise(client, seed=3).text  # remembered
    clock.advance(minutes=3)
    assert re.search(r'class="badge"[^>]*>1<', practise(client, seed=3).text)


def test_ending_a_session_forgets_its_remembered_visitor(client, app, clock):
    page = practise(client, seed=80)
    submit(client, page, wrong_of(app, page).id)
    clock.advance(minutes=3)
    badge = r'class="badge"[^>]*>1<'
    assert re.search(badge, practise(client, seed=3).text)
    assert re.search(badge, practise(client, seed=3).text)  # remembered
    with app.state.sessionmaker() as db:
        secret = app.state.session_cookie.secret(client.cookies.get(COOKIE_NAME))
        end_web_session(db=db, secret=secret)
    assert "badge" not in practise(client, seed=3).text


def test_a_form_reads_its_session_afresh_but_not_the_reviews(client, app, clock):
    """A form's request checks its browser session in the database every time (a log-out in
    another process counts at once) and reads no review counts: it answers with a redirect.
    Should it show a page (a refusal), its header shows the count this process read for the
    browser's last page."""
    page = practise(client, seed=80)
    submit(client, page, wrong_of(app, page).id)  # a learner now, with a review coming up
    clock.advance(minutes=3)
    badge = r'class="badge"[^>]*>1<'
    page = practise(client, seed=3)
    assert re.search(badge, page.text)
    statements: list[str] = []

    @event.listens_for(app.state.engine, "before_cursor_execute")
    def record(conn, cursor, statement, *args):  # type: ignore[no-untyped-def]
        statements.append(statement)

    try:
        refused = submit(client, page, None)  # no choice: the question again, with the header
        assert refused.status_code == 422 and alert(refused.text) == "Pick one of the choices."
        assert re.search(badge, refused.text)  # the count read for the page before
        session_reads = [s for s in statements if "web_sessions" in s]
        assert session_reads and not [s for s in session_reads if "review_items" in s]
    finally:
        event.remove(app.state.engine, "before_cursor_execute", record)
    with app.state.sessionmaker() as db:
        learner_id = db.scalar(select(Attempt.learner_id))
        secret = app.state.session_cookie.secret(client.cookies.get(COOKIE_NAME))
        end_web_session(db=db, secret=secret)  # logged out elsewhere; this page still open
    answered = submit(client, page, wrong_of(app, page).id)
    assert answered.status_code == 200
    with app.state.sessionmaker() as db:
        learners = db.scalars(select(Attempt.learner_id).order_by(Attempt.id)).all()
    assert learners[0] == learner_id and len(learners) == 2 and learners[1] != learner_id


def test_answering_redirects_to_feedback_with_every_choice_and_its_pitfall(client, app):
    page = practise(client, seed=8)
    variant = shown_variant(app, page)
    wrong = wrong_of(app, page)
    feedback = submit(client, page, wrong.id)
    assert feedback.status_code == 200 and feedback.template.name == "feedback.html"
    assert re.fullmatch(r"http://testserver/answers/\d+", str(feedback.url))
    text = html.unescape(feedback.text)
    assert "verdict wrong" in feedback.text and plain(wrong.pitfall.title.en) in text
    assert text.count('<li class="is-') == len(variant.choices)
    for choice in variant.choices:
        if choice.pitfall is not None and choice.id != wrong.id:
            assert plain(choice.pitfall.title.en) in text
    # No repeated "Your choice B / Correct answer B" block.
    assert "Your choice" not in text
    for step in variant.solution:
        assert step.en.split("$")[0].strip()[:20] in text


def test_a_right_answer_says_so(client, app):
    page = practise(client, seed=12)
    feedback = submit(client, page, shown_variant(app, page).correct_choice_id)
    assert "verdict right" in feedback.text


def test_changing_language_on_the_feedback_page_keeps_the_same_feedback(client, app):
    page = practise(client, seed=13)
    wrong = wrong_of(app, page)
    feedback = submit(client, page, wrong.id)
    switch = html.unescape(re.search(r'class="lang" href="([^"]*)"', feedback.text).group(1))
    zh = client.get(switch)
    assert zh.status_code == 200 and str(zh.url).split("?")[0] == str(feedback.url).split("?")[0]
    assert plain(wrong.pitfall.title.zh) in html.unescape(zh.text)
    assert attempts(app) == 1


def test_submitting_the_same_form_twice_or_another_choice_after_back_shows_the_first(client, app):
    page = practise(client, seed=21)
    variant = shown_variant(app, page)
    wrong = wrong_of(app, page)
    first = submit(client, page, wrong.id)
    again = submit(client, page, variant.correct_choice_id)  # Back, other choice, resubmit
    assert again.status_code == 200 and again.url.path == first.url.path
    assert again.url.params["again"] == "1"  # the page says the first answer counts, and which
    assert f"your first answer counts ({wrong.id.upper()})" in again.text
    assert "verdict wrong" in again.text
    assert attempts(app) == 1


def test_submitting_without_a_choice_shows_the_question_again(client, app):
    page = practise(client, seed=2)
    response = submit(client, page, None)
    assert response.status_code == 422 and alert(response.text) == "Pick one of the choices."
    assert attempts(app) == 0


def test_a_post_without_the_right_csrf_token_is_403_and_stores_nothing(client, app):
    page = practise(client)
    for bad in ("", "forged"):
        assert submit(client, page, "a", csrf_token=bad).status_code == 403
    assert attempts(app) == 0


def test_a_post_from_a_browser_without_the_session_cookie_is_403(client, app):
    page = practise(client)
    client.cookies.clear()
    assert submit(client, page, "a").status_code == 403
    assert attempts(app) == 0


# --- sessions ---------------------------------------------------------------------------------


def test_a_whole_card_session_interleaves_points_and_templates_and_ends_with_a_summary(
    client, app, card
):
    page = start(client, "card", size=10)
    seen_points, seen_templates = [], []
    for number in range(1, 11):
        assert f"Question {number} / 10" in page.text
        assert re.search(rf'<progress max="10" value="{number - 1}"', page.text)
        variant = shown_variant(app, page)
        seen_points.append(variant.id.point)
        seen_templates.append(variant.id.template_id)
        feedback = submit(client, page, variant.choices[0].id)
        assert feedback.template.name == "feedback.html"
        next_url = re.search(r'class="button" href="([^"]+)"', feedback.text).group(1)
        page = client.get(html.unescape(next_url))
    # Five points: each round of five visits every point once.
    slugs = {p.slug for p in card.points}
    assert set(seen_points[:5]) == slugs and set(seen_points[5:]) == slugs
    assert len(set(seen_templates)) == len(seen_templates)  # no template twice in ten
    assert page.template.name == "summary.html"
    summary = page.context["summary"]
    assert summary.size == 10 and summary.right + summary.wrong == 10
    assert sum(p.right + p.wrong for p in summary.points) == 10
    assert "Practise these again" in page.text or summary.wrong == 0


def test_a_point_session_shows_each_template_before_any_repeats(client, app, card):
    point = card.points[0]
    page = start(client, "point", point=point.slug, size=len(point.templates))
    seen = []
    for _ in point.templates:
        variant = shown_variant(app, page)
        assert variant.id.point == point.slug
        seen.append(variant.id.template_id)
        submit(client, page, variant.choices[0].id)
        page = client.get(str(page.url))
    assert sorted(seen) == sorted(t.id for t in point.templates)


def test_a_timed_exam_gives_no_feedback_until_the_end_then_a_score_per_point(client, app):
    page = start(client, "exam", size=5)
    assert 'id="countdown"' in page.text and "/static/countdown.js" in page.text
    right = 0
    for number in range(5):
        variant = shown_variant(app, page)
        choice = variant.correct_choice_id if number % 2 == 0 else wrong_of(app, page).id
        right += number % 2 == 0
        page = submit(client, page, choice)
        assert "verdict" not in page.text  # no feedback in between
    assert page.template.name == "summary.html"
    summary = page.context["summary"]
    assert (summary.right, summary.wrong, summary.size) == (right, 5 - right, 5)
    assert page.text.count('class="point-score"') == len(summary.points)
    assert summary.pitfalls  # the wrong ones name their pitfalls


def test_exam_questions_do_not_reveal_their_seed_to_the_api_or_the_page(client, app):
    page = start(client, "exam", size=3)
    token = form_fields(page.text)["token"]
    content = app.state.context.signer.verify(token)
    assert content.question is None and content.position is not None  # no seed in the token
    with app.state.sessionmaker() as db:
        row = db.get(PracticeSession, content.position.session_id)
    seeds = {question_id_at(row, i, app.state.context.seed_secret).seed for i in range(3)}
    assert len(seeds) == 3 and not any(str(s) in page.text for s in seeds)


def test_an_exam_past_its_deadline_refuses_answers_and_shows_the_summary(client, app, clock):
    page = start(client, "exam", size=2)
    clock.advance(minutes=10)
    refused = submit(client, page, "a")
    assert refused.template.name == "summary.html" and "Time was up" in refused.text
    assert attempts(app) == 0
    summary = client.get(str(page.url))
    assert summary.template.name == "summary.html" and summary.context["summary"].unanswered == 2


@pytest.mark.parametrize(
    ("lang", "ended", "time_up"),
    [
        ("en", "You had ended this exam: this answer was not counted.", "Time was up"),
        ("zh", "你已结束这场考试：这次作答未计分。", "时间已到"),
    ],
)
def test_an_answer_after_ending_an_exam_early_does_not_say_time_was_up(
    client, app, lang, ended, time_up
):
    """End the exam now, Back, answer the question still on screen: not counted, and the
    summary says the learner ended the exam (its 3 minutes were far from up)."""
    client.get(f"/cards/{CARD_ID}?lang={lang}")  # the language stays with the browser
    page = start(client, "exam", size=2)
    first = submit(client, page, "a")  # the next question, in the same form
    session = re.search(r'action="/sessions/(\w+)/finish"', first.text).group(1)
    client.post(f"/sessions/{session}/finish?lang={lang}", data={"csrf_token": csrf(first.text)})
    refused = submit(client, first, "b")
    assert refused.template.name == "summary.html"
    assert ended in refused.text and time_up not in refused.text
    assert attempts(app) == 1


def test_mistakes_mode_practises_fresh_variants_of_the_templates_got_wrong(client, app):
    page = practise(client, seed=40)
    wrong = wrong_of(app, page)
    template = shown_variant(app, page).id.template_id
    submit(client, page, wrong.id)
    session_page = start(client, "mistakes", size=3)
    for _ in range(3):
        variant = shown_variant(app, session_page)
        assert variant.id.template_id == template and variant.id.seed != 40
        submit(client, session_page, variant.correct_choice_id)
        session_page = client.get(str(session_page.url))


def test_mistakes_mode_without_mistakes_says_so(client):
    page = client.get(f"/cards/{CARD_ID}")
    response = client.post(
        "/sessions", data={"csrf_token": csrf(page.text), "card_id": CARD_ID, "mode": "mistakes"}
    )
    assert response.status_code == 200 and response.template.name == "nothing_to_practise.html"
    assert "No mistakes" in response.text and "Something is not right" not in response.text


def test_sessions_belong_to_their_browser(client, app):
    page = start(client, "card", size=3)
    with TestClient(app) as stranger:
        assert stranger.get(str(page.url)).status_code == 404


# --- the mistake book and review ---------------------------------------------------------------


def test_the_mistake_book_groups_by_pitfall_with_explanation_and_practise_again(client, app):
    pages = [practise(client, seed=s) for s in (50, 51)]
    falls = [wrong_of(app, p) for p in pages]
    for page, wrong in zip(pages, falls, strict=True):
        submit(client, page, wrong.id)
    book = client.get("/mistakes")
    text = articles(book.text)
    for wrong in falls:
        assert plain(wrong.pitfall.title.en) in text
    assert book.text.count('class="mistake"') == len({w.pitfall.id for w in falls})
    assert "Why this reasoning fails" in text and "Worked solution" in text
    assert 'name="mode" value="mistakes"' in book.text  # practise again, fresh numbers
    for wrong in falls:  # no internal ids as text
        assert f">{wrong.pitfall.id}<" not in book.text


def test_i_understand_this_now_hides_a_mistake_but_statistics_keep_it(client, app):
    page = practise(client, seed=60)
    wrong = wrong_of(app, page)
    submit(client, page, wrong.id)
    book = client.get("/mistakes")
    fields = dict(
        re.findall(
            r'name="(\w+)" value="([^"]*)"',
            book.text.split('action="/mistakes/dismiss"')[1].split("</form>")[0],
        )
    )
    client.post("/mistakes/dismiss", data={k: html.unescape(v) for k, v in fields.items()})
    assert 'class="mistake"' not in client.get("/mistakes").text
    assert attempts(app) == 1
    review = client.get("/review").text
    assert re.search(r"0% \(0/1\)", review)  # still counted in progress


def test_the_mistake_book_filters_by_point_and_pitfall(client, app, card):
    first, second = (
        practise(client, point=card.points[0].slug, seed=70),
        practise(client, point=card.points[4].slug, seed=71),
    )
    a, b = wrong_of(app, first), wrong_of(app, second)
    submit(client, first, a.id)
    submit(client, second, b.id)
    by_point = articles(client.get("/mistakes", params={"point": card.points[4].slug}).text)
    assert plain(b.pitfall.title.en) in by_point and plain(a.pitfall.title.en) not in by_point
    by_pitfall = articles(client.get("/mistakes", params={"pitfall": a.pitfall.id}).text)
    assert plain(a.pitfall.title.en) in by_pitfall and plain(b.pitfall.title.en) not in by_pitfall


def _dismiss_form(book: str) -> dict[str, str]:
    form = book.split('action="/mistakes/dismiss"')[1].split("</form>")[0]
    return {k: html.unescape(v) for k, v in re.findall(r'name="(\w+)" value="([^"]*)"', form)}


def test_dismissing_a_mistake_keeps_the_book_s_filter(client, app, card):
    first, second = (
        practise(client, point=card.points[0].slug, seed=70),
        practise(client, point=card.points[4].slug, seed=71),
    )
    a, b = wrong_of(app, first), wrong_of(app, second)
    submit(client, first, a.id)
    submit(client, second, b.id)
    last = card.points[4].slug
    book = client.get("/mistakes", params={"point": last, "lang": "zh"}).text
    # the exam points under their card's name (every card's first point is "1.")
    assert '<optgroup label="ZeRO-1/2/3 与 Offload 显存卸载">' in book
    done = client.post(
        "/mistakes/dismiss?lang=zh", data=_dismiss_form(book), follow_redirects=False
    )
    assert done.status_code == 303
    assert done.headers["location"] == f"/mistakes?point={last}&lang=zh"
    back = client.get(done.headers["location"]).text
    assert 'class="mistake"' not in back and "没有符合这个筛选条件的错题了" in back
    assert 'href="/mistakes?lang=zh"' in back  # all of them, one click away
    everything = client.get("/mistakes?lang=en").text
    assert plain(a.pitfall.title.en) in articles(everything)
    assert "No mistakes recorded yet" not in everything
    by_pitfall = client.get("/mistakes", params={"pitfall": a.pitfall.id}).text
    done = client.post(
        "/mistakes/dismiss?lang=en", data=_dismiss_form(by_pitfall), follow_redirects=False
    )
    shown = html.unescape(re.search(r'<option value="([^"]+)" selected>', by_pitfall).group(1))
    assert a.pitfall.id in shown.split(PITFALL_SEPARATOR)
    assert done.headers["location"] == "/mistakes?" + urlencode({"pitfall": shown})
    assert (
        "None of your mistakes left matches this filter."
        in client.get(done.headers["location"]).text
    )


def test_review_shows_what_is_due_with_a_count_in_the_header(client, app, clock):
    page = practise(client, seed=40)  # a numeric template: due again with new numbers
    submit(client, page, wrong_of(app, page).id)
    assert "badge" not in client.get("/review").text
    clock.advance(minutes=3)
    review = client.get("/review")
    assert re.search(r'class="badge"[^>]*>1<', review.text)
    assert re.search(r'due-count">1<', review.text)
    session_page = start(client, "review")
    variant = shown_variant(app, session_page)
    assert variant.id.template_id == shown_variant(app, page).id.template_id
    assert variant.params["psi"] != shown_variant(app, page).params["psi"]
    submit(client, session_page, variant.correct_choice_id)
    assert "badge" not in client.get("/review").text


def test_mistakes_survive_a_restart(client, settings, cards, app):
    page = practise(client, seed=90)
    submit(client, page, wrong_of(app, page).id)
    cookie = client.cookies.get(COOKIE_NAME)
    with TestClient(create_app(settings, cards=cards)) as again:
        again.cookies.set(COOKIE_NAME, cookie)
        assert 'class="mistake"' in again.get("/mistakes").text


# --- security: headers, links, markup, cookies, odd input -------------------------------------


def test_reading_pages_sets_no_cookie_and_writes_nothing(client, app):
    assert "set-cookie" not in client.get("/").headers
    assert "infracards_session" not in client.get("/").headers.get("set-cookie", "")
    with app.state.sessionmaker() as db:
        from app.models import Learner

        assert db.scalar(select(func.count()).select_from(Learner)) == 0


def test_every_response_carries_the_security_headers(client):
    practise(client)
    for response in (
        client.get("/"),
        practise(client),
        client.get("/nowhere"),
        client.post("/answers", data={}),
        client.get("/static/style.css"),
        client.get("/api/v1/cards"),
        client.get("/api/v1/cards/zero-memory-offload/points/1/question"),
        client.post("/api/v1/cards/zero-memory-offload/points/1/question"),
        client.get("/api/v1/nowhere"),
        client.get("/openapi.json"),
        client.get("/healthz"),
    ):
        csp = response.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp, response.url
        assert "unsafe" not in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "same-origin"


def test_the_docs_page_may_run_only_its_local_bundle_and_its_own_inline_script(client):
    import base64
    import hashlib

    docs = client.get("/docs")
    csp = docs.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    for script in re.findall(r"<script>(.*?)</script>", docs.text, re.DOTALL):
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in directives["script-src"]
    assert directives["default-src"] == "'none'" and directives["connect-src"] == "'self'"
    for asset in re.findall(r'(?:src|href)="([^"]+)"', docs.text):
        assert asset.startswith("/docs-assets/") and client.get(asset).status_code == 200
    # FastAPI's ReDoc page would load its script from a CDN (and the CSP would block it): off.
    redoc = client.get("/redoc")
    assert redoc.status_code == 404 and "redoc.standalone" not in redoc.text


@pytest.mark.parametrize("path", ["/%2F%2Fevil.example/x", "/%2Fevil.example", "/%5Cevil.example"])
def test_the_language_switch_never_links_to_another_site(client, path):
    response = client.get(path)
    switch = html.unescape(re.search(r'class="lang" href="([^"]*)"', response.text).group(1))
    assert switch.startswith("/") and not switch.startswith(("//", "/\\"))


def test_request_data_is_escaped_on_error_pages(client):
    payload = '"><script>alert(1)</script><img src=x onerror=alert(1)>'
    for response in (
        client.get(f"/cards/{payload}", params={"lang": payload, "q": payload}),
        client.get(PRACTICE.format(point=1), params={"seed": payload, "lang": payload}),
        client.get(f"/cards/{CARD_ID}/points/{payload}/practice"),
    ):
        assert 400 <= response.status_code < 500
        assert "<script>alert" not in response.text and "<img src=x" not in response.text


def test_mathml_from_latex_keeps_no_link_script_or_style_attributes():
    from app.rendering import latex_to_mathml, render_inline

    for latex in (r"\href{javascript:alert(1)}{x}", r"\style{color:red}{x}"):
        rendered = str(render_inline(f"${latex}$"))
        assert rendered.startswith('<code class="latex">') and "href=" not in rendered
    assert str(latex_to_mathml(r"\frac{16\Psi}{N_d}")).startswith("<math")


def test_the_session_cookie_is_secure_in_production(tmp_path, db_url, cards):
    settings = make_settings(tmp_path, db_url, environment="production")
    with TestClient(create_app(settings, cards=cards), base_url="https://testserver") as prod:
        cookie = prod.get(PRACTICE.format(point=1)).headers["set-cookie"]
    assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie


@pytest.mark.parametrize("value", [b"x" * 8000, b"\xc3\xa9" * 2000, b"..", b'"quoted"', b"short"])
def test_an_oversized_or_garbled_session_cookie_is_a_new_guest(client, app, value):
    cookie = [(b"cookie", COOKIE_NAME.encode() + b"=" + value)]
    page = client.get(PRACTICE.format(point=1), params={"seed": 1}, headers=cookie)
    assert page.status_code == 200 and COOKIE_NAME in page.headers["set-cookie"]
    fields = {**form_fields(page.text), "choice_id": "a"}
    assert client.post("/answers", data=fields, headers=cookie).status_code == 403
    assert attempts(app) == 0


def test_a_session_value_the_server_never_issued_is_not_adopted(app):
    """Session fixation: someone plants a cookie value of their choosing in a victim's browser
    before the victim's first answer. The server never issued it, so the victim is a new guest
    with a session of the server's choosing, and the planted value reaches nobody's history."""
    from app.auth.identity import hash_secret
    from app.models import WebSession

    planted = "p" * 43  # long enough, ASCII: accepted as a guest session before
    with TestClient(app) as victim:
        victim.cookies.set(COOKIE_NAME, planted)
        page = practise(victim, seed=5)
        issued = page.headers["set-cookie"].split(";")[0].split("=", 1)[1]
        assert issued != planted
        victim.cookies.set(COOKIE_NAME, issued)
        submit(victim, page, "a")
    assert attempts(app) == 1
    with app.state.sessionmaker() as db:
        hashes = set(db.scalars(select(WebSession.token_hash)))
    assert hash_secret(planted) not in hashes
    assert hash_secret(app.state.session_cookie.secret(issued)) in hashes
    # An issued value altered by one character is not read back either.
    forged = issued[:-1] + ("0" if issued[-1] != "0" else "1")
    assert app.state.session_cookie.secret(forged) is None


def test_another_browser_reusing_a_client_answer_id_learns_nothing(client, app):
    page = practise(client, seed=31)
    wrong = wrong_of(app, page).id
    submit(client, page, wrong)
    with TestClient(app) as stranger:
        own = form_fields(practise(stranger, seed=31).text)
        reuse = {**own, "client_answer_id": form_fields(page.text)["client_answer_id"]}
        response = stranger.post("/answers", data={**reuse, "choice_id": wrong})
        assert response.status_code == 409 and "verdict" not in response.text
        assert 'class="mistake"' not in stranger.get("/mistakes").text
    assert attempts(app) == 1


@pytest.mark.parametrize(
    "changes",
    [
        {"choice_id": "\u202ea"},
        {"choice_id": "ａ"},
        {"choice_id": "a\x00"},
        {"choice_id": "a" * 100_000},
        {"token": "\u202e" * 5000},
        {"client_answer_id": "\u00e9" * 100_000},
        {"csrf_token": "\U0001f600" * 100_000},
        {"shown_at": "-1"},
    ],
)
def test_odd_form_fields_are_4xx_never_500(app, changes):
    with TestClient(app, raise_server_exceptions=False) as browser:
        page = practise(browser, seed=4)
        response = submit(browser, page, **{"choice_id": "a", **changes})
        assert 400 <= response.status_code < 500
        assert response.headers["content-type"].startswith("text/html")


def test_backticked_names_render_as_code_and_stay_escaped():
    from app.rendering import render_inline

    rendered = str(render_inline("wrap it in `no_sync` <b>, not `<script>`"))
    assert "<code>no_sync</code>" in rendered and "&lt;b&gt;" in rendered
    assert "<code>&lt;script&gt;</code>" in rendered


def test_the_exam_length_is_chosen_on_the_card_page(client, app):
    page = client.get(f"/cards/{CARD_ID}").text
    assert re.search(r'<select name="size">.*<option value="5"', page, re.DOTALL)
    session = start(client, "exam", size=5)
    assert "Question 1 / 5" in session.text


def test_a_summary_opened_mid_session_says_so_and_links_back(client, app):
    page = start(client, "card", size=3)
    summary = client.get(str(page.url) + "/summary")
    assert "not finished yet" in summary.text and f'href="{page.url.path}"' in summary.text


def test_run_it_yourself_shows_the_recorded_chart(client):
    page = client.get(f"/cards/{CARD_ID}/run-it-yourself").text
    assert f'src="/cards/{CARD_ID}/run-it-yourself/chart.svg"' in page
    chart = client.get(f"/cards/{CARD_ID}/run-it-yourself/chart.svg")
    assert chart.status_code == 200 and chart.headers["content-type"].startswith("image/svg+xml")
    assert chart.content.lstrip().startswith(b"<svg") and b"<script" not in chart.content


def test_the_language_switch_on_a_page_answering_a_form_leads_to_the_form_s_page(client):
    """A form post answered with a page (an error beside the form) is at the POST's address: its
    language link goes to the page the form was on, never to that address as a GET (405)."""
    review = client.get("/review")
    form = {"csrf_token": csrf(review.text), "exam_date": "2020-01-01"}  # in the past
    refused = client.post("/review/exam-date", data=form, headers={"Referer": str(review.url)})
    assert refused.status_code == 400  # the page with its error, at the POST's address

    def switch(response) -> str:
        return html.unescape(re.search(r'class="lang" href="([^"]*)"', response.text).group(1))

    assert switch(refused) == "/review?lang=zh"
    # From another site, or without a Referer: the home page in the other language.
    for referer in ({"Referer": "https://elsewhere.example/review"}, {}):
        again = client.post("/review/exam-date", data=form, headers=referer)
        assert again.status_code == 400 and switch(again) == "/?lang=zh"
    followed = client.get(switch(refused))
    assert followed.status_code == 200 and followed.url.path == "/review"


def test_every_page_with_a_start_or_an_answer_form_loads_the_script_that_sends_it_once():
    """A page that includes a start form (_start.html, _deck_start.html) or has a form marked
    data-submit-once sets ``submit_once``, so that base.html loads static/submit_once.js."""
    from pathlib import Path

    pages = Path(__file__).resolve().parents[1] / "app" / "pages"
    needing = []
    for path in sorted(pages.glob("*.html")):
        text = path.read_text(encoding="utf-8")
        if path.name.startswith("_") or '{% extends "base.html" %}' not in text:
            continue
        if re.search(r'include "_(deck_)?start\.html"|data-submit-once', text):
            needing.append(path.name)
            assert "{% set submit_once = true %}" in text, path.name
    assert {"card.html", "practice.html", "today.html", "review.html"} <= set(needing)
    # Every form a practice page posts (an answer, ending the session) is sent once.
    practice = (pages / "practice.html").read_text(encoding="utf-8")
    posting = re.findall(r'<form method="post"[^>]*>|<form class="question"[^>]*>', practice)
    assert len(posting) == 2 and all("data-submit-once" in form for form in posting), posting
