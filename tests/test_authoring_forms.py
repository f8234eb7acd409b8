"""What the dashboard's forms do with what an instructor typed: a line that does not read comes
back at its field with everything as typed (a new template as well as an existing one); a text
over the 20,000-character limit is refused at its field, never cut; a template's kind is never
switched at the cost of its answer and pitfalls; a browser's CRLF line endings change nothing.

Golden values (the limit, the fixture's texts) are written here, not computed by the code under
test."""

from __future__ import annotations

import html
import re

import pytest
from test_authoring_web import csrf, log_in
from test_card_editing import posted

from app.authoring import history, service

ZERO = "/instructor/cards/zero-memory-offload"
TEMPLATE = f"{ZERO}/templates/p1-total-16psi"
NEW_TEMPLATE = f"{ZERO}/templates/new"
LIMIT = 20_000


def zero_draft(app) -> dict:
    with app.state.sessionmaker() as db:
        return service.get_draft(db=db, card_id="zero-memory-offload").document


def zero_template(app, template_id="p1-total-16psi") -> dict:
    for point in zero_draft(app)["points"]:
        for template in point["templates"]:
            if template["id"] == template_id:
                return template
    raise KeyError(template_id)


def new_template_form(client) -> dict[str, str]:
    form = posted(client.get(NEW_TEMPLATE, params={"point": "optimizer-memory"}).text)
    return form | {
        "kind": "numeric",
        "id": "p1-typed",
        "stem_en": "A {psi}-parameter model: how many bytes?",
        "stem_zh": "一个 {psi} 参数的模型占多少字节？",
        "answer": "16*psi",
        "solution_en": "16 bytes a parameter.",
        "solution_zh": "每个参数 16 字节。",
    }


def field_problems(page: str, field_id: str) -> list[str]:
    """The problems shown at the input or textarea ``field_id``: after it (and its hint),
    before the next field's label."""
    start = page.index(f'id="{field_id}"')
    end = page.find("<label", start)
    found = re.findall(r'<p class="field-problem[^>]*>(.*?)</p>', page[start:end], re.S)
    return [html.unescape(re.sub("<[^>]+>", "", p)).strip() for p in found]


def shown_textarea(page: str, name: str) -> str:
    found = re.search(rf'<textarea[^>]*name="{name}"[^>]*>(.*?)</textarea>', page, re.S)
    assert found, name
    return html.unescape(found[1]).removeprefix("\n")


# --- a line that does not read ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "typed", "shown"),
    [
        ("params", "psi: 1, 2", "parameters, line 1: write 'name = value, value, ...'"),
        ("params", "psi 7e9, 13e9", "parameters, line 1: write 'name = value, value, ...'"),
        ("derived", "h", "derived parameters, line 1: write 'name = formula'"),
        ("constraints", "psi/n_d maybe", "constraints, line 1: write"),
    ],
)
@pytest.mark.parametrize("where", ["new", "existing"])
def test_a_line_that_does_not_read_comes_back_at_its_field_with_the_typing(
    client, app, field, typed, shown, where
):
    log_in(client, app)
    if where == "new":
        path, form = NEW_TEMPLATE, new_template_form(client)
    else:
        path, form = TEMPLATE, posted(client.get(TEMPLATE).text)
        form |= {"kind": "numeric", "stem_en": "A stem typed before the slip: {psi}?"}
    before = zero_draft(app)
    form[field] = typed
    refused = client.post(path, data=form)
    assert refused.status_code == 400, refused.text[:300]
    assert shown in " ".join(field_problems(refused.text, f"f-{field}"))
    again = posted(refused.text)
    assert again[field] == typed
    assert again["stem_en"] == form["stem_en"]
    assert again["stem_zh"] == form["stem_zh"]
    assert zero_draft(app) == before  # nothing saved


@pytest.mark.parametrize("field", ["choices", "precision"])
def test_a_count_that_is_not_a_whole_number_is_refused_at_its_field_as_typed(client, app, field):
    log_in(client, app)
    form = posted(client.get(TEMPLATE).text) | {"kind": "numeric", field: "abc"}
    refused = client.post(TEMPLATE, data=form)
    assert refused.status_code == 400
    assert field_problems(refused.text, f"f-{field}") == ["must be a whole number"]
    assert zero_template(app)[field] != "abc"


def test_two_choices_typed_as_zero_come_back_as_zero(client, app):
    log_in(client, app)
    form = posted(client.get(TEMPLATE).text) | {"kind": "numeric", "choices": "0"}
    page = client.post(TEMPLATE, data=form)
    assert re.search(r'name="choices"[^>]*value="0"', page.text), page.text[:300]


# --- texts over the limit ---------------------------------------------------------------------

LONG = "x" * (LIMIT + 1)
OVER = "must be at most 20,000 characters long (this text has 20,001)"


