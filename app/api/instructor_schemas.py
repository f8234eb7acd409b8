"""The bodies of the instructor's API (:mod:`app.api.instructor`) and the responses its routes
document."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from app.api.problem_schemas import CardProblemPublic, ProblemPublic


class ProblemsPublic(BaseModel):
    problems: list[CardProblemPublic]


class CardHasErrorsPublic(ProblemPublic):
    """422 ``card_has_errors``: what publishing found (a malformed request is a 422 too, with
    ``errors`` instead of ``problems``)."""

    problems: list[CardProblemPublic] = Field(
        default_factory=list, description="card_has_errors: every problem of the card."
    )


# Publishing, and retiring a template (which publishes a version without it), refuse a card
# with errors (app.authoring.service.NotPublishable; its problems: app.errors).
HAS_ERRORS: dict[int | str, dict[str, Any]] = {
    422: {"model": CardHasErrorsPublic, "description": "card_has_errors, with `problems`."}
}
ETAG = {
    "ETag": {
        "description": "The draft's revision: send it back in If-Match to save over this draft only.",
        "required": True,
        "schema": {"type": "string"},
    }
}


class DraftCreatedPublic(BaseModel):
    card_id: str
    problems: list[CardProblemPublic]


class DraftPublic(BaseModel):
    card_id: str
    is_draft: bool = Field(description="False: no draft yet, this is the latest published version.")
    document: dict[str, Any]
    updated_at: datetime | None


class PublishedPublic(BaseModel):
    version: int


class VersionPublic(BaseModel):
    version: int
    created_at: datetime
    templates: int


class InstructorCardPublic(BaseModel):
    id: str
    title: str
    version: int
    offered: bool


class AuditPublic(BaseModel):
    at: datetime
    actor: str | None
    action: str
    template_id: str | None
    version: int | None


class ValidationPublic(BaseModel):
    id: str
    status: str = Field(description="running | done")
    templates_done: int
    templates_total: int | None = Field(description="None until the document has compiled.")
    seconds: float | None = Field(description="Wall-clock seconds it took, once done.")
    problems: list[CardProblemPublic] | None = Field(description="Once done.")
