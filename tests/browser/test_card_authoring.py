"""A whole card authored in the dashboard, in a real browser, in each UI language: from an empty
draft, the card's texts, its parameters and formula (a formula refused at its column first), two
exam points, a numeric template with three pitfalls and a statement template with another wording
of its answer, all in English and Chinese; then it validates with no problem, previews a question,
publishes, learners read it and practise it in both languages, and each export downloads as a
well-formed file. Nothing is written to the draft except through the dashboard's forms."""

from __future__ import annotations

import re
import sqlite3
import tempfile
import uuid
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from .helpers import shot
from .test_authoring import log_in_as_instructor

pytestmark = pytest.mark.browser


def t(en: str, zh: str) -> dict[str, str]:
    return {"en": en, "zh": zh}


# The card typed into the forms (it passes validation: checked with the card rules by hand,
# three pitfalls suffice for two choices, one shorter and one longer statement than the key).
TEXTS = {
    "definition": t(
        "Gradient accumulation adds the gradients of several micro-batches before one optimizer "
        "step.",
        "梯度累积把多个微批次的梯度加起来，再做一次优化器更新。",
    ),
    "use_cases": t(
        "Training with a large global batch on GPUs that hold only small micro-batches.",
        "在只能放下小微批次的 GPU 上用大的全局批次训练。",
    ),
    "problems_solved": t(
        "The batch size no longer depends on the activation memory of one GPU.",
        "批次大小不再受单张 GPU 激活显存的限制。",
    ),
}
TITLE = t("Gradient accumulation", "梯度累积")
POINTS = [
    (
        "global-batch",
        t("The global batch", "全局批次"),
        t(
            "Every rank accumulates its micro-batches; the ranks' gradients are then averaged.",
            "每个 rank 累积自己的微批次，然后在各 rank 之间平均梯度。",
        ),
    ),
    (
        "why-accumulate",
        t("Why accumulate", "为什么要累积"),
        t(
            "Accumulation trades time for memory: the same batch, in pieces.",
            "累积用时间换显存：同样的批次，分块计算。",
        ),
    ),
]
NUMERIC_STEM = t(
    "Each of {n_d} data-parallel ranks runs micro-batches of {micro} sequences and accumulates "
    "gradients over {steps} of them before each optimizer step. How many sequences does one "
    "optimizer step see?",
    "{n_d} 个数据并行 rank 各自运行 {micro} 条序列的微批次，每累积 {steps} 个微批次的梯度做一次"
    "优化器更新。一次优化器更新看到多少条序列？",
)
NUMERIC_PITFALLS = [
    (
        "forgot-ranks",
        t("Forgot the ranks", "忘了 rank 数"),
        "micro*steps",
        t(
            "{value} is one rank's share; all {n_d} ranks contribute: {answer}.",
            "{value} 只是一个 rank 的份额；{n_d} 个 rank 都有贡献：{answer}。",
        ),
    ),
    (
        "forgot-accumulation",
        t("Forgot the accumulation", "忘了累积"),
        "micro*n_d",
        t(
            "{value} is one micro-batch per rank; each rank accumulates {steps}: {answer}.",
            "{value} 是每个 rank 一个微批次；每个 rank 累积 {steps} 个：{answer}。",
        ),
    ),
    (
        "counted-backward",
        t("Counted the backward pass", "把反向传播也算了"),
        "2*global_batch",
        t(
            "{value} counts each sequence twice, forward and backward; it is one sample: {answer}.",
            "{value} 把每条序列按前向和反向算了两次；它只是一个样本：{answer}。",
        ),
    ),
]
STATEMENT_STEM = t(
    "Why accumulate gradients over several micro-batches?", "为什么要在多个微批次上累积梯度？"
)
STATEMENT_ANSWER = t(
    "To train with a large batch without holding its activations at once.",
    "为了用大批量训练，而不必同时保存它的全部激活。",
)
STATEMENT_OTHER_WORDING = t(
    "To reach a large batch without the activation memory it would need at once.",
    "为了达到大批量，又不需要一次性占用那么多激活显存。",
)
STATEMENT_PITFALLS = [
    (
        "faster",
        t("Thinks it is faster", "以为更快"),
        t(
            "To make each optimizer step run faster on the same hardware.",
            "为了让同样的硬件上每一步都跑得更快。",
        ),
        t(
            "Accumulating takes as long as running the batch at once, or longer.",
            "累积和一次跑完整个批次一样久，甚至更久。",
        ),
    ),
    (
        "no-communication",
        t("Thinks it removes communication", "以为省掉了通信"),
        t(
            "To avoid the gradient communication between the data-parallel ranks of a step.",
            "为了省掉同一步里数据并行 rank 之间的通信开销。",
        ),
        t(
            "The ranks still average their gradients, once per optimizer step.",
            "各 rank 仍然要平均梯度，每次优化器更新一次。",
        ),
    ),
    (
        "smaller-weights",
        t("Thinks it shrinks the weights", "以为减少了权重"),
        t(
            "To store the model weights and their optimizer states in far less GPU memory.",
            "为了在整个训练过程中用更少的显存存放模型权重和状态。",
        ),
        t(
            "The weights are the same size whatever the batch.",
            "无论批次多大，权重的大小都一样。",
        ),
    ),
]
# What the page says in each UI language (as shown, not looked up in the catalogs).
SHOWN = {
    "en": {
        "column": "column",
        "no_problems": "No problems",
        "required": "must not be empty",
        "in_use": "still has templates",
    },
    "zh": {"column": "列", "no_problems": "没有问题", "required": "不能为空", "in_use": "仍有模板"},
}


