"""Exams that end themselves, summaries that list their questions, and the edge states of
practice: no mistakes to practise, a question answered again, a statement's verdict."""

from __future__ import annotations

import html
import re
from datetime import UTC, timedelta

import pytest
from conftest import CARD_ID
from sqlalchemy import func, select
from test_web import csrf, form_fields, shown_variant, start, submit, wrong_of

from app.domain.generation import generate, grade
from app.domain.practice import EXAM_SECONDS_PER_QUESTION
from app.domain.typed import accepted_units
from app.domain.units import get_unit
from app.models import Attempt, PracticeSession
from app.practice.sessions import EXAM_GRACE
from app.rendering import render_inline, render_quantity

API = "/api/v1"
PASSWORD = "correct horse battery"


def attempts(app) -> int:
    with app.state.sessionmaker() as db:
        return db.scalar(select(func.count()).select_from(Attempt))


def session_row(app, page) -> PracticeSession:
    session_id = re.search(r"/sessions/([^/?]+)", str(page.url)).group(1)
    with app.state.sessionmaker() as db:
        row = db.get(PracticeSession, session_id)
        db.expunge(row)
    return row


def past_the_deadline(clock, row, extra=timedelta(seconds=1)) -> None:
    deadline = row.deadline_at.replace(tzinfo=UTC)
    clock.now = deadline + EXAM_GRACE + extra


def choice_html(choice, lang="en") -> str:
    """A choice's text as pages render it (numbers as quantities, statements with MathML)."""
    text = choice.text.get(lang)
    return str(render_quantity(text) if choice.value is not None else render_inline(text))


# --- an exam ends itself ------------------------------------------------------------------------


def test_an_exam_past_its_deadline_is_over_everywhere_and_its_end_is_the_deadline(
    client, app, clock
):
    page = start(client, "exam", size=3)
    row = session_row(app, page)
    assert row.deadline_at.replace(tzinfo=UTC) == clock.now + timedelta(
        seconds=3 * EXAM_SECONDS_PER_QUESTION
    )
    first = shown_variant(app, page)
    question_two = submit(client, page, first.correct_choice_id)
    assert "Question 2 / 3" in question_two.text
    past_the_deadline(clock, row)

    # The session's address shows the results, never a question.
    resumed = client.get(f"/sessions/{row.id}", follow_redirects=False)
    assert resumed.status_code == 303 and resumed.headers["location"].endswith("/summary")
    summary = client.get(resumed.headers["location"])
    assert summary.template.name == "summary.html" and summary.context["finished"]
    counted = summary.context["summary"]
    assert (counted.right, counted.wrong, counted.unanswered) == (1, 0, 2)
    assert counted.seconds == 3 * EXAM_SECONDS_PER_QUESTION  # the whole time, not the read's
    assert "still running" not in summary.text and "not finished" not in summary.text
    # Unanswered questions are unanswered, not wrong with a pitfall.
    assert summary.text.count("Not answered") == 2 and not counted.pitfalls
    # The summary says why (it said nothing of the time running out).
    assert "Time ran out with 2 questions unanswered." in summary.text
    zh = client.get(f"/sessions/{row.id}/summary", params={"lang": "zh"})
    assert "时间到了，还有 2 道题没有作答。" in zh.text

    # Stored once, exactly at the deadline; later reads change nothing.
    with app.state.sessionmaker() as db:
        stored = db.get(PracticeSession, row.id).finished_at
    assert stored.replace(tzinfo=UTC) == row.deadline_at.replace(tzinfo=UTC)
    clock.advance(hours=5)
    again = client.get(f"/sessions/{row.id}/summary")
    assert again.context["summary"].seconds == 3 * EXAM_SECONDS_PER_QUESTION
    with app.state.sessionmaker() as db:
        assert db.get(PracticeSession, row.id).finished_at == stored

    # Its answer's feedback opens now (no feedback while an exam runs).
    feedback = client.get(f"/answers/{counted.questions[0].attempt_id}")
    assert feedback.template.name == "feedback.html"


