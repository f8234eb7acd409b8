"""What the dashboard's authoring forms share: a form's draft saved as the API saves it, a text
of every language as a form shows it, and the problems grouped by the field they are shown at."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from starlette.responses import Response

from app.authoring import service
from app.deps import DbDep, InstructorVisitor
from app.domain.authoring import CardProblem
from app.domain.languages import LANGS
from app.web.authoring import back_to


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
