"""Typed answers through the API: a numeric question asked without choices, answered with a number
and a unit, graded at the template's precision and diagnosed by pitfall.

The golden values are worked out here from the ZeRO-2 template's formulas (card file,
p2-zero2-per-rank) and the parameters the question states:

    key                 2Ψ + 14Ψ/N_d          (per rank under ZeRO-2)
    zero2-grads-replicated   4Ψ + 12Ψ/N_d     (that is ZeRO-1)
    ddp-no-sharding          16Ψ

With seed 724 the exam point zero-stage-memory serves that template with Ψ = 1.3B and N_d = 32:
the key is 2.6e9 + 18.2e9 / 32 = 3.16875e9 bytes (3.17 GB; 3.16875e9 / 2**30 = 2.951 GiB); ZeRO-1
gives 5.2e9 + 15.6e9 / 32 = 5.6875e9 bytes (5.69 GB), a pitfall this variant does not show among
its choices.
"""

from __future__ import annotations

import html
import re
import uuid
from fractions import Fraction

import pytest
from conftest import CARD_ID
from sqlalchemy import func, select
from test_i18n import untranslated

from app.domain.units import get_unit
from app.models import Attempt, PracticeSession, ReviewLog
from app.practice.sessions import question_id_at

API = "/api/v1"
POINT = "zero-stage-memory"
SEED = 724
TEMPLATE = "p2-zero2-per-rank"


def new_learner(client) -> dict[str, str]:
    response = client.post(f"{API}/learners")
    assert response.status_code == 201, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


@pytest.fixture
def auth(client):
    return new_learner(client)


def typed_question(client, headers=None, mode="typed", seed=SEED, point=POINT):
    response = client.get(
        f"{API}/cards/{CARD_ID}/points/{point}/question",
        params={"seed": seed, "mode": mode},
        headers=headers or {},
    )
    assert response.status_code == 200, response.text
    return response.json()


def golden(body) -> dict[str, Fraction]:
    """The key and two pitfalls' values in bytes, from the parameters the question states."""
    assert body["template_id"] == TEMPLATE
    psi = Fraction(body["params"]["psi"])
    n_d = Fraction(body["params"]["n_d"])
    return {
        "key": 2 * psi + 14 * psi / n_d,
        "zero1": 4 * psi + 12 * psi / n_d,
        "ddp": 16 * psi,
    }


def send(client, headers, body, *, lang="en", **fields):
    payload = {"token": body["token"], "client_answer_id": str(uuid.uuid4()), **fields}
    return client.post(f"{API}/answers?lang={lang}", json=payload, headers=headers)


def attempts(db) -> int:
    db.expire_all()
    count = db.scalar(select(func.count()).select_from(Attempt))
    db.commit()
    return int(count or 0)


# --- the question ------------------------------------------------------------------------------


def test_a_typed_question_is_the_same_variant_without_its_choices(client):
    with_choices = typed_question(client, mode="choices")
    typed = typed_question(client)
    assert typed["mode"] == "typed" and with_choices["mode"] == "choices"
    assert typed["choices"] == [] and len(with_choices["choices"]) == 4
    for field in ("template_id", "template_version", "seed", "params", "stem", "kind"):
        assert typed[field] == with_choices[field]
    assert typed["params"] == {"psi": "1300000000", "n_d": "32"}
    assert "1.3B" in typed["stem"] and "32" in typed["stem"]
    # Bytes in any unit, decimal or binary; graded at the template's 3 significant figures.
    assert typed["typed_units"] == ["B", "KB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB"]
    assert typed["typed_figures"] == 3
    # The shown choices do not include ZeRO-1's value: a typed answer can still fall for it.
    assert "5.69 GB" not in [c["text"] for c in with_choices["choices"]]


def test_a_statement_question_keeps_its_choices_and_takes_no_units(client):
    for seed in range(200):
        body = typed_question(client, seed=seed, point="gradient-sharding")
        if body["kind"] == "statement":
            break
    else:
        pytest.skip("no statement template on this point")
    assert body["mode"] == "choices" and body["choices"]
    assert body["typed_units"] == [] and body["typed_figures"] is None


# --- grading -----------------------------------------------------------------------------------


