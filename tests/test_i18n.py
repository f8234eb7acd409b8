"""The product's texts go through the gettext catalogs (app/locale): every message has a Chinese
translation, the catalogs are up to date with the sources and compiled, Chinese pages show no
English interface text, the Chinese dashboard's validation messages are Chinese, and languages
are negotiated by Babel."""

from __future__ import annotations

import html
import json
import re
from functools import lru_cache
from html.parser import HTMLParser
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import parse_mapping_cfg
from babel.messages.pofile import read_po
from babel.support import Translations
from conftest import CARD_ID
from test_authoring_web import csrf, log_in

from app.domain import messages
from app.domain.languages import LANGS, choose_lang, from_accept_language
from app.domain.messages import CatalogMissing, Message, plural_message
from app.domain.texts import Text

ROOT = Path(__file__).resolve().parents[1]
LOCALE = ROOT / "app" / "locale"


def catalog(lang: str):
    with (LOCALE / lang / "LC_MESSAGES" / "messages.po").open("rb") as handle:
        return read_po(handle, locale=lang)


def keys(messages_) -> set[tuple[str | None, str]]:
    """(context, msgid) of every message; a plural message by its singular."""
    found = set()
    for message in messages_:
        if message.id:
            msgid = message.id[0] if isinstance(message.id, tuple) else message.id
            found.add((message.context, msgid))
    return found


def strings(message) -> list[str]:
    return list(message.string) if isinstance(message.string, tuple) else [message.string]


# --- the catalogs -----------------------------------------------------------------------------


def test_every_message_has_a_chinese_translation():
    zh = catalog("zh")
    untranslated = [m.id for m in zh if m.id and (m.fuzzy or not all(strings(m)))]
    assert not untranslated, (
        f"translate these in app/locale/zh/LC_MESSAGES/messages.po: {untranslated}"
    )
    # Placeholders (%(name)s) kept, plural forms right (Babel's checks, as `pybabel compile`).
    broken = [(m.id, [str(e) for e in errors]) for m, errors in zh.check()]
    assert not broken
    # Catalog texts are shown unescaped on pages: no markup may come from a translation.
    assert not [m.id for m in zh if m.id and any("<" in s or "&" in s for s in strings(m))]


def test_the_catalogs_are_up_to_date_with_the_sources():
    """``make messages`` was run: the msgids in the sources are those of messages.pot and of
    every language's .po."""
    with (ROOT / "babel.cfg").open() as handle:
        method_map, options_map = parse_mapping_cfg(handle)
    extracted = {
        (context, msgid[0] if isinstance(msgid, tuple) else msgid)
        for _, _, msgid, _, context in extract_from_dir(ROOT, method_map, options_map)
        if msgid
    }
    with (LOCALE / "messages.pot").open("rb") as handle:
        template = keys(read_po(handle))
    assert extracted == template, (
        "messages.pot is stale (run `make messages`): "
        f"new {sorted(extracted - template)[:10]}, gone {sorted(template - extracted)[:10]}"
    )
    for lang in LANGS:
        assert keys(catalog(lang)) == template, f"{lang}: run `make messages`"


def test_the_compiled_catalogs_are_the_po_files():
    """The .mo files (``make catalogs``) say what the .po files say."""
    for lang in LANGS:
        with messages.catalog_path(lang).open("rb") as handle:
            compiled = Translations(handle)
        for message in catalog(lang):
            if not message.id or message.fuzzy or not all(strings(message)):
                continue
            if isinstance(message.id, tuple):
                shown = (
                    compiled.npgettext(message.context, *message.id, 1)
                    if message.context
                    else compiled.ngettext(*message.id, 1)
                )
                assert shown == strings(message)[0], (lang, message.id)
            elif message.context:
                assert compiled.pgettext(message.context, message.id) == message.string
            else:
                assert compiled.gettext(message.id) == message.string, (lang, message.id)


