"""Publishing cards into the database and keeping every server process's catalog current.

At start-up each card file is compared with the versions already stored: a version the database
lacks is stored, an unchanged one is left alone, and content changed without a version bump is
refused (:func:`app.domain.catalog.check_versions`, on the stored versions' manifests: nothing
stored is compiled for it); a file older than what instructors have published since simply stays
behind (the newest version wins).

The catalog compiles the newest version of each card only; an older version is compiled when an
old question needs it (:class:`app.domain.catalog.VersionCache`). :class:`LiveCatalog` lets
several server processes see a publication without a restart: a thread of each process checks a
small stamp of the versions table every :data:`REFRESH_EVERY_S` seconds, builds the new catalog
(compiling only the versions it has not compiled yet) and swaps it in. Requests never wait for
that: they use the catalog they find. The process that publishes swaps its own at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.auth.visitors import forget_visitors
from app.db import write_transaction
from app.domain.cards import Card, CardError, parse_card
from app.domain.catalog import OLD_VERSIONS_CACHED, Catalog, VersionCache, check_versions
from app.domain.manifests import VersionManifest, card_manifest, document_hash, manifest_of
from app.models import CardState, CardVersion

log = logging.getLogger(__name__)
REFRESH_EVERY_S = 2.0
# After a failed check the thread waits twice as long as before, up to this (a database that is
# down is not asked every few seconds by every process).
REFRESH_BACKOFF_MAX_S = 30.0


def compile_document(document: Mapping[str, Any]) -> Card:
    """A stored card document compiled (the one place the catalog compiles a card)."""
    return parse_card(document)


def publish_cards(*, db: Session, cards: Mapping[str, Card]) -> None:
    """Store the versions of ``cards`` (the card files) that the database lacks."""
    fill_manifests(db)
    stored = stored_manifests(db)
    for card in cards.values():
        check_versions(card, stored.get(card.id, []), load=stored_card(db, card.id))
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
        stored = stored_manifests(db)
        for card in cards.values():
            check_versions(card, stored.get(card.id, []), load=stored_card(db, card.id))
        return
    for card in new:
        log.info("published card %s version %s", card.id, card.version)


def stored_card(db: Session, card_id: str) -> Callable[[int], Card | None]:
    """Compiles a stored version of the card (a wording-only revision is checked against the
    version it revises: app.domain.catalog.check_versions)."""

    def load(version: int) -> Card | None:
        document = stored_document(db, card_id, version)
        db.commit()
        if document is None:
            return None
        try:
            return compile_document(document)
        except CardError:
            return None

    return load


def store_version(db: Session, card: Card) -> None:
    manifest = card_manifest(card)
    db.add(
        CardVersion(
            card_id=card.id,
            version=card.version,
            document=dict(card.document),
            content_hash=manifest.document,
            manifest=manifest.to_json(),
        )
    )


def stored_manifests(db: Session, card_id: str | None = None) -> dict[str, list[VersionManifest]]:
    """The manifest of every stored version (oldest first) by card id; a version stored before
    manifests has its own read from its document (no formula is compiled)."""
    query = select(CardVersion.card_id, CardVersion.version, CardVersion.manifest).order_by(
        CardVersion.card_id, CardVersion.version
    )
    if card_id is not None:
        query = query.where(CardVersion.card_id == card_id)
    manifests: dict[str, list[VersionManifest]] = {}
    for row_card, version, data in db.execute(query).all():
        if data is not None:
            manifest = VersionManifest.from_json(row_card, version, data)
        else:
            manifest = manifest_of(stored_document(db, row_card, version) or {})
        manifests.setdefault(row_card, []).append(manifest)
    db.commit()
    return manifests


def fill_manifests(db: Session) -> None:
    """Write the manifests of versions stored before manifests (at start-up, once)."""
    missing = db.execute(
        select(CardVersion.card_id, CardVersion.version).where(CardVersion.manifest.is_(None))
    ).all()
    db.commit()
    for card_id, version in missing:
        manifest = manifest_of(stored_document(db, card_id, version) or {})
        try:
            with write_transaction(db):
                db.execute(
                    update(CardVersion)
                    .where(CardVersion.card_id == card_id, CardVersion.version == version)
                    .values(manifest=manifest.to_json())
                )
        except OperationalError as exc:  # a read-only database: read from the document again
            log.warning("could not store the manifest of %s version %s: %s", card_id, version, exc)
            return


def stored_document(db: Session, card_id: str, version: int) -> dict[str, Any] | None:
    """That version's document (read in the session's transaction, which is left open)."""
    document = db.scalar(
        select(CardVersion.document).where(
            CardVersion.card_id == card_id, CardVersion.version == version
        )
    )
    return dict(document) if document is not None else None


def latest_document(db: Session, card_id: str) -> dict[str, Any] | None:
    """The newest stored version of a card's document, or None when it has none (read in the
    session's transaction, which is left open)."""
    document = db.scalar(
        select(CardVersion.document)
        .where(CardVersion.card_id == card_id)
        .order_by(CardVersion.version.desc())
        .limit(1)
    )
    return dict(document) if document is not None else None


def withdrawn_cards(db: Session) -> set[str]:
    rows = db.scalars(select(CardState.card_id).where(CardState.unpublished_at.is_not(None))).all()
    db.commit()
    return set(rows)


def catalog_stamp(db: Session) -> tuple[Any, ...]:
    """A small value that changes whenever a version is stored or a card withdrawn or offered."""
    versions = db.execute(
        select(func.count(), func.max(CardVersion.created_at)).select_from(CardVersion)
    ).one()
    states = db.execute(
        select(func.count(), func.max(CardState.changed_at)).select_from(CardState)
    ).one()
    db.commit()
    return (*versions, *states)


