"""A draft's revision: a digest of the document an editor or an API client read, so that a save
or a publication based on an older draft is refused instead of overwriting what was saved since.

No column holds it: the digest of the document's canonical JSON (keys sorted) is the same for
the same content, whichever process computes it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from app.domain.manifests import document_hash
from app.domain.messages import Message
from app.problems import Conflict, NotFound

# Typed into a form or an If-Match header: 32 hex digits (128 bits) are plenty.
REVISION_LENGTH = 32


def revision(document: Mapping[str, Any]) -> str:
    """The revision of a draft document (the same for the same content): the start of its
    :func:`~app.domain.manifests.document_hash`, the digest card versions are told apart by."""
    return document_hash(document)[:REVISION_LENGTH]


class DraftChanged(Conflict):
    """A save or a publication based on a draft that changed since it was read: nothing done."""

    code = "draft_changed"


class DraftPreconditionFailed(DraftChanged):
    """``If-Match`` names a revision of the draft that is no longer the current one."""

    status_code = 412
    title = "Precondition Failed"


def changed_since_read() -> DraftPreconditionFailed:
    return DraftPreconditionFailed(
        Message(
            "The draft changed since it was read (If-Match does not name its ETag); nothing was"
            " saved. Read the draft again and send the change with its new ETag."
        )
    )


def changed_since_opened() -> DraftChanged:
    return DraftChanged(
        Message(
            "The draft changed since this page was opened (in another tab or by someone else);"
            " nothing was saved. Reload it to see the changes, then make yours again."
        )
    )


def changed_while_checked() -> DraftChanged:
    return DraftChanged(
        Message(
            "The draft changed while it was being checked; nothing was published."
            " Check it and publish again."
        )
    )


def no_draft_to_publish() -> NotFound:
    return NotFound(Message("This card has no draft to publish."), code="no_draft")