def test_the_app_does_not_start_without_compiled_catalogs(tmp_path, monkeypatch):
    po = tmp_path / "zh" / "LC_MESSAGES" / "messages.po"
    po.parent.mkdir(parents=True)
    po.write_text("", encoding="utf-8")
    monkeypatch.setattr(messages, "LOCALE_DIR", tmp_path)
    messages.translations.cache_clear()
    try:
        with pytest.raises(CatalogMissing, match="make catalogs"):
            messages.check_catalogs(LANGS)
        with pytest.raises(CatalogMissing):
            Message("Cards").get("zh")  # never silently English
        from app.web.templating import make_pages

        with pytest.raises(CatalogMissing):
            make_pages()
    finally:
        monkeypatch.undo()
        messages.translations.cache_clear()


# --- messages ---------------------------------------------------------------------------------


def test_a_message_is_a_text_translated_when_shown():
    message = Message("Pick one of the choices.")
    assert message.get("en") == "Pick one of the choices." == str(message) == message.en
    assert message.get("zh") == "请选择一个选项。" == message.zh
    assert isinstance(message, Text)  # anything that takes a Text takes a message
    point = Message("Exam point %(number)s: %(title)s", number=3, title=Text("Memory", "显存"))
    assert point.get("en") == "Exam point 3: Memory" and point.get("zh") == "考点 3：显存"
    members = plural_message("%(num)s member", "%(num)s members", 1)
    assert members.get("en") == "1 member" and members.get("zh") == "1 名成员"
    assert plural_message("%(num)s member", "%(num)s members", 4).get("en") == "4 members"
    # A language without a catalog reads the English source text, as Text does.
    assert message.get("fr") == "Pick one of the choices."


def test_a_problem_takes_a_message():
    from app.problems import InvalidInput

    problem = InvalidInput(Message("Unknown practice mode."), code="invalid_mode")
    assert (
        problem.text.get("zh") == "未知的练习模式。" and problem.message == "Unknown practice mode."
    )


# --- languages --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("header", "lang"),
    [
        ("zh-CN,zh;q=0.9,en;q=0.8", "zh"),
        ("zh-TW", "zh"),
        ("zh-Hant-HK", "zh"),
        ("zh-Hans", "zh"),
        ("en-GB,en;q=0.9", "en"),
        ("en-US,zh;q=0.9", "en"),
        ("fr;q=1, zh;q=0.5, en;q=0.4", "zh"),
        ("en;q=0.5, zh", "zh"),
        ("zh;q=0, en", "en"),
        ("zh;q=0", None),
        ("fr, de", None),
        ("*", None),
        ("", None),
        (None, None),
    ],
)
def test_accept_language_is_negotiated_by_babel(header, lang):
    assert from_accept_language(header) == lang


def test_a_page_language_is_asked_then_remembered_then_the_browsers():
    assert choose_lang("en", "zh", "zh-CN") == "en"
    assert choose_lang(None, "zh", "en") == "zh"
    assert choose_lang("xx", None, "zh-CN,en;q=0.5") == "zh"
    assert choose_lang(None, None, "de") == "en"


# --- pages ------------------------------------------------------------------------------------


