"""The card catalog: every version of every card, so that any question ever shown stays gradeable.

New questions use each card's latest version. A question names its template by id and version
(:class:`~app.domain.identity.QuestionId`); the catalog finds that template in whichever card
version carries it, so old attempts, mistakes and outstanding tokens still regenerate exactly
after a template is edited (an edit must raise the template's version, see
:func:`check_versions`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .cards import Card, CardError, ExamPoint, Template, find_template_document, read_cards
from .generation import Variant, generate
from .identity import QuestionId
from .messages import Message
from .validation import validate_card


class RetiredQuestion(LookupError):
    """A question whose card or template version the catalog does not hold."""


def load_cards(directory: Path) -> dict[str, Card]:
    """Every card file in ``directory``, compiled and validated over its whole domains."""
    cards = read_cards(directory)
    for card in cards.values():
        validate_card(card)
    return cards


def document_hash(document: Mapping[str, object]) -> str:
    """A stable digest of a card document (key order and whitespace do not matter)."""
    canonical = json.dumps(document, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def template_document(document: Mapping[str, object], template_id: str) -> object | None:
    found = find_template_document(document, template_id)
    return found[1] if found is not None else None


def check_versions(new: Card, stored: Iterable[Card]) -> None:
    """Refuse ``new`` when it changes content without raising a version.

    The same card version must have the same document; a template id and version met in an older
    card version must have the same content (otherwise old questions would regenerate
    differently).
    """
    for old in stored:
        if old.id != new.id:
            continue
        if old.version == new.version and document_hash(old.document) != document_hash(
            new.document
        ):
            raise CardError(
                Message(
                    "card %(card)s version %(version)s differs from the version %(old)s already "
                    "published: raise the card's 'version'",
                    card=repr(new.id),
                    version=new.version,
                    old=old.version,
                )
            )
        for template in new.templates():
            previous = old.template(template.id)
            if previous is None or previous.version != template.version:
                continue
            if previous.generator != template.generator:
                raise CardError(
                    Message(
                        "card %(card)s, template %(template)s: its variants would be drawn from "
                        "generator %(generator)s instead of %(old)s but its version is still "
                        "%(version)s: raise the template's 'version'",
                        card=repr(new.id),
                        template=repr(template.id),
                        generator=template.generator,
                        old=previous.generator,
                        version=template.version,
                    )
                )
            if json.dumps(template_document(old.document, template.id), sort_keys=True) != (
                json.dumps(template_document(new.document, template.id), sort_keys=True)
            ):
                raise CardError(
                    Message(
                        "card %(card)s, template %(template)s: its content changed but its "
                        "version is still %(version)s: raise the template's 'version'",
                        card=repr(new.id),
                        template=repr(template.id),
                        version=template.version,
                    )
                )
            if previous.point != template.point:
                raise CardError(
                    Message(
                        "card %(card)s, template %(template)s: moved from exam point %(old)s to "
                        "%(point)s without a new version",
                        card=repr(new.id),
                        template=repr(template.id),
                        old=repr(previous.point),
                        point=repr(template.point),
                    )
                )


@dataclass(frozen=True)
class Located:
    card: Card
    point: ExamPoint
    template: Template


class Catalog:
    """Cards by id and version; :meth:`latest` is what learners practise."""

    def __init__(self, cards: Iterable[Card], *, withdrawn: Iterable[str] = ()) -> None:
        self.withdrawn = frozenset(withdrawn)  # unpublished: no new questions, old ones grade
        self._versions: dict[str, dict[int, Card]] = {}
        for card in cards:
            self._versions.setdefault(card.id, {})[card.version] = card
        self._latest = {
            card_id: versions[max(versions)] for card_id, versions in self._versions.items()
        }
        self._templates: dict[tuple[str, str, int], Located] = {}
        # Oldest first, so that the newest card version carrying a template version wins.
        for card_id, versions in self._versions.items():
            for version in sorted(versions):
                card = versions[version]
                for point in card.points:
                    for template in point.templates:
                        key = (card_id, template.id, template.version)
                        self._templates[key] = Located(card, point, template)

    def latest(self, card_id: str) -> Card | None:
        """The newest version of a card (withdrawn or not: old questions still need it)."""
        return self._latest.get(card_id)

    def offered(self, card_id: str) -> Card | None:
        """The newest version of a card learners may practise, or None."""
        return None if card_id in self.withdrawn else self._latest.get(card_id)

    def cards(self) -> list[Card]:
        """The latest version of every card offered to learners, in id order."""
        return [self._latest[c] for c in sorted(self._latest) if c not in self.withdrawn]

    def all_cards(self) -> list[Card]:
        """The latest version of every card, withdrawn ones included (the dashboard's list)."""
        return [self._latest[card_id] for card_id in sorted(self._latest)]

    def version(self, card_id: str, version: int) -> Card | None:
        return self._versions.get(card_id, {}).get(version)

    def versions(self, card_id: str) -> list[int]:
        return sorted(self._versions.get(card_id, {}))

    def locate(self, question: QuestionId) -> Located:
        """The card version, exam point and template a question was generated from."""
        found = self._templates.get(question.template_key)
        if found is None or found.template.point != question.point:
            raise RetiredQuestion(question)
        return found

    def variant(self, question: QuestionId) -> Variant:
        found = self.locate(question)
        return generate(found.card, found.template, question.seed)

    def point_title_card(self, card_id: str, point_slug: str) -> ExamPoint | None:
        """The exam point of that slug in the latest card that has it."""
        for version in reversed(self.versions(card_id)):
            card = self._versions[card_id][version]
            point = card.point_by_slug(point_slug)
            if point is not None:
                return point
        return None

    def template_anywhere(self, card_id: str, template_id: str) -> Template | None:
        """The newest version of a template (it may have been removed from the latest card)."""
        for version in reversed(self.versions(card_id)):
            template = self._versions[card_id][version].template(template_id)
            if template is not None:
                return template
        return None