def test_an_exam_whose_summary_was_never_opened_is_listed_with_its_score(client, app, clock):
    page = start(client, "exam", size=2)
    old = session_row(app, page)
    submit(client, page, wrong_of(app, page).id)
    past_the_deadline(clock, old, extra=timedelta(minutes=1))
    # A new exam, finished by answering everything: its summary lists both, newest first.
    page = start(client, "exam", size=2)
    for _ in range(2):
        page = submit(client, page, shown_variant(app, page).correct_choice_id)
    assert page.template.name == "summary.html"
    listed = page.context["past_exams"]
    assert [(e.right, e.size) for e in listed] == [(2, 2), (0, 2)]
    assert "Time ran out" not in page.text  # every question answered in time
    assert listed[1].seconds == 2 * EXAM_SECONDS_PER_QUESTION
    assert page.text.count('class="past-exam"') == 2
    assert f'href="/sessions/{old.id}/summary"' in page.text
    with app.state.sessionmaker() as db:  # listed as over, without its summary being opened
        assert db.get(PracticeSession, old.id).finished_at is None


def test_a_late_answer_on_the_web_is_not_stored_and_lands_on_the_summary(client, app, clock):
    page = start(client, "exam", size=2)
    row = session_row(app, page)
    before = attempts(app)
    past_the_deadline(clock, row)
    late = submit(client, page, shown_variant(app, page).correct_choice_id)
    assert attempts(app) == before  # not counted
    assert late.status_code == 200 and late.template.name == "summary.html"
    assert late.url.path == f"/sessions/{row.id}/summary" and late.url.params["late"] == "1"
    assert "Time was up: this answer was not counted." in late.text
    assert late.context["summary"].unanswered == 2
    # In Chinese too.
    zh = client.get(f"/sessions/{row.id}/summary", params={"late": 1, "lang": "zh"})
    assert "时间已到：这次作答未计分。" in zh.text


def test_an_answer_sent_as_the_clock_ran_out_still_counts_but_not_the_time(client, app, clock):
    page = start(client, "exam", size=2)
    row = session_row(app, page)
    clock.now = row.deadline_at.replace(tzinfo=UTC) + EXAM_GRACE / 2
    submit(client, page, shown_variant(app, page).correct_choice_id)
    assert attempts(app) == 1
    summary = client.get(f"/sessions/{row.id}/summary").context["summary"]
    assert (summary.right, summary.unanswered) == (1, 1)
    assert summary.seconds == 2 * EXAM_SECONDS_PER_QUESTION


def test_an_exam_ended_early_refuses_a_later_answer(client, app, clock):
    page = start(client, "exam", size=3)
    row = session_row(app, page)
    clock.advance(seconds=30)
    client.post(f"/sessions/{row.id}/finish", data={"csrf_token": csrf(page.text)})
    late = submit(client, page, shown_variant(app, page).correct_choice_id)
    assert attempts(app) == 0 and late.url.params["late"] == "1"
    assert late.context["summary"].seconds == 30


def signed_in_on_the_web_and_the_app(client) -> dict[str, str]:
    """One account, signed in on this browser and holding an app's bearer token."""
    client.post(f"{API}/auth/register", json={"email": "ex@example.com", "password": PASSWORD})
    login = client.get("/login")
    client.post(
        "/login",
        data={"csrf_token": csrf(login.text), "email": "ex@example.com", "password": PASSWORD},
    )
    bearer = client.post(
        f"{API}/auth/token",
        json={"email": "ex@example.com", "password": PASSWORD, "device_name": "phone"},
    ).json()["access_token"]
    return {"Authorization": f"Bearer {bearer}"}


