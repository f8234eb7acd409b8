"""The learner's latest answers, as the question choice reads them (app.domain.selection)."""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.domain.catalog import Catalog, RetiredQuestion
from app.domain.identity import QuestionId
from app.domain.selection import RECENT_ANSWERS, SeenQuestion, question_key
from app.models import Attempt


def recent_answers(
    *, db: Session, catalog: Catalog, learner_id: str, limit: int = RECENT_ANSWERS
) -> list[SeenQuestion]:
    """The learner's last ``limit`` answers on any card, oldest first, each with the key its
    feedback showed (answers to templates the catalog no longer has are left out)."""
    rows = db.execute(
        select(
            Attempt.card_id,
            Attempt.point,
            Attempt.template_id,
            Attempt.template_version,
            Attempt.seed,
            Attempt.params,
        )
        .where(Attempt.learner_id == learner_id)
        .order_by(Attempt.created_at.desc(), Attempt.id.desc())
        .limit(limit)
    ).all()
    db.commit()
    seen = (seen_question(catalog, QuestionId(*row[:5]), row[5]) for row in reversed(rows))
    return [s for s in seen if s is not None]


def seen_question(
    catalog: Catalog, question: QuestionId, params: Mapping[str, str] | None
) -> SeenQuestion | None:
    """An answered question with its key, from what its attempt stored (None once retired)."""
    try:
        template = catalog.locate(question).template
    except RetiredQuestion:
        return None
    values = {name: Fraction(value) for name, value in (params or {}).items()}
    if set(values) != set(template.params):
        return None
    return SeenQuestion(question.card_id, template.id, question_key(template, values), values)
