"""Exports reopened: the .apkg's SQLite collection and the Moodle XML, checked against variants
regenerated here with ``generate``; guids stable across exports; the instructor-only API route and
the CLI command."""

from __future__ import annotations

import io
import json
import re
import sqlite3
import xml.etree.ElementTree as ET
import zipfile
from html.parser import HTMLParser
from pathlib import Path

import pytest

from app.auth.service import register
from app.authoring.exports import export_card
from app.cli import main as cli_main
from app.domain.export_plan import export_seeds
from app.domain.generation import generate
from tests.conftest import CARDS_DIR

API = "/api/v1"
PASSWORD = "correct horse battery"
_MATH = re.compile(r"(?<!\\)\$(?!\s)(.+?)(?<!\\)\$", re.DOTALL)


# --- helpers, written independently of the exporters ------------------------------------------


def mathjax(text: str) -> str:
    """``$x$`` → ``\\(x\\)``, as the exports must write it."""
    out = _MATH.sub(lambda m: "\\(" + m.group(1).strip() + "\\)", text)
    return out.replace("\\$", "$")


def flat(text: str) -> str:
    return " ".join(text.split())


class _Text(HTMLParser):
    BLOCKS = {"p", "li", "ul", "ol", "h4", "div", "hr", "br"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)

    def handle_starttag(self, tag, attrs) -> None:
        if tag in self.BLOCKS:
            self.parts.append(" ")

    def handle_endtag(self, tag) -> None:
        if tag in self.BLOCKS:
            self.parts.append(" ")


def html_text(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    parser.close()
    return flat("".join(parser.parts))


def want(text: str) -> str:
    return flat(mathjax(text))


def open_apkg(content: bytes, tmp_path: Path) -> sqlite3.Connection:
    with zipfile.ZipFile(io.BytesIO(content)) as archive:
        names = archive.namelist()
        assert "media" in names and json.loads(archive.read("media")) == {}
        collection = next(n for n in ("collection.anki21", "collection.anki2") if n in names)
        path = tmp_path / f"{len(list(tmp_path.iterdir()))}-{collection}"
        path.write_bytes(archive.read(collection))
    return sqlite3.connect(path)


def notes(connection: sqlite3.Connection) -> list[dict]:
    (models_json,) = connection.execute("SELECT models FROM col").fetchone()
    models = json.loads(models_json)
    rows = connection.execute("SELECT guid, mid, tags, flds FROM notes ORDER BY id").fetchall()
    out = []
    for guid, mid, tags, flds in rows:
        model = models[str(mid)]
        names = [f["name"] for f in sorted(model["flds"], key=lambda f: f["ord"])]
        fields = dict(zip(names, flds.split("\x1f"), strict=True))
        template_id = tags.split()[3]
        seed = int(re.search(r"seed (\d+)$", fields["Source"]).group(1))
        out.append(
            {"guid": guid, "tags": tags.split(), "fields": fields, "model": model}
            | {"template_id": template_id, "seed": seed}
        )
    return out


def expected_count(card, variants: int) -> int:
    return sum(len(export_seeds(card, t, variants)) for t in card.templates())


# --- Anki -------------------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_apkg_notes_hold_the_question_on_the_front_and_the_explanations_on_the_back(
    card, tmp_path, lang
):
    export = export_card(card, "apkg", lang, 3)
    assert export.filename == f"{card.id}-{lang}.apkg"
    found = notes(open_apkg(export.content, tmp_path))
    assert len(found) == expected_count(card, 3) == 3 * len(card.templates())

    model = found[0]["model"]
    (template,) = model["tmpls"]
    assert "{{Question}}" in template["qfmt"]
    for name in ("Answer", "Pitfalls", "Solution"):  # on the back only
        assert "{{" + name + "}}" in template["afmt"] and name not in template["qfmt"]

    seen_templates = set()
    for note in found:
        seen_templates.add(note["template_id"])
        variant = generate(card, card.template(note["template_id"]), note["seed"])
        fields = note["fields"]
        front = html_text(fields["Question"])
        assert want(variant.stem.get(lang)) in front
        for choice in variant.choices:
            assert f"{choice.id}) {want(choice.text.get(lang))}" in front
        key = variant.choice(variant.correct_choice_id)
        assert f"{key.id}) {want(key.text.get(lang))}" in html_text(fields["Answer"])
        back_pitfalls = html_text(fields["Pitfalls"])
        wrong = [c for c in variant.choices if not c.correct]
        assert len(wrong) == len(variant.choices) - 1
        for choice in wrong:
            assert want(choice.explanation.get(lang)) in back_pitfalls
            assert want(choice.pitfall.title.get(lang)) in back_pitfalls
        solution = html_text(fields["Solution"])
        for step in variant.solution:
            assert want(step.get(lang)) in solution
        assert "$" not in front + back_pitfalls + solution  # every formula is \( ... \)
        assert f"v{variant.id.template_version}" in fields["Source"]
        assert {"infracards", card.id, variant.id.point, variant.id.template_id} <= set(
            note["tags"]
        )
    assert seen_templates == {t.id for t in card.templates()}


