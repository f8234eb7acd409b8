"""Moodle XML question files: fixed variants as ``multichoice`` questions, and numeric templates
as ``calculatedmulti`` questions where Moodle can compute them.

Fixed variants (:func:`moodle_xml`): a category pseudo-question, then one ``multichoice``
question per variant: a single answer, the key at fraction 100 and each pitfall at 0; each wrong
answer's feedback is its pitfall's explanation with the variant's numbers, the key's feedback (and
the combined feedback for any wrong answer) the worked solution. Answers are *not* shuffled: the
generator already puts the key at a seeded, uniformly distributed position, and keeping the order
keeps the letters a, b, c ... those of the service, the Anki notes and the analytics. Math is
LaTeX in ``\\( ... \\)`` for Moodle's MathJax filter.

Calculated (:func:`moodle_calculated_xml`, the plan: :mod:`app.domain.moodle_calculated`): one
category per template (``$course$/top/infracards/<card>/<template>``), whose description says
how the template went; a calculated template's category holds its ``calculatedmulti`` questions
(one per position of the key by value: a quiz takes one random question of the category), any
other template's its fixed variants as above. A comment at the top of the file lists every
template and its way. What Moodle's importer reads of a calculated question
(``qformat_xml::import_calculated``): ``synchronize``, ``single``, ``shuffleanswers``,
``answernumbering``, the combined feedback, per answer its text, ``tolerance``,
``tolerancetype``, ``correctanswerformat``, ``correctanswerlength`` and feedback, and per
wildcard a ``dataset_definition`` (status, name, type, distribution, minimum, maximum, decimals,
itemcount, the items). Moodle replaces ``{=...}`` and ``{name}`` in the question text, the
general feedback, the answers and their feedback, not in the combined feedback, so the worked
solution is the general feedback.
"""

from __future__ import annotations

import hashlib
from html import escape

from app.authoring.export_html import block_html, inline_html
from app.domain.cards import Card
from app.domain.export_plan import (
    ExportItem,
    ExportPlan,
    export_item,
    export_seeds,
    mathjax_delimiters,
)
from app.domain.languages import Lang
from app.domain.messages import Message, contextual_message
from app.domain.moodle_calculated import (
    CalculatedQuestion,
    Dataset,
    TemplateExport,
    plan_calculated,
)

CATEGORY_ROOT = "$course$/top/infracards"
# Moodle's defaults for what a multichoice answer does not use (a numeric answer's tolerance).
_TOLERANCE = "0.01"
_RELATIVE = "1"

_HOW_TO_USE = Message(
    "Numeric templates as calculated questions where Moodle can compute them: each template "
    "has a category of its own; put one random question from each category in a quiz (a "
    "calculated template's questions differ in where the key sits among the values)."
)
_WHY_WRONG = contextual_message("export", "Why the other choices are wrong")


def _cdata(html: str) -> str:
    return "<![CDATA[" + html.replace("]]>", "]]]]><![CDATA[>") + "]]>"


def _text_element(tag: str, html: str, *, fmt: str = "html", indent: str = "    ") -> str:
    return (
        f'{indent}<{tag} format="{fmt}">\n{indent}  <text>{_cdata(html)}</text>\n{indent}</{tag}>'
    )


def _plain(value: str) -> str:
    return escape(value, quote=True)


def _comment(text: str) -> str:
    """An XML comment (``--`` may not occur in one, nor end it)."""
    return "<!-- " + text.replace("--", "- -").rstrip("-") + " -->"


def _category(path: str, info_html: str) -> str:
    return "\n".join(
        [
            '  <question type="category">',
            f"    <category><text>{_plain(path)}</text></category>",
            '    <info format="html">',
            f"      <text>{_cdata(info_html)}</text>",
            "    </info>",
            "  </question>",
        ]
    )


# --- fixed variants ---------------------------------------------------------------------------


def moodle_xml(plan: ExportPlan) -> str:
    """The plan as a Moodle XML question file (one category, one multichoice per variant)."""
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        "<quiz>",
        _category(f"{CATEGORY_ROOT}/{plan.card_id}", block_html(plan.title)),
    ]
    for item in plan.items:
        lines.append(_moodle_question(item, plan))
    lines.append("</quiz>")
    return "\n".join(lines) + "\n"


