"""The HTML of exported texts (Anki notes, Moodle XML): paragraphs escaped, math left for
MathJax (``\\( ... \\)``, as :func:`app.domain.export_plan.mathjax_delimiters` writes it)."""

from __future__ import annotations

from html import escape

from app.domain.export_plan import paragraphs


def block_html(text: str) -> str:
    """A text's paragraphs as ``<p>``, escaped (MathJax reads ``\\( ... \\)`` from the text)."""
    return "".join(f"<p>{escape(p, quote=False)}</p>" for p in paragraphs(text))


def inline_html(text: str) -> str:
    """A text on one line (its paragraphs joined), escaped."""
    return escape(" ".join(paragraphs(text)), quote=False)
