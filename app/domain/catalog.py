"""The card catalog: the current version of every card, compiled, and every older one on demand.

New questions use each card's latest version, compiled when the catalog is built. A question names
its template by id and version (:class:`~app.domain.identity.QuestionId`); the catalog finds the
card version that carries it in the versions' manifests (:mod:`app.domain.manifests`), and an
older version is compiled only when a question of it is graded or regenerated, then kept in a
bounded cache (:class:`VersionCache`) shared by the catalogs of a process. So old attempts,
mistakes and outstanding tokens still regenerate exactly after a template is edited (an edit must
raise the template's version, see :func:`check_versions`), and publishing a version never
compiles the older ones.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from .cards import Card, CardError, ExamPoint, Template, find_template_document, read_cards
from .generation import Variant, generate
from .identity import QuestionId
from .manifests import VersionManifest, card_manifest
from .manifests import document_hash as document_hash
from .messages import Message
from .validation import validate_card
from .versions import compare_templates

# Compiled older card versions a process keeps (least recently used dropped first): grading an
# old question compiles its version once, not at every answer.
OLD_VERSIONS_CACHED = 4

# How the catalog gets an older card version compiled: (card id, version) -> Card, or None when
# it cannot be read any more.
VersionLoader = Callable[[str, int], Card | None]


def learning_order(cards: Iterable[Card]) -> list[Card]:
    """The deck in learning order: a card after the cards it lists as prerequisites (those in
    the deck), otherwise in id order; a cycle of prerequisites is broken at its smallest id."""
    by_id = {card.id: card for card in cards}
    waiting = {
        card_id: {p for p in card.prerequisites if p in by_id} for card_id, card in by_id.items()
    }
    order: list[Card] = []
    while waiting:
        ready = sorted(c for c, before in waiting.items() if not before) or [min(waiting)]
        chosen = ready[0]
        order.append(by_id[chosen])
        del waiting[chosen]
        for before in waiting.values():
            before.discard(chosen)
    return order


class RetiredQuestion(LookupError):
    """A question whose card or template version the catalog does not hold."""


class ValidationRecords(Protocol):
    """Which card documents this code validated whole before (:mod:`app.catalog.validated`)."""

    def holds(self, card: Card) -> bool: ...

    def record(self, card: Card) -> None: ...


def load_cards(directory: Path, records: ValidationRecords | None = None) -> dict[str, Card]:
    """Every card file in ``directory``, compiled and validated over its whole domains.

    ``records``: a card they hold passed this validation before (the same document, the same
    code), so it is not validated again (its questions' combinations are then built as they are
    first asked for); a card validated now is recorded."""
    cards = read_cards(directory)
    for card in cards.values():
        if records is not None and records.holds(card):
            continue
        validate_card(card)
        if records is not None:
            records.record(card)
    return cards


def template_document(document: Mapping[str, object], template_id: str) -> object | None:
    found = find_template_document(document, template_id)
    return found[1] if found is not None else None


def check_versions(
    new: Card,
    stored: Iterable[Card | VersionManifest],
    *,
    load: Callable[[int], Card | None] | None = None,
) -> None:
    """Refuse ``new`` when it changes content without raising a version.

    The same card version must have the same document; a template id, version and revision met
    in an older card version must have the same content (otherwise old questions would
    regenerate differently), and another revision of the same version must ask the same values
    (:func:`app.domain.versions.compare_templates`, on that older version compiled by ``load``,
    given its card version). The stored versions are otherwise compared by their manifests.
    """
    mine = card_manifest(new)
    older: dict[int, Card | None] = {}
    for found in stored:
        old = card_manifest(found) if isinstance(found, Card) else found
        if old.card_id != new.id:
            continue
        if old.version == new.version and old.document != mine.document:
            raise CardError(
                Message(
                    "card %(card)s version %(version)s differs from the version %(old)s already "
                    "published: raise the card's 'version'",
                    card=repr(new.id),
                    version=new.version,
                    old=old.version,
                )
            )
        for template_id, template in mine.templates.items():
            previous = old.templates.get(template_id)
            if previous is None or previous.version != template.version:
                continue
            if old.generator != mine.generator:
                raise CardError(
                    Message(
                        "card %(card)s, template %(template)s: its variants would be drawn from "
                        "generator %(generator)s instead of %(old)s but its version is still "
                        "%(version)s: raise the template's 'version'",
                        card=repr(new.id),
                        template=repr(template_id),
                        generator=mine.generator,
                        old=old.generator,
                        version=template.version,
                    )
                )
            if previous.revision != template.revision:
                if old.version not in older:
                    older[old.version] = found if isinstance(found, Card) else None
                    if older[old.version] is None and load is not None:
                        older[old.version] = load(old.version)
                _check_revision(new, template_id, older[old.version], old.version)
            elif previous.content != template.content:
                raise CardError(
                    Message(
                        "card %(card)s, template %(template)s: its content changed but its "
                        "version is still %(version)s: raise the template's 'version'",
                        card=repr(new.id),
                        template=repr(template_id),
                        version=template.version,
                    )
                )
            if previous.point != template.point:
                raise CardError(
                    Message(
                        "card %(card)s, template %(template)s: moved from exam point %(old)s to "
                        "%(point)s without a new version",
                        card=repr(new.id),
                        template=repr(template_id),
                        old=repr(previous.point),
                        point=repr(template.point),
                    )
                )


def _check_revision(new: Card, template_id: str, old_card: Card | None, old_version: int) -> None:
    """Refuse a revision of a template version that asks other values than the form of that
    version in ``old_card`` (the stored card version ``old_version``, compiled; None when it
    could not be)."""
    old_template = old_card.template(template_id) if old_card is not None else None
    new_template = new.template(template_id)
    assert new_template is not None
    if old_template is None:
        raise CardError(
            Message(
                "card %(card)s, template %(template)s: revision %(revision)s of "
                "version %(version)s cannot be compared with the stored card "
                "version %(old)s: raise the template's 'version'",
                card=repr(new.id),
                template=repr(template_id),
                revision=new_template.revision,
                version=new_template.version,
                old=old_version,
            )
        )
    comparison = compare_templates(old_template, new_template)
    if not comparison.minor:
        raise CardError(
            Message(
                "card %(card)s, template %(template)s: version %(label)s changes "
                "values of version %(old)s (%(reason)s): raise the template's "
                "'version'",
                card=repr(new.id),
                template=repr(template_id),
                label=new_template.version_label,
                old=old_template.version_label,
                reason=comparison.reasons[0],
            )
        )


@dataclass(frozen=True)
class Located:
    card: Card
    point: ExamPoint
    template: Template


class VersionCache:
    """Compiled older card versions, at most ``size``, the least recently used dropped first."""

    def __init__(self, size: int = OLD_VERSIONS_CACHED) -> None:
        self.size = size
        self._cards: OrderedDict[tuple[str, int], Card] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, card_id: str, version: int, load: VersionLoader) -> Card | None:
        key = (card_id, version)
        with self._lock:
            card = self._cards.get(key)
            if card is not None:
                self._cards.move_to_end(key)
                return card
        card = load(card_id, version)  # outside the lock: other versions are served meanwhile
        if card is None:
            return None
        with self._lock:
            self._cards[key] = card
            self._cards.move_to_end(key)
            while len(self._cards) > self.size:
                self._cards.popitem(last=False)
        return card

    def keys(self) -> list[tuple[str, int]]:
        """The cached (card id, version) pairs, least recently used first."""
        with self._lock:
            return list(self._cards)


@dataclass(frozen=True)
class OfferedTemplates:
    """The templates learners may be asked: those of the ``cards`` offered (by id), but the
    ``retired`` (card, template) pairs, which an earlier version of their card had and its
    latest has not. The review items that count as due are of these (app.models.ReviewItem
    .due_by): no review can serve an item of a withdrawn card or of a retired template."""

    cards: tuple[str, ...]
    retired: tuple[tuple[str, str], ...] = ()


class Catalog:
    """Cards by id and version; :meth:`latest` is what learners practise.

    ``cards`` are compiled card versions (at least each card's newest); ``manifests`` describe
    every stored version, and ``load_version`` compiles one of them when a question needs it.
    """

    def __init__(
        self,
        cards: Iterable[Card],
        *,
        withdrawn: Iterable[str] = (),
        manifests: Iterable[VersionManifest] = (),
        load_version: VersionLoader | None = None,
        cache: VersionCache | None = None,
    ) -> None:
        self.withdrawn = frozenset(withdrawn)  # unpublished: no new questions, old ones grade
        self._load = load_version
        self._cache = cache if cache is not None else VersionCache()
        self._manifests: dict[str, dict[int, VersionManifest]] = {}
        for manifest in manifests:
            self._manifests.setdefault(manifest.card_id, {})[manifest.version] = manifest
        self._compiled: dict[tuple[str, int], Card] = {}
        for card in cards:
            self._compiled[(card.id, card.version)] = card
            known = self._manifests.setdefault(card.id, {})
            if card.version not in known:
                known[card.version] = card_manifest(card)
        self._latest: dict[str, Card] = {}
        for card_id, versions in self._manifests.items():
            for version in sorted(versions, reverse=True):
                newest = self.version(card_id, version)
                if newest is not None:
                    self._latest[card_id] = newest
                    break
        offered = tuple(sorted(c for c in self._latest if c not in self.withdrawn))
        self.offered_templates = OfferedTemplates(
            offered,
            tuple(
                sorted(
                    (card_id, template_id)
                    for card_id in offered
                    for manifest in self._manifests.get(card_id, {}).values()
                    for template_id in manifest.templates
                    if self._latest[card_id].template(template_id) is None
                )
            ),
        )
        # (card, template, template version) -> (card version, exam point); oldest first, so
        # that the newest card version carrying a template version wins.
        self._templates: dict[tuple[str, str, int], tuple[int, str]] = {}
        for card_id, versions in self._manifests.items():
            for version in sorted(versions):
                for template_id, entry in versions[version].templates.items():
                    key = (card_id, template_id, entry.version)
                    self._templates[key] = (version, entry.point)

    def latest(self, card_id: str) -> Card | None:
        """The newest version of a card (withdrawn or not: old questions still need it)."""
        return self._latest.get(card_id)

    def offered(self, card_id: str) -> Card | None:
        """The newest version of a card learners may practise, or None."""
        return None if card_id in self.withdrawn else self._latest.get(card_id)

    def cards(self) -> list[Card]:
        """The latest version of every card offered to learners, in learning order
        (:func:`learning_order`)."""
        return learning_order(
            [self._latest[c] for c in sorted(self._latest) if c not in self.withdrawn]
        )

    def all_cards(self) -> list[Card]:
        """The latest version of every card, withdrawn ones included (the dashboard's list)."""
        return [self._latest[card_id] for card_id in sorted(self._latest)]

    def version(self, card_id: str, version: int) -> Card | None:
        """That card version, compiled (an older one on first use, then from the cache)."""
        card = self._compiled.get((card_id, version))
        if card is not None:
            return card
        if self._load is None or version not in self._manifests.get(card_id, {}):
            return None
        return self._cache.get(card_id, version, self._load)

    def versions(self, card_id: str) -> list[int]:
        return sorted(self._manifests.get(card_id, {}))

    def manifest(self, card_id: str, version: int) -> VersionManifest | None:
        return self._manifests.get(card_id, {}).get(version)

    def locate(self, question: QuestionId) -> Located:
        """The card version, exam point and template a question was generated from."""
        found = self._templates.get(question.template_key)
        if found is None or found[1] != question.point:
            raise RetiredQuestion(question)
        card = self.version(question.card_id, found[0])
        template = card.template(question.template_id) if card is not None else None
        point = card.point_by_slug(found[1]) if card is not None else None
        if card is None or template is None or point is None:
            raise RetiredQuestion(question)  # a stored version the engine cannot read any more
        return Located(card, point, template)

    def find_template(self, card_id: str, template_id: str, version: int) -> Located | None:
        """Where a template version is, whichever exam point it is in; None if nowhere."""
        found = self._templates.get((card_id, template_id, version))
        if found is None:
            return None
        try:
            return self.locate(QuestionId(card_id, found[1], template_id, version, 0))
        except RetiredQuestion:
            return None

    def variant(self, question: QuestionId) -> Variant:
        found = self.locate(question)
        return generate(found.card, found.template, question.seed)

    def point_title_card(self, card_id: str, point_slug: str) -> ExamPoint | None:
        """The exam point of that slug in the latest card that has it."""
        for version in reversed(self.versions(card_id)):
            if point_slug in self._manifests[card_id][version].points:
                card = self.version(card_id, version)
                point = card.point_by_slug(point_slug) if card is not None else None
                if point is not None:
                    return point
        return None

    def template_anywhere(self, card_id: str, template_id: str) -> Template | None:
        """The newest version of a template (it may have been removed from the latest card)."""
        for version in reversed(self.versions(card_id)):
            if template_id in self._manifests[card_id][version].templates:
                card = self.version(card_id, version)
                template = card.template(template_id) if card is not None else None
                if template is not None:
                    return template
        return None
