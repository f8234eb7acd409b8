"""Problem documents as the API documents them: the RFC 9457 document every error is
(:class:`ProblemPublic`), and a card problem as the instructor's API shows it (validation,
drafts, a refused publication), with a give-away cue's family and sample variants where
validation found one."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ProblemErrorPublic(BaseModel):
    """One error of a problem's ``errors``: a request's value that does not validate (``loc``,
    ``type``, ``message``), or a calculator's input (``field``, ``detail``)."""

    loc: list[str] | None = Field(default=None, description="Where: body, query, path, ...")
    type: str | None = Field(default=None, description="What kind of error, e.g. missing.")
    message: str | None = None
    field: str | None = Field(default=None, description="A calculator's input.")
    detail: str | None = None


class ProblemPublic(BaseModel):
    """An RFC 9457 problem document (``application/problem+json``); the members after
    ``detail`` come with the codes they name."""

    type: str = "about:blank"
    title: str
    status: int
    code: str = Field(description="Stable machine-readable reason, e.g. question_expired.")
    detail: str = Field(description="What was wrong, in the requested language.")
    field: str | None = Field(
        default=None,
        description="invalid_value, invalid_unit, answer_form, not_typeable: the field at fault "
        "(value, unit, choice_id), for a form to mark.",
    )
    errors: list[ProblemErrorPublic] | None = Field(
        default=None,
        description="invalid_request: every value that does not validate; a calculator's inputs "
        "that do not read.",
    )
    limit_bytes: int | None = Field(default=None, description="413: the largest body taken.")
    reason: str | None = Field(
        default=None,
        description="busy, database_unavailable: the database's trouble (busy, timeout, ...).",
    )


class AnswerConflictPublic(ProblemPublic):
    """A 409 to an answer; a session that ended first (exam_over, session_over) says where."""

    summary_url: str | None = Field(
        default=None,
        description="exam_over, session_over: the session's summary page on this server (the "
        "answer was not counted).",
    )


class SessionConflictPublic(ProblemPublic):
    """A 409 to a session's next question; a session that is over (exam_over, session_over)
    says where its summary is."""

    summary_url: str | None = Field(
        default=None,
        description="exam_over, session_over: the session's summary page on this server.",
    )


class CueChoicePublic(BaseModel):
    id: str
    text: str
    correct: bool


class CueExamplePublic(BaseModel):
    params: dict[str, str] = Field(description="The parameters as the stem shows them.")
    choices: list[CueChoicePublic] = Field(description="As labelled; the key is correct.")


class GiveawayPublic(BaseModel):
    family: str = Field(description="length, rank, unit, form, richness, register, …")
    strategy: str = Field(description="The content-blind strategy, e.g. 'shortest'.")
    lang: str = Field(description="The language the choices were read in (and are shown in).")
    share: float = Field(description="How often it finds the key, held out.")
    examples: list[CueExamplePublic] = Field(
        description="Sample variants where the cue points at the key."
    )


class CardProblemPublic(BaseModel):
    severity: str = Field(description="error | warning")
    template_id: str | None
    field: str | None
    message: str
    position: int | None = Field(description="The column in the formula or text, where known.")
    giveaway: GiveawayPublic | None = Field(
        default=None,
        description="A give-away cue: its family, strategy and sample variants.",
    )
    halts: bool = Field(
        default=False,
        description="True: validation stopped at this problem, before the templates (the "
        "document's structure, or a card that does not compile); no template was checked.",
    )
