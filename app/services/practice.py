"""Answering a question: grade it, store the attempt once per client answer id, replay repeats.

Idempotency rests on the unique ``attempts.client_answer_id``: the first request stores the
attempt; a repeat (a retried request, a double-submitted form, a concurrent duplicate that loses
the insert race) gets the stored attempt's result. The same id with another question, choice or
learner is a conflict.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db import write_transaction
from app.domain.cards import Card
from app.domain.generation import Choice, Grade, UnknownChoice, Variant, grade
from app.models import Attempt
from app.services.errors import Conflict, UnknownChoiceError
from app.services.learners import LearnerRef, ensure_learner
from app.services.questions import QuestionRef, QuestionSigner, regenerate


@dataclass(frozen=True)
class AnswerOutcome:
    attempt: Attempt
    variant: Variant
    grade: Grade


def answer_question(
    *,
    session: Session,
    cards: dict[str, Card],
    signer: QuestionSigner,
    learner: LearnerRef,
    token: str,
    choice_id: str,
    client_answer_id: str,
) -> AnswerOutcome:
    """Grade ``choice_id`` for the question in ``token`` and record the attempt (once)."""
    ref = signer.verify(token)
    variant = regenerate(cards, ref)
    try:
        result = grade(variant, choice_id)
    except UnknownChoice:
        offered = ", ".join(c.id for c in variant.choices)
        raise UnknownChoiceError(
            f"unknown choice {choice_id!r}: this question offers {offered}"
        ) from None

    stored = find_attempt(session=session, client_answer_id=client_answer_id)
    if stored is None:
        try:
            with write_transaction(session):
                stored = find_attempt(session=session, client_answer_id=client_answer_id)
                if stored is None:
                    ensure_learner(session=session, learner=learner)
                    attempt = _new_attempt(
                        cards[ref.card_id], variant, result, learner, client_answer_id
                    )
                    session.add(attempt)
                    session.flush()
                    return AnswerOutcome(attempt=attempt, variant=variant, grade=result)
        except IntegrityError:
            # A concurrent request with the same client_answer_id won the insert.
            stored = find_attempt(session=session, client_answer_id=client_answer_id)
            if stored is None:
                raise
    _check_same_answer(stored, learner, ref, choice_id)
    return AnswerOutcome(attempt=stored, variant=variant, grade=result)


def find_attempt(*, session: Session, client_answer_id: str) -> Attempt | None:
    return session.scalars(
        select(Attempt).where(Attempt.client_answer_id == client_answer_id)
    ).first()


def _check_same_answer(
    stored: Attempt, learner: LearnerRef, ref: QuestionRef, choice_id: str
) -> None:
    same = (
        stored.learner_id == learner.id
        and stored.card_id == ref.card_id
        and stored.template_id == ref.template_id
        and stored.template_version == ref.template_version
        and stored.seed == ref.seed
        and stored.choice_id == choice_id
    )
    if not same:
        raise Conflict(
            "client_answer_id was already used for a different answer; "
            "send a new client_answer_id for each answer"
        )


def _new_attempt(
    card: Card, variant: Variant, result: Grade, learner: LearnerRef, client_answer_id: str
) -> Attempt:
    return Attempt(
        learner_id=learner.id,
        card_id=variant.card_id,
        card_version=card.version,
        point=variant.point,
        template_id=variant.template_id,
        template_version=variant.template_version,
        seed=variant.seed,
        params=dict(variant.params),
        choices=[_stored_choice(c) for c in variant.choices],
        choice_id=result.chosen_choice_id,
        correct_choice_id=result.correct_choice_id,
        correct=result.correct,
        pitfall_id=result.pitfall.id if result.pitfall is not None else None,
        client_answer_id=client_answer_id,
    )


def _stored_choice(choice: Choice) -> dict[str, Any]:
    return {
        "id": choice.id,
        "text": {"en": choice.text.en, "zh": choice.text.zh},
        "value": choice.value,
        "unit": choice.unit,
        "pitfall_id": choice.pitfall_id,
    }
