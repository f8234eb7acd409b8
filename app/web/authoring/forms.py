"""What the dashboard's authoring forms share: what they read of a submitted form (every text's
line endings LF, no text over :data:`MAX_FIELD_CHARS`), a form's draft saved as the API saves
it, a text of every language as a form shows it, and the problems grouped by their field."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from app.authoring import service
from app.authoring.revisions import DraftChanged
from app.deps import DbDep, InstructorVisitor
from app.domain.authoring import CardProblem
from app.domain.languages import LANGS
from app.domain.messages import Message
from app.web.authoring import back_to

# The longest text one field of a form takes (a stem, an explanation, a formula); the inputs say
# so (maxlength) and a longer one is refused at its field, never cut.
MAX_FIELD_CHARS = 20_000
_ROW = re.compile(r"^(pitfall|formula)(\d{1,5})_(.+)$")
_LANG = re.compile("_(" + "|".join(LANGS) + ")$")


def plain_text(value: str) -> str:
    """A submitted text with the card files' line endings: a browser's textarea sends CRLF."""
    return value.replace("\r\n", "\n").replace("\r", "\n")


async def submitted(request: Request) -> dict[str, str]:
    """An authoring form's fields as posted (whole), every text's line endings LF."""
    return {k: plain_text(v) for k, v in (await request.form()).items() if isinstance(v, str)}


def too_long(form: Mapping[str, str], template_id: str | None = None) -> list[CardProblem]:
    """A problem at each field of ``form`` over :data:`MAX_FIELD_CHARS`, naming the limit."""
    return [
        CardProblem(
            "error",
            template_id,
            document_field(name, form),
            Message(
                "must be at most %(limit)s characters long (this text has %(count)s)",
                limit=f"{MAX_FIELD_CHARS:,}",
                count=f"{len(value):,}",
            ),
        )
        for name, value in form.items()
        if len(value) > MAX_FIELD_CHARS
    ]


def document_field(name: str, form: Mapping[str, str]) -> str:
    """The document field a form's input edits, where its problems are shown: ``stem_en`` →
    ``stem.en``, ``formula0_expr`` → ``formulas.0.expr``, ``pitfall2_title_zh`` →
    ``pitfalls.<its id>.title.zh``."""
    prefix = ""
    row = _ROW.match(name)
    if row is not None:
        kind, index, name = row[1], row[2], row[3]
        key = form.get(f"pitfall{index}_id", "").strip() if kind == "pitfall" else index
        prefix = f"{kind}s.{key}."
    return prefix + _LANG.sub(r".\1", name)


def saved(
    db: DbDep,
    visitor: InstructorVisitor,
    card_id: str,
    document: dict[str, Any],
    based_on: str | None = None,
) -> Response:
    """Write the draft as the API's ``PUT …/draft`` does, then see the card's page; the form's
    ``based_on`` revision no longer the draft's: :class:`DraftChanged`, nothing saved."""
    assert visitor.learner is not None
    service.save_draft(
        db=db, actor=visitor.learner, card_id=card_id, document=document, based_on=based_on
    )
    return back_to(visitor, f"/instructor/cards/{card_id}")


def text_of(value: object) -> dict[str, str]:
    """A text of every language as the form shows it (blank where the document has none)."""
    found = value if isinstance(value, Mapping) else {}
    return {lang: str(found.get(lang) or "") for lang in LANGS}


def by_field(problems: Sequence[CardProblem]) -> dict[str, list[CardProblem]]:
    grouped: dict[str, list[CardProblem]] = {}
    for problem in problems:
        grouped.setdefault(problem.field or "", []).append(problem)
    return grouped


def draft_form_context(
    visitor: InstructorVisitor,
    *,
    revision: str | None,
    conflict: DraftChanged | None,
    reload_url: str,
) -> dict[str, Any]:
    """What every form editing a draft shows besides its fields: the CSRF token, the text limit,
    the draft's ``revision`` it is based on, and a ``conflict`` (the draft changed meanwhile)
    with where the current draft is (``reload_url``)."""
    return {
        "csrf_token": visitor.csrf_token,
        "max_chars": MAX_FIELD_CHARS,
        "revision": revision,
        "conflict": None if conflict is None else conflict.text,
        "reload_url": reload_url,
    }