def test_the_key_typed_in_the_questions_unit_or_another_of_its_dimension_is_right(client, auth):
    body = typed_question(client, auth)
    key = golden(body)["key"]
    assert key == Fraction(3168750000)  # 3.16875 GB
    gib = key / 2**30  # 2.9511... GiB
    assert Fraction("2.95") - Fraction("0.005") < gib < Fraction("2.95") + Fraction("0.005")
    for value, unit in [
        ("3.17", "GB"),
        ("3.16875", "GB"),
        ("3168.75", "MB"),
        ("3.17e9", "B"),
        ("2.95", "GiB"),  # a profiler's reading of the same memory
        (" 3.17 ", "GB"),
    ]:
        response = send(client, auth, body, value=value, unit=unit)
        assert response.status_code == 200, response.text
        result = response.json()
        assert result["correct"] is True, (value, unit, result)
        assert result["pitfall"] is None and result["choices"] == []
        assert result["choice_id"] is None and result["correct_choice_id"] is None
        assert result["value"] == value.strip() and result["unit"] == unit
        assert result["answer"] == "3.17 GB"
        assert len(result["solution"]) == 3
    assert send(client, auth, body, value="3.17", unit="GB").json()["explanation"] == (
        "3.17 GB is right."
    )


def test_a_value_off_by_more_than_the_precision_is_wrong(client, auth):
    body = typed_question(client, auth)
    # 3.16 GB is 0.00875 GB away: more than half a unit of the third figure (0.005 GB).
    result = send(client, auth, body, value="3.16", unit="GB").json()
    assert result["correct"] is False and result["pitfall"] is None


def test_a_pitfalls_value_is_diagnosed_as_that_pitfall_with_its_explanation(client, auth):
    body = typed_question(client, auth)
    values = golden(body)
    assert values["zero1"] == Fraction(5687500000)  # 5.69 GB, not among the shown choices
    result = send(client, auth, body, value="5.69", unit="GB").json()
    assert result["correct"] is False
    assert result["pitfall"]["id"] == "zero2-grads-replicated"
    assert result["pitfall"]["title"] == "Kept the gradients whole (that is ZeRO-1)"
    # The pitfall's explanation with this variant's numbers: ZeRO-1's value and the key.
    assert "5.69 GB" in result["pitfall"]["explanation"]
    assert "3.17 GB" in result["pitfall"]["explanation"]
    assert result["explanation"] == (
        "5.69 GB is the value the pitfall “Kept the gradients whole (that is ZeRO-1)” gives; "
        "the answer is 3.17 GB."
    )
    assert result["solution"][-1].startswith("Per rank:")
    # DDP's 16Ψ = 20.8 GB, typed in GiB (19.4 GiB): the same diagnosis by value.
    assert values["ddp"] == Fraction(20800000000)
    ddp = send(client, auth, body, value="19.4", unit="GiB", lang="zh").json()
    assert ddp["pitfall"]["id"] == "ddp-no-sharding"
    assert ddp["pitfall"]["title"] == "什么都没切分（那是 DDP）"
    assert ddp["explanation"] == (
        "19.4 GiB 正是误区「什么都没切分（那是 DDP）」得出的值；正确答案是 3.17 GB。"
    )


def test_a_value_matching_nothing_says_so_and_shows_the_worked_solution(client, auth, db):
    body = typed_question(client, auth)
    result = send(client, auth, body, value="4", unit="GB").json()
    assert result["correct"] is False and result["pitfall"] is None
    assert result["explanation"] == "4 GB matches no pitfall we know; the answer is 3.17 GB."
    assert result["solution"][0].startswith("ZeRO-2 partitions the fp16 gradients")
    stored = db.scalars(select(Attempt)).one()
    assert (stored.typed_value, stored.typed_unit, stored.choice_id) == ("4", "GB", None)
    assert stored.correct is False and stored.pitfall_id is None and stored.choices == []
    zh = send(client, auth, body, value="4", unit="GB", lang="zh").json()
    assert zh["explanation"] == "4 GB 与我们已知的任何误区都不符；正确答案是 3.17 GB。"


