"""A card's texts hold words and $...$ maths the pages render, nothing else: validation (card
files at load, the dashboard's drafts, publishing) refuses HTML markup and LaTeX commands the
pages' LaTeX→MathML conversion does not render, naming the field and the command in both
languages; and the exports never hand such a command or tag to MathJax or to an HTML reader,
even for a card stored before the check.

Golden texts are written here from the inputs the QA pass tried."""

from __future__ import annotations

import copy
import io
import json
import re
import zipfile
from pathlib import Path

import pytest
import yaml

from app.authoring.exports import anki_fields, export_card
from app.domain.authoring import check_document
from app.domain.cards import CardError, parse_card
from app.domain.catalog import load_cards
from app.domain.export_plan import mathjax_delimiters, plan_export
from app.domain.markup import LATEX_COMMANDS, markup_problem, markup_problems, strip_markup
from app.rendering import latex_to_mathml

ROOT = Path(__file__).resolve().parents[1]
CARD = json.loads((ROOT / "tests" / "cards_fixtures" / "kv_cache_card.json").read_text())

HREF = r"$\href{javascript:alert(1)}{K}$"
HOSTILE_STEM = f"<script>alert('stem')</script> {HREF} $<img src=x onerror=alert(5)>$"


def sample(command: str) -> str:
    """The command used as maths uses it (its arguments, its pair)."""
    if command in ("left", "right"):
        return r"\left( x \right)"
    if command in ("frac", "dfrac", "tfrac", "binom", "overset", "underset", "stackrel"):
        return rf"\{command}{{a}}{{b}}"
    if command in {"big", "Big", "bigl", "bigr", "Bigl", "Bigr"}:
        return rf"\{command}( x"
    takes_one = """sqrt overline underline hat bar tilde vec dot ddot widehat widetilde overbrace
        underbrace mathrm mathbf mathit mathsf mathtt mathcal mathbb text textrm textbf textit
        operatorname boldsymbol""".split()
    if command in takes_one:
        return rf"a \{command}{{x}}"
    return rf"a \{command} b"


@pytest.mark.parametrize("command", sorted(LATEX_COMMANDS))
def test_every_allowed_command_is_rendered_by_the_pages(command):
    rendered = str(latex_to_mathml(sample(command)))
    assert rendered.startswith("<math"), rendered  # not the source shown as code
    assert "\\" not in rendered, rendered  # not an unknown command copied as a name


@pytest.mark.parametrize(
    "command",
    ["href", "url", "unicode", "html", "htmlClass", "class", "style", "cssId", "require", "def"]
    + ["newcommand", "renewcommand", "input", "color"],
)
def test_commands_that_link_load_style_or_define_are_refused(command):
    problem = markup_problem(f"$a \\{command}{{x}}$")
    assert problem is not None
    assert problem.get("en") == (
        f"the LaTeX command \\{command} is not allowed: it links, loads, styles or defines "
        "something, and an export's MathJax would act on it"
    )
    assert problem.get("zh") == (
        f"不允许使用 LaTeX 命令 \\{command}：它会链接、加载、设置样式或定义内容，导出文件中的 "
        "MathJax 会执行它"
    )


def poisoned() -> dict:
    document = copy.deepcopy(CARD)
    document["points"][0]["templates"][0]["stem"]["en"] = HOSTILE_STEM
    document["definition"] = {"en": r"$\text{<b>bold</b>}$", "zh": r"$\unicode{x3C}script$"}
    document["problems_solved"]["en"] = "<a href='javascript:alert(3)'>link</a>"
    document["formulas"][0]["latex"] = r"\frac{16\Psi}{N_d} <script>alert(4)</script>"
    document["use_cases"]["zh"] = r"用 $\mathrm{KV} \foo$ 估算"
    return document


def test_the_reported_texts_are_refused_at_their_field_naming_the_markup():
    problems = {
        (p.template_id, p.field): (p.reason.get("en"), p.reason.get("zh"), p.text.get("en"))
        for p in check_document(poisoned()).errors
    }
    html_en = (
        "it holds HTML markup ({markup}): a card's texts are plain text with $...$ maths; put a "
        "space after a less-than sign, or write \\lt in maths"
    )
    html_zh = (
        "其中有 HTML 标记（{markup}）：卡片的文字是纯文本加 $...$ 公式；小于号后请加空格，"
        "公式中也可写 \\lt"
    )
    expected = {
        ("kv-total", "stem.en"): "'<script'",
        (None, "definition.en"): "'<b'",
        (None, "problems_solved.en"): "'<a'",
        (None, "formulas.0.latex"): "'<script'",
    }
    for where, markup in expected.items():
        en, zh, _ = problems[where]
        assert (en, zh) == (html_en.format(markup=markup), html_zh.format(markup=markup)), where
    assert problems[(None, "definition.zh")][:2] == (
        "the LaTeX command \\unicode is not allowed: it links, loads, styles or defines "
        "something, and an export's MathJax would act on it",
        "不允许使用 LaTeX 命令 \\unicode：它会链接、加载、设置样式或定义内容，导出文件中的 "
        "MathJax 会执行它",
    )
    assert problems[(None, "use_cases.zh")][:2] == (
        "the LaTeX command \\foo is not one the pages render (maths may use fractions, roots, "
        "Greek letters, operators, relations, delimiters and \\mathrm-like fonts)",
        "页面不能渲染 LaTeX 命令 \\foo（公式可用分数、根号、希腊字母、运算符、关系符、括号和 "
        "\\mathrm 一类的字体）",
    )
    assert problems[("kv-total", "stem.en")][2].startswith(
        "card 'kv-cache', template 'kv-total', stem.en: it holds HTML markup ('<script')"
    )
    assert len(problems) == 6  # the template itself still validates: no other error


