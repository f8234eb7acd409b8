"""A card's own calculator on the web and in the API: the page works without JavaScript, keeps the
form and says what is wrong at each field (400), speaks the page's language; the JSON is typed in
the OpenAPI document and refuses bad input with a problem document, never a 500; the card page,
the deck and Today link each card's calculator."""

from __future__ import annotations

import html
import re
import time

import pytest

ACTIVATION = "activation-memory"
MEGATRON = "megatron-3d-pipeline"
ZERO = "zero-memory-offload"


def page_of(card_id: str) -> str:
    return f"/cards/{card_id}/calculator"


def api_of(card_id: str) -> str:
    return f"/api/v1/cards/{card_id}/calculator"


def words(page: str) -> str:
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def output_row(page: str, output_id: str) -> str:
    found = re.search(rf'<tr class="calc-term" id="out-{output_id}">(.*?)</tr>', page, re.S)
    assert found, output_id
    return words(found.group(1))


# --- the page ---------------------------------------------------------------------------------


def test_the_activation_page_shows_the_defaults_result(client):
    response = client.get(page_of(ACTIVATION))
    assert response.status_code == 200
    page = response.text
    assert "<h1>Activation memory calculator</h1>" in page
    assert '<form id="calc-form"' in page and 'method="get"' in page
    assert 'name="s"' in page and 'value="2048"' in page
    assert output_row(page, "layer_plain").endswith("2.87 GB")
    assert output_row(page, "per_layer").endswith("579 MB")
    assert output_row(page, "act_gpu").endswith("55.6 GB")
    text = words(page)
    assert "First stage — Does not fit : 99.1 GB of 80 GB (19.1 GB short)" in text
    assert "act_tp =" in text  # the card's formula each figure comes from
    assert '<svg xmlns="http://www.w3.org/2000/svg"' in page and "style=" not in page
    assert re.findall(r"<script[^>]*>", page) == [
        '<script src="/static/timezone.js" defer>',
        '<script src="/static/calculator.js" defer>',
    ]


def test_a_choice_changes_the_formula_and_the_verdict(client):
    page = client.get(page_of(ACTIVATION), params={"sp": "on"}).text
    assert '<option value="on" selected>' in page
    assert output_row(page, "per_layer").endswith("359 MB")
    assert "First stage — Fits : 77.9 GB of 80 GB (2.09 GB to spare)" in words(page)
    assert "act_tp_sp =" in words(page)


def test_the_megatron_page(client):
    page = client.get(page_of(MEGATRON), params={"schedule": "interleaved"}).text
    assert output_row(page, "n_d").endswith("24") and output_row(page, "n_m").endswith("64")
    assert output_row(page, "bubble").endswith("5.47%")
    assert output_row(page, "states_sharded").endswith("17.8 GB")
    text = words(page)
    assert "Holds : m ≥ p: enough micro-batches to fill the pipeline" in text
    assert "Distributed optimizer — Fits : 17.8 GB of 80 GB" in text


def test_a_check_that_fails_says_what_it_means(client):
    page = client.get(page_of(MEGATRON), params={"tp": "16", "gpus": "3072"}).text
    assert "Does not hold : t ≤ 8" in words(page)
    assert "Across servers its four all-reduces" in words(page)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_bad_input_is_the_same_page_with_a_message_per_field(client, lang):
    response = client.get(
        page_of(MEGATRON), params={"lang": lang, "gpus": "1000", "psi": "lots", "n_v": "0"}
    )
    assert response.status_code == 400
    page = response.text
    assert 'role="alert"' in page and "<svg" not in page and "Traceback" not in page
    assert 'value="lots"' in page and 'value="1000"' in page  # the form keeps what was typed
    # psi and n_v are no numbers, and 64 GPUs a replica do not divide 1000 (the rule over m,
    # an output, waits for every number).
    assert page.count('aria-invalid="true"') == 3
    text = words(page)
    if lang == "en":
        assert "Parameters Ψ: 'lots' is not a number." in text
        assert "Model chunks per GPU v: from 1 to 64." in text
        assert "GPUs: t·p must divide N" in text
    else:
        assert '<html lang="zh-Hans">' in page
        assert "参数量 Ψ：'lots' 不是数字。" in text
        assert "每张卡的模型块数 v：应在 1 到 64 之间。" in text
        assert "GPU 总数：t·p 必须整除 N" in text
        assert '<input type="hidden" name="lang" value="zh">' in page


def test_the_chinese_page(client):
    page = client.get(page_of(ACTIVATION), params={"lang": "zh", "recompute": "full"}).text
    assert "<h1>激活显存计算器</h1>" in page
    assert '<option value="full" selected>完全：只保留每层的输入</option>' in page
    assert output_row(page, "per_layer").endswith("50.3 MB")
    assert "第一个阶段 — 放得下" in words(page)


def test_hostile_input_is_escaped_and_quick(client):
    started = time.perf_counter()
    response = client.get(
        page_of(ACTIVATION),
        params={"s": '"><script>alert(1)</script>', "h": "1e99999999", "t": "9" * 5000},
    )
    assert time.perf_counter() - started < 2
    assert response.status_code == 400
    assert "<script>alert" not in response.text and "&lt;script&gt;" in response.text


