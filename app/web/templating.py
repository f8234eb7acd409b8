"""Jinja2 setup and page rendering: filters for math, the language switch, gettext.

Templates speak through the message catalogs (:mod:`app.domain.messages`) with
``jinja2.ext.i18n``: ``_()``, ``gettext``, ``ngettext``, ``pgettext`` and ``{% trans %}``, newstyle
(named ``%(x)s`` parameters, autoescaped). Each render gets the gettext callables of its page's
language in its context, so concurrent requests in other languages do not share them. Numbers
and dates are formatted by Babel in the page's locale.

Security headers (CSP and the rest) are added to every response by ``app.web.security``.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from babel import Locale
from babel.dates import format_datetime, format_skeleton
from babel.numbers import format_decimal
from fastapi import Request
from fastapi.templating import Jinja2Templates
from jinja2 import pass_context
from jinja2.runtime import Context
from markupsafe import Markup
from starlette.responses import Response

from app.domain.calculator import format_bytes, has_calculator
from app.domain.calendar import zone
from app.domain.languages import LANGS, other_lang
from app.domain.messages import Message, check_catalogs, translations
from app.domain.texts import Text
from app.rendering import (
    latex_to_mathml,
    render_inline,
    render_paragraphs,
    render_plain,
    render_quantity,
)

LANG_COOKIE = "infracards_lang"
# The browser's IANA time zone, set by static/timezone.js (read only when the learner chose none).
TIME_ZONE_COOKIE = "infracards_tz"
LANG_COOKIE_MAX_AGE_S = 365 * 24 * 3600
BYTES_FIGURES = 3  # the pages' byte sizes (the demo's results, upload limits): "55 MB"

PAGES_DIR = Path(__file__).resolve().parents[1] / "pages"


def make_pages() -> Jinja2Templates:
    check_catalogs(LANGS)  # at start: a missing compiled catalog is an error, not English pages
    pages = Jinja2Templates(directory=PAGES_DIR)
    env = pages.env
    # The pages ship with the code and change only with it (a restart): no file checks on every
    # render (three os.stat calls for a question page).
    env.auto_reload = False
    env.add_extension("jinja2.ext.i18n")
    env.newstyle_gettext = True  # type: ignore[attr-defined]
    # Formulas are named in the page's language (their spoken words), hence the context.
    env.filters["math"] = pass_context(lambda c, text: render_inline(text, _lang(c)))
    env.filters["paragraphs"] = pass_context(lambda c, text: render_paragraphs(text, _lang(c)))
    env.filters["quantity"] = pass_context(lambda c, text: render_quantity(text, _lang(c)))
    env.filters["latex"] = pass_context(
        lambda c, latex: latex_to_mathml(latex, display=True, lang=_lang(c))
    )
    env.filters["plain"] = render_plain
    env.filters["bytes"] = _bytes_filter
    env.filters["number"] = _number_filter
    env.filters["when"] = _when_filter
    env.globals["duration"] = format_duration
    env.globals["has_calculator"] = has_calculator
    env.globals["start_id"] = lambda: uuid.uuid4().hex  # a start form's client_session_id
    return pages


# --- gettext in the pages, per language ---------------------------------------------------

MAX_CONSTANT_MESSAGES = 4096  # translated messages without parameters kept per language


def _newstyle(lookup: Callable[..., str], plural: bool = False) -> Callable[..., str]:
    """A template's gettext call as Jinja's newstyle gettext makes it: translated, marked safe
    when autoescaping (the catalogs are ours), then the named parameters put in (escaped)."""

    # A message without parameters in an autoescaped template is the same every time: kept.
    constant: dict[tuple[Any, ...], str] = {}

    @pass_context
    def call(context: Context, *args: Any, **variables: Any) -> str:
        escaping = context.eval_ctx.autoescape
        if escaping and not variables and not plural:
            known = constant.get(args)
            if known is not None:
                return known
        text = lookup(*args)
        if escaping:
            text = Markup(text)
        if plural:
            variables.setdefault("num", args[-1])
        result: str = text % variables
        if escaping and not variables and not plural and len(constant) < MAX_CONSTANT_MESSAGES:
            constant[args] = result
        return result

    return call


@lru_cache(maxsize=16)
def gettext_callables(lang: str) -> dict[str, Callable[..., str]]:
    """``gettext``, ``ngettext``, ``pgettext`` and ``npgettext`` in ``lang`` for a template's
    context (``_()`` and ``{% trans %}`` call them)."""
    catalog = translations(lang)
    return {
        "gettext": _newstyle(catalog.gettext),
        "ngettext": _newstyle(catalog.ngettext, plural=True),
        "pgettext": _newstyle(catalog.pgettext),
        "npgettext": _newstyle(catalog.npgettext, plural=True),
    }


@lru_cache(maxsize=16)
def html_lang(lang: str) -> str:
    """The ``lang`` attribute of a page in ``lang``: Chinese pages are Simplified (zh-Hans)."""
    locale = Locale.parse(lang)
    if locale.language == "zh" and not locale.script:
        return "zh-Hans"
    return lang


@lru_cache(maxsize=16)
def language_name(lang: str) -> str:
    """A language's name in itself (``中文``, ``English``), for the language switch."""
    return str(Locale.parse(lang).get_display_name(lang) or lang)


