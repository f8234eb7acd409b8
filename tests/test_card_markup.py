"""No markup from card text reaches a learner's page.

An instructor's LaTeX is converted to MathML; the converter copies ``\\text{...}`` verbatim, and an
XML parser and the browser's HTML parser read ``<!-->``, CDATA and processing instructions
differently. Every rendering of card text is therefore read here as the browser reads it (the
HTML5 parser of html5lib) and must hold only the elements and attributes of the allow-lists,
no comment, whatever the card says: in each renderer, and in every field of a card shown on the
card page, the question page, the feedback page and the mistake book.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import html5lib
import pytest
from conftest import make_settings
from fastapi.testclient import TestClient

from app.domain.cards import read_cards
from app.rendering import latex_to_mathml, render_inline, render_paragraphs, render_quantity

KV_CARD = json.loads((Path(__file__).parent / "cards_fixtures" / "kv_cache_card.json").read_text())

# The reported input and its relatives: comments read differently by the two parsers, CDATA,
# processing instructions, foreign elements, MathML's HTML integration point, closing the math
# early, entities, attributes that link or script.
HOSTILE = [
    '<!--><meta/http-equiv="refresh"/content="0;url=/signup?pwned=1">-->',
    '<!--><a href="https://evil.example/login">sign in</a>-->',
    "<!--><img src=x onerror=alert(1)>-->",
    "<!--><script>alert(1)</script>-->",
    "<!---><iframe src=//evil.example></iframe>-->",
    "<![CDATA[<img src=x onerror=alert(1)>]]>",
    '<?pi <a href="https://evil.example">x</a>?>',
    "</mtext></mrow></math><img src=x onerror=alert(1)><math><mrow><mtext>",
    '<annotation-xml encoding="text/html"><img src=x onerror=alert(1)/></annotation-xml>',
    '<maction actiontype="statusline" href="https://evil.example">x</maction>',
    '<mi style="position:fixed;inset:0">cover</mi>',
    '<mi xmlns:xl="http://www.w3.org/1999/xlink" xl:href="https://evil.example">x</mi>',
    "&lt;img src=x onerror=alert(1)&gt;",
    "<mglyph src=https://evil.example/x.png/>",
    "<svg><script>alert(1)</script></svg>",
    "<style>*{display:none}</style>",
]
HOSTILE_LATEX = [rf"\text{{{payload}}}" for payload in HOSTILE] + [
    r"\href{javascript:alert(1)}{x}",
    r"\style{background:url(https://evil.example)}{x}",
    r"\text{a}\text{<!--}--><img src=x onerror=alert(1)>",
]

MATHML = set(
    """math mrow mi mn mo mtext mspace ms mfrac msqrt mroot mstyle merror mpadded mphantom
    mfenced menclose msub msup msubsup munder mover munderover mmultiscripts mprescripts none
    mtable mtr mtd mlabeledtr semantics annotation""".split()
)
# What the renderers themselves write around formulas and code spans.
TEXT_ELEMENTS = {"p", "code"}
LINKING = re.compile(r"evil\.example|pwned|javascript:|onerror|url\(", re.IGNORECASE)


def fragment_nodes(markup: str):
    """Every node of ``markup`` as the HTML5 parser builds it inside a ``<div>``."""
    fragment = html5lib.parseFragment(markup, treebuilder="etree", namespaceHTMLElements=False)
    yield from fragment.iter()


def local(tag: object) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def assert_only_allowed(markup: str) -> None:
    for node in fragment_nodes(markup):
        if node.tag == "DOCUMENT_FRAGMENT":
            continue
        assert isinstance(node.tag, str) and not callable(node.tag), f"a comment in {markup!r}"
        name = local(node.tag)
        assert name in MATHML | TEXT_ELEMENTS, f"<{name}> from {markup!r}"
        for attribute, value in node.attrib.items():
            attribute = local(attribute)
            assert not attribute.startswith("on") and attribute not in {"href", "src", "style"}
            if name == "code":
                assert attribute == "class" and value == "latex"
            assert not (attribute != "aria-label" and LINKING.search(value)), (attribute, value)


@pytest.mark.parametrize("latex", HOSTILE_LATEX)
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_formula_renders_to_allowed_mathml_or_its_source_only(latex, lang):
    for display in (False, True):
        assert_only_allowed(latex_to_mathml(latex, display=display, lang=lang))
    for text in (f"before ${latex}$ after", f"`code` ${latex}$ and $x$"):
        assert_only_allowed(render_inline(text, lang))
        assert_only_allowed(render_paragraphs(f"{text}\n\n{text}", lang))
        assert_only_allowed(render_quantity(text, lang))


def test_the_reported_input_is_shown_as_its_source_text():
    latex = rf"\text{{{HOSTILE[0]}}}"
    rendered = str(latex_to_mathml(latex))
    assert rendered.startswith('<code class="latex">')
    texts = [n.text for n in fragment_nodes(rendered) if local(n.tag) == "code"]
    assert texts == [latex]  # the learner sees what the instructor wrote, as text


def test_ordinary_formulas_still_render_as_mathml():
    rendered = str(
        latex_to_mathml(r"\frac{16\Psi}{N_d} + \left(x_{i}^{2}\right) \approx 1.5\,\mathrm{GB}")
    )
    tags = [local(n.tag) for n in fragment_nodes(rendered)]
    assert tags[1] == "math" and {"mfrac", "msubsup", "mo", "mn"} <= set(tags)
    assert "&lt;" not in rendered and "aria-label=" in rendered
    # a text with characters HTML escapes is kept as text, escaped once
    quoted = str(latex_to_mathml(r'\text{a > b " c}'))
    texts = [n.text for n in fragment_nodes(quoted) if local(n.tag) == "mtext"]
    assert [t.replace("\N{NO-BREAK SPACE}", " ") for t in texts] == ['a > b " c']


# --- every field of a card, on the pages a learner sees ------------------------------------------


def poisoned(document: object, payload: str) -> object:
    """The card with `` $\\text{payload}$`` added to every bilingual text and every formula's
    LaTeX replaced by it."""
    if isinstance(document, dict):
        if set(document) == {"en", "zh"} and all(isinstance(v, str) for v in document.values()):
            return {lang: f"{text} $\\text{{{payload}}}$" for lang, text in document.items()}
        changed = {key: poisoned(value, payload) for key, value in document.items()}
        if "latex" in changed and "expr" in changed:
            changed["latex"] = rf"\text{{{payload}}}"
        return changed
    if isinstance(document, list):
        return [poisoned(item, payload) for item in document]
    return document


def form_value(page: str, name: str) -> str:
    return html.unescape(re.search(rf'name="{name}" value="([^"]*)"', page).group(1))


def page_problems(page: str) -> list[str]:
    """What on a served page could only have come from card text as markup."""
    problems = []
    document = html5lib.parse(page, treebuilder="etree", namespaceHTMLElements=False)
    for node in document.iter():
        if not isinstance(node.tag, str):
            if LINKING.search(str(node.text or "")) or "meta" in str(node.text or ""):
                problems.append(f"comment {node.text!r}")
            continue
        name = local(node.tag)
        if name in {"meta", "img", "iframe", "object", "embed", "svg", "style", "base"}:
            if name == "meta" and set(node.attrib) <= {"charset", "name", "content"}:
                if not LINKING.search(node.attrib.get("content", "")):
                    continue
            problems.append(f"<{name} {node.attrib}>")
        if name == "script" and (node.text or "").strip():
            problems.append(f"inline script {node.text!r}")
        for attribute, value in node.attrib.items():
            if attribute in ("aria-label", "label"):  # text only (an optgroup's card title)
                continue
            if LINKING.search(value) or local(attribute).startswith("on"):
                problems.append(f"<{name} {attribute}={value!r}>")
    return problems


def learner_pages(tmp_path: Path, db_url: str, payload: str) -> dict[str, str]:
    """The card page, every point's question page, two feedback pages per point and the mistake
    book, in both languages, for the fixture card with ``payload`` in every field."""
    cards_dir = tmp_path / "cards"
    cards_dir.mkdir()
    document = poisoned(KV_CARD, payload)
    (cards_dir / "kv-cache.yaml").write_text(json.dumps(document, ensure_ascii=False))
    from app.main import create_app

    settings = make_settings(tmp_path, db_url, cards_dir=cards_dir)
    # Compiled, not validated: validation refuses markup now (app.domain.markup), and these pages
    # must stay clean for a card stored before it did.
    app = create_app(settings, cards=read_cards(cards_dir))
    pages: dict[str, str] = {}
    with TestClient(app) as client:
        for lang in ("en", "zh"):
            pages[f"card {lang}"] = client.get(f"/cards/kv-cache?lang={lang}").text
            for point in KV_CARD["points"]:
                path = f"/cards/kv-cache/points/{point['slug']}/practice"
                question = client.get(path, params={"seed": 3, "lang": lang})
                assert question.status_code == 200, question.text[:300]
                pages[f"{point['slug']} {lang}"] = question.text
                choices = re.findall(r'name="choice_id" value="([^"]+)"', question.text)
                answered = [
                    client.post(
                        "/answers",
                        data={
                            "csrf_token": form_value(question.text, "csrf_token"),
                            "token": form_value(question.text, "token"),
                            "choice_id": choice,
                            "lang": lang,
                        },
                    )
                    for choice in choices[:2]
                ]
                for number, feedback in enumerate(answered):
                    assert feedback.status_code == 200, feedback.text[:300]
                    pages[f"{point['slug']} feedback {number} {lang}"] = feedback.text
            pages[f"mistakes {lang}"] = client.get(f"/mistakes?lang={lang}").text
    return pages


@pytest.mark.parametrize("payload", [HOSTILE[0], HOSTILE[1], HOSTILE[5], HOSTILE[7]])
def test_no_field_of_a_card_puts_markup_into_learners_pages(tmp_path, db_url, payload):
    pages = learner_pages(tmp_path, db_url, payload)
    words = "".join(
        "".join(html5lib.parse(page, treebuilder="etree").itertext()) for page in pages.values()
    )
    assert LINKING.search(words), "the payload is shown to the learner as text"
    for name, page in pages.items():
        assert page_problems(page) == [], name