class LiveCatalog:
    """The catalog of this process: built at start-up, swapped when a card is published here,
    and refreshed by a thread of its own (:meth:`start`) when another process publishes."""

    def __init__(
        self,
        sessions: sessionmaker[Session],
        files: Mapping[str, Card],
        *,
        refresh_every_s: float = REFRESH_EVERY_S,
        old_versions_cached: int = OLD_VERSIONS_CACHED,
    ) -> None:
        self._sessions = sessions
        self._files = dict(files)
        self._file_hashes = {card_id: card_manifest(c).document for card_id, c in files.items()}
        # The card files found identical to their stored version: (card id, version).
        self._files_stored: set[tuple[str, int]] = set()
        self.every = refresh_every_s
        self.cache = VersionCache(old_versions_cached)
        self._build = threading.Lock()  # one build at a time; requests never take it
        self.stamp: tuple[Any, ...] | None = None  # of the database state the catalog shows
        self.catalog = Catalog(self._files.values())
        self.refresher: CatalogRefresher | None = None

    @property
    def loaded(self) -> bool:
        """Whether the catalog was built from the database (not the card files alone)."""
        return self.stamp is not None

    def load(self) -> Catalog:
        """Publish the card files' new versions and build the catalog (start-up)."""
        with self._sessions() as db:
            publish_cards(db=db, cards=self._files)
        return self.reload()

    def reload(
        self, *, known: Iterable[Card] = (), sessions: sessionmaker[Session] | None = None
    ) -> Catalog:
        """Build the catalog of what the database holds now and swap it in.

        Only a card's newest version is compiled, and only when it is not compiled already (in
        the current catalog, the card files, or ``known``: the version just published here).
        """
        with self._build, (sessions or self._sessions)() as db:
            stamp = catalog_stamp(db)
            manifests = stored_manifests(db)
            withdrawn = withdrawn_cards(db)
            # A stored version never changes (check_versions), so a version compiled once is it.
            compiled = {(c.id, c.version): c for c in [*self.catalog.all_cards(), *known]}
            current = []
            for card_id, versions in manifests.items():
                newest = versions[-1]
                card = compiled.get((card_id, newest.version))
                if card is None or (
                    card.source is not None and (card_id, card.version) not in self._files_stored
                ):
                    card = self._compile(db, card_id, newest.version)
                if card is not None:
                    current.append(card)
            for card_id, card in self._files.items():  # a card file the database lacks
                if card_id not in manifests:
                    current.append(card)
            catalog = Catalog(
                current,
                withdrawn=withdrawn,
                manifests=[m for versions in manifests.values() for m in versions],
                load_version=self.load_version,
                cache=self.cache,
            )
            previous = self.catalog
            self.catalog, self.stamp = catalog, stamp  # requests take whichever they find
        if catalog.offered_templates != previous.offered_templates:
            forget_visitors()  # the headers' due counts are of the templates offered: read anew
        return catalog

    def _compile(self, db: Session, card_id: str, version: int) -> Card | None:
        file = self._files.get(card_id)
        document = stored_document(db, card_id, version)
        if document is None:
            return None
        if file is not None and file.version == version:
            if self._file_hashes.get(card_id) == document_hash(document):
                self._files_stored.add((card_id, version))
                return file
        try:
            return compile_document(document)
        except CardError as exc:  # a stored version the current engine cannot read any more
            log.error("card %s version %s cannot be read: %s", card_id, version, exc)
            return None

    def load_version(self, card_id: str, version: int) -> Card | None:
        """An older stored version, compiled (the catalog caches it: app.domain.catalog)."""
        with self._sessions() as db:
            return self._compile(db, card_id, version)

    def refresh(self, sessions: sessionmaker[Session] | None = None) -> bool:
        """Rebuild the catalog when the database's stamp changed; whether it did."""
        with (sessions or self._sessions)() as db:
            stamp = catalog_stamp(db)
        if stamp == self.stamp:
            return False
        self.reload(sessions=sessions)
        return True

    def start(self, sessions: sessionmaker[Session] | None = None) -> None:
        """Start refreshing on a thread of this process (with ``sessions`` of its own)."""
        if self.refresher is None:
            self.refresher = CatalogRefresher(self, sessions or self._sessions)
            self.refresher.start()

    def stop(self) -> None:
        refresher, self.refresher = self.refresher, None
        if refresher is not None:
            refresher.stop()


class CatalogRefresher(threading.Thread):
    """Every ``live.every`` seconds: a cheap stamp query; when it changed, the new catalog is
    built here, off the requests' path. A failed check is logged and waited out, longer each
    time (up to :data:`REFRESH_BACKOFF_MAX_S`)."""

    def __init__(self, live: LiveCatalog, sessions: sessionmaker[Session]) -> None:
        super().__init__(name="catalog-refresher", daemon=True)
        self.live = live
        self.sessions = sessions
        self.stopping = threading.Event()
        self.failures = 0

    def run(self) -> None:
        delay = self.live.every
        while not self.stopping.wait(delay):
            try:
                self.live.refresh(self.sessions)
            except Exception as exc:  # noqa: BLE001 - the last catalog serves meanwhile
                self.failures += 1
                delay = min(max(delay, 0.05) * 2, REFRESH_BACKOFF_MAX_S)
                log.warning(
                    "could not refresh the card catalog (next try in %.0f s): %s", delay, exc
                )
            else:
                delay = self.live.every

    def stop(self, timeout_s: float = 5.0) -> None:
        self.stopping.set()
        if self.is_alive():
            self.join(timeout_s)
