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
from sqlalchemy.orm import Session

from app.auth.service import LearnerRef, now_utc
from app.authoring.history import publish_changes, unknown_card
from app.authoring.validation import TooManyValidations, ValidationJob, default_validations
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
    Checked,
    canonical,
    next_version,
    size_problem,
)
from app.domain.cards import CardError
from app.domain.catalog import check_versions
from app.domain.messages import Message, plural_message
from app.domain.patches import json_patch
from app.domain.storable import value_problem
from app.domain.versions import compare_cards
from app.models import AuditEntry, CardDraft, CardState
from app.problems import (
    Conflict,
    InvalidInput,
    NotFound,
    Problem,
    TooManyRequests,
    UnprocessableInput,
)

MAX_DOCUMENT_BYTES = 2_000_000


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


class DraftTooLarge(Problem):
    """A draft over a size limit (templates, formulas, placeholders: cards/README.md)."""

    status_code = 422
    code = "draft_too_large"
    title = "Unprocessable Content"


def checked_size(document: object) -> dict[str, Any]:
    """The document, when it is a JSON object within the size limits of a draft."""
    if not isinstance(document, dict):
        raise InvalidInput(Message("a card document is a JSON object"), code="invalid_document")
    if len(json.dumps(document, ensure_ascii=False)) > MAX_DOCUMENT_BYTES:
        raise InvalidInput(Message("the card document is too large"), code="document_too_large")
    unstorable = value_problem(document)
    if unstorable is not None:  # a NUL, a lone surrogate, NaN: refused before any database
        raise UnprocessableInput(
            Message("the card document cannot be stored: %(problem)s", problem=unstorable),
            code="unstorable_document",
        )
    problem = size_problem(document)
    if problem is not None:
        raise DraftTooLarge(problem)
    return document


def start_validation(document: object) -> ValidationJob:
    """A validation job for the document (:mod:`app.authoring.validation`): the running or
    finished one for the same document, or a new one."""
    try:
        return default_validations().start(checked_size(document))
    except TooManyValidations:
        raise TooManyRequests(
            Message("too many cards are being validated at once: try again in a moment"),
            retry_after_s=5,
        ) from None


def validation_job(job_id: str) -> ValidationJob:
    job = default_validations().get(job_id)
    if job is None:
        raise NotFound(Message("there is no such validation"), code="validation_not_found")
    return job


def validate(document: object) -> Checked:
    """Every problem of a card document, found by a validation job in the sandbox's worker
    processes (an authored formula costs at most the sandbox's limits, never a request thread's
    time); waits for the job, which its own wall-clock bound ends."""
    job = start_validation(document)
    job.wait()
    return Checked(None, tuple(job.problems or ()))


def validate_template(document: object, template_id: str) -> Checked:
    """The problems the editor shows for one template: the document's compilation problems and
    warnings, and that template validated (the whole card's, when it was validated already)."""
    doc = checked_size(document)
    validations = default_validations()
    known = validations.get_finished(doc)
    if known is not None:
        return Checked(None, known)
    return Checked(None, validations.one_template(doc, template_id))


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


def save_draft(*, db: Session, actor: LearnerRef, card_id: str, document: object) -> None:
    doc = checked_size(document)
    if doc.get("id") != card_id:
        raise InvalidInput(
            Message("the document's id must be %(card)s", card=repr(card_id)),
            code="invalid_document",
        )
    with write_transaction(db):
        draft = db.get(CardDraft, card_id)
        if draft is None and not stored_documents_exist(db, card_id):
            raise unknown_card(card_id)
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


@dataclass(frozen=True)
class Draft:
    card_id: str
    document: dict[str, Any]
    is_draft: bool  # False: the latest published version, shown as the starting point
    updated_at: datetime | None


def get_draft(*, db: Session, card_id: str) -> Draft:
    draft = db.get(CardDraft, card_id)
    db.commit()
    if draft is not None:
        return Draft(card_id, dict(draft.document), True, draft.updated_at)
    document = latest_document(db, card_id)
    if document is None:
        raise unknown_card(card_id)
    return Draft(card_id, _editable(document), False, None)


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
    """Publish the card's draft as its next version; the new version number."""
    draft = db.get(CardDraft, card_id)
    db.commit()
    if draft is None:
        raise NotFound(
            Message("This card has no draft to publish."),
            code="no_draft",
        )
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
    with write_transaction(db):
        store_version(db, card)
        stale = db.get(CardDraft, card_id)
        if stale is not None:
            db.delete(stale)
        _audit(
            db,
            actor,
            "publish",
            card_id,
            version=card.version,
            changes=publish_changes(previous, dict(card.document)),
        )
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
