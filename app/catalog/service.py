"""Publishing cards into the database and keeping every server process's catalog current.

At start-up each card file is compared with the versions already stored: a version the database
lacks is stored, an unchanged one is left alone, and content changed without a version bump is
refused (:func:`app.domain.catalog.check_versions`); a file older than what instructors have
published since simply stays behind (the newest version wins). The catalog holds every stored
version, so questions, attempts and reviews made with an older template still regenerate exactly.

:class:`LiveCatalog` lets several server processes see a publication without a restart: at most
every :data:`REFRESH_EVERY_S` seconds a request checks a small stamp of the versions table and
rebuilds the catalog when it changed.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, sessionmaker

from app.db import write_transaction
from app.domain.cards import Card, CardError, parse_card
from app.domain.catalog import Catalog, check_versions, document_hash
from app.models import CardState, CardVersion

log = logging.getLogger(__name__)
REFRESH_EVERY_S = 2.0


def publish_cards(*, db: Session, cards: Mapping[str, Card]) -> None:
    """Store the versions of ``cards`` (the card files) that the database lacks."""
    stored = stored_cards(db)
    for card in cards.values():
        check_versions(card, stored.get(card.id, []))
    new = [
        card
        for card in cards.values()
        if all(old.version != card.version for old in stored.get(card.id, []))
    ]
    if not new:
        return
    try:
        with write_transaction(db):
            for card in new:
                store_version(db, card)
    except IntegrityError:
        # Another server process published the same version at the same moment.
        db.rollback()
        stored = stored_cards(db)
        for card in cards.values():
            check_versions(card, stored.get(card.id, []))
        return
    for card in new:
        log.info("published card %s version %s", card.id, card.version)


def store_version(db: Session, card: Card) -> None:
    db.add(
        CardVersion(
            card_id=card.id,
            version=card.version,
            document=dict(card.document),
            content_hash=document_hash(card.document),
        )
    )


def stored_cards(db: Session, card_id: str | None = None) -> dict[str, list[Card]]:
    """Every stored version (oldest first) by card id."""
    query = select(CardVersion).order_by(CardVersion.card_id, CardVersion.version)
    if card_id is not None:
        query = query.where(CardVersion.card_id == card_id)
    cards: dict[str, list[Card]] = {}
    for row in db.scalars(query):
        try:
            card = parse_card(row.document)
        except CardError as exc:  # a stored version the current engine cannot read any more
            log.error("card %s version %s cannot be read: %s", row.card_id, row.version, exc)
            continue
        cards.setdefault(card.id, []).append(card)
    db.commit()
    return cards


def stored_documents(db: Session, card_id: str) -> list[dict[str, Any]]:
    rows = db.scalars(
        select(CardVersion.document)
        .where(CardVersion.card_id == card_id)
        .order_by(CardVersion.version)
    ).all()
    db.commit()
    return [dict(r) for r in rows]


def withdrawn_cards(db: Session) -> set[str]:
    rows = db.scalars(select(CardState.card_id).where(CardState.unpublished_at.is_not(None))).all()
    db.commit()
    return set(rows)


def _stamp(db: Session) -> tuple[Any, ...]:
    versions = db.execute(
        select(func.count(), func.max(CardVersion.created_at)).select_from(CardVersion)
    ).one()
    states = db.execute(
        select(func.count(), func.max(CardState.changed_at)).select_from(CardState)
    ).one()
    db.commit()
    return (*versions, *states)


class LiveCatalog:
    """The catalog of this process, refreshed when another process publishes."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        files: Mapping[str, Card],
        *,
        refresh_every_s: float = REFRESH_EVERY_S,
    ) -> None:
        self._sessions = sessions
        self._files = dict(files)
        self._every = refresh_every_s
        self._lock = threading.Lock()
        self._checked = 0.0
        self._stamp: tuple[Any, ...] | None = None
        self.catalog = Catalog(self._files.values())

    def load(self) -> Catalog:
        """Publish the card files' new versions and load every stored one (start-up)."""
        with self._sessions() as db:
            publish_cards(db=db, cards=self._files)
        return self.reload()

    def reload(self) -> Catalog:
        with self._sessions() as db:
            stamp = _stamp(db)
            stored = [c for versions in stored_cards(db).values() for c in versions]
            withdrawn = withdrawn_cards(db)
        self.catalog = Catalog([*stored, *self._files.values()], withdrawn=withdrawn)
        self._stamp = stamp
        self._checked = time.monotonic()
        return self.catalog

    def current(self) -> tuple[Catalog, bool]:
        """The catalog, reloaded first when the database says it changed; (catalog, changed)."""
        if time.monotonic() - self._checked < self._every:
            return self.catalog, False
        with self._lock:
            if time.monotonic() - self._checked < self._every:
                return self.catalog, False
            self._checked = time.monotonic()
            try:
                with self._sessions() as db:
                    stamp = _stamp(db)
            except Exception as exc:  # noqa: BLE001 - a database hiccup keeps the last catalog
                log.warning("could not check the card catalog: %s", exc)
                return self.catalog, False
            if stamp == self._stamp:
                return self.catalog, False
            return self.reload(), True
