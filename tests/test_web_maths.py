"""Formulas where markup cannot go, on the pages: titles and the mistake book's filter show them as
plain text, each pitfall title is offered once, and every ``<math>`` is named in words."""

from __future__ import annotations

import html
import re
from collections import defaultdict

from conftest import CARD_ID
from test_web import articles, practise, shown_variant, submit


def options(page: str, name: str) -> list[tuple[str, str]]:
    """(value, text) of each option of the select ``name``, unescaped."""
    select = page.split(f'<select name="{name}">')[1].split("</select>")[0]
    return [
        (html.unescape(value), html.unescape(text).strip())
        for value, text in re.findall(r'<option value="([^"]*)"[^>]*>([^<]*)</option>', select)
    ]


def shared_title(card) -> tuple[str, list[tuple[str, str]]]:
    """A pitfall title (English) that two pitfall ids share, with (point, pitfall id) of each."""
    seen: dict[str, dict[str, str]] = defaultdict(dict)
    for point in card.points:
        for template in point.templates:
            for pitfall in template.pitfalls:
                seen[pitfall.title.en].setdefault(pitfall.id, point.slug)
    title, ids = next((t, ids) for t, ids in seen.items() if len(ids) > 1 and "$" not in t)
    return title, [(point, pitfall) for pitfall, point in ids.items()][:2]


def fall_for(client, app, point: str, pitfall_id: str) -> None:
    """Answer a question of ``point`` with the choice of pitfall ``pitfall_id``."""
    for seed in range(400):
        page = practise(client, point=point, seed=seed)
        variant = shown_variant(app, page)
        choice = next(
            (c for c in variant.choices if c.pitfall and c.pitfall.id == pitfall_id), None
        )
        if choice is not None:
            submit(client, page, choice.id)
            return
    raise AssertionError(f"no seed under 400 asks for pitfall {pitfall_id} of {point}")


def test_the_pitfall_filter_lists_a_title_once_and_selects_every_attempt_under_it(
    client, app, card
):
    title, falls = shared_title(card)
    for point, pitfall_id in falls:
        fall_for(client, app, point, pitfall_id)
    book = client.get("/mistakes").text
    assert book.count('class="mistake"') == 2
    titled = [(value, text) for value, text in options(book, "pitfall") if text == title]
    assert len(titled) == 1
    (value, _), ids = titled[0], sorted(pitfall for _, pitfall in falls)
    assert value == ",".join(ids)
    chosen = client.get("/mistakes", params={"pitfall": value}).text
    assert chosen.count('class="mistake"') == 2 and articles(chosen).count(title) == 2
    assert (value, title) in options(chosen, "pitfall")
    assert f'<option value="{html.escape(value)}" selected>' in chosen
    # One of the ids alone (an older link) still filters, and selects the title's option.
    alone = client.get("/mistakes", params={"pitfall": ids[0]}).text
    assert alone.count('class="mistake"') == 1
    assert f'<option value="{html.escape(value)}" selected>' in alone


def test_the_filters_show_formulas_as_plain_text(client, app, card):
    fall_for(client, app, card.points[0].slug, card.points[0].templates[0].pitfalls[0].id)
    for lang in ("en", "zh"):
        book = client.get("/mistakes", params={"lang": lang}).text
        shown = options(book, "point") + options(book, "pitfall")
        assert len(shown) > len(card.points)
        assert not [text for _, text in shown if "\\" in text or "$" in text]
    points = dict(options(client.get("/mistakes", params={"lang": "en"}).text, "point"))
    # The card's "ZeRO-3: 1.5× DDP's communication for $16\Psi \to \frac{16\Psi}{N_d}$".
    assert any(text.endswith("16Ψ → 16Ψ/N_d") for text in points.values())


def test_a_formula_in_a_heading_is_named_in_the_pages_language(client):
    en = client.get(f"/cards/{CARD_ID}").text
    zh = client.get(f"/cards/{CARD_ID}", params={"lang": "zh"}).text
    heading = re.compile(r"<h3 [^>]*>(.*?)</h3>", re.DOTALL)
    assert any('<math aria-label="16 Psi" ' in h for h in heading.findall(en))
    assert any(
        '<math aria-label="16 Psi 变为 N 下标 d 分之 16 Psi" ' in h for h in heading.findall(zh)
    )
    assert not re.search(r"<math (?![^>]*aria-label=)", en + zh)


def test_titles_hold_plain_text(client):
    for path in (f"/cards/{CARD_ID}", f"/cards/{CARD_ID}/calculator", "/mistakes"):
        for lang in ("en", "zh"):
            title = client.get(path, params={"lang": lang}).text.split("<title>")[1]
            title = title.split("</title>")[0]
            assert "<" not in title and "$" not in title and "\\" not in title


def test_run_it_yourself_says_where_the_demo_comes_from_and_links_the_chart(client):
    page = client.get(f"/cards/{CARD_ID}/run-it-yourself").text
    assert "<code>make demo</code>" in page and "clone its repository" in page
    chart = f"/cards/{CARD_ID}/run-it-yourself/chart.svg"
    assert f'<a href="{chart}">' in page
    # The image keeps the chart's own size (360 wide) before it loads.
    assert re.search(rf'<img src="{re.escape(chart)}" alt="[^"]+" width="360" height="\d+">', page)
    assert client.get(chart).headers["content-type"].startswith("image/svg+xml")


def test_the_calculators_sources_have_rows_of_their_own(client):
    page = client.get(
        f"/cards/{CARD_ID}/calculator",
        params={"psi": "70B", "n_d": 64, "gpu_gb": 80, "stage": 3, "offload": "optimizer"},
    ).text
    assert page.count('<tr class="calc-source-row">') == 5
    assert '<td class="calc-source" colspan="3">From: ' in page