def test_anki_guids_are_stable_across_exports_and_distinct_per_variant_and_language(card, tmp_path):
    def guids(lang, variants, timestamp):
        export = export_card(card, "apkg", lang, variants, timestamp=timestamp)
        return {
            (n["template_id"], n["seed"]): n["guid"]
            for n in notes(open_apkg(export.content, tmp_path))
        }

    first = guids("en", 3, 1_700_000_000)
    again = guids("en", 3, 1_800_000_000)  # a later export (newer modification times)
    assert first == again
    assert len(set(first.values())) == len(first)
    more = guids("en", 5, 1_800_000_000)  # more variants keep the first ones and their guids
    assert first.items() <= more.items() and len(more) == expected_count(card, 5)
    chinese = guids("zh", 3, 1_700_000_000)
    assert chinese.keys() == first.keys() and not set(chinese.values()) & set(first.values())


def test_the_fixed_variants_are_distinct_questions(card):
    for template in card.templates():
        seeds = export_seeds(card, template, 5)
        assert seeds == sorted(seeds) or template.domain_size() < 5
        assert seeds[:3] == export_seeds(card, template, 3)
        shown = {
            (
                tuple(sorted(v.params.items())),
                frozenset(c.pitfall_id for c in v.choices),
            )
            for v in (generate(card, template, s) for s in seeds)
        }
        assert len(shown) == len(seeds) == 5
        if template.domain_size() >= 5:
            params = {tuple(sorted(generate(card, template, s).params.items())) for s in seeds}
            assert len(params) == 5


# --- Moodle XML -------------------------------------------------------------------------------


def moodle_questions(content: bytes) -> tuple[ET.Element, list[ET.Element]]:
    root = ET.fromstring(content)
    assert root.tag == "quiz"
    category, *questions = root.findall("question")
    assert category.get("type") == "category"
    assert category.findtext("category/text") == "$course$/top/infracards/zero-memory-offload"
    assert all(q.get("type") == "multichoice" for q in questions)
    return root, questions


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_moodle_xml_one_right_answer_and_per_answer_feedback(card, lang):
    export = export_card(card, "moodle", lang, 2)
    assert export.filename == f"{card.id}-{lang}.xml"
    _, questions = moodle_questions(export.content)
    assert len(questions) == expected_count(card, 2)
    idnumbers = set()
    for question in questions:
        template_id, seed = re.fullmatch(
            r".* · \d+\. (\S+) · seed (\d+)", question.findtext("name/text")
        ).groups()
        variant = generate(card, card.template(template_id), int(seed))
        idnumbers.add(question.findtext("idnumber"))
        assert question.findtext("single") == "true"
        assert question.findtext("shuffleanswers") == "false"
        assert question.findtext("answernumbering") == "abc"
        assert question.find("questiontext").get("format") == "html"
        stem = html_text(question.findtext("questiontext/text"))
        assert stem == want(variant.stem.get(lang))
        assert "$" not in stem

        answers = question.findall("answer")
        assert [html_text(a.findtext("text")) for a in answers] == [
            want(c.text.get(lang)) for c in variant.choices
        ]  # the service's order: letters a, b, c ... match
        right = [a for a in answers if a.get("fraction") == "100"]
        assert len(right) == 1
        assert all(a.get("fraction") in ("0", "100") for a in answers)
        key = variant.choice(variant.correct_choice_id)
        assert html_text(right[0].findtext("text")) == want(key.text.get(lang))
        key_feedback = html_text(right[0].findtext("feedback/text"))
        incorrect = html_text(question.findtext("incorrectfeedback/text"))
        for step in variant.solution:
            assert want(step.get(lang)) in key_feedback and want(step.get(lang)) in incorrect
        for answer, choice in zip(answers, variant.choices, strict=True):
            if choice.correct:
                continue
            assert answer.get("fraction") == "0"
            assert html_text(answer.findtext("feedback/text")) == want(choice.explanation.get(lang))
    assert len(idnumbers) == len(questions)


