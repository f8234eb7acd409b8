"""Authoring use cases: drafts, validation, publication, withdrawal, retirement, diffs.

Every change is written to the audit log (who, when, what it changed: a JSON Patch and the
versions it went from and to, never the whole document twice) in the same transaction as the
change itself. Publishing decides the version numbers (:func:`app.domain.authoring.next_version`,
from the stored versions' manifests), compiles the new version once, stores it, and swaps the
process's live catalog at once; other processes see it within their refresh interval.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.auth.service import LearnerRef, now_utc
from app.authoring.checks import (  # noqa: F401 - the checks, as the pages and the API call them
    MAX_DOCUMENT_BYTES,
    DraftTooLarge,
    checked_size,
    start_validation,
    validate,
    validate_template,
    validation_job,
)
from app.authoring.history import publish_changes, unknown_card
from app.authoring.revisions import (
    changed_since_opened,
    changed_while_checked,
    no_draft_to_publish,
    revision,
)
from app.catalog.service import (
    LiveCatalog,
    compile_document,
    latest_document,
    store_version,
    stored_manifests,
)
from app.db import write_transaction
from app.domain.authoring import (
    CardProblem,
    canonical,
    next_version,
)
from app.domain.cards import CardError
from app.domain.catalog import check_versions
from app.domain.messages import Message, plural_message
from app.domain.patches import json_patch
from app.domain.versions import compare_cards
from app.models import AuditEntry, CardDraft, CardState
from app.problems import (
    Conflict,
    InvalidInput,
    NotFound,
    Problem,
)


class NotPublishable(Problem):
    """A draft with errors: publishing is blocked until they are fixed."""

    status_code = 422
    code = "card_has_errors"
    title = "Unprocessable Content"

    def __init__(self, problems: list[CardProblem]) -> None:
        count = len([p for p in problems if p.severity == "error"])
        super().__init__(
            plural_message(
                "The card has %(num)s error: fix it before publishing.",
                "The card has %(num)s errors: fix them before publishing.",
                count,
            )
        )
        self.problems = problems


def _audit(
    db: Session,
    actor: LearnerRef,
    action: str,
    card_id: str,
    *,
    before: Any = None,
    after: Any = None,
    template_id: str | None = None,
    version: int | None = None,
    changes: dict[str, Any] | None = None,
) -> None:
    db.add(
        AuditEntry(
            actor_id=actor.id,
            actor_email=actor.email,
            action=action,
            card_id=card_id,
            template_id=template_id,
            version=version,
            before=before,
            after=after,
            changes=changes,
            at=now_utc(),
        )
    )


# --- drafts -----------------------------------------------------------------------------------


def create_draft(*, db: Session, actor: LearnerRef, document: object) -> str:
    """A new card as a draft; its id must be new."""
    doc = checked_size(document)
    card_id = doc.get("id")
    if not isinstance(card_id, str) or not card_id:
        raise InvalidInput(Message("the card document needs an 'id'"), code="invalid_document")
    with write_transaction(db):
        if db.get(CardDraft, card_id) is not None or stored_documents_exist(db, card_id):
            raise Conflict(
                Message("A card %(card)s already exists.", card=repr(card_id)),
                code="card_exists",
            )
        db.add(CardDraft(card_id=card_id, document=doc, updated_by=actor.id, updated_at=now_utc()))
        _audit(db, actor, "create_draft", card_id, after=doc)
    return card_id


def stored_documents_exist(db: Session, card_id: str) -> bool:
    from app.models import CardVersion

    return (
        db.scalar(select(CardVersion.version).where(CardVersion.card_id == card_id).limit(1))
        is not None
    )


def save_draft(
    *,
    db: Session,
    actor: LearnerRef,
    card_id: str,
    document: object,
    based_on: str | None = None,
) -> str:
    """Replace the card's draft (or start one from the latest version); the new revision.
    ``based_on``: the revision the change was made on (:attr:`Draft.revision`); when the draft
    has changed since, nothing is saved (409 ``draft_changed``)."""
    doc = checked_size(document)
    if doc.get("id") != card_id:
        raise InvalidInput(
            Message("the document's id must be %(card)s", card=repr(card_id)),
            code="invalid_document",
        )
    with write_transaction(db):
        draft = _current_draft(db, card_id)
        if draft is None and not stored_documents_exist(db, card_id):
            raise unknown_card(card_id)
        if based_on is not None:
            shown = draft.document if draft else _editable(latest_document(db, card_id) or {})
            if revision(shown) != based_on:
                raise changed_since_opened()
        # What changed (between the documents' canonical forms: defaults spelled out), from
        # the draft or else from the latest version; not the document twice.
        if draft is not None:
            changes = {
                "from": "draft",
                "patch": json_patch(canonical(draft.document), canonical(doc)),
            }
        else:
            base = latest_document(db, card_id) or {}
            patch = json_patch(canonical(base), canonical(doc))
            changes = {"from_version": base.get("version"), "patch": patch}
        if draft is None:
            db.add(
                CardDraft(card_id=card_id, document=doc, updated_by=actor.id, updated_at=now_utc())
            )
        else:
            draft.document = doc
            draft.updated_by = actor.id
            draft.updated_at = now_utc()
        _audit(db, actor, "save_draft", card_id, changes=changes)
    return revision(doc)


def _current_draft(db: Session, card_id: str) -> CardDraft | None:
    """The card's draft as stored now, locked until the transaction ends (PostgreSQL; SQLite's
    write transaction holds the whole database)."""
    query = select(CardDraft).where(CardDraft.card_id == card_id).with_for_update()
    return db.scalars(query.execution_options(populate_existing=True)).first()


@dataclass(frozen=True)
class Draft:
    card_id: str
    document: dict[str, Any]
    is_draft: bool  # False: the latest published version, shown as the starting point
    updated_at: datetime | None
    revision: str  # what a save based on this document passes as ``based_on``


def get_draft(*, db: Session, card_id: str) -> Draft:
    draft = db.get(CardDraft, card_id)
    db.commit()
    if draft is not None:
        document = dict(draft.document)
        return Draft(card_id, document, True, draft.updated_at, revision(document))
    latest = latest_document(db, card_id)
    if latest is None:
        raise unknown_card(card_id)
    document = _editable(latest)
    return Draft(card_id, document, False, None, revision(document))


def _editable(document: dict[str, Any]) -> dict[str, Any]:
    """A stored document without the noise of unset optional fields."""
    return _strip_none(document)


def _strip_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_strip_none(v) for v in value]
    return value


def discard_draft(*, db: Session, actor: LearnerRef, card_id: str) -> None:
    with write_transaction(db):
        draft = db.get(CardDraft, card_id)
        if draft is None:
            raise NotFound(Message("this card has no draft"), code="no_draft")
        _audit(db, actor, "discard_draft", card_id, before=dict(draft.document))
        db.delete(draft)


# --- publishing -------------------------------------------------------------------------------


def publish(*, db: Session, actor: LearnerRef, live: LiveCatalog, card_id: str) -> int:
    """Publish the card's draft as its next version; the new version number. A draft published
    meanwhile (by a second request) is refused as 404 ``no_draft``; a draft saved again while
    it was being checked is kept, unpublished (409 ``draft_changed``)."""
    draft = db.get(CardDraft, card_id)
    db.commit()
    if draft is None:
        raise no_draft_to_publish()
    checked_revision = revision(draft.document)
    published = stored_manifests(db, card_id).get(card_id, [])
    document = next_version(draft.document, published)
    checked = validate(document)
    if checked.errors:
        raise NotPublishable(list(checked.problems))
    # Validated in the sandbox; the draft is within the size limits, and compiling is linear.
    # Compiled here: the live catalog takes this card as it is (no other version is).
    try:
        card = compile_document(document)
    except CardError as exc:  # pragma: no cover - the sandbox found no error
        raise InvalidInput(exc.text, code="card_has_errors") from None
    # A changed template whose values validation has just evaluated without trouble, all the
    # same as its latest published form's, is a wording-only revision of that version.
    newest = live.catalog.version(card_id, published[-1].version) if published else None
    if newest is not None:
        wording_only = [t for t, c in compare_cards(newest, card).items() if c.minor]
        if wording_only:
            document = next_version(draft.document, published, wording_only=wording_only)
            card = card.renumbered(document)
    try:
        check_versions(card, published, load=lambda v: live.catalog.version(card_id, v))
    except CardError as exc:  # pragma: no cover - next_version makes the versions consistent
        raise InvalidInput(exc.text, code="version_conflict") from None
    previous = latest_document(db, card_id) if published else None
    try:
        with write_transaction(db):
            current = _current_draft(db, card_id)
            if current is None:
                raise no_draft_to_publish()
            if revision(current.document) != checked_revision:
                raise changed_while_checked()
            store_version(db, card)
            db.flush()  # a version stored meanwhile fails here, before anything else is written
            db.delete(current)
            _audit(
                db,
                actor,
                "publish",
                card_id,
                version=card.version,
                changes=publish_changes(previous, dict(card.document)),
            )
    except IntegrityError:
        # Another publication stored this version number first (its draft is gone with it).
        raise no_draft_to_publish() from None
    live.reload(known=[card])
    return card.version


def set_offered(
    *, db: Session, actor: LearnerRef, live: LiveCatalog, card_id: str, offered: bool
) -> None:
    """Withdraw a card from learners (its old questions still grade) or offer it again."""
    if not stored_documents_exist(db, card_id):
        db.commit()
        raise unknown_card(card_id)
    with write_transaction(db):
        state = db.get(CardState, card_id)
        if state is None:
            state = CardState(card_id=card_id)
            db.add(state)
        state.unpublished_at = None if offered else now_utc()
        state.changed_at = now_utc()
        _audit(db, actor, "offer" if offered else "withdraw", card_id)
    live.reload()


def retire_template(
    *, db: Session, actor: LearnerRef, live: LiveCatalog, card_id: str, template_id: str
) -> int:
    """Publish a new version without ``template_id``; its old questions keep grading."""
    latest = latest_document(db, card_id)
    db.commit()
    if latest is None:
        raise unknown_card(card_id)
    document = json.loads(json.dumps(latest))
    found = False
    for point in document.get("points", []):
        kept = [t for t in point.get("templates", []) if t.get("id") != template_id]
        found = found or len(kept) != len(point.get("templates", []))
        point["templates"] = kept
    if not found:
        raise NotFound(
            Message("the card has no template %(template)s", template=repr(template_id)),
            code="template_not_found",
        )
    if any(not point["templates"] for point in document["points"]):
        raise Conflict(
            Message("retiring it would leave an exam point without templates"),
            code="point_would_be_empty",
        )
    save_draft(db=db, actor=actor, card_id=card_id, document=document)
    version = publish(db=db, actor=actor, live=live, card_id=card_id)
    with write_transaction(db):
        _audit(db, actor, "retire_template", card_id, template_id=template_id, version=version)
    return version