# --- refusals: 422 naming the field, nothing stored --------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field", "code", "en", "zh"),
    [
        (
            {"value": "3,17", "unit": "GB"},
            "value",
            "invalid_value",
            "value: Use a decimal point, not a comma: 3.17, not 3,17.",
            "value：请用小数点，不要用逗号：输入 3.17，而不是 3,17。",
        ),
        (
            {"value": "3,170,000", "unit": "KB"},
            "value",
            "invalid_value",
            "value: Type the number without thousands separators: 3170000, not 3,170,000.",
            "value：请不要使用千位分隔符：输入 3170000，而不是 3,170,000。",
        ),
        (
            {"value": "three", "unit": "GB"},
            "value",
            "invalid_value",
            "value: 'three' is not a number: type digits, with a decimal point and an exponent "
            "(1.5e3) if you need them.",
            "value：'three' 不是数字：请输入数字，需要时可带小数点和指数（如 1.5e3）。",
        ),
        (
            {"value": "3.17", "unit": "Gb"},
            "unit",
            "invalid_unit",
            "unit: 'Gb' is not a unit this question takes: use one of B, KB, MB, GB, TB, PB, "
            "KiB, MiB, GiB, TiB.",
            "unit：本题不接受单位 'Gb'：请使用 B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB 之一。",
        ),
        (
            {"value": "3.17", "unit": "s"},  # a known unit of another dimension
            "unit",
            "invalid_unit",
            "unit: 's' is not a unit this question takes: use one of B, KB, MB, GB, TB, PB, "
            "KiB, MiB, GiB, TiB.",
            "unit：本题不接受单位 's'：请使用 B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB 之一。",
        ),
        (
            {"value": "3.17"},
            "unit",
            "invalid_unit",
            "unit: Say which unit the number is in.",
            "unit：请注明这个数的单位。",
        ),
        (
            {"choice_id": "a", "value": "3.17", "unit": "GB"},
            "choice_id",
            "answer_form",
            "choice_id: Send either choice_id, or value and unit: not both.",
            "choice_id：choice_id 与 value 和 unit 只能发送其一，不能同时发送。",
        ),
        (
            {},
            "choice_id",
            "answer_form",
            "choice_id: Send choice_id, or value and unit.",
            "choice_id：请发送 choice_id，或者 value 和 unit。",
        ),
    ],
)
def test_bad_input_is_a_422_naming_the_field_in_the_learners_language_and_stores_nothing(
    client, auth, db, fields, field, code, en, zh
):
    body = typed_question(client, auth)
    for lang, detail in (("en", en), ("zh", zh)):
        response = send(client, auth, body, lang=lang, **fields)
        assert response.status_code == 422, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        problem = response.json()
        assert (problem["code"], problem["field"], problem["detail"]) == (code, field, detail)
    assert attempts(db) == 0


def test_a_value_for_a_statement_question_is_refused(client, auth, db):
    for seed in range(200):
        body = typed_question(client, auth, seed=seed, point="gradient-sharding")
        if body["kind"] == "statement":
            break
    else:
        pytest.skip("no statement template on this point")
    response = send(client, auth, body, value="1", unit="GB", lang="zh")
    problem = response.json()
    assert response.status_code == 422 and problem["code"] == "not_typeable"
    assert problem["field"] == "value"
    assert problem["detail"] == "value：这道题要选择一个说法作答，不能输入数值。请发送 choice_id。"
    assert attempts(db) == 0


# --- once, and rated -----------------------------------------------------------------------------


def test_a_resent_typed_answer_replays_and_another_question_with_its_id_is_409(client, auth, db):
    body = typed_question(client, auth)
    cid = str(uuid.uuid4())
    payload = {"token": body["token"], "client_answer_id": cid, "value": "5.69", "unit": "GB"}
    first = client.post(f"{API}/answers", json=payload, headers=auth).json()
    again = client.post(f"{API}/answers", json=payload, headers=auth).json()
    assert again["replayed"] is True and first["replayed"] is False
    assert again["attempt_id"] == first["attempt_id"]
    assert again["pitfall"]["id"] == first["pitfall"]["id"] == "zero2-grads-replicated"
    assert (again["value"], again["unit"]) == ("5.69", "GB")
    other = typed_question(client, auth, seed=SEED + 5)  # another numeric question
    reused = client.post(f"{API}/answers", json={**payload, "token": other["token"]}, headers=auth)
    assert reused.status_code == 409 and reused.json()["code"] == "answer_id_reused"
    assert attempts(db) == 1


