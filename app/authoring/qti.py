"""QTI 3.0 export: a content package (a zip) of one ``qti-assessment-item`` per fixed variant,
for the learning platforms that import QTI (Canvas, TAO, Blackboard ... through their QTI
importers).

The same fixed variants as the other exports (:func:`app.domain.export_plan.plan_export`), one
language per package. Each item is a single-choice ``qti-choice-interaction`` whose choices keep
the service's letters and order (``shuffle="false"``: the generator already places the key at a
seeded position); the key is the correct response; response processing scores 1 or 0 and sets
``FEEDBACK`` to the choice made, which shows that choice's modal feedback: the pitfall's name
and explanation with the variant's numbers, then the worked solution (the key: the solution).
Math is MathML in its own namespace (the service's own LaTeX converter, markup re-serialised
from allow-lists, app.rendering), so no player needs MathJax.
"""

from __future__ import annotations

import io
import re
import zipfile
from html import escape

from app.domain.cards import Card
from app.domain.export_plan import DEFAULT_VARIANTS, ExportItem, ExportPlan, paragraphs, plan_export
from app.domain.languages import Lang
from app.rendering import render_inline

ITEM_NS = "http://www.imsglobal.org/xsd/imsqtiasi_v3p0"
ITEM_SCHEMA = "https://purl.imsglobal.org/spec/qti/v3p0/schema/xsd/imsqti_asiv3p0p1_v1p0.xsd"
MANIFEST_NS = "http://www.imsglobal.org/xsd/qti/qtiv3p0/imscp_v1p2"
MANIFEST_SCHEMA = (
    "https://purl.imsglobal.org/spec/qti/v3p0/schema/xsd/imsqtiv3p0_imscpv1p2_v1p0.xsd"
)
XSI = "http://www.w3.org/2001/XMLSchema-instance"
_ARIA = re.compile(r' aria-label="[^"]*"')


def qti_package(card: Card, lang: Lang, variants: int = DEFAULT_VARIANTS) -> bytes:
    """The card's fixed variants as a QTI 3.0 content package (zip bytes)."""
    plan = plan_export(card, lang, variants, mathjax=False)
    files = {f"items/{identifier(item)}.xml": assessment_item(item, plan) for item in plan.items}
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("imsmanifest.xml", manifest(plan, list(files)))
        for name, content in files.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def identifier(item: ExportItem) -> str:
    """The item's QTI identifier: its exact question (template, version, seed)."""
    q = item.question
    return f"{q.template_id}-v{q.template_version}-s{q.seed}"


def _flow(text: str, lang: str) -> str:
    """A text's paragraphs as ``<p>``, its math as MathML (no ``aria-label``: MathML 3's schema
    has none; players label math themselves)."""
    return "".join(f"<p>{_inline(p, lang)}</p>" for p in paragraphs(text))


def _inline(text: str, lang: str) -> str:
    return _ARIA.sub("", str(render_inline(" ".join(paragraphs(text)), lang)))


def assessment_item(item: ExportItem, plan: ExportPlan) -> str:
    """One variant as a ``qti-assessment-item`` document."""
    lang = plan.lang
    key = item.key
    solution = (
        f"<p><strong>{escape(plan.label('solution'))}</strong></p><ol>"
        + "".join(f"<li>{_inline(step, lang)}</li>" for step in item.solution)
        + "</ol>"
    )
    choices = "\n".join(
        f'      <qti-simple-choice identifier="{c.letter}" fixed="true">'
        f"{_inline(c.text, lang)}</qti-simple-choice>"
        for c in item.choices
    )
    feedback = []
    for choice in item.choices:
        if choice.correct:
            body = f"<p>{escape(plan.label('correct'))}</p>{solution}"
        else:
            assert choice.pitfall_title is not None
            body = (
                f"<p><strong>{_inline(choice.pitfall_title, lang)}</strong></p>"
                f"{_flow(choice.explanation or '', lang)}{solution}"
            )
        feedback.append(
            f'  <qti-modal-feedback outcome-identifier="FEEDBACK" identifier="{choice.letter}" '
            f'show-hide="show"><qti-content-body>{body}</qti-content-body></qti-modal-feedback>'
        )
    title = escape(f"{item.point_number}. {item.question.template_id} · {item.reference}")
    return "\n".join(
        [
            '<?xml version="1.0" encoding="UTF-8"?>',
            f'<qti-assessment-item xmlns="{ITEM_NS}" xmlns:xsi="{XSI}" '
            f'xsi:schemaLocation="{ITEM_NS} {ITEM_SCHEMA}" identifier="{identifier(item)}" '
            f'title="{title}" adaptive="false" time-dependent="false" xml:lang="{lang}">',
            '  <qti-response-declaration identifier="RESPONSE" cardinality="single" '
            'base-type="identifier">',
            f"    <qti-correct-response><qti-value>{key.letter}</qti-value></qti-correct-response>",
            "  </qti-response-declaration>",
            '  <qti-outcome-declaration identifier="SCORE" cardinality="single" base-type="float">',
            "    <qti-default-value><qti-value>0</qti-value></qti-default-value>",
            "  </qti-outcome-declaration>",
            '  <qti-outcome-declaration identifier="FEEDBACK" cardinality="single" '
            'base-type="identifier"/>',
            "  <qti-item-body>",
            f"    <div>{_flow(item.stem, lang)}</div>",
            '    <qti-choice-interaction response-identifier="RESPONSE" shuffle="false" '
            'max-choices="1" min-choices="1">',
            choices,
            "    </qti-choice-interaction>",
            "  </qti-item-body>",
            "  <qti-response-processing>",
            "    <qti-response-condition>",
            "      <qti-response-if>",
            '        <qti-match><qti-variable identifier="RESPONSE"/>'
            '<qti-correct identifier="RESPONSE"/></qti-match>',
            '        <qti-set-outcome-value identifier="SCORE">'
            '<qti-base-value base-type="float">1</qti-base-value></qti-set-outcome-value>',
            "      </qti-response-if>",
            "    </qti-response-condition>",
            '    <qti-set-outcome-value identifier="FEEDBACK">'
            '<qti-variable identifier="RESPONSE"/></qti-set-outcome-value>',
            "  </qti-response-processing>",
            *feedback,
            "</qti-assessment-item>",
            "",
        ]
    )


def manifest(plan: ExportPlan, files: list[str]) -> str:
    """The package's ``imsmanifest.xml``: one resource per item."""
    resources = "\n".join(
        f'    <resource identifier="{name.removeprefix("items/").removesuffix(".xml")}" '
        f'type="imsqti_item_xmlv3p0" href="{name}"><file href="{name}"/></resource>'
        for name in files
    )
    return "\n".join(
        [
            '<?xml version="1.0" encoding="UTF-8"?>',
            f'<manifest xmlns="{MANIFEST_NS}" xmlns:xsi="{XSI}" '
            f'xsi:schemaLocation="{MANIFEST_NS} {MANIFEST_SCHEMA}" '
            f'identifier="{escape(plan.card_id)}-v{plan.card_version}-{plan.lang}">',
            "  <metadata><schema>QTI Package</schema><schemaversion>3.0.0</schemaversion>"
            "</metadata>",
            "  <organizations/>",
            "  <resources>",
            resources,
            "  </resources>",
            "</manifest>",
            "",
        ]
    )