def test_the_api_refuses_a_late_answer_with_the_summary_url(client, app, clock):
    """A learner answering a session's question through the API (the same account on the web
    and in the app) after the exam's time: 409 exam_over with summary_url; nothing stored."""
    headers = signed_in_on_the_web_and_the_app(client)
    page = start(client, "exam", size=2)
    row = session_row(app, page)
    token = form_fields(page.text)["token"]
    past_the_deadline(clock, row)
    body = {"token": token, "choice_id": "a", "client_answer_id": "late-1"}
    refused = client.post(f"{API}/answers", json=body, headers=headers)
    assert refused.status_code == 409
    assert refused.headers["content-type"].startswith("application/problem+json")
    problem = refused.json()
    assert problem["code"] == "exam_over" and problem["status"] == 409
    assert problem["summary_url"] == f"/sessions/{row.id}/summary"
    zh = client.post(f"{API}/answers?lang=zh", json=body, headers=headers).json()
    assert zh["detail"] == "考试已结束：这次作答未计分。请查看成绩。"
    batch = client.post(
        f"{API}/answers/batch",
        json={"answers": [{**body, "client_answer_id": "late-2"}]},
        headers=headers,
    ).json()
    (item,) = batch["results"]
    assert item["code"] == "exam_over" and item["summary_url"] == problem["summary_url"]
    assert attempts(app) == 0
    # The summary the problem names is the learner's, and it is over.
    assert client.get(problem["summary_url"]).context["finished"]


def review_logs(app) -> int:
    from sqlalchemy import func, select

    from app.models import ReviewLog

    with app.state.sessionmaker() as db:
        return int(db.scalar(select(func.count()).select_from(ReviewLog)) or 0)


def test_no_route_tells_an_exam_answers_result_before_the_exam_ends(client, app, clock):
    """The exam page's question token posted to the API by the same account (single, batch,
    typed) is stored and acknowledged without its result; the learner's attempts, mistakes and
    pitfalls and the web feedback page tell nothing either, until the exam ends."""
    headers = signed_in_on_the_web_and_the_app(client)

    def answered_so_far():
        cards = client.get(f"{API}/me/progress", headers=headers).json()["cards"]
        attempts = sum(point["attempts"] for card in cards for point in card["points"])
        due = client.get(f"{API}/me/review/due", headers=headers).json()["items"]
        pitfalls = [p["pitfall_id"] for card in cards for p in card["pitfalls"]]
        return attempts, sorted(d["template_id"] for d in due), pitfalls, review_logs(app)

    before = answered_so_far()
    page = start(client, "exam", size=3, typed="1")
    row = session_row(app, page)
    summary_url = f"/sessions/{row.id}/summary"
    result_fields = {"correct", "correct_choice_id", "pitfall", "explanation", "solution"}
    result_fields |= {"choices", "answer", "value", "unit", "choice_id"}

    def acknowledged(body, client_answer_id):
        assert body["stored"] is True and body["feedback"] is None, body
        assert body["client_answer_id"] == client_answer_id
        assert body["summary_url"] == summary_url and not result_fields & set(body)
        return body["attempt_id"]

    def wrong_answer(page) -> dict[str, str]:
        """A wrong answer to the page's question: a pitfall's choice, or typed, its value (a
        question asked without choices takes no choice)."""
        variant = shown_variant(app, page)
        fields = {"token": form_fields(page.text)["token"]}
        if not accepted_units(variant):
            return {**fields, "choice_id": wrong_of(app, page).id}
        unit = variant.content.template.unit
        value = variant.content.pitfalls[0].value / get_unit(unit).scale
        return {**fields, "value": f"{float(value):.6g}", "unit": unit}

    wrong = wrong_answer(page)
    single = client.post(f"{API}/answers", json={**wrong, "client_answer_id": "exam-1"},
                         headers=headers)  # fmt: skip
    assert single.status_code == 200
    first = acknowledged(single.json(), "exam-1")
    again = client.post(f"{API}/answers", json={**wrong, "client_answer_id": "exam-1"},
                        headers=headers)  # fmt: skip
    assert acknowledged(again.json(), "exam-1") == first and again.json()["replayed"] is True

    page = client.get(f"/sessions/{row.id}")
    item = wrong_answer(page)
    batch = client.post(f"{API}/answers/batch",
                        json={"answers": [{**item, "client_answer_id": "exam-2"}]},
                        headers=headers)  # fmt: skip
    (result,) = batch.json()["results"]
    assert result.pop("outcome") == "withheld"  # the batch's tag of a result not told yet
    second = acknowledged(result, "exam-2")

    # Nothing else tells either while the exam runs.
    for path in ("/me/attempts", "/me/mistakes"):
        assert client.get(f"{API}{path}", headers=headers).json()["items"] == [], path
    assert client.get(f"{API}/me/pitfalls", headers=headers).json() == []
    for attempt_id in (first, second):
        hidden = client.get(f"/answers/{attempt_id}", follow_redirects=False)
        assert hidden.status_code == 303 and hidden.headers["location"] == f"/sessions/{row.id}"
    running = client.get(summary_url)
    assert "Score" not in running.text and "This exam is still running" in running.text
    assert 'class="mistake"' not in client.get("/mistakes").text
    # Nor progress, pitfall mastery or the review schedule: the answers are rated when it ends.
    assert answered_so_far() == before
    clock.advance(minutes=2)  # past a wrong answer's first learning step, still inside the exam
    assert answered_so_far()[1:] == before[1:]

    # The last question, typed: its answer ends the exam, and everything shows.
    page = client.get(f"/sessions/{row.id}")
    variant = shown_variant(app, page)
    token = form_fields(page.text)["token"]
    if accepted_units(variant):
        last = {"value": "1", "unit": variant.content.template.unit}
    else:  # a statement keeps its choices
        last = {"choice_id": variant.correct_choice_id}
    typed = client.post(f"{API}/answers",
                        json={"token": token, **last, "client_answer_id": "exam-3"},
                        headers=headers)  # fmt: skip
    acknowledged(typed.json(), "exam-3")
    listed = client.get(f"{API}/me/attempts", headers=headers).json()["items"]
    assert [a["client_answer_id"] for a in listed] == ["exam-3", "exam-2", "exam-1"]
    assert [a["correct"] for a in listed][1:] == [False, False]
    assert len(client.get(f"{API}/me/mistakes", headers=headers).json()["items"]) >= 2
    assert client.get(f"/answers/{first}").template.name == "feedback.html"
    # Ended: its answers are rated, in order, once (the next read of progress settles it).
    attempts, _due, _pitfalls, logs = answered_so_far()
    assert (attempts, logs) == (before[0] + 3, before[3] + 3)
    client.get(summary_url)
    assert review_logs(app) == before[3] + 3
    replayed = client.post(f"{API}/answers", json={**wrong, "client_answer_id": "exam-1"},
                           headers=headers).json()  # fmt: skip
    assert replayed["correct"] is False and replayed["replayed"] is True


