"""The web pages as a learner uses them: read a card, practise, get feedback, review mistakes."""

from __future__ import annotations

import html
import json
import re

import pytest
from conftest import CARD_ID, make_settings
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from app.domain.generation import generate_for_point
from app.main import create_app
from app.models import Attempt
from app.web.session import COOKIE_NAME

PRACTICE = f"/cards/{CARD_ID}/points/{{point}}/practice"


def form_fields(page: str) -> dict[str, str]:
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page))
    return {k: html.unescape(v) for k, v in fields.items()}


def alert(page: str) -> str:
    match = re.search(r'role="alert">([^<]*)<', page)
    return html.unescape(match.group(1)) if match else ""


def practise(client, point=1, seed=1, **params):
    response = client.get(PRACTICE.format(point=point), params={"seed": seed, **params})
    assert response.status_code == 200, response.text
    return response


def submit(client, page, choice_id, **changes):
    data = {**form_fields(page.text), "choice_id": choice_id, **changes}
    return client.post("/answers", data={k: v for k, v in data.items() if v is not None})


def attempts(app) -> int:
    with app.state.sessionmaker() as session:
        return session.scalar(select(func.count()).select_from(Attempt))


def wrong_choice(card, point, seed):
    return next(c for c in generate_for_point(card, point, seed).choices if c.pitfall is not None)


# --- reading ----------------------------------------------------------------------------------


def test_the_card_list_links_to_each_card(client, card):
    response = client.get("/")
    assert response.status_code == 200
    assert response.template.name == "cards.html"
    assert f'href="/cards/{CARD_ID}"' in response.text
    assert html.escape(card.title.en) in response.text


def test_the_card_page_shows_the_card_its_formulas_as_mathml_and_practise_links(client, card):
    response = client.get(f"/cards/{CARD_ID}")
    assert response.status_code == 200 and response.template.name == "card.html"
    page = response.text
    assert page.count("<math") >= len(card.formulas)
    for point in card.points:
        assert f'href="/cards/{CARD_ID}/points/{point.number}/practice"' in page
        assert f'id="point-{point.number}"' in page
    assert f'href="/cards/{CARD_ID}/practice"' in page
    for command in (
        "python -m app.zero_demo --world-size 4",
        "torchrun --nproc-per-node 8 -m app.zero_demo",
        "python -m app.zero_demo --backend nccl",
    ):
        assert command in page
    assert "Definition" in page and "Use cases" in page and "What it solves" in page


def test_pages_need_no_javascript_and_no_cdn(client):
    practice = practise(client)
    feedback = submit(client, practice, "a")
    for response in (
        client.get("/"),
        client.get(f"/cards/{CARD_ID}"),
        practice,
        feedback,
        client.get("/mistakes"),
    ):
        assert "<script" not in response.text
        assert not re.search(r'(src|href)="(https?:)?//', response.text)
        assert "script-src" not in response.headers["content-security-policy"]
    assert client.get("/static/style.css").status_code == 200


def test_the_language_switch_shows_chinese(client, card):
    page = client.get(f"/cards/{CARD_ID}").text
    assert f'href="/cards/{CARD_ID}?lang=zh"' in page
    zh = client.get(f"/cards/{CARD_ID}", params={"lang": "zh"})
    assert '<html lang="zh-Hans">' in zh.text
    assert "考点" in zh.text
    assert f'href="/cards/{CARD_ID}/points/1/practice?lang=zh"' in zh.text


@pytest.mark.parametrize(
    "path", ["/cards/no-such-card", f"/cards/{CARD_ID}/points/99/practice", "/nowhere"]
)
def test_unknown_pages_are_404_pages_with_a_message(client, path):
    response = client.get(path)
    assert response.status_code == 404
    assert response.headers["content-type"].startswith("text/html")
    assert alert(response.text)


def test_bad_query_values_are_4xx_pages_not_errors(client):
    response = client.get(PRACTICE.format(point=1), params={"seed": "abc"})
    assert response.status_code == 422 and "seed" in alert(response.text)


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


def test_the_card_page_shows_recorded_demo_results(tmp_path, db_url, cards):
    with demo_client(tmp_path, db_url, cards, json.dumps(DEMO)) as client:
        page = client.get(f"/cards/{CARD_ID}").text
        assert '<table class="results">' in page
        assert "7 MB" in page and "4.5 MB" in page and "2,000,000" in page
        assert "gloo" in page
        api = client.get(f"/api/v1/cards/{CARD_ID}").json()
        assert api["demo"]["results"]["world_size"] == 4


