"""Importing Moodle XML multichoice questions into a draft: each single-answer question becomes a
statement template (the 100 % answer the key, each wrong answer a pitfall explained by its
feedback), other questions are listed with the reason they were skipped, and a hostile file is a
400, never an expansion or a 500. Our own Moodle export imports back to the same questions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_authoring import instructor_headers, learner_headers

from app.authoring import service
from app.authoring.exports import export_card
from app.domain.export_plan import export_seeds
from app.domain.generation import generate
from app.domain.moodle_import import MoodleImportError, read_moodle_xml

API = "/api/v1"
KV = json.loads((Path(__file__).parent / "cards_fixtures" / "kv_cache_card.json").read_text())

BANK = b"""<?xml version="1.0" encoding="UTF-8"?>
<quiz>
  <question type="category"><category><text>$course$/top/Memory</text></category></question>
  <question type="multichoice">
    <name><text>Adam states</text></name>
    <questiontext format="html"><text><![CDATA[<p>How many bytes per parameter do
      <strong>Adam's</strong> two fp32 moments take?</p><p>Count \\(m\\) &amp; \\(v\\).</p>]]></text></questiontext>
    <generalfeedback format="html"><text><![CDATA[<p>Two moments of 4 bytes: 8.</p>]]></text></generalfeedback>
    <single>true</single>
    <answer fraction="100" format="html"><text>8 bytes</text><feedback><text>Right.</text></feedback></answer>
    <answer fraction="0" format="html"><text>4 bytes</text>
      <feedback format="html"><text><![CDATA[<p>That is one moment.</p>]]></text></feedback></answer>
    <answer fraction="0" format="html"><text>12 bytes</text>
      <feedback><text>That adds the master weights.</text></feedback></answer>
    <answer fraction="0" format="html"><text>16 bytes</text>
      <feedback><text>That is all the model states.</text></feedback></answer>
  </question>
  <question type="multichoice">
    <name><text>Too few</text></name>
    <questiontext format="html"><text>Two choices only?</text></questiontext>
    <single>true</single>
    <answer fraction="100"><text>Yes</text></answer>
    <answer fraction="0"><text>No</text></answer>
  </question>
  <question type="multichoice">
    <name><text>Several right</text></name>
    <questiontext format="html"><text>Pick all</text></questiontext>
    <single>false</single>
    <answer fraction="50"><text>A</text></answer><answer fraction="50"><text>B</text></answer>
    <answer fraction="0"><text>C</text></answer><answer fraction="0"><text>D</text></answer>
  </question>
  <question type="shortanswer">
    <name><text>Typed</text></name>
    <questiontext format="html"><text>Type it</text></questiontext>
    <answer fraction="100"><text>8</text></answer>
  </question>
</quiz>
"""


def test_a_question_bank_becomes_statement_templates_and_the_rest_is_skipped_with_reasons():
    read = read_moodle_xml(BANK, lang="en", taken={"moodle-adam-states"})
    (template,) = read.templates
    assert template["id"] == "moodle-adam-states-2"  # the taken id is not reused
    assert template["kind"] == "statement"
    assert template["stem"]["en"] == (
        "How many bytes per parameter do Adam's two fp32 moments take?\n\nCount $m$ & $v$."
    )
    assert template["stem"]["zh"] == template["stem"]["en"]  # to translate
    assert template["answer"] == {"en": "8 bytes", "zh": "8 bytes"}
    assert [p["statement"]["en"] for p in template["pitfalls"]] == [
        "4 bytes",
        "12 bytes",
        "16 bytes",
    ]
    assert [p["explanation"]["en"] for p in template["pitfalls"]] == [
        "That is one moment.",
        "That adds the master weights.",
        "That is all the model states.",
    ]
    assert template["solution"] == [
        {"en": "Two moments of 4 bytes: 8.", "zh": "Two moments of 4 bytes: 8."}
    ]
    assert template["choices"] == 4
    skipped = {s.question: s.reason.en for s in read.skipped}
    assert set(skipped) == {"Too few", "Several right", "Typed"}
    assert "at least 3 wrong answers" in skipped["Too few"]
    assert "several right answers" in skipped["Several right"]
    assert "shortanswer" in skipped["Typed"]


def test_our_moodle_export_imports_back_to_the_same_questions(card):
    exported = export_card(card, "moodle", "en", variants=1).content
    read = read_moodle_xml(exported, lang="en")
    assert not read.skipped
    variants = [
        generate(card, template, seed)
        for template in card.templates()
        for seed in export_seeds(card, template, 1)
    ]
    assert len(read.templates) == len(variants)
    for template, variant in zip(read.templates, variants, strict=True):
        key = next(c for c in variant.choices if c.correct)
        assert template["answer"]["en"] == key.text.en
        assert sorted(p["statement"]["en"] for p in template["pitfalls"]) == sorted(
            c.text.en for c in variant.choices if not c.correct
        )
        # the stem's words and math come back as the card wrote them ($...$)
        assert template["stem"]["en"] == variant.stem.en.replace("\\$", "$")


BOMB = b"""<?xml version="1.0"?>
<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;&lol;&lol;&lol;&lol;&lol;&lol;">
<!ENTITY lol3 "&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;&lol2;">]>
<quiz><question type="multichoice"><name><text>&lol3;</text></name></question></quiz>"""


@pytest.mark.parametrize(
    "content", [BOMB, b'<?xml version="1.0"?>\n<!DOCTYPE quiz>\n<quiz></quiz>']
)
def test_a_file_with_a_doctype_is_refused_for_its_doctype_not_as_malformed(content):
    with pytest.raises(MoodleImportError) as refused:
        read_moodle_xml(content, lang="en")
    assert refused.value.text.get("en") == (
        "the file has a document type declaration (DOCTYPE), which an import does not accept: "
        "remove that line, or export the questions from Moodle again"
    )
    assert refused.value.text.get("zh") == (
        "文件含有文档类型声明（DOCTYPE），导入不接受这种文件：请删除那一行，或从 Moodle 重新导出题目"
    )
    with pytest.raises(MoodleImportError) as malformed:
        read_moodle_xml(b"<quiz><question></quiz>", lang="en")
    assert malformed.value.text.get("en") == "this is not a well-formed XML file"


def kv_draft(client, headers) -> None:
    created = client.post(f"{API}/instructor/cards", headers=headers, json=KV)
    assert created.status_code == 201, created.text


def upload(client, headers, content: bytes, **params):
    return client.post(
        f"{API}/instructor/cards/kv-cache/import",
        headers=headers,
        params={"point": "kv-bytes", **params},
        files={"file": ("bank.xml", content, "application/xml")},
    )


def test_the_api_imports_into_a_point_of_the_draft(client, app):
    headers = instructor_headers(client, app)
    kv_draft(client, headers)
    response = upload(client, headers, BANK, language="en")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["imported"] == ["moodle-adam-states"]
    assert {s["question"] for s in body["skipped"]} == {"Too few", "Several right", "Typed"}
    assert body["to_translate"] == ["zh"]
    draft = client.get(f"{API}/instructor/cards/kv-cache/draft", headers=headers).json()
    (point,) = draft["document"]["points"]
    assert [t["id"] for t in point["templates"]] == ["kv-total", "moodle-adam-states"]
    # importing again adds new ids, never overwrites
    again = upload(client, headers, BANK, language="en").json()
    assert again["imported"] == ["moodle-adam-states-2"]
    # the skipped reasons come in the asked language
    zh = upload(client, headers, BANK, language="en", lang="zh").json()
    assert all(any("\u4e00" <= ch <= "\u9fff" for ch in s["reason"]) for s in zh["skipped"])


@pytest.mark.parametrize(
    ("content", "params", "status", "code"),
    [
        (BOMB, {}, 400, "invalid_import"),
        (b"not xml at all", {}, 400, "invalid_import"),
        (b"<html><body/></html>", {}, 400, "invalid_import"),
        (b"<quiz>" + b" " * 2_000_001 + b"</quiz>", {}, 400, "invalid_import"),
        (BANK, {"point": "no-such-point"}, 404, "point_not_found"),
        (BANK, {"language": "fr"}, 422, None),
    ],
)
def test_a_bad_file_or_request_is_a_clear_problem(client, app, content, params, status, code):
    headers = instructor_headers(client, app)
    kv_draft(client, headers)
    response = upload(client, headers, content, **params)
    assert response.status_code == status, response.text
    if code:
        assert response.json()["code"] == code
    draft = client.get(f"{API}/instructor/cards/kv-cache/draft", headers=headers).json()
    assert [t["id"] for t in draft["document"]["points"][0]["templates"]] == ["kv-total"]


def test_only_instructors_import(client, app):
    response = upload(client, learner_headers(client), BANK)
    assert response.status_code in (401, 403)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_dashboard_imports_a_file_and_lists_what_it_skipped(client, app, lang):
    import html

    from test_authoring_web import csrf, kv_draft, log_in

    log_in(client, app)
    client.cookies.set("lang", lang)
    page = kv_draft(client, app)
    assert 'enctype="multipart/form-data"' in page.text and 'name="point"' in page.text
    response = client.post(
        "/instructor/cards/kv-cache/import" + ("?lang=zh" if lang == "zh" else ""),
        data={"csrf_token": csrf(page.text), "point": "kv-bytes", "language": "en"},
        files={"file": ("bank.xml", BANK, "application/xml")},
    )
    assert response.status_code == 200, response.text[:500]
    text = html.unescape(response.text)
    assert "/instructor/cards/kv-cache/templates/moodle-adam-states" in text
    for name in ("Too few", "Several right", "Typed"):
        assert name in text
    if lang == "zh":
        assert "只导入 multichoice 单选题" in text and "已跳过" in text
    else:
        assert "only multichoice questions are imported" in text
    editor = client.get("/instructor/cards/kv-cache/templates/moodle-adam-states")
    assert editor.status_code == 200 and "Adam" in html.unescape(editor.text)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_file_the_dashboard_cannot_import_comes_back_at_the_import_form(client, app, lang):
    """A file that cannot be imported was the error page (a link back to the card); it is the
    card's page again, the reason at the file field, the exam point and language as chosen, and
    the draft unchanged."""
    import html

    from test_authoring_web import csrf, kv_draft, log_in

    log_in(client, app)
    client.cookies.set("infracards_lang", lang)
    page = kv_draft(client, app)
    before = kv_document(app)
    response = client.post(
        "/instructor/cards/kv-cache/import",
        data={"csrf_token": csrf(page.text), "point": "kv-bytes", "language": "zh"},
        files={"file": ("bank.xml", b'<?xml version="1.0"?>\n<!DOCTYPE quiz>\n<quiz></quiz>')},
    )
    assert response.status_code == 400, response.text[:300]
    text = html.unescape(response.text)
    problem = re.search(
        r'<p class="field-problem error" id="import-file-problem"[^>]*>(.*?)</p>', text, re.S
    )
    assert problem, text[:500]
    reason = {
        "en": "the file has a document type declaration (DOCTYPE), which an import does not accept",
        "zh": "文件含有文档类型声明（DOCTYPE），导入不接受这种文件",
    }[lang]
    assert problem[1].startswith("bank.xml") and reason in problem[1]
    assert re.search(r'<option value="kv-bytes" selected>', text)
    assert re.search(r'<option value="zh" lang="zh-Hans" selected>', text)
    assert kv_document(app) == before


def kv_document(app) -> dict:
    with app.state.sessionmaker() as db:
        return service.get_draft(db=db, card_id="kv-cache").document


@pytest.mark.parametrize(
    ("case", "lang", "reason"),
    [
        ("too-large", "en", "the file is larger than 2 MB"),
        ("too-large", "zh", "文件大于 2 MB"),
        (
            "no-room",
            "en",
            "importing the file's 1 question would make the draft too large: the draft has 2"
            " templates;"
            " a draft may have at most 1",
        ),
        ("no-room", "zh", "导入这 1 道题会让草稿超出上限：草稿有 2 个模板；一份草稿最多 1 个"),
    ],
)
def test_an_import_over_a_limit_comes_back_at_the_import_form(
    client, app, monkeypatch, case, lang, reason
):
    """A file over the import's size limit is told the limit in human units (it said '2000000
    bytes'), and an import that would take the draft past its template limit comes back at the
    file field (it was the error page), the exam point and language as chosen."""
    import html

    from test_authoring_web import csrf, kv_draft, log_in

    from app.domain import authoring

    log_in(client, app)
    client.cookies.set("infracards_lang", lang)
    page = kv_draft(client, app)
    before = kv_document(app)
    content = BANK
    if case == "too-large":
        content = b"<quiz>" + b" " * 2_000_001 + b"</quiz>"
    else:
        monkeypatch.setattr(authoring, "MAX_TEMPLATES", 1)
    response = client.post(
        "/instructor/cards/kv-cache/import",
        data={"csrf_token": csrf(page.text), "point": "kv-bytes", "language": "zh"},
        files={"file": ("bank.xml", content)},
    )
    assert response.status_code in (400, 422), response.text[:300]
    text = html.unescape(response.text)
    problem = re.search(
        r'<p class="field-problem error" id="import-file-problem"[^>]*>(.*?)</p>', text, re.S
    )
    assert problem, text[:500]
    assert problem[1].startswith("bank.xml") and reason in problem[1]
    assert re.search(r'<option value="kv-bytes" selected>', text)
    assert re.search(r'<option value="zh" lang="zh-Hans" selected>', text)
    assert kv_document(app) == before
