"""Jinja2 setup and page rendering: filters for math, the language switch.

Security headers (CSP and the rest) are added to every response by ``app.web.security``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from fastapi import Request
from fastapi.templating import Jinja2Templates
from starlette.responses import Response

from app.domain.languages import LANGS, other_lang
from app.domain.texts import Text
from app.rendering import latex_to_mathml, render_inline, render_paragraphs, render_quantity
from app.web.ui import UI

LANG_COOKIE = "infracards_lang"
LANG_COOKIE_MAX_AGE_S = 365 * 24 * 3600

TEMPLATES_DIR = Path(__file__).resolve().parents[1] / "templates"


def make_templates() -> Jinja2Templates:
    templates = Jinja2Templates(directory=TEMPLATES_DIR)
    env = templates.env
    env.filters["math"] = render_inline
    env.filters["paragraphs"] = render_paragraphs
    env.filters["quantity"] = render_quantity
    env.filters["latex"] = lambda latex: latex_to_mathml(latex, display=True)
    env.filters["bytes"] = format_bytes
    env.filters["number"] = format_plain
    env.filters["when"] = format_when
    env.globals["duration"] = format_duration
    return templates


def link(path: str, lang: str, **params: Any) -> str:
    """``path`` with query parameters; the language is kept unless it is the default."""
    query = {k: v for k, v in params.items() if v is not None}
    if lang != "en":
        query["lang"] = lang
    return f"{path}?{urlencode(query)}" if query else path


def render_page(
    request: Request,
    name: str,
    context: Mapping[str, Any],
    *,
    lang: str,
    status_code: int = 200,
    switch_url: str | None = None,
) -> Response:
    """Render a page template with the shared context (language, UI strings, helpers).

    A page asked for in a language (``?lang=``) remembers it in a cookie for the next pages.
    """
    other = other_lang(lang)
    if switch_url is None:
        params = dict(request.query_params)
        params["lang"] = other
        # One leading slash: a request for "//evil.example" must not link off-site.
        switch_url = "/" + request.url.path.lstrip("/") + "?" + urlencode(params)
    full = {
        "learner": getattr(request.state, "visitor_learner", None),
        "due_count": getattr(request.state, "due_count", 0),
        "lang": lang,
        "ui": UI[lang],
        "t": lambda text: text.get(lang) if isinstance(text, Text) else str(text),
        "link": lambda path, **params: link(path, lang, **params),
        "switch_url": switch_url,
        **context,
    }
    templates: Jinja2Templates = request.app.state.templates
    response = templates.TemplateResponse(request, name, full, status_code=status_code)
    asked = request.query_params.get("lang")
    if asked in LANGS and request.cookies.get(LANG_COOKIE) != asked:
        response.set_cookie(
            LANG_COOKIE, asked, max_age=LANG_COOKIE_MAX_AGE_S, httponly=True, samesite="lax"
        )
    return response


def format_bytes(value: float | None) -> str:
    """Bytes in decimal units (the card counts GB as 10^9 bytes)."""
    if value is None:
        return "—"
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {unit}"
    return f"{value:.0f} B"


def format_plain(value: float | None) -> str:
    if value is None:
        return "—"
    if float(value).is_integer():
        return f"{int(value):,}"
    return f"{value:.4g}"


def format_when(moment: datetime | None) -> str:
    if moment is None:
        return "—"
    return moment.strftime("%Y-%m-%d %H:%M UTC")


def format_duration(seconds: int, lang: str) -> str:
    minutes, rest = divmod(max(0, int(seconds)), 60)
    ui = UI[lang]
    if minutes:
        return f"{minutes} {ui['minutes']} {rest} {ui['seconds']}"
    return f"{rest} {ui['seconds']}"