@pytest.mark.parametrize(
    "content", ["{not json", "[]", '{"results": "nope"}', '{"results": [1, {"stage": 2}]}']
)
def test_malformed_demo_results_never_break_the_card_page(tmp_path, db_url, cards, content):
    with demo_client(tmp_path, db_url, cards, content) as client:
        assert client.get(f"/cards/{CARD_ID}").status_code == 200


# --- practising -------------------------------------------------------------------------------


def test_practice_page_is_a_form_with_a_csrf_token_and_changes_nothing(client, app, card):
    last = card.points[-1].number
    response = practise(client, point=last, seed=77)
    assert response.template.name == "practice.html"
    fields = form_fields(response.text)
    assert {"csrf_token", "token", "client_answer_id"} <= set(fields)
    variant = generate_for_point(card, last, 77)
    assert response.text.count('type="radio" name="choice_id"') == len(variant.choices)
    assert COOKIE_NAME in response.cookies
    client.get(f"/cards/{CARD_ID}/practice")
    client.get("/mistakes")
    assert attempts(app) == 0


def test_answering_shows_feedback_with_the_pitfall_and_the_worked_solution(client, app, card):
    page = practise(client, point=1, seed=2024)
    variant = generate_for_point(card, 1, 2024)
    wrong = wrong_choice(card, 1, 2024)
    response = submit(client, page, wrong.id)
    assert response.status_code == 200 and response.template.name == "feedback.html"
    context = response.context
    assert context["grade"].correct is False
    assert context["chosen"].id == wrong.id and context["correct"].id == variant.correct_choice_id
    text = html.unescape(response.text)
    assert "Not quite" in text
    assert wrong.pitfall.title.en.split("$")[0] in text
    assert len(re.findall(r"<li>", response.text.split('class="solution"')[1])) == len(
        variant.solution
    )
    assert f'href="/cards/{CARD_ID}/points/1/practice"' in response.text  # Next question
    assert attempts(app) == 1


def test_a_right_answer_says_so(client, card):
    last = card.points[-1].number
    page = practise(client, point=last, seed=5)
    response = submit(client, page, generate_for_point(card, last, 5).correct_choice_id)
    assert response.context["grade"].correct is True
    assert 'class="verdict right"' in response.text


def test_whole_card_practice_keeps_drawing_random_points(client, card):
    response = client.get(f"/cards/{CARD_ID}/practice", params={"seed": 3})
    assert response.status_code == 200
    assert form_fields(response.text)["mode"] == "card"
    feedback = submit(client, response, "a")
    assert f'href="/cards/{CARD_ID}/practice"' in feedback.text


@pytest.mark.parametrize("csrf", [None, "", "wrong-token"])
def test_a_post_without_the_right_csrf_token_is_403_and_stores_nothing(client, app, csrf):
    page = practise(client)
    response = submit(client, page, "a", csrf_token=csrf)
    assert response.status_code == 403
    assert "security token" in alert(response.text)
    assert attempts(app) == 0


def test_a_post_from_a_browser_without_the_session_cookie_is_403(client, app):
    page = practise(client)
    client.cookies.clear()
    assert submit(client, page, "a").status_code == 403
    assert attempts(app) == 0


def test_submitting_without_a_choice_shows_the_question_again(client, app):
    page = practise(client, seed=9)
    response = submit(client, page, None)
    assert response.status_code == 422 and response.template.name == "practice.html"
    assert "Pick one" in alert(response.text)
    assert form_fields(response.text)["token"] == form_fields(page.text)["token"]
    assert attempts(app) == 0


def test_bad_answers_get_4xx_pages(client, app):
    page = practise(client)
    assert submit(client, page, "z").status_code == 422
    assert submit(client, page, "a", token="tampered").status_code == 400
    assert attempts(app) == 0


def test_submitting_the_same_form_twice_records_one_attempt(client, app):
    page = practise(client, seed=10)
    first, second = submit(client, page, "b"), submit(client, page, "b")
    assert first.status_code == second.status_code == 200
    assert attempts(app) == 1


# --- the learner and their mistakes -----------------------------------------------------------