def test_the_largest_inputs_still_answer(client):
    response = client.get(
        page_of(ACTIVATION),
        params={"s": "1048576", "b": "65536", "h": "1048576", "a": "65536", "n_l": "10000",
                "t": "1024", "p": "1", "n_m": "1000000"},
    )  # fmt: skip
    assert response.status_code == 200


def test_the_card_pages_and_the_deck_link_every_calculator(client):
    deck = client.get("/cards").text
    today = client.get("/").text
    for card_id, title in (
        (ACTIVATION, "Activation memory calculator"),
        (MEGATRON, "3D layout calculator"),
        (ZERO, "Memory calculator"),
    ):
        link = f'<a href="{page_of(card_id)}">{title}</a>'
        assert link in client.get(f"/cards/{card_id}").text
        assert link in deck and link in today
    chinese = client.get(f"/cards/{MEGATRON}", params={"lang": "zh"}).text
    assert f'<a href="{page_of(MEGATRON)}?lang=zh">3D 并行布局计算器</a>' in chinese


def test_the_zero_calculator_is_unchanged(client):
    page = client.get(page_of(ZERO)).text
    assert "Does not fit: 140 GB of 80 GB (60 GB short)" in " ".join(
        html.unescape(re.sub(r"<[^>]+>", "", page)).split()
    )
    assert client.get(api_of(ZERO)).json()["total_gpu_bytes"] == 140 * 10**9


# --- the JSON ---------------------------------------------------------------------------------


def test_the_json_is_typed_and_matches_the_page(client):
    body = client.get(api_of(ACTIVATION), params={"sp": "on"}).json()
    assert body["card_id"] == ACTIVATION and body["title"] == "Activation memory calculator"
    outputs = {o["id"]: o for o in body["outputs"]}
    assert outputs["per_layer"]["value"] == 358_612_992
    assert outputs["per_layer"]["card_formula"] == "act_tp_sp"
    assert outputs["per_layer"]["latex"].startswith(r"\frac{sbh}{t}")
    # 96 layers × 14.25·sbh against 16·12·L·h²/64 = 288·h²: 1368·2048 / (288·12288) = 19/24.
    assert outputs["act_vs_states"]["exact"] == "19/24" and outputs["in_flight"]["shown"] == "8"
    inputs = {i["name"]: i for i in body["inputs"]}
    assert inputs["gpu_mem"]["value"] == 80 * 10**9 and inputs["gpu_mem"]["unit"] == "GB"
    assert inputs["sp"]["kind"] == "choice" and inputs["sp"]["text"] == "on"
    assert [c["value"] for c in inputs["recompute"]["choices"]] == ["none", "selective", "full"]
    [bar] = body["memory"]
    assert bar["fits"] and bar["total_bytes"] == 77_913_391_104
    assert [t["id"] for t in bar["terms"]] == ["states_gpu", "act_gpu"]


def test_the_json_in_chinese(client):
    body = client.get(api_of(MEGATRON), params={"lang": "zh", "global_batch": "96"}).json()
    assert body["title"] == "3D 并行布局计算器"
    checks = {c["id"]: c for c in body["checks"]}
    assert not checks["pipeline-fills"]["holds"]
    assert checks["pipeline-fills"]["note"].startswith("微批次数少于阶段数时")
    assert {o["id"]: o["shown"] for o in body["outputs"]}["bubble"] == "175%"  # 7/4


@pytest.mark.parametrize(("lang", "detail"), [("en", "is not a number"), ("zh", "不是数字")])
def test_bad_json_input_is_a_problem_document_per_field(client, lang, detail):
    response = client.get(api_of(ACTIVATION), params={"lang": lang, "s": "many", "t": "5"})
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert body["code"] == "invalid_calculator_input" and detail in body["detail"]
    # s is no number, and 96 heads do not divide over t = 5: both are said at once.
    assert [e["field"] for e in body["errors"]] == ["s", "t"]


def test_an_unknown_input_is_refused(client):
    response = client.get(api_of(ACTIVATION), params={"psi": "70B"})
    assert response.status_code == 400
    body = response.json()
    assert body["code"] == "unknown_calculator_input" and "psi" in body["detail"]
    assert "n_m" in body["detail"]  # the names it takes


@pytest.mark.parametrize(
    "params",
    [
        {"s": "\x00"},
        {"s": "é" * 40},
        {"h": "1e30"},
        {"gpu_mem": "-0"},
        {"recompute": "<b>"},
        {"n_m": "1_000"},
        {"b": "１"},
    ],
)
def test_odd_input_is_never_a_500(client, params):
    response = client.get(api_of(ACTIVATION), params=params)
    assert response.status_code in (200, 400)
    assert response.headers["content-type"].startswith(("application/json", "application/problem"))


def test_the_openapi_document_names_both_calculators(client):
    spec = client.get("/openapi.json").json()
    operation = spec["paths"]["/api/v1/cards/{card_id}/calculator"]["get"]
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    refs = {item["$ref"].rsplit("/", 1)[1] for item in schema["anyOf"]}
    assert refs == {"CalculatorPublic", "CardCalculatorPublic"}
    problem = operation["responses"]["400"]["content"]["application/problem+json"]["schema"]
    assert problem["$ref"].endswith("/CalculatorProblemPublic")
    schemas = spec["components"]["schemas"]
    assert "errors" in schemas["CalculatorProblemPublic"]["properties"]
    assert {"inputs", "outputs", "checks", "memory"} <= set(
        schemas["CardCalculatorPublic"]["properties"]
    )
