"""Every field of a card in the dashboard: the card's texts, parameters and formulas, and its exam
points (add, edit, move, remove), each refusal at its field in the page's language; and the same
rules through the API's whole-document draft, where validation reports them at the same fields.

Golden values are written here from the fixture card and the forms' inputs, not computed by the
code under test."""

from __future__ import annotations

import copy
import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from test_authoring import instructor_headers
from test_authoring_web import csrf, log_in, me_ref

from app.authoring import service

API = "/api/v1"
CARD = json.loads((Path(__file__).parent / "cards_fixtures" / "kv_cache_card.json").read_text())
KV = CARD["formulas"][0]


def create(client, card_id="kv-cache"):
    page = client.get("/instructor")
    return client.post(
        "/instructor/cards",
        data={
            "csrf_token": csrf(page.text),
            "card_id": card_id,
            "title_en": "KV cache size",
            "title_zh": "KV 缓存大小",
        },
    )


def draft(app, card_id="kv-cache"):
    with app.state.sessionmaker() as db:
        return service.get_draft(db=db, card_id=card_id).document


def card_form(token, **changes):
    """The card form filled with the fixture card's texts, parameters and formula."""
    form = {"csrf_token": token, "params": ", ".join(CARD["params"])}
    for name in ("title", "definition", "use_cases", "problems_solved"):
        form |= {f"{name}_en": CARD[name]["en"], f"{name}_zh": CARD[name]["zh"]}
    form |= {
        "formula0_id": KV["id"],
        "formula0_title_en": KV["title"]["en"],
        "formula0_title_zh": KV["title"]["zh"],
        "formula0_expr": KV["expr"],
        "formula0_latex": KV["latex"],
        "formula0_unit": "B",
    }
    return form | changes


def field_problems(page: str, field_id: str) -> list[str]:
    """The problems shown right after the input or textarea ``field_id``."""
    found = re.search(
        rf'id="{re.escape(field_id)}"[^>]*>(?:[^<]*</(?:textarea|p)>)?\s*((?:<p class="field-problem[^>]*>.*?</p>)*)',
        page,
        re.S,
    )
    assert found, field_id
    return [html.unescape(re.sub("<[^>]+>", "", p)) for p in re.findall(r"<p.*?</p>", found[1])]


def test_a_new_card_has_no_placeholder_text_and_validation_names_each_missing_one(client, app):
    log_in(client, app)
    created = create(client)
    assert created.status_code == 200
    document = draft(app)
    assert document["title"] == {"en": "KV cache size", "zh": "KV 缓存大小"}
    assert document["definition"] == {"en": "", "zh": ""} and document["points"] == []
    page = html.unescape(created.text)
    for field in ("definition.en", "use_cases.zh", "problems_solved.en"):
        assert f"<code>{field}</code>: must not be empty" in page
    assert "<code>points</code>: needs at least 1 item" in page
    assert "point-1" not in page


def test_the_card_form_saves_texts_parameters_and_formulas_into_the_draft(client, app):
    log_in(client, app)
    create(client)
    form = client.get("/instructor/cards/kv-cache/edit")
    assert form.status_code == 200 and 'name="definition_zh"' in form.text
    saved = client.post("/instructor/cards/kv-cache/edit", data=card_form(csrf(form.text)))
    assert saved.status_code == 200 and saved.url.path == "/instructor/cards/kv-cache"
    document = draft(app)
    for name in ("title", "definition", "use_cases", "problems_solved", "params"):
        assert document[name] == CARD[name], name
    assert document["formulas"] == [{**KV, "unit": "B"}]
    # Shown again as saved, with an empty row for the next formula.
    again = client.get("/instructor/cards/kv-cache/edit").text
    assert f'value="{KV["expr"]}"' in again and 'name="formula1_expr" value=""' in again
    # A formula's fields cleared: it is gone.
    cleared = card_form(csrf(again), formula0_id="", formula0_title_en="", formula0_title_zh="")
    cleared |= {"formula0_expr": "", "formula0_latex": ""}
    client.post("/instructor/cards/kv-cache/edit", data=cleared)
    assert draft(app)["formulas"] == []