class _Visible(HTMLParser):
    """The text a reader sees (and hears: titles, labels, alt texts), as separate pieces; code,
    formulas, and the editor's own inputs (bilingual card content) left out."""

    SKIP = {"script", "style", "code", "math", "textarea", "pre"}
    ATTRIBUTES = {"title", "aria-label", "placeholder", "alt"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[str] = []
        self.skipping = 0

    def handle_starttag(self, tag, attrs):
        if tag in self.SKIP:
            self.skipping += 1
        for name, value in attrs:
            if name in self.ATTRIBUTES and value:
                self.pieces.append(value)

    def handle_endtag(self, tag):
        if tag in self.SKIP and self.skipping:
            self.skipping -= 1

    def handle_data(self, data):
        if not self.skipping and data.strip():
            self.pieces.append(data.strip())


def visible(page: str) -> list[str]:
    parser = _Visible()
    parser.feed(page)
    return parser.pieces


_PLACEHOLDER = re.compile(r"%\([a-z_]+\)[sd]")


@lru_cache(maxsize=1)
def english_interface_texts() -> tuple[frozenset[str], tuple[str, ...]]:
    """The English texts of the catalog that Chinese translates differently: whole texts (a piece
    of a page that is exactly one is untranslated) and the phrases of two words or more between
    their placeholders (one found inside a piece is untranslated)."""
    whole: set[str] = set()
    phrases: set[str] = set()
    for message in catalog("zh"):
        if not message.id:
            continue
        sources = message.id if isinstance(message.id, tuple) else (message.id,)
        if all(source in strings(message) for source in sources):
            continue  # written the same in both (GPU, DeepSpeed, infracards)
        for source in sources:
            for fragment in _PLACEHOLDER.split(source):
                fragment = fragment.strip(" :;,.()·")
                if len(re.findall(r"[A-Za-z]{2,}", fragment)) >= 1:
                    whole.add(fragment)
                if len(re.findall(r"[A-Za-z]{2,}", fragment)) >= 2:
                    phrases.add(fragment)
    return frozenset(whole), tuple(sorted(phrases, key=len, reverse=True))


@lru_cache(maxsize=1)
def phrase_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """Each phrase with its pattern, compiled once: there are more phrases than the ``re``
    module's cache holds (512), so searching by text recompiled every one for every piece."""
    _, phrases = english_interface_texts()
    return tuple(
        (phrase, re.compile(r"(?<![A-Za-z])" + re.escape(phrase) + r"(?![A-Za-z])"))
        for phrase in phrases
    )


def untranslated(page: str) -> list[str]:
    whole, _ = english_interface_texts()
    found = []
    for piece in visible(page):
        piece = html.unescape(piece).strip(" :;,.()·—→←")
        if piece in whole:
            found.append(piece)
            continue
        for phrase, pattern in phrase_patterns():
            if pattern.search(piece):
                found.append(phrase)
                break
    return found


def hidden_fields(page: str) -> dict[str, str]:
    fields = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page))
    return {k: html.unescape(v) for k, v in fields.items()}


def learner_pages(client, app) -> dict[str, str]:
    """Every learner page, in the client's remembered language."""
    pages = {}
    for path in (
        "/",
        f"/cards/{CARD_ID}",
        f"/cards/{CARD_ID}/run-it-yourself",
        f"/cards/{CARD_ID}/calculator?psi=7.5B&n_d=64&gpu_gb=80&stage=3&offload=optimizer"
        "&layers=80&hidden=8192&seq_len=4096&micro_batch=1&heads=64",
        f"/cards/{CARD_ID}/calculator?psi=lots&n_d=0",
        # The calculators cards declare: results, a check that fails, refused input.
        "/cards/activation-memory/calculator?sp=on&recompute=selective",
        "/cards/megatron-3d-pipeline/calculator?tp=16&gpus=3072&schedule=interleaved",
        "/cards/megatron-3d-pipeline/calculator?gpus=1000&psi=lots&schedule=maybe",
        "/cards/no-such-card",
        "/login",
        "/signup",
        "/classes/join",
        "/password-reset",
        "/password-reset/not-a-link",
    ):
        response = client.get(path)
        assert response.status_code in (200, 400, 404), path
        pages[path] = response.text
    card = client.get(f"/cards/{CARD_ID}").text
    exam = client.post(
        "/sessions",
        data={"csrf_token": csrf(card), "card_id": CARD_ID, "mode": "exam", "size": "5"},
    )
    pages["exam question"] = exam.text
    question = client.get(f"/cards/{CARD_ID}/points/optimizer-memory/practice", params={"seed": 1})
    pages["question"] = question.text
    content = app.state.context.signer.verify(hidden_fields(question.text)["token"])
    variant = app.state.catalog.variant(content.question)
    wrong = next(c for c in variant.choices if c.pitfall is not None)
    feedback = client.post("/answers", data={**hidden_fields(question.text), "choice_id": wrong.id})
    pages["feedback"] = feedback.text
    pages["no choice"] = client.post("/answers", data=hidden_fields(question.text)).text
    session = client.post(
        "/sessions", data={"csrf_token": csrf(card), "card_id": CARD_ID, "mode": "card"}
    )
    pages["summary"] = client.get(str(session.url) + "/summary").text
    pages["/mistakes"] = client.get("/mistakes").text
    pages["/review"] = client.get("/review").text
    pages["guest /account"] = client.get("/account").text
    pages["guest /account/delete"] = client.get("/account/delete").text
    return pages


