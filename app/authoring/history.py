"""A card's history for the dashboard: its versions, what changed between two, the audit log.

Read from the stored versions' manifests and the two documents compared: a card with many
versions costs no more here than one with a few.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.catalog.service import latest_document, stored_document, stored_manifests
from app.domain.authoring import canonical
from app.domain.cards import document_templates, version_label
from app.domain.catalog import Catalog
from app.domain.diffs import diff_documents
from app.domain.manifests import document_hash
from app.domain.messages import Message
from app.domain.patches import json_patch
from app.domain.texts import Text
from app.domain.versions import Comparison, compare_cards
from app.models import AuditEntry, CardDraft, CardVersion
from app.problems import NotFound


def unknown_card(card_id: str) -> NotFound:
    return NotFound(
        Message("There is no card %(card)s.", card=repr(card_id[:100])),
        code="card_not_found",
    )


def publish_changes(previous: dict[str, Any] | None, document: dict[str, Any]) -> dict[str, Any]:
    """The audit entry's record of a publication: the versions it went from and to (both stored
    in full in card_versions) and the JSON Patch between them; the first version is the stored
    version itself."""
    if previous is None:
        return {"from_version": None, "to_version": document.get("version")}
    return {
        "from_version": previous.get("version"),
        "to_version": document.get("version"),
        "patch": json_patch(previous, document),
    }


@dataclass(frozen=True)
class VersionInfo:
    version: int
    created_at: datetime
    templates: int


def versions(*, db: Session, card_id: str) -> list[VersionInfo]:
    manifests = {m.version: m for m in stored_manifests(db, card_id).get(card_id, [])}
    rows = db.execute(
        select(CardVersion.version, CardVersion.created_at)
        .where(CardVersion.card_id == card_id)
        .order_by(CardVersion.version)
    ).all()
    db.commit()
    if not rows:
        raise unknown_card(card_id)
    return [
        VersionInfo(version, created_at, len(manifests[version].templates))
        for version, created_at in rows
    ]


@dataclass(frozen=True)
class DraftInfo:
    card_id: str
    title: Text
    updated_at: datetime


def drafts(*, db: Session) -> list[DraftInfo]:
    """Every card's unpublished draft, the latest saved first: a new card has nothing else to
    be found by until it is published."""
    rows = db.scalars(select(CardDraft).order_by(CardDraft.updated_at.desc())).all()
    found = [DraftInfo(d.card_id, _title(d.document), d.updated_at) for d in rows]
    db.commit()
    return found


def _title(document: object) -> Text:
    title = document.get("title") if isinstance(document, dict) else None
    if not isinstance(title, dict):
        return Text("", "")
    return Text(str(title.get("en") or ""), str(title.get("zh") or ""))


def diff(
    *, db: Session, catalog: Catalog, card_id: str, old: int, new: int, lang: str = "en"
) -> list[dict[str, Any]]:
    """What changed between two stored versions (:func:`app.domain.diffs.diff_documents`); each
    changed template also says whether its values changed (``revision``: minor or major, and
    why, in ``lang``: :func:`app.domain.versions.compare_cards`) and its versions as people read
    them (``from_label``, ``to_label``: ``1`` → ``1.1``)."""
    before, after = stored_document(db, card_id, old), stored_document(db, card_id, new)
    db.commit()
    if before is None or after is None:
        raise NotFound(Message("no such version"), code="version_not_found")
    older, newer = catalog.version(card_id, old), catalog.version(card_id, new)
    compared = compare_cards(older, newer) if older is not None and newer is not None else {}
    return _explained(diff_documents(before, after), before, after, compared, lang)


def draft_diff(*, db: Session, card_id: str, lang: str = "en") -> tuple[int, list[dict[str, Any]]]:
    """What the draft changes since the latest version (its number, and the changes as
    :func:`diff` gives them: the draft's templates have no version yet). Values are compared in
    the formula sandbox (the draft is instructor input); a draft that does not compile there
    gets its changes without ``revision``."""
    from app.authoring.preview import PREVIEW_CPU_S, PREVIEW_TIMEOUT_S
    from app.authoring.sandbox import default_sandbox
    from app.authoring.sandbox_worker import compare_task
    from app.authoring.service import checked_size, get_draft

    draft = get_draft(db=db, card_id=card_id)
    latest = latest_document(db, card_id)
    db.commit()
    if not draft.is_draft:
        raise NotFound(Message("this card has no draft"), code="no_draft")
    if latest is None:
        raise NotFound(Message("no such version"), code="version_not_found")
    document = canonical(checked_size(draft.document))
    kind, payload = default_sandbox().call(
        compare_task,
        document_hash(document),
        document,
        latest,
        timeout_s=PREVIEW_TIMEOUT_S,
        cpu_limit_s=PREVIEW_CPU_S,
    )
    compared = payload if kind == "ok" and isinstance(payload, dict) else {}
    changes = diff_documents(latest, document)
    return int(latest["version"]), _explained(changes, latest, None, compared, lang)


def _explained(
    changes: list[dict[str, Any]],
    before: dict[str, Any],
    after: dict[str, Any] | None,
    compared: dict[str, Comparison],
    lang: str,
) -> list[dict[str, Any]]:
    """``changes`` with each changed template's version labels (none for a draft's ``after``)
    and, where it was compared, its revision: minor or major, and why."""
    labels = {
        side: {
            t["id"]: version_label(int(t["version"]), int(t.get("revision") or 0))
            for _, t in document_templates(document)
            if "id" in t and "version" in t
        }
        for side, document in (("from", before), ("to", after or {}))
    }
    for change in changes:
        template_id = change["template_id"]
        if template_id is None or change["change"] != "changed":
            continue
        change["from_label"] = labels["from"].get(template_id)
        change["to_label"] = labels["to"].get(template_id) if after is not None else None
        if after is None:  # a draft's template has no version until it is published
            change["to_version"] = None
        comparison = compared.get(template_id)
        if comparison is not None:
            change["revision"] = comparison.to_json(lang)
    return changes


def audit_log(*, db: Session, card_id: str, limit: int = 100, offset: int = 0) -> list[AuditEntry]:
    """The card's audit entries, newest first: ``limit`` of them after the ``offset`` newest."""
    rows = db.scalars(
        select(AuditEntry)
        .where(AuditEntry.card_id == card_id)
        .order_by(AuditEntry.at.desc(), AuditEntry.id.desc())
        .offset(offset)
        .limit(limit)
    ).all()
    db.commit()
    return list(rows)