def test_a_template_text_over_the_limit_is_refused_at_its_field_not_cut(client, app):
    log_in(client, app)
    page = client.get(TEMPLATE)
    assert f'maxlength="{LIMIT}"' in page.text
    form = posted(page.text) | {"kind": "numeric", "precision": "3", "stem_en": LONG}
    refused = client.post(TEMPLATE, data=form)
    assert refused.status_code == 400
    assert OVER in field_problems(refused.text, "f-stem-en")
    assert shown_textarea(refused.text, "stem_en") == LONG  # as typed, whole
    assert zero_template(app)["stem"]["en"] != LONG[:LIMIT]


def test_a_card_text_over_the_limit_is_refused_at_its_field_not_cut(client, app):
    log_in(client, app)
    page = client.get(f"{ZERO}/edit")
    assert re.search(rf'<textarea maxlength="{LIMIT}"[^>]*name="definition_en"', page.text)
    refused = client.post(f"{ZERO}/edit", data=posted(page.text) | {"definition_en": LONG})
    assert refused.status_code == 422
    assert OVER in field_problems(refused.text, "f-definition-en")
    assert shown_textarea(refused.text, "definition_en") == LONG
    assert zero_draft(app)["definition"]["en"] != LONG[:LIMIT]


def test_an_exam_point_explanation_over_the_limit_is_refused_at_its_field(client, app):
    log_in(client, app)
    path = f"{ZERO}/points/optimizer-memory"
    page = client.get(path)
    assert re.search(rf'<textarea maxlength="{LIMIT}"[^>]*name="explanation_en"', page.text)
    refused = client.post(path, data=posted(page.text) | {"explanation_en": LONG})
    assert refused.status_code == 422
    assert refused.template.name == "instructor_point.html"
    assert OVER in field_problems(refused.text, "point-explanation-en")
    assert shown_textarea(refused.text, "explanation_en") == LONG


# --- a template's kind ------------------------------------------------------------------------


def test_switching_an_existing_templates_kind_is_refused_and_loses_nothing(client, app):
    log_in(client, app)
    before = zero_template(app)
    form = posted(client.get(TEMPLATE).text) | {"kind": "statement", "precision": "3"}
    form["stem_en"] = "Typed before switching the kind: {psi}?"
    refused = client.post(TEMPLATE, data=form)
    assert refused.status_code == 400
    [reason] = field_problems(refused.text, "f-kind")
    assert reason.startswith("a template's kind cannot be changed")
    again = posted(refused.text)
    assert again["answer"] == before["answer"]  # the numeric form, as it was
    assert again["stem_en"] == form["stem_en"]
    assert all(
        again[f"pitfall{i}_formula"] == p["formula"] for i, p in enumerate(before["pitfalls"])
    )
    assert zero_template(app) == before
    assert "_TextIn" not in refused.text and "answer.str" not in refused.text


def test_switching_a_new_templates_kind_shows_that_kinds_fields(client, app):
    log_in(client, app)
    form = new_template_form(client) | {"kind": "statement"}
    shown = client.post(NEW_TEMPLATE, data=form)
    assert shown.status_code == 200
    assert 'name="answer_en"' in shown.text and 'name="answer"' not in shown.text
    assert "statement template's fields" in html.unescape(shown.text)
    assert posted(shown.text)["stem_en"] == form["stem_en"]
    assert "p1-typed" not in str(zero_draft(app))  # nothing saved yet
    # Saved without an answer, the problems name the answer's fields as the form does.
    empty = posted(shown.text) | {"kind": "statement"}
    saved = client.post(NEW_TEMPLATE, data=empty, follow_redirects=True)
    text = html.unescape(saved.text)
    assert "answer.en" in text and "_TextIn" not in text and "answer.str" not in text


# --- line endings -----------------------------------------------------------------------------


def crlf(form: dict[str, str]) -> dict[str, str]:
    """The form as a browser posts it: every textarea's line endings CRLF."""
    return {k: v.replace("\n", "\r\n") for k, v in form.items()}


def test_saving_the_forms_unchanged_with_crlf_changes_nothing(client, app):
    log_in(client, app)
    page = client.get(f"{ZERO}/edit")
    assert "\n" in posted(page.text)["definition_en"]  # a text of several paragraphs
    assert client.post(f"{ZERO}/edit", data=crlf(posted(page.text))).status_code == 200
    point = f"{ZERO}/points/optimizer-memory"
    assert client.post(point, data=crlf(posted(client.get(point).text))).status_code == 200
    template = posted(client.get(TEMPLATE).text) | {"kind": "numeric"}
    assert "\n" in template["solution_en"]
    assert client.post(TEMPLATE, data=crlf(template)).status_code == 200
    with app.state.sessionmaker() as db:
        _, changes = history.draft_diff(db=db, card_id="zero-memory-offload")
    assert changes == []
    assert "\r" not in str(zero_draft(app))


# --- deleting a template, discarding a draft: asked first ---------------------------------------