def instructor_pages(client, app) -> dict[str, str]:
    log_in(client, app)
    pages = {}
    for path in (
        "/account",
        "/instructor",
        f"/instructor/cards/{CARD_ID}",
        f"/instructor/cards/{CARD_ID}/templates/p1-total-16psi",
        f"/instructor/cards/{CARD_ID}/templates/new",
        f"/instructor/cards/{CARD_ID}/edit",
        f"/instructor/cards/{CARD_ID}/new-point",
        f"/instructor/cards/{CARD_ID}/points/optimizer-memory",
        f"/instructor/cards/{CARD_ID}/preview?template_id=p1-total-16psi",
        f"/instructor/cards/{CARD_ID}/analytics",
        "/instructor/classes",
    ):
        response = client.get(path)
        assert response.status_code == 200, path
        pages[path] = response.text
    classes = pages["/instructor/classes"]
    created = client.post("/instructor/classes", data={"csrf_token": csrf(classes), "name": "ZeRO"})
    pages["class"] = created.text
    return pages


def test_chinese_pages_show_no_english_interface_text(client, app):
    client.get("/", params={"lang": "zh"})  # remembered for the next pages
    pages = learner_pages(client, app) | instructor_pages(client, app)
    for name, page in pages.items():
        assert '<html lang="zh-Hans">' in page, name
        assert not untranslated(page), f"{name} shows English: {untranslated(page)}"


def test_the_english_check_finds_english_pages(client, app):
    """The check above looks at the right text: the same pages in English are full of it."""
    pages = learner_pages(client, app)
    for name, page in pages.items():
        assert untranslated(page), name


# --- the instructor dashboard -----------------------------------------------------------------

CARD_FIXTURE = json.loads(
    (Path(__file__).parent / "cards_fixtures" / "kv_cache_card.json").read_text(encoding="utf-8")
)


def problem_texts(page: str) -> list[str]:
    """The problems a dashboard page lists (the overview's and the editor's), as read."""
    items = re.findall(r'<li class="(?:error|warning)">(.*?)</li>', page, re.DOTALL)
    items += re.findall(r'<p class="field-problem [a-z]+" role="alert">(.*?)</p>', page, re.DOTALL)
    return [html.unescape(re.sub(r"<[^>]+>", "", item)).strip() for item in items]


_ENGLISH_WORDS = re.compile(
    r"\b(?:the|is|must|a|an|of|with|not|and|template|card|pitfall|error|never|was)\b"
)


def test_the_chinese_dashboard_shows_validation_messages_in_chinese(client, app):
    """A broken draft, validated in Chinese: its shape, compile and validation problems (and the
    formula check as the editor types) are Chinese; the English dashboard says the same in
    English."""
    from sqlalchemy import select

    from app.auth.service import LearnerRef
    from app.authoring import service
    from app.models import Learner

    log_in(client, app)
    template = CARD_FIXTURE["points"][0]["templates"][0]
    broken = [
        {**template, "id": "kv-syntax", "answer": "kv * ("},  # a formula that does not parse
        {**template, "id": "kv-unknown", "answer": "kv * nope"},  # an unknown name
        {  # a pitfall showing the answer's value
            **template,
            "id": "kv-clash",
            "pitfalls": [{**template["pitfalls"][0], "formula": "kv"}, *template["pitfalls"][1:]],
        },
    ]
    document = {**CARD_FIXTURE, "points": [{**CARD_FIXTURE["points"][0], "templates": broken}]}
    with app.state.sessionmaker() as db:
        me = db.scalars(select(Learner).where(Learner.email == "prof@example.com")).one()
        actor = LearnerRef(me.id, "account", "instructor", me.email)
        service.create_draft(db=db, actor=actor, document={**document, "points": []})
        # A document of the wrong shape first: its shape problems are all that is listed.
        shape = {**template, "id": "kv-empty-stem", "stem": {"en": "How large?", "zh": ""}}
        service.save_draft(
            db=db,
            actor=actor,
            card_id="kv-cache",
            document={**document, "points": [{**document["points"][0], "templates": [shape]}]},
        )
    shape_problems = problem_texts(
        client.get("/instructor/cards/kv-cache", params={"lang": "zh"}).text
    )
    assert shape_problems and all("stem.zh：不能为空" in text for text in shape_problems)
    with app.state.sessionmaker() as db:
        service.save_draft(db=db, actor=actor, card_id="kv-cache", document=document)

    english = problem_texts(client.get("/instructor/cards/kv-cache", params={"lang": "en"}).text)
    assert english and all(
        _ENGLISH_WORDS.search(text) or re.search(r"\bunknown name\b", text) for text in english
    ), english
    overview = client.get("/instructor/cards/kv-cache", params={"lang": "zh"}).text
    chinese = problem_texts(overview)
    assert chinese, overview
    for text in chinese:
        assert re.search(r"[\u4e00-\u9fff]", text), text
        assert not _ENGLISH_WORDS.search(text), f"English in the Chinese dashboard: {text}"
    assert any("语法错误" in text for text in chinese)
    assert any("未知名称 'nope'" in text for text in chinese)
    assert any("冲突" in text for text in chinese)
    assert not untranslated(overview)

    editor = client.get("/instructor/cards/kv-cache/templates/kv-unknown").text  # still zh
    at_field = problem_texts(editor)
    assert any("未知名称 'nope'" in text for text in at_field), at_field
    checked = client.get(
        "/instructor/check-formula",
        params={
            "card_id": "kv-cache",
            "names": "layers,heads,head_dim,seq,batch",
            "text": "layers * nope",
        },
    ).json()
    assert checked["ok"] is False and checked["message"].startswith("未知名称 'nope'")
    # The API's problem documents stay in English unless asked (CardProblem.to_json(lang)).
    checked_doc = service.validate(document)
    assert all(p.to_json()["message"] == p.message for p in checked_doc.problems)
    assert any(
        re.search(r"[\u4e00-\u9fff]", p.to_json("zh")["message"]) for p in checked_doc.problems
    )


