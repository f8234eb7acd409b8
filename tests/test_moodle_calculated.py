"""Moodle calculated multichoice export, reopened: the XML parsed as Moodle's importer reads it
(``qformat_xml::import_calculated``), every ``{=...}`` formula checked by a port of Moodle's own
formula check and computed here, at every dataset item, by a small evaluator of Moodle's syntax
written for this test (wildcards put in as Moodle puts them, ``(value)``, then arithmetic on
Python's ``ast`` limited to numbers, operators and Moodle's functions), against the engine's key
and pitfall values for those parameters; templates Moodle cannot ask stay fixed variants, with the
reason; the option through the API, the dashboard and the CLI."""

from __future__ import annotations

import ast
import copy
import html
import math
import operator
import re
from collections import Counter
from fractions import Fraction

import defusedxml.ElementTree as SafeET
import pytest
from test_authoring import instructor_headers, learner_headers
from test_authoring_web import log_in
from test_derived_params import SHARDED, card_with
from test_exports import flat, html_text, mathjax
from test_i18n import untranslated

from app.authoring.exports import export_card, export_published
from app.cli import main as cli_main
from app.domain.cards import Card, parse_card
from app.domain.formulas import parse_formula
from app.domain.generation import candidates
from app.domain.moodle_calculated import export_template, plan_calculated
from app.domain.moodle_formulas import moodle_text, translate
from tests.conftest import CARDS_DIR

API = "/api/v1"
# Moodle's own patterns (qtype_calculated): a wildcard, and a formula inside a text.
WILDCARD = re.compile(r"\{([A-Za-z][^>} <{\"']*)\}")
FORMULA = re.compile(r"\{=([^{}]*(?:\{[A-Za-z][^>} <{\"']*\}[^{}]*)*)\}")
# What a shown unit means in base units, written here from the README's table.
UNITS = {
    "B": Fraction(1),
    "KB": Fraction(10**3),
    "MB": Fraction(10**6),
    "GB": Fraction(10**9),
    "TB": Fraction(10**12),
    "PB": Fraction(10**15),
    "GiB": Fraction(2**30),
    "MiB": Fraction(2**20),
    "KiB": Fraction(2**10),
    "TiB": Fraction(2**40),
    "B/s": Fraction(1),
    "MB/s": Fraction(10**6),
    "GB/s": Fraction(10**9),
    "TB/s": Fraction(10**12),
    "s": Fraction(1),
    "ms": Fraction(1, 10**3),
    "µs": Fraction(1, 10**6),
    "×": Fraction(1),
    "%": Fraction(1, 100),
    "GPUs": Fraction(1),
    "张 GPU": Fraction(1),
    "": Fraction(1),
}


# --- a tiny evaluator of Moodle's formulas, for this test only ---------------------------------


def php_round(x: float, places: float = 0) -> float:
    """PHP's round: halves away from zero."""
    factor = 10.0 ** int(places)
    y = math.floor(abs(x) * factor + 0.5) / factor
    return math.copysign(y, x)


FUNCTIONS = {
    "abs": abs,
    "ceil": math.ceil,
    "floor": math.floor,
    "sqrt": math.sqrt,
    "log": math.log,
    "log10": math.log10,
    "pow": math.pow,
    "round": php_round,
    "min": min,
    "max": max,
}
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul}