def test_deleting_a_template_is_asked_first_and_done_once_confirmed(client, app):
    log_in(client, app)
    editor = client.get(TEMPLATE).text
    delete = f"{TEMPLATE}/delete"
    assert f'href="{delete}"' in editor and f'action="{delete}"' not in editor
    # A post without the confirmation (an old page, a slip) only asks.
    asked = client.post(delete, data={"csrf_token": csrf(editor)})
    assert asked.status_code == 200 and asked.template.name == "instructor_confirm.html"
    assert "p1-total-16psi" in str(zero_draft(app))
    page = client.get(delete)
    assert page.status_code == 200 and "Delete template p1-total-16psi?" in html.unescape(page.text)
    assert f'href="{TEMPLATE}"' in page.text  # the way back
    done = client.post(delete, data=posted(page.text))
    assert done.status_code == 200 and done.url.path == ZERO
    assert "p1-total-16psi" not in str(zero_draft(app))
    assert client.get(f"{ZERO}/templates/nope/delete").status_code == 404


def test_the_card_page_discards_the_draft_once_confirmed(client, app):
    log_in(client, app)
    assert "/discard" not in client.get(ZERO).text  # no draft yet
    edit = posted(client.get(f"{ZERO}/edit").text) | {"title_en": "A draft title"}
    assert client.post(f"{ZERO}/edit", data=edit).status_code == 200
    card = client.get(ZERO).text
    assert f'href="{ZERO}/discard"' in card
    page = client.get(f"{ZERO}/discard")
    assert "Discard the draft of zero-memory-offload?" in html.unescape(page.text)
    done = client.post(f"{ZERO}/discard", data=posted(page.text))
    assert done.status_code == 200 and done.url.path == ZERO
    with app.state.sessionmaker() as db:
        draft = service.get_draft(db=db, card_id="zero-memory-offload")
    assert not draft.is_draft and draft.document["title"]["en"] != "A draft title"
    assert client.get(f"{ZERO}/discard").status_code == 404  # nothing left to discard


# --- minor: a missing template, a formula too long to check ---------------------------------


def test_a_missing_template_is_404_in_the_editor_as_in_the_preview(client, app):
    log_in(client, app)
    assert client.get(f"{ZERO}/templates/nope").status_code == 404
    assert client.get(f"{ZERO}/preview", params={"template_id": "nope"}).status_code == 404


def test_a_formula_too_long_to_check_is_answered_as_the_editor_script_reads_it(client, app):
    log_in(client, app)
    answer = client.get(
        "/instructor/check-formula",
        params={"card_id": "zero-memory-offload", "text": "psi+" * 600},
    )
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    assert answer.json() == {
        "ok": False,
        "message": "must be at most 2000 characters long",
        "position": 2001,
        "where": None,
    }


# --- minor: Chinese sentences with Chinese punctuation ---------------------------------------


def test_chinese_preview_and_moodle_plan_headings_use_chinese_punctuation(client, app):
    log_in(client, app)
    preview = client.get(
        f"{ZERO}/preview", params={"template_id": "p1-total-16psi", "seed": 1, "lang": "zh"}
    )
    assert "预览：p1-total-16psi" in html.unescape(preview.text)
    plan = html.unescape(client.get(f"{ZERO}/export/moodle", params={"lang": "zh"}).text)
    sentence = re.search(r"第 \d+ 版：\d+ 个模板为计算题，\d+ 个为固定变体。", plan)
    assert sentence, re.findall(r"<p>[^<]*版[^<]*</p>", plan)
    english = html.unescape(client.get(f"{ZERO}/export/moodle", params={"lang": "en"}).text)
    assert re.search(r"Version \d+: \d+ templates? calculated, \d+ as fixed variants\.", english)


# --- a pitfall typed without its id -----------------------------------------------------------


def test_a_pitfall_typed_without_an_id_comes_back_refused_not_dropped(client, app):
    """The form ends with a blank pitfall row; one filled in but for its id was dropped without
    a word when saved (the instructor's new pitfall lost). It is refused at its id field, with
    what was typed; once named, it is saved."""
    log_in(client, app)
    blank = len(zero_template(app)["pitfalls"])  # the row after the template's own pitfalls
    prefix = f"pitfall{blank}_"
    typed = {
        prefix + "title_en": "Forgot the gradients",
        prefix + "title_zh": "漏算了梯度",
        prefix + "formula": "14*psi",
        prefix + "explanation_en": "Counts weights and optimizer states only.",
        prefix + "explanation_zh": "只算了权重和优化器状态。",
    }
    form = posted(client.get(TEMPLATE).text) | {"kind": "numeric"} | typed
    before = zero_draft(app)
    refused = client.post(TEMPLATE, data=form)
    assert refused.status_code == 400, refused.text[:300]
    assert field_problems(refused.text, f"p{blank}-id") == [
        "this pitfall has no id: give it one (lowercase letters, digits and dashes, such as"
        " forgot-the-master-copy), or clear its fields to leave it out"
    ]
    again = posted(refused.text)
    assert {name: again[name] for name in typed} == typed
    assert again[prefix + "id"] == ""
    assert zero_draft(app) == before  # nothing saved
    saved = client.post(TEMPLATE, data=again | {prefix + "id": "forgot-the-gradients"})
    assert saved.status_code == 200, saved.text[:300]
    added = zero_template(app)["pitfalls"][blank]
    assert added["id"] == "forgot-the-gradients"
    assert added["formula"] == "14*psi"
    assert added["title"] == {"en": "Forgot the gradients", "zh": "漏算了梯度"}
