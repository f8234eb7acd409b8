"""The instructor dashboard's pages: instructor only, every problem shown at its field, the
template form round-trips a template, preview by seed or by parameter values, publishing."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from app.auth.service import LearnerRef, register
from app.authoring import service
from app.models import Learner

CARD = json.loads((Path(__file__).parent / "cards_fixtures" / "kv_cache_card.json").read_text())
PASSWORD = "instructor password"


def csrf(text: str) -> str:
    return html.unescape(re.search(r'name="csrf_token" value="([^"]+)"', text).group(1))


def log_in(client, app, email="prof@example.com", role="instructor"):
    with app.state.sessionmaker() as db:
        register(db=db, email=email, password=PASSWORD, role=role)
    page = client.get("/login")
    client.post(
        "/login", data={"csrf_token": csrf(page.text), "email": email, "password": PASSWORD}
    )


PAGES = [
    "/instructor",
    "/instructor/cards/zero-memory-offload",
    "/instructor/cards/zero-memory-offload/templates/p1-total-16psi",
    "/instructor/cards/zero-memory-offload/preview?template_id=p1-total-16psi",
    "/instructor/cards/zero-memory-offload/diff?from=1&to=2",
    "/instructor/check-formula?card_id=zero-memory-offload&text=psi",
]


@pytest.mark.parametrize("role", [None, "learner"])
def test_dashboard_pages_are_for_instructors_only(client, app, role):
    if role:
        log_in(client, app, role=role)
    for path in PAGES:
        response = client.get(path, follow_redirects=False)
        if role is None:  # sent to log in, and back here afterwards (tests/test_login_return.py)
            assert response.status_code == 303, path
            assert response.headers["location"].startswith("/login?next=%2Finstructor"), path
        else:
            assert response.status_code == 403, path
    page = client.get("/")
    assert (
        client.post(
            "/instructor/cards",
            data={"csrf_token": csrf(page.text) if "csrf" in page.text else "x", "card_id": "x"},
        ).status_code
        == 403
    )


def test_the_dashboard_lists_cards_and_the_template_editor_shows_the_template(client, app):
    log_in(client, app)
    assert "zero-memory-offload" in client.get("/instructor").text
    editor = client.get("/instructor/cards/zero-memory-offload/templates/p1-total-16psi").text
    assert (
        'name="answer"' in editor and "data-formula" in editor and "/static/authoring.js" in editor
    )
    preview = client.get(
        "/instructor/cards/zero-memory-offload/preview",
        params={"template_id": "p1-total-16psi", "seed": 4},
    ).text
    assert preview.count('class="tag right"') == 1
    blank_seed = client.get(
        "/instructor/cards/zero-memory-offload/preview",
        params={"template_id": "p1-total-16psi", "seed": ""},
    )
    assert blank_seed.status_code == 200, blank_seed.text[:300]  # the form's blank seed: any
    by_value = client.get(
        "/instructor/cards/zero-memory-offload/preview",
        params={"template_id": "p1-total-16psi", "param.psi": "70B"},
    )
    assert by_value.status_code == 200 and "70B" in html.unescape(by_value.text)


def test_a_formula_is_checked_as_typed_with_its_column(client, app):
    log_in(client, app)
    bad = client.get(
        "/instructor/check-formula",
        params={"card_id": "zero-memory-offload", "names": "psi,n_d", "text": "16*psi + nope"},
    ).json()
    # Columns count from 1: "nope" starts at the 10th character.
    assert bad["ok"] is False and bad["position"] == 10 and "nope" in bad["message"]
    assert bad["where"] == "column 10"
    in_zh = client.get(
        "/instructor/check-formula",
        params={
            "card_id": "zero-memory-offload",
            "names": "psi",
            "text": "psi + nope",
            "lang": "zh",
        },
    ).json()
    assert in_zh["where"] == "第 7 列" and "nope" in in_zh["message"]
    assert not any(word in in_zh["message"] for word in ("unknown", "column"))
    good = client.get(
        "/instructor/check-formula",
        params={"card_id": "zero-memory-offload", "names": "psi,n_d", "text": "zero3 + psi"},
    ).json()
    assert good == {"ok": True, "message": None, "position": None}


def test_saving_a_broken_template_shows_each_problem_at_its_field_then_it_publishes(client, app):
    log_in(client, app)
    page = client.get("/instructor")
    created = client.post(
        "/instructor/cards",
        data={
            "csrf_token": csrf(page.text),
            "card_id": "kv-cache",
            "title_en": "KV cache",
            "title_zh": "KV 缓存",
        },
    )
    assert created.status_code == 200 and "kv-cache" in created.text

    with app.state.sessionmaker() as db:
        me = LearnerRef(
            db.scalars(select(Learner.id).where(Learner.email == "prof@example.com")).one(),
            "account",
            "instructor",
            "prof@example.com",
        )
        service.save_draft(
            db=db,
            actor=me,
            card_id="kv-cache",
            document={**CARD, "points": [{**CARD["points"][0], "templates": []}]},
        )
    template = CARD["points"][0]["templates"][0]
    form = {
        "csrf_token": csrf(created.text),
        "point": "kv-bytes",
        "id": "kv-total",
        "kind": "numeric",
        "params": "\n".join(
            f"{k} = {', '.join(map(str, v['values']))}" for k, v in template["params"].items()
        ),
        "stem_en": template["stem"]["en"],
        "stem_zh": template["stem"]["zh"],
        "answer": "kv * (",
        "unit": "GB",
        "precision": "3",
        "choices": "4",
        "solution_en": template["solution"][0]["en"],
        "solution_zh": template["solution"][0]["zh"],
    }
    for index, pitfall in enumerate(template["pitfalls"]):
        form |= {
            f"pitfall{index}_id": pitfall["id"],
            f"pitfall{index}_title_en": pitfall["title"]["en"],
            f"pitfall{index}_title_zh": pitfall["title"]["zh"],
            f"pitfall{index}_formula": pitfall["formula"],
            f"pitfall{index}_explanation_en": pitfall["explanation"]["en"],
            f"pitfall{index}_explanation_zh": pitfall["explanation"]["zh"],
        }
    saved = client.post("/instructor/cards/kv-cache/templates/new", data=form)
    editor = client.get("/instructor/cards/kv-cache/templates/kv-total")
    assert saved.status_code == 200 and 'class="field-problem error"' in editor.text
    overview = client.get("/instructor/cards/kv-cache").text
    assert "<code>answer</code>" in overview and "disabled" in overview
    fixed = client.post(
        "/instructor/cards/kv-cache/templates/kv-total", data={**form, "answer": "kv"}
    )
    assert fixed.status_code == 200 and "No problems" in fixed.text
    published = client.post(
        "/instructor/cards/kv-cache/publish", data={"csrf_token": csrf(fixed.text)}
    )
    assert published.status_code == 200 and "Version 1" in published.text
    with TestClient(app) as learner:
        assert learner.get("/cards/kv-cache").status_code == 200
        question = learner.get("/cards/kv-cache/points/kv-bytes/practice")
        assert question.status_code == 200 and "KV cache" in html.unescape(question.text)


# --- exports, significant figures, a broken template's preview, the audit log's pages ----------


def me_ref(app, email="prof@example.com") -> LearnerRef:
    with app.state.sessionmaker() as db:
        learner_id = db.scalars(select(Learner.id).where(Learner.email == email)).one()
    return LearnerRef(learner_id, "account", "instructor", email)


def kv_draft(client, app, document=None):
    """A kv-cache draft (``document``: the fixture card by default); the dashboard's page."""
    page = client.get("/instructor")
    client.post(
        "/instructor/cards",
        data={
            "csrf_token": csrf(page.text),
            "card_id": "kv-cache",
            "title_en": "KV cache",
            "title_zh": "KV 缓存",
        },
    )
    with app.state.sessionmaker() as db:
        service.save_draft(db=db, actor=me_ref(app), card_id="kv-cache", document=document or CARD)
    return client.get("/instructor/cards/kv-cache")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_card_page_downloads_the_exports_with_the_session_cookie(client, app, lang):
    from app.authoring.exports import export_published

    signed_out = client.get(
        "/instructor/cards/zero-memory-offload/export?format=apkg", follow_redirects=False
    )
    assert signed_out.status_code == 303 and signed_out.headers["location"].startswith("/login")
    log_in(client, app)
    page = client.get("/instructor/cards/zero-memory-offload", params={"lang": lang})
    links = [html.unescape(h) for h in re.findall(r'href="([^"]*/export\?[^"]*)"', page.text)]
    labels = {
        "en": ["Anki package (English)", "Moodle XML (Chinese)"],
        "zh": ["Anki 卡组（英文）", "Moodle XML（中文）"],
    }[lang]
    assert all(label in page.text for label in labels), labels
    assert {re.search(r"format=(\w+)", h).group(1) for h in links} == {"apkg", "moodle", "qti"}
    assert {re.search(r"language=(\w+)", h).group(1) for h in links} == {"en", "zh"}
    for href in links:
        response = client.get(href)
        assert response.status_code == 200, href
        fmt = re.search(r"format=(\w+)", href).group(1)
        language = re.search(r"language=(\w+)", href).group(1)
        same = export_published(
            app.state.live_catalog.catalog, "zero-memory-offload", fmt, language
        )
        assert response.headers["content-disposition"] == (
            f'attachment; filename="{same.filename}"'
        )
        if fmt == "moodle":  # the Anki package's timestamps differ from one export to the next
            assert response.content == same.content
    bad = client.get("/instructor/cards/zero-memory-offload/export?format=docx")
    assert bad.status_code == 422
    assert client.get("/instructor/cards/nope/export?format=apkg").status_code == 404