@pytest.mark.parametrize(("lang", "reason"), [("en", "must not be empty"), ("zh", "不能为空")])
def test_an_empty_text_is_refused_at_its_field_in_the_page_language(client, app, lang, reason):
    log_in(client, app)
    create(client)
    form = client.get("/instructor/cards/kv-cache/edit")
    refused = client.post(
        f"/instructor/cards/kv-cache/edit?lang={lang}",
        data=card_form(csrf(form.text), definition_zh="  ", title_en=""),
    )
    assert refused.status_code == 422
    assert field_problems(refused.text, "f-definition-zh") == [reason]
    assert field_problems(refused.text, "f-title-en") == [reason]
    assert field_problems(refused.text, "f-definition-en") == []
    # Nothing saved; the form keeps what was typed.
    assert draft(app)["definition"] == {"en": "", "zh": ""}
    assert CARD["use_cases"]["zh"] in html.unescape(refused.text)


def test_a_formula_with_an_unknown_name_is_refused_at_its_column(client, app):
    log_in(client, app)
    create(client)
    token = csrf(client.get("/instructor/cards/kv-cache/edit").text)
    # "2*2*layers*headz": the unknown name starts at the 12th character.
    refused = client.post(
        "/instructor/cards/kv-cache/edit",
        data=card_form(token, formula0_expr="2*2*layers*headz"),
    )
    assert refused.status_code == 422
    shown = field_problems(refused.text, "e-formula0_expr")
    assert len(shown) == 1 and "headz" in shown[0] and "(at column 12)" in shown[0]
    assert draft(app)["formulas"] == []
    # A formula may use the ones above it, not one below.
    later = card_form(
        token,
        formula0_expr="kv2 / 2",
        formula1_id="kv2",
        formula1_title_en="Twice",
        formula1_title_zh="两倍",
        formula1_expr="2*layers",
        formula1_latex="2L",
    )
    refused = client.post("/instructor/cards/kv-cache/edit", data=later)
    assert refused.status_code == 422
    assert "kv2" in field_problems(refused.text, "e-formula0_expr")[0]
    above = later | {"formula0_expr": KV["expr"], "formula1_expr": "kv / 2"}
    assert client.post("/instructor/cards/kv-cache/edit", data=above).status_code == 200
    assert [f["id"] for f in draft(app)["formulas"]] == ["kv", "kv2"]


def test_a_formula_row_needs_its_id_titles_and_latex(client, app):
    log_in(client, app)
    create(client)
    token = csrf(client.get("/instructor/cards/kv-cache/edit").text)
    refused = client.post(
        "/instructor/cards/kv-cache/edit?lang=zh",
        data=card_form(token, formula0_id="", formula0_title_zh="", formula0_latex=""),
    )
    assert refused.status_code == 422
    assert field_problems(refused.text, "fm0-id") == ["必填"]
    assert field_problems(refused.text, "fm0-tzh") == ["不能为空"]
    assert field_problems(refused.text, "fm0-latex") == ["必填"]
    # What only compiling the formulas finds (a unit, an id used twice) is shown above the form.
    for changes, words in (
        ({"formula0_unit": "parsecs"}, "parsecs"),
        (
            {
                "formula1_id": "kv",
                "formula1_title_en": "Again",
                "formula1_title_zh": "又一个",
                "formula1_expr": "layers",
                "formula1_latex": "L",
            },
            "declared twice",
        ),
    ):
        refused = client.post(
            "/instructor/cards/kv-cache/edit?lang=en", data=card_form(token, **changes)
        )
        assert refused.status_code == 422
        top = re.search(
            r'role="status">.*?</p>\s*(<p class="field-problem[^>]*>.*?</p>)', refused.text, re.S
        )
        assert top and words in html.unescape(top[1]), words
    assert draft(app)["formulas"] == []
    bad_param = client.post(
        "/instructor/cards/kv-cache/edit?lang=zh", data=card_form(token, params="layers, 2heads")
    )
    assert bad_param.status_code == 422
    assert field_problems(bad_param.text, "h-card-params") == ["不是合法的名称：'2heads'"]