def test_the_exam_page_submits_counts_down_to_the_summary_and_ends_in_the_learners_zone(
    client, app, clock
):
    client.cookies.set("infracards_tz", "Asia/Shanghai")
    page = start(client, "exam", size=2)
    row = session_row(app, page)
    button = re.search(r'<button type="submit">([^<]+)</button>', page.text).group(1)
    assert button == "Submit"
    countdown = re.search(r'<span id="countdown" data-seconds="(\d+)" data-summary-url="([^"]+)"',
                          page.text)  # fmt: skip
    assert int(countdown.group(1)) == 2 * EXAM_SECONDS_PER_QUESTION
    assert countdown.group(2) == f"/sessions/{row.id}/summary"
    # Without JavaScript, a refresh at the deadline opens the results.
    refresh = re.search(
        r'<noscript><meta http-equiv="refresh" content="(\d+);url=([^"]+)">', page.text
    )
    assert int(refresh.group(1)) >= 2 * EXAM_SECONDS_PER_QUESTION
    assert refresh.group(2) == f"/sessions/{row.id}/summary"
    # The end on the learner's clock (UTC+8), not UTC.
    local_end = row.deadline_at.replace(tzinfo=UTC) + timedelta(hours=8)
    assert f"{local_end:%H:%M} GMT+08:00" in page.text
    zh = client.get(f"/sessions/{row.id}", params={"lang": "zh"})
    assert '<button type="submit">提交</button>' in zh.text
    # Each language's own brackets around the end (zh: full-width, as the rest of its text).
    zh_end = f"{local_end.year}年{local_end.month}月{local_end.day}日 {local_end:%H:%M}"
    assert re.search(rf"（结束于 {zh_end}[^）<]*）", zh.text), zh_end
    assert re.search(rf"\(ends at [^)<]*{local_end:%H:%M} GMT\+08:00\)", page.text)
    # A practice question still says "Check answer".
    practice = client.get(start(client, "point", point="offload").url.path, params={"lang": "en"})
    assert '<button type="submit">Check answer</button>' in practice.text