def test_significant_figures_are_labelled_and_fewer_than_three_are_refused_at_the_field(
    client, app
):
    log_in(client, app)
    kv_draft(client, app)
    editor = client.get("/instructor/cards/kv-cache/templates/kv-total")
    assert "Significant figures" in editor.text and "Decimals" not in editor.text
    template = CARD["points"][0]["templates"][0]
    form = {
        "csrf_token": csrf(editor.text),
        "point": CARD["points"][0]["slug"],
        "id": "kv-total",
        "kind": "numeric",
        "params": "\n".join(
            f"{k} = {', '.join(map(str, v['values']))}" for k, v in template["params"].items()
        ),
        "stem_en": template["stem"]["en"],
        "stem_zh": template["stem"]["zh"],
        "answer": template["answer"],
        "unit": template["unit"],
        "precision": "2",
        "choices": str(template.get("choices", 4)),
    }
    refused = client.post("/instructor/cards/kv-cache/templates/kv-total", data=form)
    assert refused.status_code == 400
    at_field = re.search(
        r'id="h-precision">.*?</p>(<p class="field-problem error"[^>]*>[^<]*</p>)',
        refused.text,
        re.S,
    )
    assert at_field and "significant figures must be 0" in html.unescape(at_field.group(1))
    assert 'name="precision" type="number" min="0" max="12" value="2"' in refused.text
    with app.state.sessionmaker() as db:
        stored = service.get_draft(db=db, card_id="kv-cache").document
    assert stored["points"][0]["templates"][0]["precision"] == template["precision"]
    in_zh = client.get("/instructor/cards/kv-cache/templates/kv-total", params={"lang": "zh"})
    assert "有效数字位数" in in_zh.text and "整数填 0" in in_zh.text


