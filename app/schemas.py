"""JSON shapes of the API (``XxxPublic`` out, ``XxxCreate`` in). Texts are in the requested language."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from app.models import CLIENT_ANSWER_ID_MAX


class ErrorPublic(BaseModel):
    detail: str = Field(description="What was wrong, in plain words.")


class PointSummaryPublic(BaseModel):
    number: int
    title: str


class CardSummaryPublic(BaseModel):
    id: str
    title: str
    points: list[PointSummaryPublic]


class FormulaPublic(BaseModel):
    id: str
    title: str
    latex: str = Field(description="LaTeX source; render it client-side or show it as code.")
    unit: str


class PointPublic(BaseModel):
    number: int
    title: str
    explanation: str = Field(
        description="Paragraphs separated by blank lines; inline LaTeX in $...$."
    )


class DemoCommandPublic(BaseModel):
    where: str
    command: str


class DemoPublic(BaseModel):
    commands: list[DemoCommandPublic]
    results: dict[str, Any] | None = Field(
        description="cards/demo-results/<card id>.json as recorded by the demo, or null."
    )


class CardPublic(BaseModel):
    id: str
    version: int
    title: str
    definition: str
    use_cases: str
    problems_solved: str
    formulas: list[FormulaPublic]
    points: list[PointPublic]
    demo: DemoPublic


class ChoicePublic(BaseModel):
    id: str
    text: str
    value: float | None = Field(description="The number in `unit`; null for statement choices.")
    unit: str | None


class QuestionPublic(BaseModel):
    token: str = Field(description="Signed question reference; send it back with the answer.")
    card_id: str
    point: int
    template_id: str
    template_version: int
    seed: int
    kind: str = Field(description="numeric | statement")
    params: dict[str, str] = Field(
        description="Exact parameter values, e.g. {'psi': '70000000000'}."
    )
    params_display: dict[str, str] = Field(description="Parameters as shown, e.g. {'psi': '70B'}.")
    stem: str
    choices: list[ChoicePublic]


class AnswerCreate(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "token": "WyJ6ZXJvLW1lbW9yeS1vZmZsb2FkIiwxLC...",
                    "choice_id": "b",
                    "client_answer_id": "7f9c2a4e-2b1d-4d7e-9a57-0d3c5f1e8b21",
                }
            ]
        }
    )

    token: str = Field(min_length=1, max_length=1000, description="The question's token.")
    choice_id: str = Field(min_length=1, max_length=8, description="The id of the chosen choice.")
    client_answer_id: str = Field(
        min_length=1,
        max_length=CLIENT_ANSWER_ID_MAX,
        pattern=r"^[A-Za-z0-9._:-]+$",
        description="Unique per answer (a UUID); resending it replays the stored result.",
    )


class PitfallPublic(BaseModel):
    id: str
    title: str
    explanation: str | None = Field(
        description="Why this reasoning fails, with the question's numbers."
    )


class AnswerPublic(BaseModel):
    attempt_id: int
    correct: bool
    choice_id: str
    correct_choice_id: str
    pitfall: PitfallPublic | None = Field(description="The misconception behind a wrong choice.")
    explanation: str
    solution: list[str] = Field(description="Worked solution steps with this question's numbers.")


class LearnerCreatedPublic(BaseModel):
    learner_id: str
    token: str = Field(
        description="Bearer token, shown only once; send `Authorization: Bearer <token>`."
    )
    token_type: str = "bearer"


class LearnerPublic(BaseModel):
    learner_id: str
    kind: str = Field(description="app (bearer token) | guest (cookie)")


class MistakePublic(BaseModel):
    attempt_id: int
    card_id: str
    point: int
    template_id: str
    template_version: int
    seed: int
    params: dict[str, str]
    stem: str | None = Field(description="Null when the question's template has changed since.")
    choice_id: str
    choice_text: str
    correct_choice_id: str
    correct_choice_text: str | None
    pitfall: PitfallPublic | None
    answered_at: datetime


class PitfallCountPublic(BaseModel):
    card_id: str
    pitfall_id: str
    title: str
    count: int
