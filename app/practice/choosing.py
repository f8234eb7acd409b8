"""Questions chosen for a learner outside a session: batches (offline use) and "practise again"
after an answer, by the rules of app.domain.selection (as practice sessions choose theirs)."""

from __future__ import annotations

import random
import secrets

from sqlalchemy.orm import Session

from app.domain.cards import Card
from app.domain.catalog import Catalog
from app.domain.generation import generate
from app.domain.identity import QuestionId
from app.domain.messages import Message
from app.domain.practice import same_points
from app.domain.selection import Pick, SeenQuestion, choose_questions
from app.models import Attempt
from app.practice.questions import (
    Question,
    QuestionSigner,
    get_card,
    point_slug,
    random_seed,
    retired,
)
from app.practice.recent import recent_answers, seen_question
from app.problems import NotFound


def question_batch(
    *,
    db: Session,
    catalog: Catalog,
    signer: QuestionSigner,
    card_id: str,
    count: int,
    point: str | None = None,
    learner_id: str | None = None,
    typed: bool = False,
) -> list[Question]:
    """``count`` questions on the card (or on one exam point) in rounds over its templates; for
    a learner, after their latest answers, and their tokens bound to them (``typed``: asked
    without their choices)."""
    seen = (
        recent_answers(db=db, catalog=catalog, learner_id=learner_id)
        if learner_id is not None
        else []
    )
    card = get_card(catalog, card_id)
    if point is None:
        scope = card.templates()
    else:
        found = card.point_by_slug(point_slug(card, point))
        assert found is not None
        scope = list(found.templates)
    picks = choose_questions(
        card.id,
        scope,
        count,
        seen=seen,
        seeds=lambda _position, _draw: random_seed(),
        rng=random.Random(secrets.randbits(64)),
    )
    return [_question(card, signer, pick, learner_id, typed) for pick in picks]


def practise_again(
    *,
    db: Session,
    catalog: Catalog,
    signer: QuestionSigner,
    learner_id: str,
    attempt_id: int,
) -> Question:
    """A new question after the learner's answer ``attempt_id``: its template with new values
    for the parameters its key depends on, or, when that cannot give a key the learner has not
    just seen (a statement template has one key sentence), another template of its exam point.
    """
    attempt = db.get(Attempt, attempt_id) if 0 < attempt_id < 2**62 else None
    db.commit()
    if attempt is None or attempt.learner_id != learner_id:
        raise NotFound(Message("There is no such answer."), code="attempt_not_found")
    card = get_card(catalog, attempt.card_id)
    template = card.template(attempt.template_id)
    if template is None:
        raise retired()
    seen = recent_answers(db=db, catalog=catalog, learner_id=learner_id)
    answered = seen_question(
        catalog,
        QuestionId(
            attempt.card_id,
            attempt.point,
            attempt.template_id,
            attempt.template_version,
            attempt.seed,
        ),
        attempt.params,
    )
    if answered is not None:
        seen.append(answered)  # the answer practised again counts as the latest seen
    (pick,) = choose_questions(
        card.id,
        [template],
        1,
        seen=seen,
        seeds=lambda _position, _draw: random_seed(),
        rng=random.Random(secrets.randbits(64)),
        wider=same_points(card, [template]),
    )
    return _question(card, signer, pick, learner_id)


def review_question(
    *,
    catalog: Catalog,
    signer: QuestionSigner,
    card_id: str,
    template_id: str,
    learner_id: str,
    seen: list[SeenQuestion],
) -> Question:
    """A question of one template (a review due) after the learner's ``seen`` answers, oldest
    first: a key not among the last of them, new numbers for what the key depends on where it
    can (a statement has one key: it is asked as it is). The question joins ``seen``."""
    card = get_card(catalog, card_id)
    template = card.template(template_id)
    if template is None:
        raise retired()
    (pick,) = choose_questions(
        card.id,
        [template],
        1,
        seen=seen,
        seeds=lambda _position, _draw: random_seed(),
        rng=random.Random(secrets.randbits(64)),
    )
    seen.append(pick.seen())
    return _question(card, signer, pick, learner_id)


def _question(
    card: Card, signer: QuestionSigner, pick: Pick, learner_id: str | None, typed: bool = False
) -> Question:
    variant = generate(card, pick.template, pick.seed)
    return Question(
        variant=variant,
        token=signer.sign(variant.id, learner_id, typed=typed),
        expires_at=signer.expires_at(),
    )