def test_the_preview_of_a_template_that_does_not_compile_shows_its_problems(client, app):
    log_in(client, app)
    broken = json.loads(json.dumps(CARD))
    broken["points"][0]["templates"][0]["answer"] = "kv * ("
    template_id = broken["points"][0]["templates"][0]["id"]
    kv_draft(client, app, broken)
    for lang in ("en", "zh"):
        page = client.get(
            "/instructor/cards/kv-cache/preview", params={"template_id": template_id, "lang": lang}
        )
        assert page.status_code in (200, 422), page.text[:300]
        assert "<code>answer</code>" in page.text and 'class="problem-list"' in page.text
        assert f"/instructor/cards/kv-cache/templates/{template_id}" in page.text
    unknown = client.get("/instructor/cards/kv-cache/preview", params={"template_id": "nope"})
    assert unknown.status_code == 404


def test_the_audit_log_shows_twenty_entries_a_page_newest_first(client, app):
    log_in(client, app)
    kv_draft(client, app)
    with app.state.sessionmaker() as db:
        for _ in range(23):
            service.save_draft(db=db, actor=me_ref(app), card_id="kv-cache", document=CARD)
    # 25 entries: the creation and 24 saves.
    pages = []
    url = "/instructor/cards/kv-cache"
    while url:
        page = client.get(url)
        audit = re.search(r'<ul class="audit">(.*?)</ul>', page.text, re.S).group(1)
        pages.append(audit.count("<li>"))
        older = re.search(r'<a rel="next" href="([^"]+)"', page.text)
        url = html.unescape(older.group(1)) if older else None
    assert pages == [20, 5]
    assert "Older entries" in client.get("/instructor/cards/kv-cache").text
    zh = client.get("/instructor/cards/kv-cache", params={"lang": "zh"}).text
    assert "较早的记录" in zh
    assert client.get("/instructor/cards/kv-cache?audit_page=0").status_code == 422


