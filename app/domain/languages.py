"""The languages of the product, in one place: every text, page and API response uses these."""

from __future__ import annotations

from typing import Literal

Lang = Literal["en", "zh"]
LANGS: tuple[Lang, ...] = ("en", "zh")
DEFAULT_LANG: Lang = "en"


def pick_lang(value: str | None) -> Lang:
    """``value`` when it is a known language, else the default (unknown values included)."""
    if value == "zh":
        return "zh"
    return DEFAULT_LANG


def other_lang(lang: str) -> Lang:
    return "en" if lang == "zh" else "zh"


def from_accept_language(header: str | None) -> Lang | None:
    """The preferred known language of an ``Accept-Language`` header, or None.

    ``zh-CN,zh;q=0.9,en;q=0.8`` gives ``zh``; weights are honoured, ``q=0`` refuses a language.
    """
    if not header:
        return None
    best: tuple[float, int, Lang] | None = None
    for index, part in enumerate(header.split(",")[:20]):
        piece = part.strip()
        if not piece:
            continue
        tag, _, params = piece.partition(";")
        weight = 1.0
        params = params.strip()
        if params.startswith("q="):
            try:
                weight = float(params[2:])
            except ValueError:
                continue
        primary = tag.strip().lower().split("-")[0]
        if primary not in LANGS or weight <= 0:
            continue
        lang: Lang = "zh" if primary == "zh" else "en"
        candidate = (weight, -index, lang)
        if best is None or candidate[:2] > best[:2]:
            best = candidate
    return best[2] if best is not None else None


def choose_lang(asked: str | None, remembered: str | None, accept_language: str | None) -> Lang:
    """A page's language: asked for (``?lang=``), else remembered (cookie), else the browser's."""
    for value in (asked, remembered):
        if value in LANGS:
            return pick_lang(value)
    return from_accept_language(accept_language) or DEFAULT_LANG