def test_the_cookie_keeps_the_learner_across_requests(client, app, card):
    for seed in (1, 2):
        submit(client, practise(client, seed=seed), wrong_choice(card, 1, seed).id)
    with app.state.sessionmaker() as session:
        assert session.scalar(select(func.count(func.distinct(Attempt.learner_id)))) == 1
    mistakes = client.get("/mistakes")
    assert len(mistakes.context["mistakes"]) == 2


def test_my_mistakes_lists_wrong_attempts_and_counts_per_pitfall(client, card):
    chosen = []
    last = card.points[-1].number
    for point, seed in ((1, 11), (1, 11), (last, 12)):
        wrong = wrong_choice(card, point, seed)
        submit(client, practise(client, point=point, seed=seed), wrong.id)
        chosen.append(wrong)
    submit(
        client,
        practise(client, point=last, seed=13),
        generate_for_point(card, last, 13).correct_choice_id,
    )

    response = client.get("/mistakes")
    assert response.status_code == 200 and response.template.name == "mistakes.html"
    mistakes = response.context["mistakes"]
    assert len(mistakes) == 3
    assert mistakes[0].stem == generate_for_point(card, last, 12).stem
    assert mistakes[0].pitfall_title == chosen[2].pitfall.title
    counts = {(c.pitfall_id, c.count) for c in response.context["counts"]}
    assert (chosen[0].pitfall.id, 2) in counts
    text = html.unescape(response.text)
    assert "Pitfalls you fell for" in text and "2×" in text
    assert "UTC" in text


def test_another_browser_has_its_own_mistakes(client, app, card):
    submit(client, practise(client, seed=1), wrong_choice(card, 1, 1).id)
    with TestClient(app) as stranger:
        assert stranger.get("/mistakes").context["mistakes"] == []


def test_mistakes_survive_a_restart(client, settings, cards, card):
    submit(client, practise(client, seed=21), wrong_choice(card, 1, 21).id)
    cookie = client.cookies.get(COOKIE_NAME)
    client.close()

    with TestClient(create_app(settings, cards=cards)) as restarted:
        restarted.cookies.set(COOKIE_NAME, cookie)
        mistakes = restarted.get("/mistakes").context["mistakes"]
        assert [m.seed for m in mistakes] == [21]


def test_a_tampered_session_cookie_is_a_new_guest(client, card):
    submit(client, practise(client, seed=1), wrong_choice(card, 1, 1).id)
    client.cookies.set(COOKIE_NAME, "forged.value")
    response = client.get("/mistakes")
    assert response.status_code == 200 and response.context["mistakes"] == []


def test_the_session_cookie_is_httponly_lax_and_secure_when_configured(tmp_path, db_url, cards):
    with TestClient(create_app(make_settings(tmp_path, db_url), cards=cards)) as plain:
        cookie = plain.get(PRACTICE.format(point=1)).headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
    settings = make_settings(tmp_path, db_url, cookie_secure=True)
    with TestClient(create_app(settings, cards=cards), base_url="https://testserver") as secure:
        assert "Secure" in secure.get(PRACTICE.format(point=1)).headers["set-cookie"]


def test_reading_pages_sets_no_cookie(client):
    assert "set-cookie" not in client.get("/").headers
    assert "set-cookie" not in client.get(f"/cards/{CARD_ID}").headers


# --- security: headers, links, markup, cookies, ownership, odd input -------------------------


def test_every_response_carries_the_security_headers(client):
    practise(client)  # a guest session, so the POST below reaches the CSRF check
    responses = [
        client.get("/"),
        practise(client),
        client.get("/nowhere"),
        client.post("/answers", data={}),  # 403, no CSRF token
        client.get("/static/style.css"),
        client.get("/api/v1/cards"),
        client.get("/api/v1/nowhere"),
        client.get("/openapi.json"),
        client.get("/healthz"),
    ]
    for response in responses:
        csp = response.headers["content-security-policy"]
        assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp, response.url
        assert "script-src" not in csp and "unsafe" not in csp
        assert response.headers["x-content-type-options"] == "nosniff"
        assert response.headers["referrer-policy"] == "same-origin"