def test_a_batch_takes_typed_and_chosen_answers_together(client, auth, db):
    body = typed_question(client, auth)
    chosen = typed_question(client, auth, mode="choices", seed=SEED + 1)
    items = [
        {"token": body["token"], "client_answer_id": "t-1", "value": "2.95", "unit": "GiB"},
        {"token": body["token"], "client_answer_id": "t-2", "value": "3,17", "unit": "GB"},
        {"token": chosen["token"], "client_answer_id": "t-3", "choice_id": "a"},
    ]
    response = client.post(f"{API}/answers/batch?lang=zh", json={"answers": items}, headers=auth)
    assert response.status_code == 200, response.text
    typed, bad, choice = response.json()["results"]
    assert typed["correct"] is True and typed["unit"] == "GiB"
    assert bad["status"] == 422 and bad["code"] == "invalid_value"
    assert bad["detail"] == "value：请用小数点，不要用逗号：输入 3.17，而不是 3,17。"
    assert choice["choice_id"] == "a" and choice["value"] is None
    assert attempts(db) == 2


def test_a_right_typed_answer_rates_stronger_than_a_right_choice(client, db):
    typed_learner, chooser = new_learner(client), new_learner(client)
    typed = typed_question(client, typed_learner)
    assert send(client, typed_learner, typed, value="3.17", unit="GB").json()["correct"]
    chosen = typed_question(client, chooser, mode="choices")
    right = next(c["id"] for c in chosen["choices"] if c["text"] == "3.17 GB")
    assert send(client, chooser, chosen, choice_id=right).json()["correct"]
    ratings = {
        attempt.typed_unit: rating
        for attempt, rating in db.execute(
            select(Attempt, ReviewLog.rating).join(ReviewLog, ReviewLog.attempt_id == Attempt.id)
        )
    }
    # No duration sent: a right choice rates Good (3), a right typed answer Easy (4).
    assert ratings == {None: 3, "GB": 4}


def test_a_value_typed_for_a_question_shown_with_choices_rates_as_a_choice(client, db):
    """Recall is stronger evidence than recognition only when the choices were not shown: a
    client that fetched the question with its choices gets a choice's rating for typing it."""
    learner = new_learner(client)
    shown = typed_question(client, learner, mode="choices")
    assert shown["choices"]
    answered = send(client, learner, shown, value="3.17", unit="GB").json()
    assert answered["correct"] and answered["unit"] == "GB"
    assert db.scalars(select(ReviewLog.rating)).all() == [3]  # Good, as a right choice


def test_a_choice_sent_for_a_question_asked_without_choices_is_refused(client, auth, db):
    """Its choices were never shown: a letter is a guess (one in four), not recall, and is
    refused like any other malformed answer (422 naming choice_id); nothing is stored."""
    body = typed_question(client, auth)
    assert body["mode"] == "typed" and body["choices"] == []
    for lang, says in (("en", "asked without its choices"), ("zh", "没有给出选项")):
        refused = send(client, auth, body, lang=lang, choice_id="a")
        assert refused.status_code == 422, refused.text
        problem = refused.json()
        assert problem["code"] == "answer_form" and problem["field"] == "choice_id"
        assert says in problem["detail"]
    assert attempts(db) == 0
    assert send(client, auth, body, value="3.17", unit="GB").status_code == 200


def test_a_wrong_typed_answer_rates_again(client, auth, db):
    body = typed_question(client, auth)
    send(client, auth, body, value="5.69", unit="GB")
    assert db.scalars(select(ReviewLog.rating)).all() == [1]


def test_the_mistake_book_shows_a_typed_answer(client, auth):
    body = typed_question(client, auth)
    send(client, auth, body, value="5.69", unit="GB")
    items = client.get(f"{API}/me/mistakes", headers=auth).json()["items"]
    assert len(items) == 1
    item = items[0]
    assert (item["choice_id"], item["typed_value"], item["typed_unit"]) == (None, "5.69", "GB")
    assert item["choice_text"] == "5.69 GB" and item["correct_choice_text"] == "3.17 GB"
    assert item["pitfall"]["id"] == "zero2-grads-replicated"
    assert "5.69 GB" in item["pitfall"]["explanation"]