def test_the_live_check_of_a_card_formula_knows_only_the_names_given(client, app):
    log_in(client, app)
    check = "/instructor/check-formula"
    query = {"card_id": "zero-memory-offload", "names": "psi", "text": "zero3 + psi"}
    assert client.get(check, params=query).json()["ok"] is True  # a template's: card formulas too
    card = client.get(check, params=query | {"scope": "card"}).json()
    assert card["ok"] is False and card["position"] == 1 and "zero3" in card["message"]


# --- exam points -------------------------------------------------------------------------------


def point_form(token, **changes):
    point = CARD["points"][0]
    return {
        "csrf_token": token,
        "slug": point["slug"],
        "title_en": point["title"]["en"],
        "title_zh": point["title"]["zh"],
        "explanation_en": point["explanation"]["en"],
        "explanation_zh": point["explanation"]["zh"],
    } | changes


def test_a_new_exam_point_needs_its_title_and_explanation_in_both_languages(client, app):
    log_in(client, app)
    create(client)
    page = client.get("/instructor/cards/kv-cache/new-point?lang=zh")
    assert page.status_code == 200 and 'name="explanation_zh"' in page.text
    refused = client.post(
        "/instructor/cards/kv-cache/points?lang=zh",
        data=point_form(csrf(page.text), title_zh="", explanation_en=""),
    )
    assert refused.status_code == 422
    assert field_problems(refused.text, "point-title-zh") == ["不能为空"]
    assert field_problems(refused.text, "point-explanation-en") == ["不能为空"]
    assert draft(app)["points"] == []
    added = client.post(
        "/instructor/cards/kv-cache/points?lang=en", data=point_form(csrf(page.text))
    )
    assert added.status_code == 200
    point = CARD["points"][0]
    assert draft(app)["points"] == [
        {
            "number": 1,
            "slug": point["slug"],
            "title": point["title"],
            "explanation": point["explanation"],
            "templates": [],
        }
    ]
    taken = client.post("/instructor/cards/kv-cache/points", data=point_form(csrf(page.text)))
    assert taken.status_code == 409
    assert "kv-bytes" in field_problems(taken.text, "h-point-slug")[0]
    bad_slug = client.post(
        "/instructor/cards/kv-cache/points?lang=en",
        data=point_form(csrf(page.text), slug="KV Bytes"),
    )
    assert bad_slug.status_code == 422
    assert field_problems(bad_slug.text, "h-point-slug") == [
        "an exam point slug is lower-case letters and digits, words joined by single hyphens"
        " (e.g. per-layer-formula)"
    ]


def test_an_exam_point_is_edited_moved_and_removed_only_without_templates(client, app):
    log_in(client, app)
    create(client)
    second = {
        "number": 2,
        "slug": "kv-fit",
        "title": {"en": "Sequences that fit", "zh": "能放下的序列"},
        "explanation": {
            "en": "Free memory over the cache per sequence.",
            "zh": "空闲显存除以每条序列的缓存。",
        },
        "templates": [],
    }
    with app.state.sessionmaker() as db:
        document = {**CARD, "points": [*CARD["points"], second]}
        service.save_draft(db=db, actor=me_ref(app), card_id="kv-cache", document=document)
    page = client.get("/instructor/cards/kv-cache/points/kv-bytes")
    assert page.status_code == 200
    token = csrf(page.text)
    edited = point_form(token, title_en="KV cache bytes", title_zh="KV 缓存字节")
    assert client.post("/instructor/cards/kv-cache/points/kv-bytes", data=edited).status_code == 200
    first = draft(app)["points"][0]
    assert first["title"] == {"en": "KV cache bytes", "zh": "KV 缓存字节"}
    assert [t["id"] for t in first["templates"]] == ["kv-total"]  # its templates kept
    empty = client.post(
        "/instructor/cards/kv-cache/points/kv-bytes", data=point_form(token, title_en=" ")
    )
    assert empty.status_code == 422 and field_problems(empty.text, "point-title-en")
    # Moved down: numbered by position, slugs kept.
    client.post(
        "/instructor/cards/kv-cache/points/kv-bytes/move",
        data={"csrf_token": token, "direction": "down"},
    )
    assert [(p["number"], p["slug"]) for p in draft(app)["points"]] == [
        (1, "kv-fit"),
        (2, "kv-bytes"),
    ]
    # Removing a point its templates still use is refused, saying which templates.
    for lang, words in (("en", "still has templates"), ("zh", "仍有模板")):
        refused = client.post(
            f"/instructor/cards/kv-cache/points/kv-bytes/delete?lang={lang}",
            data={"csrf_token": token},
        )
        assert refused.status_code == 409
        assert words in html.unescape(refused.text) and "kv-total" in refused.text
    assert len(draft(app)["points"]) == 2
    removed = client.post(
        "/instructor/cards/kv-cache/points/kv-fit/delete", data={"csrf_token": token}
    )
    assert removed.status_code == 200
    assert [(p["number"], p["slug"]) for p in draft(app)["points"]] == [(1, "kv-bytes")]
    assert client.get("/instructor/cards/kv-cache/points/nope").status_code == 400