# --- summaries list their questions ---------------------------------------------------------------


def test_a_practice_summary_lists_each_question_with_its_answer_and_key(client, app):
    page = start(client, "card", size=3)
    row = session_row(app, page)
    asked = []
    for number in range(3):
        variant = shown_variant(app, page)
        wrong = wrong_of(app, page)
        chosen = variant.choice(variant.correct_choice_id) if number == 1 else wrong
        asked.append((variant, chosen))
        submit(client, page, chosen.id)
        page = client.get(f"/sessions/{row.id}")
    summary = client.get(f"/sessions/{row.id}/summary")
    lines = summary.text.split('<li class="question-line')[1:]
    assert len(lines) == 3
    for (variant, chosen), line in zip(asked, lines, strict=True):
        key = variant.choice(variant.correct_choice_id)
        assert str(render_inline(variant.stem.en)) in line  # the stem, with its MathML
        chosen_part = line.split('class="chosen">')[1].split("</dd>")[0]
        key_part = line.split('class="key">')[1].split("</dd>")[0]
        assert choice_html(chosen) in chosen_part and f">{chosen.id}<" in chosen_part
        assert choice_html(key) in key_part and f">{key.id}<" in key_part
        if chosen.pitfall is None:
            assert "Correct" in line and "pitfall-name" not in line
        else:
            assert "Not quite" in line
            assert str(render_inline(chosen.pitfall.title.en)) in line.split("pitfall-name")[1]
    with app.state.sessionmaker() as db:
        ids = db.scalars(
            select(Attempt.id)
            .where(Attempt.practice_session_id == row.id)
            .order_by(Attempt.position)
        ).all()
    for number, attempt_id in enumerate(ids, start=1):
        assert f'<a href="/answers/{attempt_id}">See question {number} again</a>' in summary.text
    zh = client.get(f"/sessions/{row.id}/summary", params={"lang": "zh"})
    assert zh.text.count('<li class="question-line') == 3 and "各题回顾" in zh.text
    assert str(render_inline(asked[0][0].stem.zh, "zh")) in zh.text


def test_a_running_exam_tells_nothing_on_its_summary(client, app):
    page = start(client, "exam", size=3)
    row = session_row(app, page)
    submit(client, page, wrong_of(app, page).id)
    summary = client.get(f"/sessions/{row.id}/summary")
    assert not summary.context["finished"] and "still running" in summary.text
    assert "question-line" not in summary.text and "score-line" not in summary.text


# --- edge states --------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_my_mistakes_without_mistakes_offers_practice_instead(client, lang):
    card = client.get(f"/cards/{CARD_ID}", params={"lang": lang})
    response = client.post(
        "/sessions",
        data={"csrf_token": csrf(card.text), "card_id": CARD_ID, "mode": "mistakes"},
    )
    assert response.status_code == 200 and response.template.name == "nothing_to_practise.html"
    expected = {
        "en": "No mistakes to practise yet: answer some questions first.",
        "zh": "还没有错题可练，先做几道题吧。",
    }
    assert "Something is not right" not in response.text
    notice = re.search(r'class="notice" role="status">([^<]+)<', response.text).group(1)
    assert html.unescape(notice) == expected[lang]
    # It offers the whole card, which starts.
    assert 'name="mode" value="card"' in response.text
    started = client.post(
        "/sessions",
        data={"csrf_token": csrf(response.text), "card_id": CARD_ID, "mode": "card"},
    )
    assert started.template.name == "practice.html"