def test_the_apis_refusals_of_a_token_and_a_cursor_speak_the_readers_language(client):
    me = "/api/v1/me/attempts"
    zh = {"Accept-Language": "zh-CN"}
    refusals = [
        ({}, "token_required", "需要请求头 'Authorization: Bearer <token>'"),
        ({"Authorization": "Basic eDp5"}, "invalid_authorization", "Authorization 请求头必须是 'Bearer <token>' 的形式"),
        ({"Authorization": "Bearer nope"}, "invalid_token", "令牌不存在或已被撤销"),
    ]  # fmt: skip
    for headers, code, detail in refusals:
        body = client.get(me, headers={**zh, **headers}).json()
        assert (body["code"], body["detail"]) == (code, detail)
    english = client.get(me, params={"lang": "en"}).json()
    assert english["detail"] == "this needs 'Authorization: Bearer <token>'"
    token = client.post("/api/v1/learners").json()["access_token"]
    learner = {"Authorization": f"Bearer {token}"}
    body = client.get(me, params={"cursor": "x"}, headers={**zh, **learner}).json()
    assert (body["code"], body["detail"]) == ("invalid_cursor", "无效的游标")
    assert client.get(me, params={"cursor": "x"}, headers=learner).json()["detail"] == (
        "invalid cursor"
    )


def test_the_apis_problem_titles_and_the_frameworks_refusals_speak_the_readers_language(client):
    """A problem's title and the framework's own refusals (an unknown route, a method a route
    does not take, a body that is not JSON) in Chinese when asked; English as before."""
    zh = {"Accept-Language": "zh-CN"}
    token = client.post("/api/v1/learners").json()["access_token"]
    learner = {"Authorization": f"Bearer {token}"}
    refusals = [
        (client.get("/api/v1/me", headers=zh), 401, "未授权", None),
        (client.get("/api/v1/cards/nope", headers=zh), 404, "未找到", None),
        (client.get("/api/v1/nowhere", headers=zh), 404, "未找到", "未找到"),
        (client.put("/api/v1/cards", headers=zh), 405, "不允许的请求方法", "不允许的请求方法"),
        (
            client.post(
                "/api/v1/answers/batch",
                content=b"[" * 100_000,
                headers={**zh, **learner, "Content-Type": "application/json"},
            ),
            400,
            "请求有误",
            "无法解析请求体",
        ),
        (client.post("/api/v1/answers", json={}, headers={**zh, **learner}), 422, "无法处理的请求", None),
        (client.get("/api/v1/me/attempts", params={"cursor": "x"}, headers={**zh, **learner}), 400, "请求有误", None),
    ]  # fmt: skip
    for response, status, title, detail in refusals:
        body = response.json()
        assert (response.status_code, body["status"], body["title"]) == (status, status, title)
        if detail is not None:
            assert body["detail"] == detail
    english = [
        (client.get("/api/v1/me"), "Unauthorized", None),
        (client.get("/api/v1/nowhere"), "Not Found", "Not Found"),
        (client.put("/api/v1/cards"), "Method Not Allowed", "Method Not Allowed"),
        (client.post("/api/v1/answers", json={}, headers=learner), "Unprocessable Entity", None),
    ]
    for response, title, detail in english:
        assert response.json()["title"] == title
        if detail is not None:
            assert response.json()["detail"] == detail