@pytest.mark.parametrize(
    ("learners", "lang", "shown"),
    [(1, "en", "(1 learner)"), (19, "en", "(19 learners)"), (19, "zh", "（19 名学员）")],
)
def test_a_count_of_learners_in_the_analytics_chart_takes_its_plural_form(learners, lang, shown):
    from app.domain.analytics import Stats, TemplateAnalytics, facility_discrimination_svg
    from app.web.analytics import learners_counter

    stats = Stats(40, 20, 30, 0.75, -0.2, learners, None, 0)
    svg = facility_discrimination_svg(
        [TemplateAnalytics("t1", "p", stats, (), (), (1,))],
        title="t",
        x_label="x",
        y_label="y",
        learners_text=learners_counter(lang),
    )
    assert html.unescape(svg).count(shown.strip("()（）")) == 1, svg


def test_the_validation_progress_counts_templates_in_their_plural_form():
    from types import SimpleNamespace

    from app.web.authoring.cards import progress_text

    one = progress_text(SimpleNamespace(total=1, done=0))
    assert one.get("en") == "Validating the draft: 0 of 1 template checked…"
    many = progress_text(SimpleNamespace(total=6, done=2))
    assert many.get("en") == "Validating the draft: 2 of 6 templates checked…"
    assert many.get("zh") == "正在校验草稿：已检查 2 / 6 个模板…"


def publish_draft(client, app, document):
    with app.state.sessionmaker() as db:
        service.save_draft(db=db, actor=me_ref(app), card_id="kv-cache", document=document)
        return service.publish(
            db=db, actor=me_ref(app), live=app.state.live_catalog, card_id="kv-cache"
        )


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_version_diff_shows_each_change_before_and_after_and_whether_values_changed(
    client, app, lang
):
    import copy

    log_in(client, app)
    kv_draft(client, app)
    assert publish_draft(client, app, CARD) == 1
    reworded = copy.deepcopy(CARD)
    template = reworded["points"][0]["templates"][0]
    template["stem"]["zh"] = template["stem"]["zh"].replace("有多少", "占多少")
    reworded["points"][0]["title"]["en"] = "How big the KV cache is"
    assert publish_draft(client, app, reworded) == 2
    valued = copy.deepcopy(reworded)
    valued["points"][0]["templates"][0]["pitfalls"][5]["formula"] = "kv*heads/2"
    assert publish_draft(client, app, valued) == 3

    minor = client.get("/instructor/cards/kv-cache/diff", params={"from": 1, "to": 2, "lang": lang})
    assert minor.status_code == 200
    text = html.unescape(minor.text)
    assert {"en": "wording only (minor)", "zh": "仅改措辞（次版本）"}[lang] in text
    assert "(v1 → v1.1)" in text
    # The stem's field with both languages before and after; the exam point's title too.
    assert "<code>stem</code>" in text and CARD["points"][0]["templates"][0]["stem"]["zh"] in text
    assert template["stem"]["zh"] in text
    assert CARD["points"][0]["title"]["en"] in text and "How big the KV cache is" in text
    assert "<code>kv-bytes</code>" in text  # the exam point, named by its slug

    major = html.unescape(
        client.get(
            "/instructor/cards/kv-cache/diff", params={"from": 2, "to": 3, "lang": lang}
        ).text
    )
    assert {"en": "values changed (major)", "zh": "数值有变（主版本）"}[lang] in major
    assert "(v1.1 → v2)" in major
    assert "pitfalls[heads-twice].formula" in major
    assert "<code>kv*heads</code>" in major and "<code>kv*heads/2</code>" in major
    # The reason names the pitfall, the parameters and the values before and after.
    assert "{layers=24, heads=16, head_dim=128, seq=2048, batch=4}" in major


def _text(value):
    return {"en": value, "zh": value}