def _moodle_question(item: ExportItem, plan: ExportPlan) -> str:
    q = item.question
    name = f"{plan.card_id} · {item.point_number}. {q.template_id} · seed {q.seed}"
    solution = _solution_html(item.solution, plan.label("solution"))
    parts = [
        '  <question type="multichoice">',
        f"    <name><text>{_plain(name)}</text></name>",
        _text_element("questiontext", block_html(item.stem)),
        _text_element("generalfeedback", ""),
        "    <defaultgrade>1</defaultgrade>",
        "    <penalty>0.3333333</penalty>",
        "    <hidden>0</hidden>",
        f"    <idnumber>{_plain(_idnumber(f'{q.template_id}-v{q.template_version}-s{q.seed}'))}</idnumber>",
        "    <single>true</single>",
        "    <shuffleanswers>false</shuffleanswers>",
        "    <answernumbering>abc</answernumbering>",
        "    <showstandardinstruction>0</showstandardinstruction>",
        _text_element("correctfeedback", block_html(plan.label("correct"))),
        _text_element("partiallycorrectfeedback", ""),
        _text_element("incorrectfeedback", block_html(plan.label("incorrect")) + solution),
    ]
    for choice in item.choices:
        feedback = solution if choice.correct else block_html(choice.explanation or "")
        parts += [
            f'    <answer fraction="{100 if choice.correct else 0}" format="html">',
            f"      <text>{_cdata(inline_html(choice.text))}</text>",
            _text_element("feedback", feedback, indent="      "),
            "    </answer>",
        ]
    parts += [*_tags(item.tags), "  </question>"]
    return "\n".join(parts)


def _tags(tags: tuple[str, ...]) -> list[str]:
    return [
        "    <tags>",
        *(f"      <tag><text>{_plain(tag)}</text></tag>" for tag in tags),
        "    </tags>",
    ]


def _solution_html(steps: tuple[str, ...], heading: str) -> str:
    items = "".join(f"<li>{inline_html(step)}</li>" for step in steps)
    return f"<p><b>{escape(heading)}</b></p><ol>{items}</ol>"


def _idnumber(full: str) -> str:
    """Moodle's question id number (at most 100 characters, unique within the category)."""
    if len(full) <= 100:
        return full
    return hashlib.sha256(full.encode("utf-8")).hexdigest()[:32]


# --- calculated -------------------------------------------------------------------------------


def moodle_calculated_xml(card: Card, lang: Lang, variants: int) -> str:
    """The card as a Moodle XML question file, numeric templates as calculated multichoice
    questions where Moodle can compute them, the rest as ``variants`` fixed variants each."""
    routes = plan_calculated(card, lang)
    labels = ExportPlan(
        card_id=card.id,
        card_version=card.version,
        title=mathjax_delimiters(card.title.get(lang)),
        lang=lang,
        variants=variants,
        items=(),
    )
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        "<quiz>",
        _report(card, routes, lang),
        _category(
            f"{CATEGORY_ROOT}/{card.id}",
            block_html(labels.title) + block_html(_HOW_TO_USE.get(lang)),
        ),
    ]
    for route in routes:
        template = route.template
        lines.append(
            _category(
                f"{CATEGORY_ROOT}/{card.id}/{template.id}",
                block_html(f"{route.point_number}. {template.id}: {route.summary.get(lang)}"),
            )
        )
        if route.calculated:
            for index, question in enumerate(route.questions):
                lines.append(_calculated_question(card, route, index, question, labels))
            continue
        for seed in export_seeds(card, template, variants):
            lines.append(_moodle_question(export_item(card, template, seed, lang), labels))
    lines.append("</quiz>")
    return "\n".join(lines) + "\n"


def _report(card: Card, routes: tuple[TemplateExport, ...], lang: Lang) -> str:
    calculated = sum(1 for r in routes if r.calculated)
    head = "infracards · " + Message(
        "%(card)s version %(version)s, numeric templates as Moodle calculated "
        "multichoice questions where Moodle can compute them: %(calculated)s templates "
        "calculated, %(fixed)s as fixed variants.",
        card=card.id,
        version=card.version,
        calculated=calculated,
        fixed=len(routes) - calculated,
    ).get(lang)
    rows = [f"  {r.point_number}. {r.template.id}: {r.summary.get(lang)}" for r in routes]
    return _comment("\n".join([head, *rows]) + "\n")