def test_the_docs_page_may_run_only_its_local_bundle_and_its_own_inline_script(client):
    import base64
    import hashlib

    docs = client.get("/docs")
    assert docs.status_code == 200
    csp = docs.headers["content-security-policy"]
    directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
    inline = re.findall(r"<script>(.*?)</script>", docs.text, re.DOTALL)
    assert inline
    for script in inline:
        digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in directives["script-src"]
    assert "'self'" in directives["script-src"] and "unsafe" not in directives["script-src"]
    assert directives["default-src"] == "'none'" and directives["frame-ancestors"] == "'none'"
    assert directives["connect-src"] == "'self'"  # it fetches /openapi.json
    for asset in re.findall(r'(?:src|href)="([^"]+)"', docs.text):
        assert asset.startswith("/docs-assets/") and client.get(asset).status_code == 200


@pytest.mark.parametrize("path", ["/%2F%2Fevil.example/x", "/%2Fevil.example", "/%5Cevil.example"])
def test_the_language_switch_never_links_to_another_site(client, path):
    response = client.get(path)
    assert response.status_code == 404
    switch = html.unescape(re.search(r'class="lang" href="([^"]*)"', response.text).group(1))
    assert switch.startswith("/") and not switch.startswith(("//", "/\\"))
    assert "lang=zh" in switch


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
    from app.web.render import latex_to_mathml, render_inline

    for latex in (r"\href{javascript:alert(1)}{x}", r"\style{color:red}{x}"):
        rendered = str(render_inline(f"${latex}$"))
        assert rendered.startswith('<code class="latex">'), rendered
        assert "href=" not in rendered and "style=" not in rendered
    assert str(latex_to_mathml(r"\frac{16\Psi}{N_d}")).startswith("<math")


def test_the_session_cookie_is_small_and_secure_in_production(tmp_path, db_url, cards):
    settings = make_settings(tmp_path, db_url, environment="production")
    with TestClient(create_app(settings, cards=cards), base_url="https://testserver") as prod:
        cookie = prod.get(PRACTICE.format(point=1)).headers["set-cookie"]
    assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    assert len(cookie) < 400  # far below the 4096 bytes browsers keep


@pytest.mark.parametrize(
    "value", [b"x" * 8000, b"\xc3\xa9" * 2000, b"e30.AAAA", b"..", b'"quoted"', b"a.b.c.d"]
)
def test_an_oversized_or_garbled_session_cookie_is_a_new_guest(client, app, value):
    cookie = [(b"cookie", COOKIE_NAME.encode() + b"=" + value)]
    page = client.get(PRACTICE.format(point=1), params={"seed": 1}, headers=cookie)
    assert page.status_code == 200 and COOKIE_NAME in page.headers["set-cookie"]
    # The form of that page does not post for the old (garbled) cookie.
    fields = {**form_fields(page.text), "choice_id": "a"}
    assert client.post("/answers", data=fields, headers=cookie).status_code == 403
    assert attempts(app) == 0


def test_another_browser_reusing_a_client_answer_id_learns_nothing(client, app, card):
    page = practise(client, seed=31)
    wrong = wrong_choice(card, 1, 31).id
    assert submit(client, page, wrong).status_code == 200
    with TestClient(app) as stranger:
        own = form_fields(practise(stranger, seed=31).text)
        reuse = {**own, "client_answer_id": form_fields(page.text)["client_answer_id"]}
        response = stranger.post("/answers", data={**reuse, "choice_id": wrong})
        assert response.status_code == 409
        assert "client_answer_id" in alert(response.text) and "Not quite" not in response.text
        assert stranger.get("/mistakes").context["mistakes"] == []
    assert attempts(app) == 1


@pytest.mark.parametrize(
    "changes",
    [
        {"choice_id": "\u202ea"},
        {"choice_id": "ａ"},  # fullwidth a
        {"choice_id": "a\x00"},
        {"choice_id": "a" * 100_000},
        {"lang": "\u0000zh", "mode": "\U0001f600" * 1000},
        {"token": "\u202e" * 5000},
        {"client_answer_id": "\u00e9" * 100_000},
        {"csrf_token": "\U0001f600" * 100_000},
    ],
)
def test_odd_form_fields_are_4xx_never_500(app, changes):
    with TestClient(app, raise_server_exceptions=False) as browser:
        page = practise(browser, seed=4)
        response = submit(browser, page, **{"choice_id": "a", **changes})
        assert 400 <= response.status_code < 500
        assert response.headers["content-type"].startswith("text/html")