def register_giveaway_card():
    """A statement template whose key alone has no absolute word (the register family)."""
    wrong = [
        "Only the gradients",
        "Only the fp16 weights",
        "Always activations",
        "Only the weights and the gradients",
        "Always the activations and gradients",
        "Every kind of model state, always",
    ]
    template = {
        "id": "what-zero1-shards",
        "version": 1,
        "kind": "statement",
        "stem": _text("What does ZeRO-1 shard?"),
        "answer": _text("The optimizer states alone"),
        "answer_phrasings": [_text("The optimizer states alone.")],
        "solution": [_text("ZeRO-1 partitions the optimizer states.")],
        "pitfalls": [
            {
                "id": f"p{i}",
                "title": _text(f"p{i}"),
                "statement": _text(t),
                "explanation": _text("no"),
            }
            for i, t in enumerate(wrong)
        ],
    }
    return {
        "id": "kv-cache",
        "version": 1,
        "title": _text("Mini"),
        "definition": _text("d"),
        "use_cases": _text("u"),
        "problems_solved": _text("p"),
        "points": [
            {
                "number": 1,
                "slug": "the-point",
                "title": _text("Point"),
                "explanation": _text("e"),
                "templates": [template],
            }
        ],
    }


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_giveaway_problem_shows_its_family_and_sample_variants_on_the_card_page(
    client, app, lang
):
    log_in(client, app)
    kv_draft(client, app, register_giveaway_card())
    page = client.get("/instructor/cards/kv-cache", params={"lang": lang})
    text = html.unescape(page.text)
    assert {"en": "Gives the key away by its register", "zh": "从语气上泄露了答案"}[lang] in text
    assert "“without absolute words”" in text
    examples = re.findall(r'<div class="cue-example"', text)
    assert 2 <= len(examples) <= 3
    # Each sample marks one key, the key's wording.
    keys = re.findall(r'<li class="key"><strong>([a-d])\.</strong> ([^<]+) <span', text)
    assert len(keys) == len(examples)
    assert {k[1] for k in keys} <= {"The optimizer states alone", "The optimizer states alone."}


def echo_giveaway_card():
    """A numeric template whose stem states the very quantity its key shows (the echo family)."""
    from test_giveaways import echo_template

    card = register_giveaway_card()
    card["params"] = ["w"]
    card["points"][0]["templates"] = [echo_template()]
    return card


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_stem_giving_its_key_is_shown_as_the_echo_of_the_stem(client, app, lang):
    log_in(client, app)
    kv_draft(client, app, echo_giveaway_card())
    text = html.unescape(client.get("/instructor/cards/kv-cache", params={"lang": lang}).text)
    said = {"en": "Gives the key away by its echo of the stem", "zh": "从题干数字上泄露了答案"}
    assert said[lang] in text and "“repeats the stem”" in text
    # Each sample's key is the number its parameters show for the weights.
    samples = re.findall(r'<div class="cue-example".*?</div>', text, re.S)
    assert 2 <= len(samples) <= 3
    for sample in samples:
        weights = re.search(r"<code>w = ([^<]+)</code>", sample).group(1)
        key = re.search(r'<li class="key"><strong>[a-d]\.</strong> ([^<]+) <span', sample)
        assert key.group(1) == weights


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_key_that_alone_repeats_its_stem_is_shown_as_words_shared_with_the_stem(
    client, app, lang
):
    from test_giveaways import stem_words_statements

    log_in(client, app)
    card = register_giveaway_card()
    card["points"][0]["templates"] = [stem_words_statements()]
    kv_draft(client, app, card)
    text = html.unescape(client.get("/instructor/cards/kv-cache", params={"lang": lang}).text)
    said = {
        "en": "Gives the key away by its words shared with the stem",
        "zh": "从与题干共用的词上泄露了答案",
    }
    assert said[lang] in text and "“most words shared with the stem”" in text
    # Each sample marks the key, the one choice that says "optimizer" as the stem does.
    keys = re.findall(r'<li class="key"><strong>([a-d])\.</strong> ([^<]+) <span', text)
    assert keys and {k[1] for k in keys} <= {
        "The optimizer states alone",
        "The optimizer states alone.",
        "The optimizer states alone。",
    }


