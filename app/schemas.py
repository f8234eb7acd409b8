"""JSON shapes of the API (``XxxPublic`` out, ``XxxCreate`` in). Texts are in the requested language;
texts with inline LaTeX (``$...$``) come with a ``..._mathml`` rendering beside them.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypeAliasType

from app.domain.languages import Lang
from app.domain.moodle_calculated import NumericExport
from app.models import CLIENT_ANSWER_ID_MAX

# Named components of the OpenAPI document: one enum each, however many operations and models
# use it (a generator makes one type of each).
LangCode = TypeAliasType("Lang", Lang)
QuestionMode = TypeAliasType("QuestionMode", Literal["choices", "typed"])
NumericExportCode = TypeAliasType("NumericExport", NumericExport)

ClientAnswerId = Field(
    min_length=1,
    max_length=CLIENT_ANSWER_ID_MAX,
    pattern=r"^[A-Za-z0-9._:-]+$",
    description="Unique per answer (a UUID); resending it replays the stored result.",
)


class FormulaPublic(BaseModel):
    id: str
    title: str
    latex: str = Field(description="LaTeX source.")
    mathml: str = Field(description="The same formula as MathML.")
    unit: str


class PointPublic(BaseModel):
    slug: str
    number: int
    title: str
    explanation: str = Field(description="Paragraphs separated by blank lines; LaTeX in $...$.")
    explanation_mathml: str = Field(description="The explanation as HTML paragraphs with MathML.")


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
    text_mathml: str
    value: float | None = Field(description="The number in `unit`; null for statement choices.")
    unit: str | None


class QuestionPublic(BaseModel):
    token: str = Field(description="Signed question reference; send it back with the answer.")
    card_id: str
    point: str = Field(description="The exam point's slug.")
    point_number: int | None
    template_id: str
    template_version: int
    seed: int | None = Field(description="The variant's seed; null for exam questions.")
    kind: str = Field(description="numeric | statement")
    params: dict[str, str] = Field(description="Exact parameter values, e.g. {'psi': '7e10'}.")
    params_display: dict[str, str] = Field(description="Parameters as shown, e.g. {'psi': '70B'}.")
    stem: str
    stem_mathml: str
    choices: list[ChoicePublic] = Field(
        description="The choices; empty when the question is asked typed (mode=typed)."
    )
    expires_at: datetime = Field(description="After this the token is refused (question_expired).")
    mode: QuestionMode = Field(
        description="choices: answer with a choice_id; typed: with a value and a unit (numeric "
        "questions; a statement is always asked with its choices)."
    )
    typed_units: list[str] = Field(
        description="The units a typed answer may be in (those measuring what the question "
        "asks, e.g. GB and GiB); empty for a statement, which cannot be typed."
    )
    typed_figures: int | None = Field(
        description="The significant figures a typed answer is graded at (0: a whole number); "
        "null for a statement."
    )


class QuestionBatchPublic(BaseModel):
    items: list[QuestionPublic]


ANSWER_EXAMPLE = {
    "token": "eyJxIjpbInplcm8tbWVtb3J5LW9mZmxvYWQiLC...",
    "choice_id": "b",
    "client_answer_id": "7f9c2a4e-2b1d-4d7e-9a57-0d3c5f1e8b21",
}


class AnswerCreate(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [ANSWER_EXAMPLE]})

    token: str = Field(min_length=1, max_length=1000, description="The question's token.")
    choice_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=8,
        description="The id of the chosen choice; or send `value` and `unit` instead (not both).",
    )
    value: str | None = Field(
        default=None,
        max_length=100,
        description="A typed answer: the number as typed (digits, optional sign, decimal point "
        "and exponent; no thousands separators), e.g. '105' or '1.2e3'. With `unit`.",
    )
    unit: str | None = Field(
        default=None,
        max_length=16,
        description="The typed value's unit: one of the question's `typed_units`, e.g. 'GiB'.",
    )
    client_answer_id: str = ClientAnswerId
    answered_at: datetime | None = Field(
        default=None,
        description="When the learner answered (offline answers), ISO 8601. Kept between the "
        "question's issue (its token) and the answer's arrival: a device clock that is off "
        "cannot place an answer outside them. The review is scheduled from it (never before "
        "the item's last review), and the day it falls on counts for streaks and activity.",
    )
    duration_ms: int | None = Field(
        default=None, ge=0, description="Time from showing the question to answering."
    )


class PitfallPublic(BaseModel):
    id: str
    title: str
    explanation: str | None = Field(description="Why this reasoning fails, with the numbers.")


class ChoiceReviewPublic(BaseModel):
    id: str
    text: str
    correct: bool
    pitfall: PitfallPublic | None


class AnswerPublic(BaseModel):
    outcome: Literal["stored"] = Field(
        description="stored: graded and recorded (the tag a client switches on; a batch item's "
        "result carries the same)."
    )
    attempt_id: int
    client_answer_id: str = Field(
        description="The id this answer was sent with (a replay of a session position's "
        "first answer, stored under another id, echoes it too: attempt_id names the stored one)."
    )
    correct: bool
    choice_id: str | None = Field(description="The choice made; null for a typed answer.")
    correct_choice_id: str | None = Field(description="Null for a typed answer (no choices).")
    pitfall: PitfallPublic | None = Field(
        description="The misconception behind a wrong choice, or the pitfall whose value a typed "
        "answer is (null when it matches none)."
    )
    explanation: str
    solution: list[str] = Field(description="Worked solution steps with this question's numbers.")
    choices: list[ChoiceReviewPublic] = Field(
        description="Every choice with its pitfall; empty for a typed answer."
    )
    replayed: bool = Field(description="True when this is the stored first answer.")
    value: str | None = Field(description="The typed number as stored; null for a choice.")
    unit: str | None = Field(description="The typed number's unit; null for a choice.")
    answer: str = Field(description="The right answer as the question shows it.")


class AnswerStoredPublic(BaseModel):
    """An answer in an exam that is still running: stored and counted, its result (right or
    wrong, the key, the pitfall, the solution) told only once the exam ends."""

    outcome: Literal["withheld"] = Field(
        description="withheld: recorded in a running exam; its result shows when the exam ends."
    )
    attempt_id: int
    client_answer_id: str = Field(
        description="The id this answer was sent with (a replay of a session position's "
        "first answer, stored under another id, echoes it too: attempt_id names the stored one)."
    )
    stored: Literal[True] = True
    replayed: bool = Field(description="True when this is the stored first answer.")
    feedback: None = Field(
        default=None, description="Always null: the exam's results show when it ends."
    )
    summary_url: str = Field(description="The exam's summary page on this server.")


# POST /answers (and a session's answer): ``outcome`` tells the two shapes apart.
AnswerResultPublic = Annotated[AnswerPublic | AnswerStoredPublic, Field(discriminator="outcome")]


class LearnerCreatedPublic(BaseModel):
    learner_id: str
    access_token: str = Field(description="Bearer token, shown only once.")
    token_type: Literal["bearer"] = "bearer"


class RegisterCreate(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [{"email": "ada@example.com", "password": "orbit-lamp-42"}]}
    )

    email: str = Field(min_length=3, max_length=254)
    password: str = Field(min_length=1, max_length=1024)


class RegistrationPublic(BaseModel):
    """The answer to a sign-up: the same whether the address was new or already had an account
    (then its owner was emailed and nothing was created)."""

    email: str = Field(description="The address as stored (lower case).")
    role: Literal["learner"] = Field(default="learner", description="A new account's role.")


class TokenCreate(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"email": "ada@example.com", "password": "orbit-lamp-42", "device_name": "Pixel 9"}
            ]
        }
    )

    email: str = Field(min_length=1, max_length=254)
    password: str = Field(min_length=1, max_length=1024)
    device_name: str = Field(min_length=1, max_length=100)


class TokenPublic(BaseModel):
    access_token: str
    token_type: Literal["bearer"] = "bearer"
    claimed_history: bool = Field(False, description="An install's history claimed by this call.")


class DeviceTokenPublic(BaseModel):
    id: int
    device_name: str | None
    created_at: datetime
    last_used_at: datetime | None
    current: bool


class LearnerPublic(BaseModel):
    learner_id: str
    kind: str = Field(description="account | app")
    role: str
    email: str | None
    time_zone: str | None = Field(
        None, description="The IANA zone the learner's days are counted in (null: UTC)."
    )


class AttemptPublic(BaseModel):
    attempt_id: int
    client_answer_id: str
    card_id: str
    point: str
    template_id: str
    template_version: int
    stem: str | None = Field(description="Null when the catalog no longer has the template.")
    choice_id: str | None = Field(description="Null for a typed answer.")
    choice_text: str = Field(description="The choice made, or the typed number and unit.")
    correct_choice_id: str | None = Field(description="Null for a typed answer.")
    correct_choice_text: str
    correct: bool
    pitfall: PitfallPublic | None
    answered_at: datetime
    typed_value: str | None = Field(default=None, description="A typed answer's number.")
    typed_unit: str | None = Field(default=None, description="A typed answer's unit.")
    dismissed: bool = Field(
        default=False, description='Hidden from the mistake book ("I understand this now").'
    )


class AttemptPagePublic(BaseModel):
    items: list[AttemptPublic]
    next_cursor: str | None


class PitfallCountPublic(BaseModel):
    card_id: str
    point: str
    pitfall_id: str
    title: str
    count: int


class PointProgressPublic(BaseModel):
    point: str
    attempts: int
    share_right: float | None
    due: int
    retention: float | None = Field(
        description="FSRS's mean recall probability now (0..1) of the point's questions in "
        "FSRS's Review state (last answered right), t counted in fractional days since the last "
        "review, to three decimals; null when none is (no figure rather than 100 %)."
    )
    reviewed: int = Field(0, description="Questions the retention is the mean of.")
    learning: int = Field(0, description="Questions still learning (last answer wrong): left out.")


class CardProgressPublic(BaseModel):
    card_id: str
    points: list[PointProgressPublic]
    pitfalls: list[PitfallMasteryPublic] = Field(
        default_factory=list, description="Every pitfall the learner met, in the card's order."
    )


class ProgressPublic(BaseModel):
    cards: list[CardProgressPublic]


class DueItemPublic(BaseModel):
    card_id: str
    point: str
    template_id: str
    due_at: datetime
    question: QuestionPublic


class DuePagePublic(BaseModel):
    items: list[DueItemPublic]
    next_cursor: str | None


class PitfallMasteryPublic(BaseModel):
    pitfall_id: str
    point: str = Field(description="The exam point (slug) where it first appears on the card.")
    title: str
    state: Literal["falling", "fixed", "avoided"] = Field(
        description="falling: chosen in one of the last 3 answers offering it (or fewer than 3 "
        "answers offering it since); fixed: chosen before, avoided in the last 3 answers "
        "offering it; avoided: offered, never chosen."
    )
    offered: int = Field(
        description="Answers that offered it: it was among the choices shown (a typed answer "
        "offers every pitfall of its template)."
    )
    chosen: int = Field(description="Of those, answers that chose it.")


class PasswordResetCreate(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{"email": "ada@example.com"}]})

    email: str = Field(min_length=1, max_length=254)


class AccountDeletion(BaseModel):
    password: str = Field(
        default="",
        max_length=1024,
        description="The account's password (an anonymous install's learner has none).",
    )


class PasswordResetConfirm(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"token": "Yx3kP0q9v1sR7tWm2nB4cD6eF8gH0jK2", "password": "orbit-lamp-43"}]
        }
    )

    token: str = Field(min_length=1, max_length=100, description="The token of the emailed link.")
    password: str = Field(min_length=1, max_length=1024, description="The new password.")