# --- what a malformed field is told ---------------------------------------------------------


def test_a_malformed_requests_fields_are_told_in_the_readers_language(client):
    """A 422's items said pydantic's English after the Chinese 'invalid request' ('请求无效：
    body.token: Field required'); each now says what is wrong in Chinese. English is pydantic's
    own text as before, and ``type`` is unchanged."""
    api = "/api/v1"
    zh = {"Accept-Language": "zh"}
    missing = client.post(f"{api}/auth/token", json={}, headers=zh).json()
    assert missing["detail"].startswith("请求无效：")
    assert "body.email：此字段必填" in missing["detail"], missing["detail"]
    assert {e["type"] for e in missing["errors"]} == {"missing"}
    assert all(e["message"].endswith("：此字段必填") for e in missing["errors"])
    seed = client.get(f"{api}/cards/{CARD_ID}/points/1/question?seed=abc", headers=zh).json()
    assert [e["message"] for e in seed["errors"]] == ["query.seed：必须是整数"]
    english = client.post(f"{api}/auth/token", json={}).json()
    assert "body.email: Field required" in english["detail"]


@pytest.mark.parametrize(
    ("field", "value", "zh"),
    [
        ("name", "", "至少要有 1 个字符"),
        ("name", "x" * 9, "最多只能有 8 个字符"),
        ("name", 7, "必须是文本"),
        ("count", "many", "必须是整数"),
        ("count", 0, "不能小于 1"),
        ("count", 11, "不能大于 10"),
        ("ratio", "half", "必须是数字"),
        ("ratio", 1.0, "必须小于 1.0"),
        ("ok", "perhaps", "必须是 true 或 false"),
        ("day", "soon", "必须是日期（YYYY-MM-DD）"),
        ("at", "later", "必须是日期和时间（ISO 8601）"),
        ("tags", "a", "必须是列表"),
        ("tags", ["a"] * 4, "最多只能有 3 项"),
        ("kind", "other", "必须是 'a', 'b' 之一"),
        ("slug", "No Slug", "必须符合格式 ^[a-z]+$"),
    ],
)
def test_each_kind_of_field_problem_reads_in_chinese(field, value, zh):
    from datetime import date, datetime
    from typing import Literal

    from pydantic import BaseModel, ConfigDict, Field, ValidationError

    from app.field_errors import field_problem

    class Sent(BaseModel):
        model_config = ConfigDict(extra="forbid")
        name: str = Field("n", min_length=1, max_length=8)
        count: int = Field(1, ge=1, le=10)
        ratio: float = Field(0.5, lt=1)
        ok: bool = True
        day: date = date(2026, 1, 1)
        at: datetime = datetime(2026, 1, 1)
        tags: list[str] = Field(default_factory=list, max_length=3)
        kind: Literal["a", "b"] = "a"
        slug: str = Field("ab", pattern="^[a-z]+$")

    with pytest.raises(ValidationError) as refused:
        Sent.model_validate({field: value})
    error = refused.value.errors()[0]
    assert field_problem(error, "zh") == f"{field}：{zh}"
    assert field_problem(error, "en") == f"{field}: {error['msg']}"  # pydantic's, as before
    with pytest.raises(ValidationError) as extra:
        Sent.model_validate({"colour": "red"})
    assert field_problem(extra.value.errors()[0], "zh") == "colour：这里不接受这个字段"
