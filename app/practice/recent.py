"""The learner's latest answers, as the question choice reads them (app.domain.selection)."""

from __future__ import annotations

from fractions import Fraction

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.domain.catalog import Catalog, RetiredQuestion
from app.domain.identity import QuestionId
from app.domain.selection import RECENT_ANSWERS, SeenQuestion, question_key
from app.models import Attempt


def recent_answers(
    *, session: Session, catalog: Catalog, learner_id: str, limit: int = RECENT_ANSWERS
) -> list[SeenQuestion]:
    """The learner's last ``limit`` answers on any card, oldest first, each with the key its
    feedback showed (answers to templates the catalog no longer has are left out)."""
    rows = session.execute(
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
    session.commit()
    seen = []
    for card_id, point, template_id, version, seed, params in reversed(rows):
        try:
            template = catalog.locate(
                QuestionId(card_id, point, template_id, version, seed)
            ).template
        except RetiredQuestion:
            continue
        values = {name: Fraction(value) for name, value in (params or {}).items()}
        if set(values) != set(template.params):
            continue
        seen.append(SeenQuestion(template_id, question_key(template, values), values))
    return seen