def test_practise_again_on_a_mistake_marked_understood_offers_its_exam_point(client, app):
    page = start(client, "point", point="offload")
    wrong = wrong_of(app, page)
    variant = shown_variant(app, page)
    feedback = submit(client, page, wrong.id)
    book = client.get("/mistakes")
    fields = dict(
        re.findall(
            r'name="(\w+)" value="([^"]*)"',
            book.text.split('action="/mistakes/dismiss"')[1].split("</form>")[0],
        )
    )
    client.post("/mistakes/dismiss", data={k: html.unescape(v) for k, v in fields.items()})
    response = client.post(
        "/sessions",
        data={
            "csrf_token": csrf(feedback.text),
            "card_id": CARD_ID,
            "mode": "mistakes",
            "templates": variant.id.template_id,
            "size": "3",
        },
    )
    assert response.status_code == 200 and response.template.name == "nothing_to_practise.html"
    assert "marked as understood, or never answered wrong" in response.text
    assert f'name="point" value="{variant.id.point}"' in response.text
    assert "Practise this exam point" in response.text


def test_answering_again_says_the_first_answer_counts_and_which(client, app):
    page = start(client, "point", point="offload")
    variant = shown_variant(app, page)
    wrong = wrong_of(app, page)
    first = submit(client, page, variant.correct_choice_id)
    assert "Already answered" not in first.text
    # Back, another choice, submit: a new form id, the same question.
    second = submit(client, page, wrong.id, client_answer_id="another-form")
    assert attempts(app) == 1
    assert second.url.path == first.url.path and second.url.params["again"] == "1"
    notice = f"Already answered: your first answer counts ({variant.correct_choice_id.upper()})."
    assert notice in html.unescape(second.text)
    assert second.context["grade"].correct  # the first answer's verdict
    zh = client.get(second.url.path, params={"again": 1, "lang": "zh"})
    assert f"以你第一次的答案为准（{variant.correct_choice_id.upper()}）" in zh.text
    # The same form sent twice (a double click) is no second answer: nothing to say.
    double = submit(client, page, variant.correct_choice_id)
    assert "again" not in double.url.params
    # Back, another choice in the restored form (its own id sent again): the notice too.
    restored = submit(client, page, wrong.id)
    assert restored.url.params["again"] == "1"  # (in Chinese now: the language chosen above)
    assert f"以你第一次的答案为准（{variant.correct_choice_id.upper()}）" in restored.text
    assert attempts(app) == 1


def test_answering_an_exam_question_again_says_the_first_answer_counts(client, app):
    page = start(client, "exam", size=3)
    variant = shown_variant(app, page)
    submit(client, page, variant.correct_choice_id)
    second = submit(client, page, wrong_of(app, page).id, client_answer_id="back-and-again")
    assert attempts(app) == 1 and "Question 2 / 3" in second.text
    shown = html.unescape(second.text)
    expected = "Question 1 was already answered: your first answer, "
    assert f"{expected}{variant.correct_choice_id.upper()}, counts." in shown
    assert "verdict" not in second.text  # still no feedback during the exam


def test_a_statements_verdict_reads_as_a_sentence_in_both_languages(card):
    statements = [t for t in card.templates() if t.kind == "statement"]
    assert statements
    for template in statements:
        variant = generate(card, template, 7)
        right = grade(variant, variant.correct_choice_id).explanation
        key = variant.choice(variant.correct_choice_id).text
        assert right.en == f"That statement is right: {key.en}"
        assert right.zh == f"这个说法是正确的：{key.zh}"
        assert ". is right" not in right.en and "。 是正确答案" not in right.zh
    numeric = next(t for t in card.templates() if t.kind == "numeric")
    variant = generate(card, numeric, 7)
    key = variant.choice(variant.correct_choice_id).text
    assert grade(variant, variant.correct_choice_id).explanation.en == f"{key.en} is right."