# --- the same rules through the API's whole-document draft ------------------------------------


@pytest.fixture
def prof(client, app):
    return instructor_headers(client, app)


def put_draft(client, prof, document):
    answer = client.put(f"{API}/instructor/cards/kv-cache/draft", json=document, headers=prof)
    assert answer.status_code == 200, answer.text
    return answer.json()["problems"]


def test_the_api_draft_reports_an_empty_text_at_its_field_and_publishing_is_refused(client, prof):
    assert client.post(f"{API}/instructor/cards", json=CARD, headers=prof).status_code == 201
    document = copy.deepcopy(CARD)
    document["title"]["zh"] = ""
    document["points"][0]["title"]["en"] = ""
    problems = put_draft(client, prof, document)
    found = {(p["field"], p["message"]) for p in problems if p["severity"] == "error"}
    assert found == {("title.zh", "must not be empty"), ("points.0.title.en", "must not be empty")}
    published = client.post(f"{API}/instructor/cards/kv-cache/publish", headers=prof)
    assert published.status_code == 422 and published.json()["code"] == "card_has_errors"


def test_the_api_draft_reports_a_formula_with_an_unknown_name_at_its_column(client, prof):
    client.post(f"{API}/instructor/cards", json=CARD, headers=prof)
    document = copy.deepcopy(CARD)
    document["formulas"][0]["expr"] = "2*2*layers*headz"
    problems = put_draft(client, prof, document)
    assert [(p["field"], p["position"]) for p in problems] == [("formulas.kv.expr", 12)]
    assert "headz" in problems[0]["message"]
    published = client.post(f"{API}/instructor/cards/kv-cache/publish", headers=prof)
    assert published.status_code == 422


def test_the_api_draft_reports_an_exam_point_without_templates(client, prof):
    """The API replaces the whole document, so a point's templates go only where the document
    says; a point left without any is reported, and publishing refused."""
    client.post(f"{API}/instructor/cards", json=CARD, headers=prof)
    document = copy.deepcopy(CARD)
    document["points"].append(
        {
            "number": 2,
            "slug": "kv-fit",
            "title": {"en": "Sequences that fit", "zh": "能放下的序列"},
            "explanation": {"en": "Free memory over the cache.", "zh": "空闲显存除以缓存。"},
            "templates": [],
        }
    )
    problems = put_draft(client, prof, document)
    assert [(p["field"], p["message"]) for p in problems] == [
        ("points.1.templates", "needs at least 1 item")
    ]
    assert client.post(f"{API}/instructor/cards/kv-cache/publish", headers=prof).status_code == 422


# --- the template editor keeps what it does not show --------------------------------------------


