"""The languages of the product, in one place: every text, page and API response uses these."""

from __future__ import annotations

from typing import Literal

from babel import Locale

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

    The header's tags in order of weight (``q=0`` refuses a language, ties keep their order) are
    negotiated against the product's languages by Babel's :meth:`babel.Locale.negotiate`: any
    Chinese variant (``zh-CN``, ``zh-Hans``, ``zh-TW``) reads Simplified Chinese, ``en-GB``
    English; ``zh-CN,zh;q=0.9,en;q=0.8`` gives ``zh``.
    """
    if not header:
        return None
    weighted: list[tuple[float, int, str]] = []
    for index, part in enumerate(header.split(",")[:20]):
        tag, _, params = part.strip().partition(";")
        tag = tag.strip().replace("_", "-")
        if not tag or tag == "*":
            continue
        weight = 1.0
        params = params.strip()
        if params.startswith("q="):
            try:
                weight = float(params[2:])
            except ValueError:
                continue
        if weight > 0:
            weighted.append((-weight, index, tag))
    preferred = [tag for _, _, tag in sorted(weighted)]
    locale = Locale.negotiate(preferred, LANGS, sep="-") if preferred else None
    if locale is None:
        return None
    return pick_lang(locale.language)


def choose_lang(asked: str | None, remembered: str | None, accept_language: str | None) -> Lang:
    """A page's language: asked for (``?lang=``), else remembered (cookie), else the browser's."""
    for value in (asked, remembered):
        if value in LANGS:
            return pick_lang(value)
    return from_accept_language(accept_language) or DEFAULT_LANG
