"""Publishing cards into the database and building the catalog every request reads.

At start-up each card file is compared with the versions already stored: a new version is
stored, an unchanged one is left alone, and content changed without a version bump is refused
(:func:`app.domain.catalog.check_versions`). The catalog then holds every stored version, so
questions, attempts and reviews made with an older template still regenerate exactly.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.db import write_transaction
from app.domain.cards import Card, CardError, parse_card
from app.domain.catalog import Catalog, check_versions, document_hash
from app.models import CardVersion

log = logging.getLogger(__name__)


def publish_cards(*, session: Session, cards: Mapping[str, Card]) -> Catalog:
    """Store the versions of ``cards`` the database lacks; the catalog of every version."""
    stored = _stored_cards(session)
    for card in cards.values():
        check_versions(card, stored.get(card.id, []))
    new = [
        card
        for card in cards.values()
        if all(old.version != card.version for old in stored.get(card.id, []))
    ]
    if new:
        try:
            with write_transaction(session):
                for card in new:
                    session.add(
                        CardVersion(
                            card_id=card.id,
                            version=card.version,
                            document=dict(card.document),
                            content_hash=document_hash(card.document),
                        )
                    )
        except IntegrityError:
            # Another server process published the same version at the same moment.
            session.rollback()
            stored = _stored_cards(session)
            for card in cards.values():
                check_versions(card, stored.get(card.id, []))
        for card in new:
            log.info("published card %s version %s", card.id, card.version)
    older = [c for versions in _stored_cards(session).values() for c in versions]
    return Catalog([*older, *cards.values()] if older else cards.values())


def _stored_cards(session: Session) -> dict[str, list[Card]]:
    rows = session.scalars(select(CardVersion).order_by(CardVersion.card_id, CardVersion.version))
    cards: dict[str, list[Card]] = {}
    for row in rows:
        try:
            card = parse_card(row.document)
        except CardError as exc:  # a stored version the current engine cannot read any more
            log.error("card %s version %s cannot be read: %s", row.card_id, row.version, exc)
            continue
        cards.setdefault(card.id, []).append(card)
    session.commit()
    return cards
