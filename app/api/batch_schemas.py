"""The JSON shapes of ``POST /answers/batch``: typed items in, one tagged result per item out.

Each item is documented as :class:`~app.schemas.AnswerCreate` (a generated client sends its own
answer objects) but validated on its own by the route: a malformed item is that item's problem
(``outcome: problem``), never the whole batch's 422; an answer in a running exam is
``withheld`` (recorded, its result told when the exam ends). Every result carries its item's
``client_answer_id``, and ``outcome`` says which shape it is (a discriminator clients switch on).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)

from app.schemas import ANSWER_EXAMPLE, AnswerCreate, AnswerPublic, AnswerStoredPublic

MAX_BATCH_ANSWERS = 500


def as_sent_when_invalid(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    """The item as an AnswerCreate, or as sent when it is not one (the route answers it)."""
    try:
        return handler(value)
    except ValidationError:
        return value


# Documented as AnswerCreate (a reference to it); validated item by item, leniently.
BatchItem = Annotated[AnswerCreate, WrapValidator(as_sent_when_invalid)]


class AnswerBatchCreate(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "answers": [
                        ANSWER_EXAMPLE,
                        {
                            "token": "eyJxIjpbInplcm8tbWVtb3J5LW9mZmxvYWQiLC...",
                            "value": "105",
                            "unit": "GB",
                            "client_answer_id": "0b8e6c1d-5f0a-4c3e-8d2b-6a9f1e7c3d54",
                            "answered_at": "2026-05-01T08:30:00Z",
                            "duration_ms": 41000,
                        },
                    ]
                }
            ]
        }
    )

    # An item that is not an AnswerCreate stays as sent: the route makes it that item's problem,
    # not the batch's 422.
    answers: list[BatchItem] = Field(
        min_length=1,
        max_length=MAX_BATCH_ANSWERS,
        description="Up to 500 answers shaped like `POST /answers`; each is checked on its own "
        "and answered by a result of its own, in the same order.",
    )


class AnswerBatchStoredPublic(AnswerPublic):
    """An item graded and recorded (or, with ``replayed``, the stored result of its
    client_answer_id): what ``POST /answers`` answers, ``outcome`` stored."""


class AnswerBatchWithheldPublic(AnswerStoredPublic):
    """An item of an exam that is still running: recorded, its result told once the exam
    ends; what ``POST /answers`` answers, ``outcome`` withheld."""


class AnswerBatchProblemPublic(BaseModel):
    """An item refused on its own (the others are not affected): the problem the single
    ``POST /answers`` would have answered, as a result."""

    outcome: Literal["problem"] = Field(description="problem: this item was not recorded.")
    client_answer_id: str | None = Field(
        description="The item's client_answer_id as sent; null when it had none."
    )
    status: int = Field(description="The status `POST /answers` would have answered.")
    code: str = Field(description="Stable machine-readable reason, e.g. question_expired.")
    detail: str = Field(description="What was wrong, in the requested language.")
    field: str | None = Field(
        default=None,
        exclude_if=lambda field: field is None,
        description="invalid_answer and its kin: the field at fault (value, unit, choice_id).",
    )
    summary_url: str | None = Field(
        default=None,
        exclude_if=lambda url: url is None,
        description="exam_over, session_over: the session's summary page on this server.",
    )


AnswerBatchResult = Annotated[
    AnswerBatchStoredPublic | AnswerBatchWithheldPublic | AnswerBatchProblemPublic,
    Field(discriminator="outcome"),
]


class AnswerBatchPublic(BaseModel):
    results: list[AnswerBatchResult] = Field(description="One result per item, in order.")