def test_a_comparison_and_a_dollar_sign_are_not_markup():
    assert markup_problem(r"$N_d \lt 8$, $N_d \le 8$ and a < b cost \$5") is None


def test_the_shipped_cards_pass():
    for path in sorted((ROOT / "cards").glob("*.yaml")):
        assert markup_problems(yaml.safe_load(path.read_text("utf-8"))) == [], path.name


def test_a_card_file_with_markup_is_refused_at_load(tmp_path):
    document = copy.deepcopy(CARD)
    document["points"][0]["templates"][0]["solution"][0]["zh"] = r"$\href{https://x.example}{K}$"
    (tmp_path / "kv-cache.yaml").write_text(json.dumps(document, ensure_ascii=False))
    with pytest.raises(CardError) as refused:
        load_cards(tmp_path)
    assert str(refused.value) == (
        "card 'kv-cache', template 'kv-total', solution.1.zh: the LaTeX command \\href is not "
        "allowed: it links, loads, styles or defines something, and an export's MathJax would "
        "act on it"
    )


def test_markup_is_left_out_of_mathjax_for_a_card_stored_before_the_check():
    assert mathjax_delimiters(HOSTILE_STEM) == (
        "< script>alert('stem')< /script> \\(href{javascript:alert(1)}{K}\\) "
        "\\(< img src=x onerror=alert(5)>\\)"
    )
    assert strip_markup(r"\(\href{x}{y}\) \\href $\frac{a}{b}$ \$5") == (
        r"(href{x}{y}) href $\frac{a}{b}$ \$5"
    )


ACTIVE = re.compile(r"\\(?:href|unicode|url)|<script|<img|<a href|<b>K")


def test_no_export_hands_on_a_stored_cards_markup():
    document = copy.deepcopy(CARD)
    template = document["points"][0]["templates"][0]
    template["stem"]["en"] = HOSTILE_STEM + " {layers}"
    template["pitfalls"][0]["explanation"]["en"] = r"{value}: $\unicode{x3C}$ <b>K</b>: {answer}."
    template["pitfalls"][1]["title"]["en"] = r"$\url{javascript:x}$ one"
    template["solution"][0]["en"] = "<a href='javascript:alert(3)'>link</a> {=kv:GB:2}."
    card = parse_card(document)  # compiled as a stored version is, not validated
    fields = anki_fields(plan_export(card, "en", 2).items[0], plan_export(card, "en", 2))
    assert "\\(href{javascript:alert(1)}{K}\\)" in fields[0]
    assert "&lt; script&gt;alert('stem')&lt; /script&gt;" in fields[0]
    outputs = {}
    for fmt, numeric in (("apkg", "fixed"), ("moodle", "fixed"), ("moodle", "calculated")):
        content = export_card(card, fmt, "en", 2, numeric=numeric, timestamp=0).content
        outputs[f"{fmt} {numeric}"] = content
    qti = export_card(card, "qti", "en", 2).content
    with zipfile.ZipFile(io.BytesIO(qti)) as archive:
        outputs["qti"] = b"".join(archive.read(name) for name in archive.namelist())
    with zipfile.ZipFile(io.BytesIO(outputs["apkg fixed"])) as archive:
        outputs["apkg fixed"] = b"".join(archive.read(name) for name in archive.namelist())
    for name, content in outputs.items():
        text = content.decode("utf-8", errors="replace")
        assert not ACTIVE.search(text), (name, ACTIVE.search(text))


def test_the_dashboards_draft_shows_the_problem_and_publishing_is_refused(client, app):
    from test_authoring import instructor_headers

    prof = instructor_headers(client, app)
    document = copy.deepcopy(CARD)
    document["points"][0]["templates"][0]["stem"]["zh"] = r"$\href{javascript:alert(1)}{K}$"
    created = client.post("/api/v1/instructor/cards", json=document, headers=prof)
    assert created.status_code == 201, created.text
    published = client.post("/api/v1/instructor/cards/kv-cache/publish", headers=prof)
    assert published.status_code == 422 and published.json()["code"] == "card_has_errors"
    errors = [p for p in published.json()["problems"] if p["severity"] == "error"]
    assert [(p["template_id"], p["field"]) for p in errors] == [("kv-total", "stem.zh")]
    assert "\\href" in errors[0]["message"]