def test_on_postgres_an_exam_ends_at_its_deadline_once_and_refuses_late_answers(
    pg_url, tmp_path, cards
):
    import dataclasses
    from datetime import datetime

    from conftest import FakeClock, make_settings
    from fastapi.testclient import TestClient

    from app.cli import migrate
    from app.main import create_app

    migrate(pg_url)
    app = create_app(make_settings(tmp_path, pg_url), cards=cards)
    clock = FakeClock(datetime.now(UTC).replace(microsecond=0))
    app.state.context = dataclasses.replace(app.state.context, clock=clock)
    with TestClient(app) as client:
        page = start(client, "exam", size=2)
        row = session_row(app, page)
        submit(client, page, shown_variant(app, page).correct_choice_id)
        page = client.get(f"/sessions/{row.id}")
        past_the_deadline(clock, row)
        late = submit(client, page, shown_variant(app, page).correct_choice_id)
        assert late.url.params["late"] == "1" and attempts(app) == 1
        for _ in range(2):  # idempotent
            summary = client.get(f"/sessions/{row.id}/summary").context["summary"]
            assert (summary.right, summary.unanswered) == (1, 1)
            with app.state.sessionmaker() as db:
                stored = db.get(PracticeSession, row.id).finished_at
            assert stored == row.deadline_at
    app.state.sessionmaker.kw["bind"].dispose()


def test_the_new_chinese_pages_show_no_english_interface_text(client, app, clock):
    from test_i18n import untranslated

    client.get("/", params={"lang": "zh"})  # remembered for the next pages
    card = client.get(f"/cards/{CARD_ID}")
    pages = {
        "nothing to practise": client.post(
            "/sessions",
            data={"csrf_token": csrf(card.text), "card_id": CARD_ID, "mode": "mistakes"},
        ).text
    }
    page = start(client, "exam", size=3)
    row = session_row(app, page)
    submit(client, page, shown_variant(app, page).correct_choice_id)
    second = submit(client, page, wrong_of(app, page).id, client_answer_id="again-zh")
    pages["exam answered again"] = second.text
    pages["running exam summary"] = client.get(f"/sessions/{row.id}/summary").text
    past_the_deadline(clock, row)
    pages["late summary"] = submit(client, second, "b", client_answer_id="late-zh").text
    practice = start(client, "point", point="offload")
    submit(client, practice, wrong_of(app, practice).id)
    pages["feedback again"] = submit(
        client, practice, shown_variant(app, practice).correct_choice_id, client_answer_id="x"
    ).text
    assert "以你第一次的答案为准" in pages["feedback again"]
    assert "时间已到" in pages["late summary"] and "各题回顾" in pages["late summary"]
    found = {name: untranslated(text) for name, text in pages.items()}
    assert not any(found.values()), found


def test_a_sessions_end_is_one_moment_for_every_read():
    from datetime import datetime

    from app.domain.practice import session_end

    t0 = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    deadline = t0 + timedelta(minutes=3)

    def end(now, finished=None, answered=(), size=2, limit=deadline):
        return session_end(
            started_at=t0, deadline=limit, finished_at=finished, answered_at=list(answered),
            size=size, now=now,
        )  # fmt: skip

    assert end(deadline) is None  # at the deadline itself it still runs
    assert end(deadline + timedelta(seconds=1)) == deadline
    assert end(deadline + timedelta(days=3)) == deadline  # the same for every later read
    # Ended by the learner; a stored end after the deadline (an old read) reads as the deadline.
    assert end(t0 + timedelta(minutes=1), finished=t0 + timedelta(minutes=1)) == t0 + timedelta(
        minutes=1
    )
    assert end(t0, finished=deadline + timedelta(hours=1)) == deadline
    # Every question answered: its last answer, never past the deadline (an answer in the grace).
    last = t0 + timedelta(minutes=2)
    assert end(last, answered=[t0 + timedelta(minutes=1), last]) == last
    late = deadline + timedelta(seconds=5)
    assert end(late, answered=[t0, late]) == deadline
    # A practice session without a deadline runs until every question has an answer.
    assert end(t0 + timedelta(days=9), answered=[t0], limit=None) is None