@pytest.mark.parametrize("template_id", ["p1-name-the-terms", "p1-optimizer-recipes"])
def test_the_template_editor_round_trips_a_statement_template(client, app, template_id):
    """Saved from the editor as shown, a ZeRO statement template is unchanged: the answer's other
    wordings are a field of the form; conventions, sources and the pitfalls' other wordings,
    which the form does not show, are kept."""
    import yaml

    zero = yaml.safe_load(
        (Path(__file__).parents[1] / "cards" / "zero-memory-offload.yaml").read_text("utf-8")
    )
    point, template = next(
        (p, t) for p in zero["points"] for t in p["templates"] if t["id"] == template_id
    )
    log_in(client, app)
    editor = client.get(f"/instructor/cards/zero-memory-offload/templates/{template_id}")
    assert 'name="answer_phrasings_zh"' in editor.text
    form = {
        "csrf_token": csrf(editor.text),
        "point": point["slug"],
        "id": template_id,
        "kind": "statement",
        "stem_en": template["stem"]["en"],
        "stem_zh": template["stem"]["zh"],
        "answer_en": template["answer"]["en"],
        "answer_zh": template["answer"]["zh"],
        "answer_phrasings_en": "\n".join(w["en"] for w in template["answer_phrasings"]),
        "answer_phrasings_zh": "\n".join(w["zh"] for w in template["answer_phrasings"]),
        "choices": str(template.get("choices", 4)),
        "solution_en": "\n".join(s["en"] for s in template["solution"]),
        "solution_zh": "\n".join(s["zh"] for s in template["solution"]),
    }
    for index, pitfall in enumerate(template["pitfalls"]):
        for name in ("title", "statement", "explanation"):
            for lang in ("en", "zh"):
                form[f"pitfall{index}_{name}_{lang}"] = pitfall[name][lang]
        form[f"pitfall{index}_id"] = pitfall["id"]
    saved = client.post(f"/instructor/cards/zero-memory-offload/templates/{template_id}", data=form)
    assert saved.status_code == 200
    stored = next(
        t
        for p in draft(app, "zero-memory-offload")["points"]
        for t in p["templates"]
        if t["id"] == template_id
    )

    def meaningful(value):
        """The value without empty optional fields (a stored version spells them out)."""
        if isinstance(value, dict):
            return {k: meaningful(v) for k, v in value.items() if v not in (None, {}, [])}
        if isinstance(value, list):
            return [meaningful(v) for v in value]
        return value

    assert meaningful(stored) == meaningful({"choices": 4, **template})


def test_the_forms_show_a_malformed_api_draft_without_failing(client, app):
    """The API stores any JSON object as a draft: its forms still open (blank where a field is
    not what the format says), and saving them writes a well-formed card part."""
    prof = instructor_headers(client, app, email="api@example.com")
    client.post(f"{API}/instructor/cards", json=CARD, headers=prof)
    odd = {
        **CARD,
        "title": "not a text",
        "params": "layers",
        "formulas": ["kv", {"id": 3, "title": "x"}],
        "points": [{**CARD["points"][0], "title": None, "explanation": ["x"]}],
    }
    put_draft(client, prof, odd)
    log_in(client, app)
    for path in ("/edit", "/points/kv-bytes", "/new-point", ""):
        page = client.get(f"/instructor/cards/kv-cache{path}")
        assert page.status_code == 200, (path, page.text[:300])
    token = csrf(client.get("/instructor/cards/kv-cache/edit").text)
    assert client.post("/instructor/cards/kv-cache/edit", data=card_form(token)).status_code == 200
    document = draft(app)
    assert document["title"] == CARD["title"] and document["formulas"] == [{**KV, "unit": "B"}]


def test_moving_an_exam_point_past_either_end_keeps_it_there_and_numbers_stay_1_to_n():
    from app.domain.authoring import move_point

    points = [{"number": n, "slug": slug, "templates": []} for n, slug in enumerate("abc", start=1)]
    document = {"points": points}
    order = lambda doc: [(p["number"], p["slug"]) for p in doc["points"]]  # noqa: E731
    assert order(move_point(document, "a", -1)) == [(1, "a"), (2, "b"), (3, "c")]
    assert order(move_point(document, "c", 1)) == [(1, "a"), (2, "b"), (3, "c")]
    assert order(move_point(document, "c", -1)) == [(1, "a"), (2, "c"), (3, "b")]
    assert order(move_point(document, "a", 5)) == [(1, "b"), (2, "c"), (3, "a")]
    assert order(document) == [(1, "a"), (2, "b"), (3, "c")]  # the document itself unchanged