def test_the_preview_shows_each_pitfalls_side_of_the_key_and_the_editor_states_the_rule(
    client, app
):
    """choices: 4 needs 3 distinct pitfalls below the key and 3 above at every combination:
    the preview lays them out, and flags every combination of a draft that breaks it."""
    import copy

    log_in(client, app)
    kv_draft(client, app)
    editor = client.get("/instructor/cards/kv-cache/templates/kv-total").text
    assert "N − 1 pitfalls of distinct values below the key and N − 1 above it" in editor
    page = html.unescape(
        client.get("/instructor/cards/kv-cache/preview", params={"template_id": "kv-total"}).text
    )
    assert "All 16 parameter combinations checked meet the rule." in page
    assert "The first 12 of 16 combinations" in page
    rows = re.findall(r"<tr(?: class=\"failing\")?>\s*<th scope=\"row\">(.*?)</tr>", page, re.S)
    assert len(rows) == 12
    # The first combination: only-keys is half the KV cache, below it; fp32-bytes twice, above.
    first = " ".join(re.sub(r"<[^>]+>", " ", rows[0]).replace("\xa0", " ").split())
    assert first.startswith("layers=24 heads=16 head_dim=128 seq=2048 batch=4")
    kv = 2 * 2 * 24 * 16 * 128 * 2048 * 4
    assert f"{kv / 2 / 1e9:.3g} GB ↓ below" in first  # only-keys (GB keeps one step of slack)
    assert f"{2 * kv / 1e9:.3g} GB ↑ above" in first  # fp32-bytes
    assert first.endswith("3 / 3")

    # 'queries-too' made equal to 'only-keys' (kv/2): two pitfalls remain above, everywhere.
    broken = copy.deepcopy(CARD)
    broken["points"][0]["templates"][0]["pitfalls"][4]["formula"] = "kv/2"
    kv_draft(client, app, broken)
    page = html.unescape(
        client.get("/instructor/cards/kv-cache/preview", params={"template_id": "kv-total"}).text
    )
    assert "16 parameter combinations of 16 break the rule." in page
    assert page.count('<tr class="failing">') == 16
    assert "3 / 2 · 2 of 3 above" in page
    # The pitfall that merged with another on its side is named in each failing row.
    assert page.count("↓ below · same as only-keys") == 16


def test_the_draft_diff_says_before_publishing_whether_a_template_keeps_its_version(client, app):
    import copy

    log_in(client, app)
    kv_draft(client, app)
    assert publish_draft(client, app, CARD) == 1
    reworded = copy.deepcopy(CARD)
    reworded["points"][0]["templates"][0]["stem"]["en"] += " "
    with app.state.sessionmaker() as db:
        service.save_draft(db=db, actor=me_ref(app), card_id="kv-cache", document=reworded)
    card_page = client.get("/instructor/cards/kv-cache").text
    assert "/instructor/cards/kv-cache/draft/diff" in card_page
    page = html.unescape(client.get("/instructor/cards/kv-cache/draft/diff").text)
    assert "Version 1 → Draft" in page and "(v1 → Draft)" in page
    assert "wording only (minor)" in page
    with app.state.sessionmaker() as db:
        service.save_draft(
            db=db, actor=me_ref(app), card_id="kv-cache", document=value_edit_of(reworded)
        )
    page = html.unescape(client.get("/instructor/cards/kv-cache/draft/diff").text)
    assert "values changed (major)" in page and "pitfall 'heads-twice'" in page
    assert client.get("/instructor/cards/zero-memory-offload/draft/diff").status_code == 404


def value_edit_of(document):
    import copy

    edited = copy.deepcopy(document)
    edited["points"][0]["templates"][0]["pitfalls"][5]["formula"] = "kv*heads/2"
    return edited


def test_an_error_on_the_dashboard_leads_back_to_the_card_and_the_dashboard(client, app):
    """A refusal on an instructor's page linked only 'Back to the cards' (the learners' list)."""
    log_in(client, app, email="ada@example.com", role="learner")
    refused = client.get("/instructor")
    assert refused.status_code == 403 and "Back to the cards" in refused.text
    assert "Back to the dashboard" not in refused.text  # a learner has no dashboard
    client.post("/logout", data={"csrf_token": csrf(client.get("/").text)})
    log_in(client, app)
    card = "/instructor/cards/zero-memory-offload"
    bad = client.get(f"{card}/preview", params={"template_id": "p1-total-16psi", "seed": "x"})
    assert bad.status_code in (400, 422)
    assert f'<a href="{card}">Back to the card</a>' in bad.text
    assert '<a href="/instructor">Back to the dashboard</a>' in bad.text
    missing = client.get(f"{card}/templates/nope", params={"lang": "zh"})
    assert missing.status_code == 404 and "返回讲师后台" in missing.text
    assert "返回卡片" not in missing.text  # the card page may be what is missing