def compute(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = compute(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return compute(node.left) / compute(node.right)
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        return OPERATORS[type(node.op)](compute(node.left), compute(node.right))
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in FUNCTIONS
        and not node.keywords
    ):
        return float(FUNCTIONS[node.func.id](*(compute(a) for a in node.args)))
    raise AssertionError(f"not Moodle arithmetic: {ast.dump(node)}")


def moodle_value(formula: str, values: dict[str, str]) -> float:
    """A formula's value at one dataset item: each {name} becomes (value), as Moodle does."""
    for name, value in values.items():
        formula = formula.replace("{" + name + "}", f"({value})")
    assert "{" not in formula, formula
    return compute(ast.parse(formula, mode="eval").body)


def formula_errors(formula: str) -> str | None:
    """A port of qtype_calculated's get_formula_errors: None when Moodle accepts the formula."""
    while found := re.search(r"\{[A-Za-z][^>} <{\"']*\}", formula):
        formula = formula.replace(found.group(0), "1")
    formula = formula.replace(" ", "").lower()
    safe = re.escape("-+/*%>:^\\~<?=&|!")
    number = f"[{safe}.0-9eE]"
    call = re.compile(rf"(^|[{safe},(])([a-z0-9_]*)\(({number}+(,{number}+((,{number}+)+)?)?)?\)")
    while found := call.search(formula):
        name, args = found.group(2), found.group(3) or ""
        count = 0 if not args else args.count(",") + 1
        arity = {"": 1, "pi": 0, "log": (1, 2), "round": (1, 2), "pow": 2, "min": "2+", "max": "2+"}
        wanted = arity.get(name, 1 if name in {"abs", "ceil", "floor", "sqrt", "log10"} else None)
        if wanted is None:
            return f"unsupported function {name}"
        ok = (
            count in wanted
            if isinstance(wanted, tuple)
            else count >= 2
            if wanted == "2+"
            else count == wanted
        )
        if not ok:
            return f"{name or 'brackets'} with {count} arguments"
        if found.group(1):
            formula = formula.replace(found.group(0), found.group(1) + "1")
        else:
            formula = re.sub(rf"^{name}\([^)]*\)", "1", formula)
    bad = re.search(rf"[^{safe}.0-9eE]+", formula)
    return f"illegal: {bad.group(0)}" if bad else None


# --- reading the file as Moodle's importer does -----------------------------------------------


def questions_by_category(content: bytes) -> dict[str, list]:
    root = SafeET.fromstring(content)
    assert root.tag == "quiz"
    found: dict[str, list] = {}
    category = None
    for question in root.findall("question"):
        if question.get("type") == "category":
            category = question.findtext("category/text")
            found.setdefault(category, [])
            continue
        assert category is not None
        found[category].append(question)
    return found


def items_of(question) -> list[dict[str, str]]:
    """Item k of every wildcard: the k-th parameter combination (Moodle's dataset loader)."""
    definitions = question.find("dataset_definitions").findall("dataset_definition")
    columns = {}
    for definition in definitions:
        name = definition.findtext("name/text")
        items = definition.find("dataset_items").findall("dataset_item")
        count = int(definition.findtext("itemcount"))
        assert count == len(items) == int(definition.findtext("number_of_items")) <= 100
        assert [int(i.findtext("number")) for i in items] == list(range(1, count + 1))
        columns[name] = [i.findtext("value") for i in items]
    counts = {len(values) for values in columns.values()}
    assert len(counts) == 1
    return [{name: values[k] for name, values in columns.items()} for k in range(counts.pop())]


def answer_formula(text: str) -> tuple[str, Fraction]:
    """An answer's one formula and the scale of the unit after it."""
    (formula,) = FORMULA.findall(text)
    unit = FORMULA.sub("", text).strip()
    return formula, UNITS[unit]


def close(moodle: Fraction, exact: Fraction) -> bool:
    return abs(moodle - exact) <= abs(exact) / 10**9 + Fraction(1, 10**12)


def check_calculated(card: Card, template, questions: list) -> set[int]:
    """Every answer of every question computes the engine's key or one pitfall at every item,
    the answers stay distinct there, and the key keeps one position by value; the positions."""
    positions = set()
    combinations = None
    for question in questions:
        items = items_of(question)
        drawn = {tuple(Fraction(item[n]) for n in template.params) for item in items}
        combinations = combinations or drawn
        assert drawn == combinations  # the same items in every question of the template
        answers = question.findall("answer")
        assert [a.get("fraction") for a in answers].count("100") == 1
        parsed = [answer_formula(html.unescape(a.findtext("text"))) for a in answers]
        matched: list[set[str]] = [set() for _ in answers]
        for index, item in enumerate(items):
            values = {name: Fraction(text) for name, text in item.items()}
            key, pitfalls = candidates(template, template.complete(values))
            shown = [Fraction(moodle_value(f, item)) * scale for f, scale in parsed]
            exact = []  # the engine's value each answer computes here
            for at, answer in enumerate(answers):
                if answer.get("fraction") == "100":
                    assert close(shown[at], key.value), (template.id, item)
                    exact.append(key.value)
                    continue
                fits = {p.pitfall.id: p.value for p in pitfalls if close(shown[at], p.value)}
                assert fits, (template.id, item, at)
                exact.append(next(iter(fits.values())))
                matched[at] = set(fits) if index == 0 else matched[at] & set(fits)
            ordered = sorted(exact)
            for low, high in zip(ordered, ordered[1:], strict=False):
                whole = low.denominator == high.denominator == 1  # counts: only different
                assert high - low >= abs(high) / 20 or (whole and high > low), (template.id, item)
            key_at = next(i for i, a in enumerate(answers) if a.get("fraction") == "100")
            position = sum(1 for value in exact if value < exact[key_at])
            if index == 0:
                first = position
            assert position == first, (template.id, item)
        assert all(matched[i] for i, a in enumerate(answers) if a.get("fraction") == "0")
        for answer, ids in zip(answers, matched, strict=True):
            if answer.get("fraction") == "0":
                assert_explained(question, answer, [template_pitfall(template, i) for i in ids])
        positions.add(first)
    return positions


def template_pitfall(template, pitfall_id: str):
    return next(p for p in template.pitfalls if p.id == pitfall_id)


def assert_explained(question, answer, pitfalls) -> None:
    """The answer's feedback is one of its pitfalls' explanation (its words between the
    placeholders and the maths, in the file's language), or that pitfall's title with the
    explanation in the general feedback."""
    feedback = flat(html_text(answer.findtext("feedback/text")))
    general = flat(html_text(question.findtext("generalfeedback/text")))
    lang = "zh" if re.search(r"[\u4e00-\u9fff]", general) else "en"

    def words(text: str) -> list[str]:
        pieces = re.split(r"\{[^{}]*\}|\$[^$]*\$", text)
        return [flat(p).strip(" .,;:：，。；") for p in pieces if len(flat(p)) >= 12]

    def explains(pitfall, where: str) -> bool:
        return all(piece in where for piece in words(pitfall.explanation.get(lang)))

    assert any(
        explains(p, feedback)
        or (feedback == flat(mathjax(p.title.get(lang))) and explains(p, general))
        for p in pitfalls
    ), feedback


# --- the ZeRO card's calculated questions -----------------------------------------------------


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_zero3_per_rank_computes_the_key_and_each_pitfall_at_every_parameter_combination(
    card, lang
):
    export = export_card(card, "moodle", lang, numeric="calculated")
    assert export.filename == f"{card.id}-{lang}-calculated.xml"
    categories = questions_by_category(export.content)
    template = card.template("p2-zero3-per-rank")
    questions = categories[f"$course$/top/infracards/{card.id}/p2-zero3-per-rank"]
    assert {q.get("type") for q in questions} == {"calculatedmulti"}
    assert len(questions) == template.choices  # one per position of the key
    assert check_calculated(card, template, questions) == {0, 1, 2, 3}
    # every combination of the domain is an item
    domain = {
        (psi, n) for psi in template.params["psi"].values for n in template.params["n_d"].values
    }
    assert {(Fraction(i["psi"]), Fraction(i["n_d"])) for i in items_of(questions[0])} == domain
    # golden, from the card's ZeRO-3 formula 16Ψ/N_d: 70B parameters on 64 ranks hold 17.5 GB
    item = {"psi": "70000000000", "n_d": "64"}
    key = next(a for a in questions[0].findall("answer") if a.get("fraction") == "100")
    formula, scale = answer_formula(key.findtext("text"))
    assert moodle_value(formula, item) * float(scale) == pytest.approx(17.5e9)
    # the stem shows the parameters through Moodle's wildcards, math for MathJax
    stem = questions[0].findtext("questiontext/text")
    assert "{n_d}" in stem and "{=round({psi}/1000000000,2)}B" in stem and "$" not in stem
    assert moodle_value("round({psi}/1000000000,2)", item) == 70
    # each wrong answer's feedback is its pitfall's explanation (numbers as Moodle formulas)
    for question in questions:
        for answer in question.findall("answer"):
            feedback = html_text(answer.findtext("feedback/text"))
            if answer.get("fraction") == "100":
                assert feedback == ""
            else:
                assert feedback and all(
                    formula_errors(f) is None for f in FORMULA.findall(feedback)
                )


def test_every_calculated_question_of_the_shipped_cards_is_what_moodle_imports_and_computes():
    for path in sorted(CARDS_DIR.glob("*.yaml")):
        from app.domain.cards import read_card

        card = read_card(path)
        content = export_card(card, "moodle", "en", 2, numeric="calculated").content
        categories = questions_by_category(content)
        plan = {route.template.id: route for route in plan_calculated(card, "en")}
        for template in card.templates():
            questions = categories[f"$course$/top/infracards/{card.id}/{template.id}"]
            route = plan[template.id]
            if not route.calculated:
                assert {q.get("type") for q in questions} == {"multichoice"}
                continue
            assert {q.get("type") for q in questions} == {"calculatedmulti"}
            for question in questions:
                assert_importable(question)
            positions = check_calculated(card, template, questions)
            assert len(positions) == len(questions) >= 3, template.id


def assert_importable(question) -> None:
    """What qformat_xml::import_calculated reads without a default is there, well formed."""
    assert question.findtext("synchronize") == "0"
    assert question.findtext("single") == "1" and question.findtext("shuffleanswers") == "1"
    assert question.findtext("answernumbering") == "abc"
    assert question.findtext("name/text")
    for answer in question.findall("answer"):
        assert answer.get("fraction") in ("0", "100")
        assert float(answer.findtext("tolerance")) >= 0
        assert answer.findtext("tolerancetype") == "1"
        assert answer.findtext("correctanswerformat") in ("1", "2")
        assert int(answer.findtext("correctanswerlength")) >= 0
        assert answer.find("feedback/text") is not None
    names = set()
    for definition in question.find("dataset_definitions").findall("dataset_definition"):
        for field in ("status", "name", "distribution", "minimum", "maximum", "decimals"):
            assert definition.findtext(f"{field}/text") is not None, field
        assert definition.findtext("status/text") == "private"
        assert definition.findtext("type") == "calculated"
        assert float(definition.findtext("minimum/text")) <= float(
            definition.findtext("maximum/text")
        )
        names.add(definition.findtext("name/text"))
    items = items_of(question)
    texts = [
        question.findtext("questiontext/text"),
        question.findtext("generalfeedback/text"),
        *(a.findtext("text") for a in question.findall("answer")),
        *(a.findtext("feedback/text") for a in question.findall("answer")),
    ]
    for text in texts:
        for formula in FORMULA.findall(text):
            assert " " not in formula and formula_errors(formula) is None, formula
            assert math.isfinite(moodle_value(formula, items[0]))
            assert math.isfinite(moodle_value(formula, items[-1]))
        # every wildcard a formula computes with is a dataset
        assert set(WILDCARD.findall(" ".join(FORMULA.findall(text)))) <= names


def test_the_shipped_cards_send_every_numeric_template_to_moodle_calculated_and_statements_fixed():
    from app.domain.cards import read_card

    counts = {}
    for path in sorted(CARDS_DIR.glob("*.yaml")):
        card = read_card(path)
        plan = plan_calculated(card, "zh")
        for route in plan:
            if route.template.kind == "statement":
                assert not route.calculated
                assert route.reason.zh == "陈述题模板：选项是句子，不是计算出的数值"
            else:
                assert route.calculated, (route.template.id, route.reason and route.reason.en)
                assert route.items == min(route.combinations, 100)
        counts[card.id] = Counter("calculated" if r.calculated else "fixed" for r in plan)
    assert counts["zero-memory-offload"] == {"calculated": 37, "fixed": 22}


# --- what cannot be calculated, derived parameters and constraints ----------------------------


def numeric(template_id: str, answer: str, pitfalls: list[str], values: list[int]) -> dict:
    return {
        "id": template_id,
        "version": 1,
        "kind": "numeric",
        "params": {"n": {"values": values}},
        "stem": {"en": "With $\\frac{1}{n}$ and n = {n}, how many?", "zh": "n = {n}，多少？"},
        "answer": answer,
        "unit": "1",
        "precision": 0,
        "choices": 3,
        "solution": [{"en": "It is {answer}.", "zh": "是 {answer}。"}],
        "pitfalls": [
            {
                "id": f"p{i}",
                "title": {"en": f"Pitfall {i}", "zh": f"陷阱 {i}"},
                "formula": formula,
                "explanation": {"en": "{value}, not {answer}.", "zh": "{value}，不是 {answer}。"},
            }
            for i, formula in enumerate(pitfalls)
        ],
    }


@pytest.fixture
def odd_card() -> Card:
    document = card_with(SHARDED)
    templates = document["points"][0]["templates"]
    templates.append(numeric("rounded-up", "pow2ceil(n)", ["n", "2*n + 40", "n - 1"], [3, 5, 9]))
    templates.append(
        numeric("in-doubles", "ceil(n*0.1*10)", ["n + 10", "n + 20", "n * 0 + 1"], [3])
    )
    shown = copy.deepcopy(SHARDED)
    shown["id"] = "latex-braces"
    shown["stem"]["en"] = "Per rank, $\\frac{1}{tp}$ of {heads} heads ($\\frac{h}{{tp}}$)."
    templates.append(shown)
    return parse_card(document)


def test_what_moodle_cannot_ask_stays_fixed_variants_with_the_reason(odd_card):
    plan = {route.template.id: route for route in plan_calculated(odd_card, "en")}
    assert plan["kv-per-rank"].calculated
    assert "pow2ceil" in plan["rounded-up"].reason.en
    assert plan["rounded-up"].reason.zh.startswith("其答案：pow2ceil")
    assert "in doubles" in plan["in-doubles"].reason.en and "n = 3" in plan["in-doubles"].reason.en
    content = export_card(odd_card, "moodle", "en", 2, numeric="calculated").content
    root = SafeET.fromstring(content)
    infos = {
        q.findtext("category/text"): html_text(q.findtext("info/text"))
        for q in root.findall("question")
        if q.get("type") == "category"
    }
    where = f"$course$/top/infracards/{odd_card.id}"
    assert "fixed variants: its answer: pow2ceil" in infos[f"{where}/rounded-up"]
    assert infos[f"{where}/kv-per-rank"].startswith("1. kv-per-rank: calculated: ")
    categories = questions_by_category(content)
    fixed = categories[f"{where}/rounded-up"]
    assert fixed and {q.get("type") for q in fixed} == {"multichoice"}
    assert "<!-- infracards · kv-cache version" in content.decode()


def test_derived_parameters_are_wildcards_and_only_allowed_combinations_are_items(odd_card):
    template = odd_card.template("kv-per-rank")
    route = export_template(template, 1, "en")
    assert [d.name for d in route.datasets] == ["heads", "head_dim", "tp", "hidden"]
    content = export_card(odd_card, "moodle", "en", 1, numeric="calculated").content
    questions = questions_by_category(content)["$course$/top/infracards/kv-cache/kv-per-rank"]
    items = items_of(questions[0])
    allowed = {tuple(c) for c in template.allowed}
    assert {tuple(Fraction(i[n]) for n in ("heads", "head_dim", "tp")) for i in items} == allowed
    assert all(int(i["hidden"]) == int(i["heads"]) * int(i["head_dim"]) for i in items)
    assert all(int(i["heads"]) % int(i["tp"]) == 0 for i in items)  # the constraint holds
    assert "{hidden}" in questions[0].findtext("questiontext/text")
    assert len(check_calculated(odd_card, template, questions)) == len(questions)


def test_latex_braces_are_kept_from_moodle_and_values_are_braced_once_more(odd_card):
    route = export_template(odd_card.template("latex-braces"), 1, "en")
    stem = route.questions[0].stem
    # \frac{1}{tp} shows the letter: Moodle must not put a value there ({ tp} is the same LaTeX)
    assert "\\frac{1}{ tp}" in stem and "\\frac{h}{{tp}}" in stem
    names = {d.name for d in route.datasets}
    assert [w for w in WILDCARD.findall(stem) if w in names] == ["heads", "tp"]


# --- the translation itself -------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "2*psi + 2*psi + 12*psi/n_d",
        "(n_d - 1)*(alpha + 2*layer/n_d/(50*10**9))",
        "-(a - -b) / (a - b)",
        "a**3 - a**-2 + sqrt(a*b) + 1.5e3/b",
        "log(a) + log(b, 2) - abs(b - 10*a)",
        "ceil(16*a/b) + floor(b/3) + min(a, b, 7) - max(a, 2)",
    ],
)
def test_moodle_formulas_compute_what_the_engine_computes(text):
    names = ("psi", "n_d", "alpha", "layer", "a", "b")
    formula = parse_formula(text, names)
    written = moodle_text(translate(formula))
    assert " " not in written and "--" not in written and formula_errors(written) is None
    for a, b in [(3, 7), (7, 3), (11, 5)]:
        values = {"psi": 70 * 10**9, "n_d": a + 1, "alpha": Fraction(1, 10**5)}
        values |= {"layer": 10**8 * b, "a": a, "b": b}
        moodle = moodle_value(written, {k: str(Fraction(v)) for k, v in values.items()})
        exact = formula.evaluate(values)
        assert moodle == pytest.approx(float(exact), rel=1e-12), (written, values)


