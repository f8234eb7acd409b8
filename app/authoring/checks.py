"""What a card document must be before anything else is done with it (a JSON object within the
size limits of a draft), and its validation in the sandbox's worker processes: the checks the
authoring use cases (:mod:`app.authoring.service`) and the pages share."""

from __future__ import annotations

import json
from typing import Any

from app.authoring.validation import TooManyValidations, ValidationJob, default_validations
from app.domain.authoring import Checked, size_problem
from app.domain.messages import Message
from app.domain.storable import value_problem
from app.problems import InvalidInput, NotFound, Problem, TooManyRequests, UnprocessableInput

MAX_DOCUMENT_BYTES = 2_000_000


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