def test_moodle_xml_keeps_cdata_safe_and_is_well_formed_for_every_variant_count(card):
    for variants in (1, 4):
        _, questions = moodle_questions(export_card(card, "moodle", "en", variants).content)
        assert len(questions) == expected_count(card, variants)


HEADINGS = {
    "en": {
        "answer": "Answer:",
        "pitfalls": "Why the other choices are wrong",
        "solution": "Worked solution",
        "source": "Source: ",
        "correct": "Correct.",
        "incorrect": "Not quite: see the worked solution.",
    },
    "zh": {
        "answer": "答案：",
        "pitfalls": "其他选项错在哪里",
        "solution": "解答过程",
        "source": "来源：",
        "correct": "回答正确。",
        "incorrect": "不对，请看解答过程。",
    },
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_exports_headings_and_feedback_are_in_the_chosen_language(card, tmp_path, lang):
    words, other = HEADINGS[lang], HEADINGS["zh" if lang == "en" else "en"]
    _, questions = moodle_questions(export_card(card, "moodle", lang, 1).content)
    for question in questions:
        assert html_text(question.findtext("correctfeedback/text")) == words["correct"]
        incorrect = html_text(question.findtext("incorrectfeedback/text"))
        assert incorrect.startswith(f"{words['incorrect']} {words['solution']} ")
        assert other["incorrect"] not in incorrect
    connection = open_apkg(export_card(card, "apkg", lang, 1).content, tmp_path)
    for note in notes(connection):
        fields = {name: html_text(value) for name, value in note["fields"].items()}
        assert fields["Answer"].startswith(words["answer"])
        assert fields["Solution"].startswith(words["solution"])
        assert fields["Source"].startswith(f"{words['source']}{card.id} / ")
        if fields["Pitfalls"]:
            assert fields["Pitfalls"].startswith(words["pitfalls"])
        assert not any(
            other[k] in fields[f] for k, f in [("pitfalls", "Pitfalls"), ("solution", "Solution")]
        )


def test_bad_format_and_variant_counts_are_refused(card):
    from app.domain.export_plan import ExportError

    with pytest.raises(ExportError, match="unknown export format"):
        export_card(card, "docx", "en", 2)
    for variants in (0, 21):
        with pytest.raises(ExportError, match="1 to 20") as refused:
            export_card(card, "moodle", "en", variants)
        assert refused.value.text.get("zh") == f"变体数必须在 1 到 20 之间，收到的是 {variants}"


# --- the API route ----------------------------------------------------------------------------


def instructor_auth(app, client) -> dict[str, str]:
    with app.state.sessionmaker() as db:
        register(db=db, email="teach@example.com", password=PASSWORD, role="instructor")
        db.commit()
    response = client.post(
        f"{API}/auth/token",
        json={"email": "teach@example.com", "password": PASSWORD, "device_name": "laptop"},
    )
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


def test_export_route_is_for_instructors_only(app, client, card, tmp_path):
    url = f"{API}/instructor/cards/{card.id}/export"
    assert client.get(url, params={"format": "apkg"}).status_code == 401
    learner = {"Authorization": f"Bearer {client.post(f'{API}/learners').json()['access_token']}"}
    refused = client.get(url, params={"format": "apkg"}, headers=learner)
    assert refused.status_code == 403 and refused.json()["code"] == "instructor_only"
    assert refused.headers["content-type"].startswith("application/problem+json")
    # a learner learns nothing about cards or parameters either
    assert (
        client.get(f"{API}/instructor/cards/nope/export?format=docx", headers=learner).status_code
        == 403
    )

    teacher = instructor_auth(app, client)
    apkg = client.get(url, params={"format": "apkg", "lang": "zh", "variants": 2}, headers=teacher)
    assert apkg.status_code == 200, apkg.text
    assert apkg.headers["content-disposition"] == f'attachment; filename="{card.id}-zh.apkg"'
    found = notes(open_apkg(apkg.content, tmp_path))
    assert len(found) == expected_count(card, 2)
    first = found[0]
    variant = generate(card, card.template(first["template_id"]), first["seed"])
    assert want(variant.stem.zh) in html_text(first["fields"]["Question"])

    moodle = client.get(url, params={"format": "moodle", "variants": 1}, headers=teacher)
    assert moodle.status_code == 200
    assert moodle.headers["content-type"].startswith("application/xml")
    _, questions = moodle_questions(moodle.content)
    assert len(questions) == len(card.templates())

    default = client.get(url, params={"format": "moodle"}, headers=teacher)
    assert len(moodle_questions(default.content)[1]) == expected_count(card, 5)

    for params in ({"format": "docx"}, {}, {"format": "apkg", "variants": 0}):
        bad = client.get(url, params=params, headers=teacher)
        assert bad.status_code == 422, params
        assert bad.json()["code"] == "invalid_request"
    assert (
        client.get(url, params={"format": "apkg", "lang": "fr"}, headers=teacher).status_code == 422
    )
    missing = client.get(f"{API}/instructor/cards/nope/export?format=apkg", headers=teacher)
    assert missing.status_code == 404 and missing.json()["code"] == "card_not_found"


# --- the CLI ----------------------------------------------------------------------------------


def test_cli_writes_the_files_and_refuses_bad_input_in_one_line(card, tmp_path, capsys):
    out = tmp_path / "deck.apkg"
    args = ["export-questions", "--card", card.id, "--cards-dir", str(CARDS_DIR)]
    assert cli_main([*args, "--format", "apkg", "--out", str(out), "--variants", "2"]) == 0
    assert "wrote" in capsys.readouterr().out
    assert len(notes(open_apkg(out.read_bytes(), tmp_path))) == expected_count(card, 2)

    xml_out = tmp_path / "questions.xml"
    assert cli_main([*args, "--format", "moodle", "--out", str(xml_out), "--lang", "zh"]) == 0
    assert len(moodle_questions(xml_out.read_bytes())[1]) == expected_count(card, 5)
    capsys.readouterr()

    bad = [
        (["--format", "docx", "--out", str(out)], "unknown export format 'docx'"),
        (["--format", "apkg", "--out", str(out), "--lang", "fr"], "unknown language 'fr'"),
        (["--format", "apkg", "--out", str(out), "--variants", "x"], "whole number"),
        (["--format", "apkg", "--out", str(out), "--variants", "0"], "1 to 20"),
        (["--format", "apkg", "--out", str(tmp_path / "no" / "such" / "d.apkg")], "cannot write"),
    ]
    for extra, message in bad:
        assert cli_main([*args, *extra]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: ") and message in err and err.count("\n") == 1, err
        assert "Traceback" not in err
    unknown = ["export-questions", "--card", "nope", "--format", "apkg", "--out", str(out)]
    assert cli_main([*unknown, "--cards-dir", str(CARDS_DIR)]) == 1
    assert "unknown card 'nope'" in capsys.readouterr().err