def test_pow2ceil_is_not_translated():
    from app.domain.moodle_formulas import Untranslatable

    with pytest.raises(Untranslatable, match="pow2ceil"):
        translate(parse_formula("pow2ceil(x) + 1", ("x",)))


# --- asking for it: API, dashboard, CLI -------------------------------------------------------


def test_the_api_exports_calculated_questions_and_says_which_templates_went_which_way(
    app, client, card
):
    url = f"{API}/instructor/cards/{card.id}/export"
    plan_url = f"{url}/moodle-calculated"
    assert client.get(plan_url, headers=learner_headers(client)).status_code == 403
    teacher = instructor_headers(client, app)
    plan = client.get(plan_url, params={"lang": "zh"}, headers=teacher)
    assert plan.status_code == 200, plan.text
    body = plan.json()
    assert body["card_id"] == card.id and body["card_version"] == card.version
    assert body["calculated"] + body["fixed"] == len(card.templates()) == len(body["templates"])
    zero3 = next(t for t in body["templates"] if t["template_id"] == "p2-zero3-per-rank")
    assert zero3 == {
        "template_id": "p2-zero3-per-rank",
        "point": 2,
        "calculated": True,
        "questions": 4,
        "combinations": 24,
        "items": 24,
        "summary": "计算题：4 道题，正确答案按数值大小各占一个位置，覆盖全部 24 种参数组合",
        "reason": None,
    }
    statement = next(t for t in body["templates"] if not t["calculated"])
    assert statement["reason"] and statement["questions"] == statement["items"] == 0

    moodle = client.get(url, params={"format": "moodle", "numeric": "calculated"}, headers=teacher)
    assert moodle.status_code == 200
    assert moodle.headers["content-disposition"].endswith(f'"{card.id}-en-calculated.xml"')
    types = Counter(q.get("type") for q in SafeET.fromstring(moodle.content).findall("question"))
    assert types["calculatedmulti"] == sum(t["questions"] for t in body["templates"])
    refused = client.get(url, params={"format": "apkg", "numeric": "calculated"}, headers=teacher)
    assert refused.status_code == 400 and refused.json()["code"] == "invalid_export"
    bad = client.get(url, params={"format": "moodle", "numeric": "formulas"}, headers=teacher)
    assert bad.status_code == 422
    spec = client.get("/openapi.json").json()
    assert spec["components"]["schemas"]["NumericExport"]["enum"] == ["fixed", "calculated"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_dashboard_offers_the_choice_and_shows_the_plan(client, app, lang):
    log_in(client, app)
    page = client.get("/instructor/cards/zero-memory-offload", params={"lang": lang}).text
    form = re.search(r'<form class="account-form moodle-export".*?</form>', page, re.DOTALL)
    assert form and 'name="numeric"' in form.group(0)
    assert re.findall(r'<option value="(\w+)"', form.group(0))[:2] == ["fixed", "calculated"]
    report = client.get(
        "/instructor/cards/zero-memory-offload/export/moodle", params={"lang": lang}
    )
    assert report.status_code == 200
    rows = re.findall(r"<tr>\s*<th scope=\"row\">.*?</tr>", report.text, re.DOTALL)
    card = app.state.live_catalog.catalog.latest("zero-memory-offload")
    assert len(rows) == len(card.templates())
    if lang == "zh":
        assert "陈述题模板" in report.text and not untranslated(report.text)
    download = client.get(
        "/instructor/cards/zero-memory-offload/export",
        params={"format": "moodle", "numeric": "calculated", "language": lang},
    )
    same = export_published(
        app.state.live_catalog.catalog, "zero-memory-offload", "moodle", lang, numeric="calculated"
    )
    assert download.status_code == 200 and download.content == same.content


def test_the_cli_writes_the_calculated_file(card, tmp_path, capsys):
    out = tmp_path / "calculated.xml"
    args = ["export-questions", "--card", card.id, "--cards-dir", str(CARDS_DIR)]
    assert (
        cli_main([*args, "--format", "moodle", "--out", str(out), "--numeric", "calculated"]) == 0
    )
    assert "calculated" in capsys.readouterr().out
    assert b'type="calculatedmulti"' in out.read_bytes()
    assert cli_main([*args, "--format", "qti", "--out", str(out), "--numeric", "calculated"]) == 1
