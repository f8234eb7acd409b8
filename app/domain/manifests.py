"""What is known of a stored card version without compiling it: its manifest.

A manifest is read from the card document alone (plain JSON, no formula is compiled): the
document's digest, the generator its templates draw from, its exam points, and for every
template its version, exam point and content digests. It is stored beside the version, so that
the catalog knows which card version carries which template version, publishing checks the
version rules (:func:`app.domain.catalog.check_versions`) and numbers the next version
(:func:`app.domain.authoring.next_version`) without compiling any older version.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from weakref import WeakKeyDictionary

from .cards import Card, document_templates


def _digest(value: object) -> str:
    canonical = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def document_hash(document: Mapping[str, object]) -> str:
    """A stable digest of a card document (key order and whitespace do not matter)."""
    return _digest(document)


def template_body_hash(template: Mapping[str, object]) -> str:
    """A digest of a template document without its version and revision: whether its content
    changed."""
    return _digest({k: v for k, v in template.items() if k not in ("version", "revision")})


@dataclass(frozen=True)
class TemplateEntry:
    """A template as one card version carries it."""

    version: int
    point: str  # the exam point's slug
    content: str  # digest of the template document, its version included
    body: str  # digest without the version (:func:`template_body_hash`)
    revision: int = 0  # wording-only edits of ``version`` (app.domain.versions)


@dataclass(frozen=True)
class VersionManifest:
    card_id: str
    version: int
    document: str  # :func:`document_hash` of the whole document
    generator: int  # the card's: every template's variants are drawn from it
    points: tuple[str, ...]
    templates: Mapping[str, TemplateEntry]

    def to_json(self) -> dict[str, Any]:
        """The stored form (the card id and version are the row's)."""
        return {
            "hash": self.document,
            "generator": self.generator,
            "points": list(self.points),
            # [version, point, content, body], and the revision when there is one.
            "templates": {
                template_id: [t.version, t.point, t.content, t.body]
                + ([t.revision] if t.revision else [])
                for template_id, t in self.templates.items()
            },
        }

    @classmethod
    def from_json(cls, card_id: str, version: int, data: Mapping[str, Any]) -> VersionManifest:
        return cls(
            card_id=card_id,
            version=version,
            document=str(data["hash"]),
            generator=int(data["generator"]),
            points=tuple(str(p) for p in data["points"]),
            templates={
                str(template_id): TemplateEntry(
                    int(entry[0]),
                    str(entry[1]),
                    str(entry[2]),
                    str(entry[3]),
                    int(entry[4]) if len(entry) > 4 else 0,
                )
                for template_id, entry in data["templates"].items()
            },
        )


def manifest_of(document: Mapping[str, Any]) -> VersionManifest:
    """The manifest of a (stored, so normalised) card document."""
    templates: dict[str, TemplateEntry] = {}
    for point, template in document_templates(document):
        if "id" not in template:
            continue
        templates[str(template["id"])] = TemplateEntry(
            version=int(template.get("version") or 1),
            point=str(point.get("slug")),
            content=_digest(template),
            body=template_body_hash(template),
            revision=int(template.get("revision") or 0),
        )
    points = document.get("points")
    return VersionManifest(
        card_id=str(document.get("id")),
        version=int(document.get("version") or 0),
        document=document_hash(document),
        generator=int(document.get("generator") or 1),
        points=tuple(
            str(p.get("slug"))
            for p in (points if isinstance(points, list) else [])
            if isinstance(p, dict)
        ),
        templates=templates,
    )


# A compiled card's document never changes: its manifest (a digest of the whole document and of
# each template) is computed once per card object. Every app start-up, catalog refresh and
# publication asks for it, several times per card.
_card_manifests: WeakKeyDictionary[Card, VersionManifest] = WeakKeyDictionary()


def card_manifest(card: Card) -> VersionManifest:
    """:func:`manifest_of` the card's document, computed once per card object."""
    found = _card_manifests.get(card)
    if found is None:
        found = _card_manifests[card] = manifest_of(card.document)
    return found
