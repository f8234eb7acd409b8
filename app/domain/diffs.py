"""What changed between two versions of a card document, field by field, before and after.

:func:`diff_documents` lists the templates added, removed and changed, the exam points added,
removed and changed, and the card's own fields that changed. Each changed entry names its
top-level ``fields`` and gives ``details``: every changed leaf with its value before and after.
A leaf is a text (both languages together, ``{en, zh}``), a formula or another scalar, or a list
of scalars (a parameter's values); list items with an ``id`` (pitfalls, card formulas) are named
by it (``pitfalls[only-keys].formula``), exam points by their slug, other items by their place
from 1 (``solution.2``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from .cards import document_templates

# The card's own fields a diff compares (its templates and exam points are compared apart).
CARD_FIELDS = (
    "title",
    "definition",
    "use_cases",
    "problems_solved",
    "formulas",
    "params",
    "attachments",
)
POINT_FIELDS = ("number", "title", "explanation")


def _same(a: object, b: object) -> bool:
    return json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


def _is_text(value: object) -> bool:
    return isinstance(value, Mapping) and bool(value) and set(value) <= {"en", "zh"}


def _item_name(item: object, index: int) -> str:
    if isinstance(item, Mapping):
        for key in ("id", "slug"):
            if isinstance(item.get(key), str):
                return f"[{item[key]}]"
    return f".{index + 1}"


def leaves(value: object, path: str = "") -> dict[str, object]:
    """Every leaf of a document part by its path (see the module's docstring)."""
    if _is_text(value) or not isinstance(value, Mapping | list):
        return {path: value}
    found: dict[str, object] = {}
    if isinstance(value, Mapping):
        for key, item in value.items():
            found.update(leaves(item, f"{path}.{key}" if path else str(key)))
        return found
    if all(not isinstance(item, Mapping | list) for item in value):
        return {path: value}  # a list of scalars reads as one value
    for index, item in enumerate(value):
        name = _item_name(item, index)
        found.update(leaves(item, f"{path}{name}" if path else name.lstrip(".")))
    return found


def details(before: object, after: object, path: str = "") -> list[dict[str, Any]]:
    """Each leaf that differs, with its value before and after (None where it is absent)."""
    a, b = leaves(before, path), leaves(after, path)
    keys = list(a) + [k for k in b if k not in a]
    return [
        {"field": key, "before": a.get(key), "after": b.get(key)}
        for key in keys
        if not _same(a.get(key), b.get(key))
    ]


def _templates(document: Mapping[str, Any]) -> dict[str, tuple[str, dict[str, Any]]]:
    return {
        str(t["id"]): (str(p.get("slug")), t) for p, t in document_templates(document) if "id" in t
    }


def _points(document: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    points = document.get("points")
    return {
        str(p.get("slug")): p
        for p in (points if isinstance(points, list) else [])
        if isinstance(p, dict)
    }


def _without_versions(template: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in template.items() if k not in ("version", "revision")}


def diff_documents(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """What changed between two versions: templates (by id), exam points (by slug), then the
    card's own fields, each with its details before and after."""
    before, after = _templates(old), _templates(new)
    generators = int(old.get("generator") or 1), int(new.get("generator") or 1)
    changes: list[dict[str, Any]] = []
    for template_id in sorted(set(before) | set(after)):
        a, b = before.get(template_id), after.get(template_id)
        if a is None:
            assert b is not None
            changes.append(
                {"template_id": template_id, "change": "added", "fields": [], "details": []}
            )
            continue
        if b is None:
            changes.append(
                {"template_id": template_id, "change": "removed", "fields": [], "details": []}
            )
            continue
        (point_a, doc_a), (point_b, doc_b) = a, b
        body_a, body_b = _without_versions(doc_a), _without_versions(doc_b)
        if _same(body_a, body_b) and point_a == point_b and generators[0] == generators[1]:
            continue
        fields = sorted(
            k for k in set(body_a) | set(body_b) if not _same(body_a.get(k), body_b.get(k))
        )
        found = details(body_a, body_b)
        if point_a != point_b:
            fields.append("point")
            found.append({"field": "point", "before": point_a, "after": point_b})
        if generators[0] != generators[1]:  # the card's, drawing every template's variants
            fields.append("generator")
            found.append({"field": "generator", "before": generators[0], "after": generators[1]})
        changes.append(
            {
                "template_id": template_id,
                "change": "changed",
                "fields": fields,
                "from_version": doc_a.get("version"),
                "to_version": doc_b.get("version"),
                "details": found,
            }
        )
    points_a, points_b = _points(old), _points(new)
    for slug in [*points_a, *(s for s in points_b if s not in points_a)]:
        pa, pb = points_a.get(slug), points_b.get(slug)
        parts_a = {k: pa.get(k) for k in POINT_FIELDS} if pa is not None else {}
        parts_b = {k: pb.get(k) for k in POINT_FIELDS} if pb is not None else {}
        if pa is not None and pb is not None and _same(parts_a, parts_b):
            continue
        change = "added" if pa is None else "removed" if pb is None else "changed"
        changes.append(
            {
                "template_id": None,
                "point": slug,
                "change": change,
                "fields": [k for k in POINT_FIELDS if not _same(parts_a.get(k), parts_b.get(k))],
                "details": details(parts_a, parts_b),
            }
        )
    for key in CARD_FIELDS:
        if not _same(old.get(key), new.get(key)):
            changes.append(
                {
                    "template_id": None,
                    "change": "changed",
                    "fields": [key],
                    "details": details(old.get(key), new.get(key), key),
                }
            )
    return changes
