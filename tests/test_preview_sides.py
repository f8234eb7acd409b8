"""The preview's table of the key and each pitfall's side: a statement's maths is shown as maths
there, as in the choices above it, never as the card file's ``$...$`` markup.

Golden values (the card file's sentence) are written here."""

from __future__ import annotations

import html
import re

import pytest
from test_authoring_web import log_in

PREVIEW = "/instructor/cards/megatron-3d-pipeline/preview"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_sides_table_shows_a_statements_maths_as_maths(client, app, lang):
    log_in(client, app)
    page = client.get(PREVIEW, params={"template_id": "p3-mlp-split", "lang": lang})
    assert page.status_code == 200
    table = re.search(r'<table class="sides-table">(.*?)</table>', page.text, re.S)
    assert table, page.text[:300]
    cells = re.findall(r"<td[^>]*>(.*?)</td>", table[1], re.S)
    assert len(cells) == 8  # the key, six pitfalls, the count
    assert '<math aria-label="A"' in cells[0] and '<math aria-label="B"' in cells[0]  # the key
    for cell in cells:
        assert "$" not in html.unescape(re.sub(r"<[^>]+>", "", cell)), cell[:200]
