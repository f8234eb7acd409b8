"""The QTI 3.0 export: a content package whose manifest lists one assessment item per fixed
variant; each item is the service's question (the same stem, choices in the same order, the key
as the correct response) with one modal feedback per choice (the pitfall's explanation with the
variant's numbers), math as namespaced MathML; downloadable from the API and the dashboard."""

from __future__ import annotations

import io
import re
import zipfile
from xml.etree import ElementTree as ET

import pytest
from test_authoring import instructor_headers
from test_authoring_web import log_in

from app.authoring.exports import export_card
from app.domain.export_plan import export_seeds
from app.domain.generation import generate

QTI = "{http://www.imsglobal.org/xsd/imsqtiasi_v3p0}"
CP = "{http://www.imsglobal.org/xsd/qti/qtiv3p0/imscp_v1p2}"
MATHML = "{http://www.w3.org/1998/Math/MathML}"
API = "/api/v1"


def package(content: bytes) -> tuple[ET.Element, dict[str, ET.Element]]:
    archive = zipfile.ZipFile(io.BytesIO(content))
    manifest = ET.fromstring(archive.read("imsmanifest.xml"))
    items = {
        name: ET.fromstring(archive.read(name))
        for name in archive.namelist()
        if name != "imsmanifest.xml"
    }
    return manifest, items


def text_of(element: ET.Element) -> str:
    """The element's text as a reader sees it, math as its numbers and letters."""
    return re.sub(r"\s+", " ", "".join(element.itertext())).strip()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_variant_is_an_item_with_its_key_choices_and_feedback(card, lang):
    export = export_card(card, "qti", lang, variants=2)
    assert export.filename == f"{card.id}-{lang}-qti3.zip"
    assert export.media_type == "application/zip"
    manifest, items = package(export.content)

    # The manifest lists every item file of the package, each once, as a QTI 3 item.
    resources = manifest.findall(f"{CP}resources/{CP}resource")
    assert sorted(r.get("href") for r in resources) == sorted(items)
    assert {r.get("type") for r in resources} == {"imsqti_item_xmlv3p0"}
    assert all(r.find(f"{CP}file").get("href") == r.get("href") for r in resources)

    expected = {
        (template.id, seed): generate(card, template, seed)
        for template in card.templates()
        for seed in export_seeds(card, template, 2)
    }
    assert len(items) == len(expected)
    for name, item in items.items():
        assert item.tag == f"{QTI}qti-assessment-item"
        template_id, version, seed = re.fullmatch(r"items/(.+)-v(\d+)-s(\d+)\.xml", name).groups()
        variant = expected[(template_id, int(seed))]
        assert int(version) == variant.id.template_version
        # the key, computed by the engine for this seed, is the correct response
        correct = item.find(
            f"{QTI}qti-response-declaration/{QTI}qti-correct-response/{QTI}qti-value"
        )
        assert correct.text == variant.correct_choice_id
        shown = item.findall(f".//{QTI}qti-choice-interaction/{QTI}qti-simple-choice")
        assert [c.get("identifier") for c in shown] == [c.id for c in variant.choices]
        interaction = item.find(f".//{QTI}qti-choice-interaction")
        assert interaction.get("max-choices") == "1" and interaction.get("shuffle") == "false"
        for element, choice in zip(shown, variant.choices, strict=True):
            if choice.value is not None and "$" not in choice.text.get(lang):
                assert text_of(element) == choice.text.get(lang)
        # one modal feedback per choice; a pitfall's names it and explains it
        feedback = {f.get("identifier"): f for f in item.findall(f"{QTI}qti-modal-feedback")}
        assert set(feedback) == {c.id for c in variant.choices}
        for choice in variant.choices:
            body = feedback[choice.id]
            assert body.get("outcome-identifier") == "FEEDBACK"
            assert body.find(f"{QTI}qti-content-body") is not None
            if choice.pitfall is not None:
                title = choice.pitfall.title.get(lang).replace("`", "")  # code as <code>
                if "$" not in title:
                    assert title in text_of(body)
        # response processing scores the key and shows the chosen choice's feedback
        processing = item.find(f"{QTI}qti-response-processing")
        assert processing.find(f".//{QTI}qti-correct").get("identifier") == "RESPONSE"
        sets = processing.findall(f".//{QTI}qti-set-outcome-value")
        assert {s.get("identifier") for s in sets} == {"SCORE", "FEEDBACK"}
        # math is MathML in its namespace, never LaTeX source or MathJax delimiters
        stem = item.find(f"{QTI}qti-item-body")
        if "$" in variant.stem.get(lang):
            assert stem.find(f".//{MATHML}math") is not None
        assert "\\(" not in text_of(item) and "$" not in text_of(stem)
        assert item.get("{http://www.w3.org/XML/1998/namespace}lang") == lang


def test_the_api_and_the_dashboard_download_the_package(client, app):
    headers = instructor_headers(client, app, email="qti@example.com")
    response = client.get(
        f"{API}/instructor/cards/zero-memory-offload/export",
        headers=headers,
        params={"format": "qti", "variants": 1, "lang": "zh"},
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/zip"
    assert 'filename="zero-memory-offload-zh-qti3.zip"' in response.headers["content-disposition"]
    _, items = package(response.content)
    assert len(items) == 59  # one per template of the shipped card

    log_in(client, app)
    page = client.get("/instructor/cards/zero-memory-offload").text
    assert "format=qti" in page
    download = client.get(
        "/instructor/cards/zero-memory-offload/export", params={"format": "qti", "language": "en"}
    )
    assert download.status_code == 200 and download.content[:2] == b"PK"
