"""What a practice session practises: on one card, an exam point, the whole card, its mistakes or
its reviews due; on the deck, every card's mistakes or reviews due, or the cards in play (mixed,
exam). And what the deck has to offer a learner (:func:`deck_reach`): a deck session is offered
where something is to be done on more than one card (app.domain.practice.spans_the_deck).

The plans themselves are app.domain.practice's; this module reads the learner's mistakes and
reviews for them.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.orm import Session

from app.domain.cards import Card, Template
from app.domain.catalog import Catalog, OfferedTemplates
from app.domain.messages import Message
from app.domain.practice import CardPart, same_points, share, spans_the_deck
from app.models import Attempt, ReviewItem
from app.practice.questions import point_slug
from app.problems import Conflict


class NothingToPractise(Conflict):
    """A mistakes or review session with nothing in scope (a new learner, mistakes understood)."""

    def __init__(self, mode: str, *, narrowed: bool = False) -> None:
        if mode == "review":
            text = Message("Nothing is due for review right now.")
        elif narrowed:
            text = Message(
                "Nothing left to practise here: no mistake of yours is left on it (marked as "
                "understood, or never answered wrong)."
            )
        elif mode == "mistakes":
            text = Message("No mistakes to practise yet: answer some questions first.")
        else:
            text = Message("There is no card to practise yet.")
        super().__init__(text, code="nothing_to_practise")
        self.mode = mode
        self.narrowed = narrowed


# --- one card ---------------------------------------------------------------------------------


def card_part(
    *,
    db: Session,
    card: Card,
    learner_id: str,
    mode: str,
    size: int,
    now: datetime,
    point: str | int | None = None,
    templates: Collection[str] | None = None,
    withheld: frozenset[str] = frozenset(),
) -> tuple[CardPart, str | None]:
    """The card's templates a session of ``mode`` practises, ``size`` questions of them (a
    review asks each template due once), and the exam point's slug of a point session
    (``card``: one offered to learners, app.practice.questions.get_card);
    ``withheld``: the sessions whose results are not told yet (running exams: their wrong
    answers are no mistakes to practise, or the session would tell them)."""
    if mode == "point":
        slug = point_slug(card, point if point is not None else card.points[0].slug)
        found = card.point_by_slug(slug)
        assert found is not None
        return CardPart(card, list(found.templates), size), slug
    if mode in ("card", "exam"):
        return CardPart(card, card.templates(), size), None
    if mode == "mistakes":
        mistaken = _mistaken(db, learner_id, templates, told_of(learner_id, withheld))
        scope = _templates(card, sorted(mistaken.get(card.id, ())))
        if not scope:
            raise NothingToPractise(mode, narrowed=templates is not None)
        return CardPart(card, scope, size, wider=same_points(card, scope)), None
    # The card's own templates only (_templates): none of another version's.
    scope = _templates(
        card, _due(db, learner_id, now, OfferedTemplates((card.id,))).get(card.id, [])
    )
    if not scope:
        raise NothingToPractise(mode)
    # A review serves its due templates themselves (with new numbers), never others instead.
    return CardPart(card, scope, min(size, len(scope)), wider=scope), None


# --- the deck ---------------------------------------------------------------------------------


def deck_parts(
    *,
    db: Session,
    catalog: Catalog,
    learner_id: str,
    mode: str,
    size: int,
    now: datetime,
    templates: Collection[str] | None = None,
    withheld: frozenset[str] = frozenset(),
) -> list[CardPart]:
    """Each offered card's part of a deck session of ``mode`` (in learning order), ``size``
    questions in all:

    - ``review``: the templates due on every card, most overdue first (each once, at most
      ``size`` of them);
    - ``mistakes``: the templates answered wrong on every card (``templates`` narrows them), the
      questions shared in proportion to each card's;
    - ``mixed`` and ``exam``: the whole of every card the learner has answered on (every card
      before a first answer), the questions shared evenly.
    """
    cards = catalog.cards()
    if mode == "review":
        offered = {card.id: card for card in cards}
        chosen: list[tuple[Card, Template]] = []
        for card_id, template_id in _most_overdue(db, learner_id, now, catalog.offered_templates):
            card = offered.get(card_id)
            template = card.template(template_id) if card is not None else None
            if card is not None and template is not None:
                chosen.append((card, template))
        chosen = chosen[:size]
        parts = [
            CardPart(card, scope, len(scope), wider=scope)
            for card in cards
            if (scope := [template for of, template in chosen if of is card])
        ]
    elif mode == "mistakes":
        mistaken = _mistaken(db, learner_id, templates, told_of(learner_id, withheld))
        scopes = [(card, _templates(card, sorted(mistaken.get(card.id, ())))) for card in cards]
        scopes = [(card, scope) for card, scope in scopes if scope]
        counts = share(size, [len(scope) for _, scope in scopes])
        parts = [
            CardPart(card, scope, count, wider=same_points(card, scope))
            for (card, scope), count in zip(scopes, counts, strict=True)
        ]
    else:
        started = set(_started(db, learner_id))
        in_play = [card for card in cards if card.id in started] or cards
        counts = share(size, [1] * len(in_play))
        parts = [
            CardPart(card, card.templates(), count)
            for card, count in zip(in_play, counts, strict=True)
        ]
    parts = [part for part in parts if part.count > 0]
    if not parts:
        raise NothingToPractise(mode, narrowed=mode == "mistakes" and templates is not None)
    return parts


@dataclass(frozen=True)
class DeckReach:
    """What there is to do on each offered card, in learning order: reviews due now, mistakes to
    practise, answers given."""

    due: dict[str, int]  # card -> reviews due now
    mistaken: tuple[str, ...]
    started: tuple[str, ...]

    @property
    def review(self) -> bool:
        """ "Review everything due": reviews are due on more than one card."""
        return spans_the_deck(len(self.due))

    @property
    def mistakes(self) -> bool:
        """ "Practise your mistakes across the deck": mistakes on more than one card."""
        return spans_the_deck(len(self.mistaken))

    @property
    def mixed(self) -> bool:
        """ "Practise the deck": more than one card answered on."""
        return spans_the_deck(len(self.started))

    @property
    def most_due(self) -> str | None:
        """The card with the most reviews due (the first in learning order among equals)."""
        return max(self.due, key=lambda card_id: self.due[card_id], default=None)


NOTHING_TO_DO = DeckReach({}, (), ())


def deck_reach(
    *,
    db: Session,
    catalog: Catalog,
    learner_id: str,
    now: datetime,
    told: ColumnElement[bool] | None = None,
) -> DeckReach:
    """The learner's :class:`DeckReach` (the cards no longer offered left out); ``told``: the
    attempts whose result may be told (app.practice.mistakes.results_told): a running exam's
    wrong answers are no mistakes to offer yet, or the offer would tell them."""
    order = [card.id for card in catalog.cards()]
    due = _due(db, learner_id, now, catalog.offered_templates)
    mistaken = _mistaken(db, learner_id, None, told)
    started = set(_started(db, learner_id))
    return DeckReach(
        due={card_id: len(due[card_id]) for card_id in order if due.get(card_id)},
        mistaken=tuple(card_id for card_id in order if mistaken.get(card_id)),
        started=tuple(card_id for card_id in order if card_id in started),
    )


# --- what the learner's answers say ------------------------------------------------------------


def told_of(learner_id: str, withheld: Collection[str]) -> ColumnElement[bool]:
    """The learner's attempts whose result may be told: none of the ``withheld`` sessions'
    (app.practice.sessions.running_exams: exams still running)."""
    mine = Attempt.learner_id == learner_id
    if not withheld:
        return mine
    return and_(
        mine,
        or_(Attempt.practice_session_id.is_(None), Attempt.practice_session_id.not_in(withheld)),
    )


def _mistaken(
    db: Session,
    learner_id: str,
    only: Collection[str] | None,
    told: ColumnElement[bool] | None = None,
) -> dict[str, set[str]]:
    """The templates the learner answered wrong (mistakes not marked understood), per card;
    ``only``: of these templates; ``told``: of these attempts."""
    rows = db.execute(
        select(Attempt.card_id, Attempt.template_id)
        .where(
            Attempt.learner_id == learner_id if told is None else told,
            Attempt.correct.is_(False),
            Attempt.dismissed.is_(False),
        )
        .distinct()
    ).all()
    db.commit()
    wrong: dict[str, set[str]] = {}
    for card_id, template_id in rows:
        if only is None or template_id in only:
            wrong.setdefault(card_id, set()).add(template_id)
    return wrong


def _most_overdue(
    db: Session, learner_id: str, now: datetime, offered: OfferedTemplates
) -> list[tuple[str, str]]:
    """(card, template) of every review item due now of the ``offered`` (card, template) pairs
    (ReviewItem.due_by), most overdue first."""
    rows = db.execute(
        select(ReviewItem.card_id, ReviewItem.template_id)
        .where(ReviewItem.learner_id == learner_id, ReviewItem.due_by(now, offered))
        .order_by(ReviewItem.due_at, ReviewItem.id)
    ).all()
    db.commit()
    return [(card_id, template_id) for card_id, template_id in rows]


def _due(
    db: Session, learner_id: str, now: datetime, offered: OfferedTemplates
) -> dict[str, list[str]]:
    """The templates due now per card, of the ``offered`` (card, template) pairs, most overdue
    first."""
    due: dict[str, list[str]] = {}
    for card_id, template_id in _most_overdue(db, learner_id, now, offered):
        due.setdefault(card_id, []).append(template_id)
    return due


def _started(db: Session, learner_id: str) -> Sequence[str]:
    """The cards the learner has answered on."""
    cards = db.scalars(
        select(Attempt.card_id).where(Attempt.learner_id == learner_id).distinct()
    ).all()
    db.commit()
    return cards


def _templates(card: Card, ids: Iterable[str]) -> list[Template]:
    """The templates of ``card`` with these ids (one removed since is not practised any more)."""
    found = (card.template(template_id) for template_id in ids)
    return [template for template in found if template is not None]