def link(path: str, lang: str, **params: Any) -> str:
    """``path`` with query parameters; the language is kept unless it is the default."""
    query = {k: v for k, v in params.items() if v is not None}
    if lang != "en":
        query["lang"] = lang
    return f"{path}?{urlencode(query)}" if query else path


def _switch_link(request: Request, lang: str) -> str:
    """This page in ``lang``: its own address for a GET; for a page answering a form post (an
    error beside the form), the page the form was on (the Referer, on this site: the policy is
    same-origin), else the home page, so that the link never repeats a POST's address as a GET
    (405)."""
    if request.method in ("GET", "HEAD"):
        path, params = request.url.path, dict(request.query_params)
    else:
        came_from = urlsplit(request.headers.get("referer", ""))
        if came_from.netloc == request.url.netloc and came_from.path.startswith("/"):
            path, params = came_from.path, dict(parse_qsl(came_from.query))
        else:
            path, params = "/", {}
    params["lang"] = lang
    # One leading slash: a request for "//evil.example" must not link off-site.
    return "/" + path.lstrip("/") + "?" + urlencode(params)


def render_page(
    request: Request,
    name: str,
    context: Mapping[str, Any],
    *,
    lang: str,
    status_code: int = 200,
    switch_url: str | None = None,
) -> Response:
    """Render a page template with the shared context (language, gettext, helpers).

    A page asked for in a language (``?lang=``) remembers it in a cookie for the next pages.
    """
    other = other_lang(lang)
    if switch_url is None:
        switch_url = _switch_link(request, other)
    full = {
        "learner": getattr(request.state, "visitor_learner", None),
        "due_count": getattr(request.state, "due_count", 0),
        "lang": lang,
        "html_lang": html_lang(lang),
        "switch_lang": other,
        "switch_html_lang": html_lang(other),
        "switch_name": language_name(other),
        **gettext_callables(lang),
        "t": lambda text: text.get(lang) if isinstance(text, Text) else str(text),
        "link": lambda path, **params: link(path, lang, **params),
        "switch_url": switch_url,
        **context,
    }
    pages: Jinja2Templates = request.app.state.pages
    response = pages.TemplateResponse(request, name, full, status_code=status_code)
    asked = request.query_params.get("lang")
    if asked in LANGS and request.cookies.get(LANG_COOKIE) != asked:
        response.set_cookie(
            LANG_COOKIE, asked, max_age=LANG_COOKIE_MAX_AGE_S, httponly=True, samesite="lax"
        )
    return response


def _bytes_filter(value: float | None) -> str:
    """Bytes in decimal units to 3 significant figures (app.domain.calculator.format_bytes, the
    calculator's too); "—" for none (a demo result without the figure)."""
    if value is None or not math.isfinite(value):
        return "—"
    return format_bytes(value, figures=BYTES_FIGURES)


def format_plain(value: float | None, lang: str = "en") -> str:
    """A number in the page's locale (Babel): whole numbers grouped, others to 4 significant
    figures."""
    if value is None:
        return "—"
    if float(value).is_integer():
        return format_decimal(int(value), locale=lang)
    return format_decimal(value, format="@###", locale=lang)


def format_when(moment: datetime | None, lang: str = "en", zone_name: str | None = None) -> str:
    """A stored moment as the page's locale writes a date and a 24-hour time (Babel), on the
    learner's clock (``zone_name``, an IANA name; UTC when None or unknown):
    ``Jan 5, 2025, 15:04 UTC``, ``2025年1月5日 23:04 GMT+08:00``."""
    if moment is None:
        return "—"
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    locale = Locale.parse(lang)
    where = zone(zone_name)
    date = format_skeleton("yMMMd", moment, tzinfo=where, locale=locale)
    time = format_skeleton("Hm", moment, tzinfo=where, locale=locale)
    joined = str(locale.datetime_formats["medium"]).replace("{1}", date).replace("{0}", time)
    if where is UTC or zone_name in ("UTC", "Etc/UTC"):
        return f"{joined} UTC"
    return f"{joined} {format_datetime(moment, 'OOOO', tzinfo=where, locale=locale)}"


def _lang(context: Context) -> str:
    return str(context.get("lang", "en"))


@pass_context
def _number_filter(context: Context, value: float | None) -> str:
    return format_plain(value, context.get("lang", "en"))


@pass_context
def _when_filter(context: Context, moment: datetime | None) -> str:
    """A moment on the learner's clock when the page knows it (``time_zone`` in its context)."""
    return format_when(moment, context.get("lang", "en"), context.get("time_zone"))


def format_duration(seconds: int, lang: str) -> str:
    minutes, rest = divmod(max(0, int(seconds)), 60)
    if minutes:
        return Message("%(minutes)s min %(seconds)s s", minutes=minutes, seconds=rest).get(lang)
    return Message("%(seconds)s s", seconds=rest).get(lang)