def save(page: Page) -> None:
    page.click("form.template-form button[type=submit]")


def write_numeric_template(page: Page, card: str) -> None:
    page.click(f"a[href*='/instructor/cards/{card}/templates/new'][href*='point=global-batch']")
    page.fill("#f-id", "global-batch-size")
    page.fill("#f-params", "micro = 4, 8, 16\nsteps = 2, 4, 8\nn_d = 8, 16, 32")
    page.fill("#f-stem-en", NUMERIC_STEM["en"])
    page.fill("#f-stem-zh", NUMERIC_STEM["zh"])
    page.fill("#f-answer", "global_batch")
    expect(page.locator("#e-answer")).to_have_text("")  # the card formula is known
    page.fill("#f-unit", "1")
    page.fill("#f-precision", "0")
    page.fill("#f-choices", "2")
    page.fill("#f-sol-en", "{micro} × {steps} × {n_d} = {answer} sequences.")
    page.fill("#f-sol-zh", "{micro} × {steps} × {n_d} = {answer} 条序列。")
    for index, (pitfall_id, title, formula, explanation) in enumerate(NUMERIC_PITFALLS):
        page.fill(f"#p{index}-id", pitfall_id)
        page.fill(f"#p{index}-ten", title["en"])
        page.fill(f"#p{index}-tzh", title["zh"])
        page.fill(f"#f-pitfall{index}_formula", formula)
        page.fill(f"#p{index}-een", explanation["en"])
        page.fill(f"#p{index}-ezh", explanation["zh"])
        save(page)  # the editor comes back with the pitfalls so far and an empty slot
        expect(page).to_have_url(re.compile(r"/templates/global-batch-size"))
        expect(page.locator(f"#p{index + 1}-id")).to_have_value("")


def write_statement_template(page: Page, card: str) -> None:
    page.click(f"a[href*='/instructor/cards/{card}/templates/new'][href*='point=why-accumulate']")
    page.fill("#f-id", "why-accumulate")
    page.select_option("#f-kind", "statement")
    save(page)  # the editor shows a statement's fields
    expect(page.locator("#f-answer-en")).to_be_visible()
    page.fill("#f-stem-en", STATEMENT_STEM["en"])
    page.fill("#f-stem-zh", STATEMENT_STEM["zh"])
    page.fill("#f-answer-en", STATEMENT_ANSWER["en"])
    page.fill("#f-answer-zh", STATEMENT_ANSWER["zh"])
    page.fill("#f-phr-en", STATEMENT_OTHER_WORDING["en"])
    page.fill("#f-phr-zh", STATEMENT_OTHER_WORDING["zh"])
    page.fill("#f-choices", "2")
    page.fill(
        "#f-sol-en",
        "Each micro-batch's activations are freed after its backward pass; the gradients add up.",
    )
    page.fill("#f-sol-zh", "每个微批次的激活在反向传播后释放；梯度逐步相加。")
    for index, (pitfall_id, title, statement, explanation) in enumerate(STATEMENT_PITFALLS):
        page.fill(f"#p{index}-id", pitfall_id)
        page.fill(f"#p{index}-ten", title["en"])
        page.fill(f"#p{index}-tzh", title["zh"])
        page.fill(f"#p{index}-sen", statement["en"])
        page.fill(f"#p{index}-szh", statement["zh"])
        page.fill(f"#p{index}-een", explanation["en"])
        page.fill(f"#p{index}-ezh", explanation["zh"])
        save(page)
        expect(page.locator(f"#p{index + 1}-id")).to_have_value("")


