"""The dashboard's front page for what is not published yet: every draft is listed (a new card
has no other way back once its page is left), and a new card that is refused comes back with
what was typed.

Golden values (the titles, the refusal's words) are written here."""

from __future__ import annotations

import html
import re

import pytest
from test_authoring_web import csrf, log_in
from test_card_editing import posted

TITLE = {"en": "KV cache sizing", "zh": "KV 缓存估算"}


def create(client, card_id: str, title_en: str, title_zh: str, lang: str = "en"):
    page = client.get("/instructor", params={"lang": lang})
    return client.post(
        f"/instructor/cards?lang={lang}",
        data={
            "csrf_token": csrf(page.text),
            "card_id": card_id,
            "title_en": title_en,
            "title_zh": title_zh,
        },
    )


def drafts_section(page: str) -> str:
    found = re.search(r'<section aria-labelledby="drafts-title">(.*?)</section>', page, re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", found[1])) if found else ""


@pytest.mark.parametrize(("lang", "heading"), [("en", "Drafts"), ("zh", "草稿")])
def test_a_new_cards_draft_is_listed_on_the_dashboard(client, app, lang, heading):
    log_in(client, app)
    assert drafts_section(client.get("/instructor").text) == ""  # no draft yet: no section
    created = create(client, "kv-cache", TITLE["en"], TITLE["zh"])
    assert created.status_code == 200 and created.url.path == "/instructor/cards/kv-cache"
    page = client.get("/instructor", params={"lang": lang}).text
    listed = drafts_section(page)
    assert heading in listed and TITLE[lang] in listed and "kv-cache" in listed
    assert 'href="/instructor/cards/kv-cache' in page
    # Published cards are listed in the table above, not as drafts.
    assert "zero-memory-offload" not in listed


def test_a_discarded_draft_leaves_the_list(client, app):
    log_in(client, app)
    create(client, "kv-cache", TITLE["en"], TITLE["zh"])
    page = client.get("/instructor/cards/kv-cache/discard")
    done = client.post("/instructor/cards/kv-cache/discard", data=posted(page.text))
    assert done.status_code == 200
    assert "kv-cache" not in drafts_section(client.get("/instructor").text)


def value_of(page: str, field_id: str) -> str:
    found = re.search(rf'<input id="{field_id}"[^>]*value="([^"]*)"', page)
    return html.unescape(found[1]) if found else ""


@pytest.mark.parametrize(
    ("lang", "refusal"),
    [
        ("en", "A card 'zero-memory-offload' already exists."),
        ("zh", "卡片 'zero-memory-offload' 已存在。"),
    ],
)
def test_a_refused_new_card_comes_back_with_what_was_typed(client, app, lang, refusal):
    log_in(client, app)
    refused = create(client, "zero-memory-offload", "ZeRO <again> & more", "再来一张", lang)
    assert refused.status_code == 409
    assert refusal in html.unescape(refused.text)
    assert value_of(refused.text, "card-id") == "zero-memory-offload"
    assert value_of(refused.text, "title-en") == "ZeRO <again> & more"
    assert value_of(refused.text, "title-zh") == "再来一张"