class _FormReader(HTMLParser):
    """The named inputs and textareas of a page, as a browser would post them."""

    def __init__(self) -> None:
        super().__init__()
        self.fields: dict[str, str] = {}
        self._textarea: str | None = None

    def handle_starttag(self, tag, attrs):
        named = dict(attrs)
        if tag == "input" and named.get("name"):
            self.fields[named["name"]] = named.get("value") or ""
        elif tag == "textarea" and named.get("name"):
            self._textarea = named["name"]
            self.fields[self._textarea] = ""

    def handle_data(self, data):
        if self._textarea is not None:
            self.fields[self._textarea] += data

    def handle_endtag(self, tag):
        if tag == "textarea":
            self._textarea = None


def posted(page: str) -> dict[str, str]:
    reader = _FormReader()
    reader.feed(page)
    # A browser drops the newline right after <textarea>.
    return {k: v.removeprefix("\n") for k, v in reader.fields.items()}


def test_saving_the_zero_card_form_unchanged_changes_nothing(client, app):
    """Every text, parameter and formula of the ZeRO card goes through the form and back as
    the card file has it."""
    import yaml

    zero = yaml.safe_load(
        (Path(__file__).parents[1] / "cards" / "zero-memory-offload.yaml").read_text("utf-8")
    )
    log_in(client, app)
    before = draft(app, "zero-memory-offload")  # the published version: no draft yet
    page = client.get("/instructor/cards/zero-memory-offload/edit")
    saved = client.post("/instructor/cards/zero-memory-offload/edit", data=posted(page.text))
    assert saved.status_code == 200 and saved.url.path == "/instructor/cards/zero-memory-offload"
    document = draft(app, "zero-memory-offload")
    for name in ("title", "definition", "use_cases", "problems_solved", "params"):
        assert document[name] == zero[name], name
    assert document["formulas"] == [{"unit": "B", **f} for f in zero["formulas"]]
    assert document == {**before, "formulas": document["formulas"]}


def test_the_card_form_keeps_every_formula_row_however_many(client, app):
    log_in(client, app)
    create(client)
    form = card_form(csrf(client.get("/instructor/cards/kv-cache/edit").text))
    for row in range(1, 150):
        form |= {
            f"formula{row}_id": f"f{row}",
            f"formula{row}_title_en": f"Formula {row}",
            f"formula{row}_title_zh": f"公式 {row}",
            f"formula{row}_expr": f"layers + {row}",
            f"formula{row}_latex": f"L + {row}",
        }
    saved = client.post("/instructor/cards/kv-cache/edit", data=form)
    assert saved.status_code == 200, re.findall(r"field-problem[^>]*>([^<]*)", saved.text)
    ids = [f["id"] for f in draft(app)["formulas"]]
    assert ids == ["kv", *(f"f{row}" for row in range(1, 150))]


@pytest.mark.parametrize("role", [None, "learner"])
def test_the_card_and_point_forms_are_for_instructors_only(client, app, role):
    if role:
        log_in(client, app, role=role)
    card = "/instructor/cards/zero-memory-offload"
    for path in (f"{card}/edit", f"{card}/new-point", f"{card}/points/optimizer-memory"):
        response = client.get(path, follow_redirects=False)
        assert response.status_code == (403 if role else 303), path  # 303: to the login page
    token = csrf(client.get("/login").text)
    for path in (
        f"{card}/edit",
        f"{card}/points",
        f"{card}/points/optimizer-memory",
        f"{card}/points/optimizer-memory/move",
        f"{card}/points/optimizer-memory/delete",
    ):
        assert client.post(path, data={"csrf_token": token}).status_code == 403, path