def check_export(path: Path, fmt: str, lang: str) -> None:
    """A non-empty, well-formed file in ``lang``: up to five variants of each of the two
    templates (fewer where a template has fewer distinct questions), each named by its source."""
    stem_words = {
        "en": "How many sequences does one optimizer step see?",
        "zh": "一次优化器更新看到多少条序列",
    }
    assert path.stat().st_size > 0
    if fmt == "qti":
        with zipfile.ZipFile(path) as package:
            assert package.testzip() is None and "imsmanifest.xml" in package.namelist()
            items = [n for n in package.namelist() if n != "imsmanifest.xml"]
            assert 2 <= len(items) <= 10
            texts = [package.read(n).decode("utf-8") for n in items]
            assert ET.fromstring(package.read("imsmanifest.xml")).tag.endswith("manifest")
        for text in texts:
            assert ET.fromstring(text).tag.endswith("qti-assessment-item")
        assert any(stem_words[lang] in text for text in texts)
        for template_id in ("global-batch-size", "why-accumulate"):
            assert any(template_id in name for name in items), (template_id, items)
        return
    if fmt == "moodle":
        root = ET.parse(path).getroot()
        assert root.tag == "quiz"
        questions = root.findall("question[@type='multichoice']")
        assert 2 <= len(questions) <= 10
        assert any(stem_words[lang] in (q.findtext("questiontext/text") or "") for q in questions)
        names = [q.findtext("name/text") or "" for q in questions]
        for template_id in ("global-batch-size", "why-accumulate"):
            assert any(template_id in name for name in names), (template_id, names)
        return
    with zipfile.ZipFile(path) as package:
        assert package.testzip() is None and "collection.anki2" in package.namelist()
        with tempfile.TemporaryDirectory() as folder:
            package.extract("collection.anki2", folder)
            db = sqlite3.connect(Path(folder) / "collection.anki2")
            try:
                fields = [row[0] for row in db.execute("select flds from notes")]
            finally:
                db.close()
    assert 2 <= len(fields) <= 10
    assert any(stem_words[lang] in text for text in fields)
    for template_id in ("global-batch-size", "why-accumulate"):
        assert any(f"/ {template_id} v1 /" in text for text in fields), template_id


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_an_instructor_authors_a_whole_card_in_the_dashboard(
    page: Page, browser: Browser, live_server, lang: str
):
    shown = SHOWN[lang]
    log_in_as_instructor(page, live_server)
    # Sorts after the cards other browser tests open first; withdrawn at the end.
    card = f"zz-accum-{lang}-{uuid.uuid4().hex[:6]}"
    page.goto(f"{live_server.url}/instructor?lang={lang}")
    page.fill("#card-id", card)
    page.fill("#title-en", TITLE["en"])
    page.fill("#title-zh", TITLE["zh"])
    page.click("form[action='/instructor/cards'] button[type=submit]")
    expect(page).to_have_url(re.compile(rf"/instructor/cards/{card}"))
    # A new card: every text still to write is listed, no placeholder.
    problems = page.locator(".problems")
    expect(problems).to_contain_text("definition.en")
    expect(problems).to_contain_text(shown["required"])
    expect(page.locator("body")).not_to_contain_text("point-1")

    # The card's texts, parameters and formula.
    page.click(f"a[href*='/instructor/cards/{card}/edit']")
    for name, text in TEXTS.items():
        page.fill(f"#f-{name}-en", text["en"])
        page.fill(f"#f-{name}-zh", text["zh"])
    page.fill("#f-card-params", "micro, steps, n_d")
    page.fill("#fm0-id", "global_batch")
    page.fill("#fm0-ten", "Global batch")
    page.fill("#fm0-tzh", "全局批次")
    expr = page.locator("#f-formula0_expr")
    live = page.locator("#e-formula0_expr")
    expr.fill("micro*steps*n_dd")  # a typo: "n_dd" starts at column 13
    expect(live).to_contain_text("n_dd")
    expect(live).to_contain_text("13")
    expect(live.locator("mark")).to_have_text("n")
    page.fill("#fm0-latex", r"b \cdot k \cdot N_d")
    page.fill("#fm0-unit", "1")
    page.click("form.card-form button[type=submit]")
    # Refused, at the field and column, in the page's language; what was typed is kept.
    refused = page.locator("#e-formula0_expr ~ p.field-problem").first
    expect(refused).to_contain_text("n_dd")
    expect(refused).to_contain_text(shown["column"])
    expect(page.locator("#f-definition-zh")).to_have_value(TEXTS["definition"]["zh"])
    shot(page, f"card-authoring-formula-refused-{lang}")
    page.locator("#f-formula0_expr").fill("micro*steps*n_d")
    expect(page.locator("#e-formula0_expr")).to_have_text("")
    page.click("form.card-form button[type=submit]")
    expect(page).to_have_url(re.compile(rf"/instructor/cards/{card}(\?.*)?$"))

    # Two exam points, each titled and explained in both languages.
    for slug, title, explanation in POINTS:
        page.click(f"a[href*='/instructor/cards/{card}/new-point']")
        page.fill("#point-slug", slug)
        page.fill("#point-title-en", title["en"])
        page.fill("#point-title-zh", title["zh"])
        page.fill("#point-explanation-en", explanation["en"])
        page.fill("#point-explanation-zh", explanation["zh"])
        page.click("form.point-form button[type=submit]")
        expect(page.locator("article.point h3", has_text=title[lang])).to_be_visible()
    shot(page, f"card-authoring-points-{lang}")

    write_numeric_template(page, card)
    page.goto(f"{live_server.url}/instructor/cards/{card}")
    write_statement_template(page, card)
    # An exam point its templates use is not removed: the page says which templates, in its
    # language.
    page.goto(f"{live_server.url}/instructor/cards/{card}")
    page.click(f"a[href*='/instructor/cards/{card}/points/global-batch']")
    page.click("form[action$='/points/global-batch/delete'] button")
    expect(page.locator("p.error[role=alert]")).to_contain_text("global-batch-size")
    expect(page.locator("p.error[role=alert]")).to_contain_text(shown["in_use"])
    shot(page, f"card-authoring-point-in-use-{lang}")
    page.goto(f"{live_server.url}/instructor/cards/{card}")
    # Validated: no problem at all (no warning either), publishing allowed.
    expect(page.locator(".problems p.ok")).to_contain_text(shown["no_problems"], timeout=60_000)
    publish = page.locator("form[action$='/publish'] button")
    expect(publish).to_be_enabled()
    shot(page, f"card-authoring-validated-{lang}")

    # A question previewed exactly as learners see it, with its key.
    page.click("a[href*='/preview'][href*='template_id=global-batch-size']")
    expect(page.locator(".tag.right")).to_have_count(1)
    expect(page.locator(".choice-review li")).to_have_count(2)
    expect(page.locator("body")).to_contain_text(
        {
            "en": "How many sequences does one optimizer step see?",
            "zh": "一次优化器更新看到多少条序列",
        }[lang]
    )
    shot(page, f"card-authoring-preview-{lang}")
    page.goto(f"{live_server.url}/instructor/cards/{card}")
    publish.click()
    expect(page.locator("#export-title")).to_be_visible()
    shot(page, f"card-authoring-published-{lang}")

    # Each export downloads from the card page, non-empty and well-formed, in each language.
    links = page.locator(".export-links a")
    hrefs = [links.nth(i).get_attribute("href") or "" for i in range(links.count())]
    offered = {
        (re.search(r"format=(\w+)", h)[1], re.search(r"language=(\w+)", h)[1]) for h in hrefs
    }
    assert {(f, language) for f in ("apkg", "moodle") for language in ("en", "zh")} <= offered
    for index in range(len(hrefs)):
        href = links.nth(index).get_attribute("href") or ""
        fmt = re.search(r"format=(\w+)", href)[1]
        language = re.search(r"language=(\w+)", href)[1]
        with page.expect_download() as download:
            links.nth(index).click()
        check_export(Path(download.value.path()), fmt, language)

    # Learners, in both languages, read the card and practise its questions.
    learner_context = browser.new_context(base_url=live_server.url, locale="en-US")
    try:
        learner = learner_context.new_page()
        for shown_lang in ("en", "zh"):
            learner.goto(f"/cards/{card}?lang={shown_lang}")
            expect(learner.locator("h1")).to_contain_text(TITLE[shown_lang])
            expect(learner.locator("#definition")).to_contain_text(TEXTS["definition"][shown_lang])
            expect(learner.locator("#formulas")).to_contain_text(
                {"en": "Global batch", "zh": "全局批次"}[shown_lang]
            )
            for _slug, title, _ in POINTS:
                expect(learner.locator(".start-points")).to_contain_text(title[shown_lang])
            shot(learner, f"card-authoring-learner-card-{lang}-{shown_lang}")
            learner.goto(f"/cards/{card}/points/global-batch/practice?lang={shown_lang}")
            expect(learner.locator("h1.point-title")).to_contain_text(POINTS[0][1][shown_lang])
            expect(learner.locator("main")).to_contain_text(
                {"en": "How many sequences", "zh": "一次优化器更新看到多少条序列"}[shown_lang]
            )
            learner.goto(f"/cards/{card}/points/why-accumulate/practice?lang={shown_lang}")
            expect(learner.locator("main")).to_contain_text(STATEMENT_STEM[shown_lang])
            shot(learner, f"card-authoring-learner-question-{lang}-{shown_lang}")
    finally:
        learner_context.close()

    page.goto(f"{live_server.url}/instructor/cards/{card}")
    page.click("form[action$='/offer'] button")
    expect(page.locator("form[action$='/offer'] input[name=offered]")).to_have_value("yes")