def _calculated_question(
    card: Card,
    route: TemplateExport,
    index: int,
    question: CalculatedQuestion,
    labels: ExportPlan,
) -> str:
    template = route.template
    count = len(route.questions)
    name = f"{card.id} · {route.point_number}. {template.id} · calculated {index + 1}/{count}"
    idnumber = _idnumber(f"{template.id}-v{template.version}-calculated-{question.position}")
    general = _solution_html(question.solution, labels.label("solution"))
    elsewhere = [a for a in question.answers if not a.correct and not a.explained_here]
    if elsewhere:
        explained = "".join(
            f"<li><b>{inline_html(a.shown)}</b> — <i>{inline_html(a.title)}</i>"
            f"{block_html(a.explanation)}</li>"
            for a in elsewhere
        )
        general += f"<p><b>{escape(_WHY_WRONG.get(labels.lang))}</b></p><ul>{explained}</ul>"
    parts = [
        _comment(
            f"{template.id} v{template.version_label}: the key is answer {question.position + 1} "
            f"of {len(question.answers)} by value, shown in {question.unit}"
        ),
        '  <question type="calculatedmulti">',
        f"    <name><text>{_plain(name)}</text></name>",
        _text_element("questiontext", block_html(question.stem)),
        _text_element("generalfeedback", general),
        "    <defaultgrade>1</defaultgrade>",
        "    <penalty>0.3333333</penalty>",
        "    <hidden>0</hidden>",
        f"    <idnumber>{_plain(idnumber)}</idnumber>",
        "    <synchronize>0</synchronize>",
        "    <single>1</single>",
        "    <answernumbering>abc</answernumbering>",
        "    <shuffleanswers>1</shuffleanswers>",
        _text_element("correctfeedback", block_html(labels.label("correct"))),
        _text_element("partiallycorrectfeedback", ""),
        _text_element("incorrectfeedback", block_html(labels.label("incorrect"))),
    ]
    for answer in question.answers:
        feedback = block_html(answer.feedback)
        parts += [
            f'    <answer fraction="{100 if answer.correct else 0}" format="html">',
            f"      <text>{_cdata(inline_html(answer.text))}</text>",
            f"      <tolerance>{_TOLERANCE}</tolerance>",
            f"      <tolerancetype>{_RELATIVE}</tolerancetype>",
            f"      <correctanswerformat>{answer.answer_format}</correctanswerformat>",
            f"      <correctanswerlength>{answer.length}</correctanswerlength>",
            _text_element("feedback", feedback, indent="      "),
            "    </answer>",
        ]
    parts.append("    <dataset_definitions>")
    parts += [_dataset(dataset) for dataset in route.datasets]
    parts.append("    </dataset_definitions>")
    tags = ("infracards", card.id, template.point, template.id, "calculated")
    parts += [*_tags(tags), "  </question>"]
    return "\n".join(parts)


def _dataset(dataset: Dataset) -> str:
    """A private wildcard listing its value at every item (Moodle draws item ``k`` of every
    wildcard together: the k-th parameter combination)."""
    texts = dataset.texts
    low = min(dataset.values)
    high = max(dataset.values)
    items = "\n".join(
        f"          <dataset_item><number>{number}</number><value>{value}</value></dataset_item>"
        for number, value in enumerate(texts, start=1)
    )
    return "\n".join(
        [
            "      <dataset_definition>",
            "        <status><text>private</text></status>",
            f"        <name><text>{_plain(dataset.name)}</text></name>",
            "        <type>calculated</type>",
            "        <distribution><text>uniform</text></distribution>",
            f"        <minimum><text>{texts[dataset.values.index(low)]}</text></minimum>",
            f"        <maximum><text>{texts[dataset.values.index(high)]}</text></maximum>",
            f"        <decimals><text>{min(dataset.decimals, 10)}</text></decimals>",
            f"        <itemcount>{len(texts)}</itemcount>",
            "        <dataset_items>",
            items,
            "        </dataset_items>",
            f"        <number_of_items>{len(texts)}</number_of_items>",
            "      </dataset_definition>",
        ]
    )