# --- the web: "Type the answer" ------------------------------------------------------------------


def hidden_fields(text: str) -> dict[str, str]:
    found = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', text))
    return {k: html.unescape(v) for k, v in found.items()}


def without_units(page: str) -> str:
    """The page without its unit select: unit symbols (GB, GiB) read the same in Chinese."""
    return re.sub(r"<select name=\"unit\">.*?</select>", "", page, flags=re.S)


def test_a_typed_web_session_takes_a_number_and_a_unit_and_diagnoses_the_pitfall(client, app, db):
    page = client.get(f"/cards/{CARD_ID}?lang=zh")
    assert "输入答案" in page.text  # "Type the answer" among the modes, and on each exam point
    typed_starts = re.findall(
        r'<input type="hidden" name="point" value="([\w-]+)">\s*<input type="hidden" name="typed"',
        page.text,
    )
    assert POINT in typed_starts and len(typed_starts) == len(set(typed_starts)) == 5
    response = client.post(
        "/sessions",
        data={"csrf_token": hidden_fields(page.text)["csrf_token"], "card_id": CARD_ID,
              "mode": "point", "point": POINT, "typed": "1", "size": "20"},
    )  # fmt: skip
    assert response.status_code == 200
    session_url = response.url.path
    # Statements keep their choices; numeric questions ask for a number and a unit.
    while 'name="value"' not in response.text:
        assert 'type="radio" name="choice_id"' in response.text
        first = re.search(r'name="choice_id" value="(\w)"', response.text).group(1)
        client.post("/answers", data={**hidden_fields(response.text), "choice_id": first})
        response = client.get(session_url)
    assert 'name="choice_id"' not in response.text
    assert '<option value="GiB">GiB</option>' in response.text
    assert "按 3 位有效数字评分" in response.text
    assert not untranslated(without_units(response.text))
    before = attempts(db)
    form = hidden_fields(response.text)
    bad = client.post("/answers", data={**form, "value": "3,17", "unit": "GB"})
    assert bad.status_code == 422
    assert "请用小数点，不要用逗号：输入 3.17，而不是 3,17。" in html.unescape(bad.text)
    assert 'value="3,17"' in bad.text  # what was typed stays in the field
    assert not untranslated(without_units(bad.text))
    assert attempts(db) == before
    # A pitfall's value in the question's unit (this is a flow test: the values themselves are
    # pinned by hand in the API tests above).
    content = app.state.context.signer.verify(form["token"])
    row = db.get(PracticeSession, content.position.session_id)
    db.commit()
    variant = app.state.catalog.variant(
        question_id_at(row, content.position.position, app.state.context.seed_secret)
    )
    pitfall = variant.content.pitfalls[0]
    unit = variant.content.template.unit
    value = f"{float(pitfall.value / get_unit(unit).scale):.6g}"
    feedback = client.post("/answers", data={**form, "value": value, "unit": unit})
    assert feedback.status_code == 200
    text = html.unescape(feedback.text)
    assert f"正是误区「{pitfall.pitfall.title.zh}」得出的值" in text
    assert "为什么这种推理不对" in text  # the pitfall's explanation
    assert "解题步骤" in text  # the worked solution
    assert not untranslated(feedback.text)
    assert attempts(db) == before + 1
    # Another number sent from the same question's form (Back, or a second tab): the first
    # answer counts, and the notice names the number typed first, not a choice letter.
    again = client.post("/answers", data={**form, "value": "1", "unit": unit})
    assert again.status_code == 200 and again.url.params["again"] == "1"
    assert f"以你第一次的答案为准（{value} {unit}）" in html.unescape(again.text)
    assert attempts(db) == before + 1
    # The summary shows the numbers, with no choice letter the learner never saw.
    summary = client.post(f"{session_url}/finish", data={"csrf_token": form["csrf_token"]})
    typed_line = rf'<dd class="chosen">{re.escape(f"{value} {unit}")}</dd>\s*<dt>[^<]*</dt><dd class="key">(.*?)</dd>'
    key = re.search(typed_line, summary.text, flags=re.S)
    assert key is not None and "choice-id" not in key.group(1)
