"""JSON shapes of practice sessions: starting one (on a card or on the deck), its state, its next
question, its summary, an exam's past results."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
from typing_extensions import TypeAliasType

from app.domain.practice import MAX_SIZE, SCOPE_MODES
from app.models import CLIENT_ANSWER_ID_MAX
from app.practice.sessions import EXAM_GRACE
from app.schemas import PitfallPublic, QuestionPublic

# One named enum each (a generator makes one type of it); app.domain.practice.MODES and SCOPES,
# in their order (tests/test_api_sessions.py holds them together).
SessionMode = TypeAliasType(
    "SessionMode", Literal["point", "card", "mistakes", "review", "exam", "mixed"]
)
SessionScope = TypeAliasType("SessionScope", Literal["card", "deck"])

TemplateId = Annotated[str, StringConstraints(min_length=1, max_length=100)]
SESSION_EXAMPLE = {"card_id": "zero-memory-offload", "mode": "exam", "size": 10}
DECK_SESSION_EXAMPLE = {"scope": "deck", "mode": "review"}


class SessionCreate(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"examples": [SESSION_EXAMPLE, DECK_SESSION_EXAMPLE]}
    )

    scope: SessionScope = Field(
        default="card",
        description="card: a session on card_id; deck: a session on every card at once, the "
        "cards interleaved (no card_id), in mode mixed, mistakes, review or exam.",
    )
    card_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="The card (scope card); none for scope deck.",
    )
    mode: SessionMode = Field(
        description="point: one exam point's questions; card: the whole card, mixed; mistakes: "
        "the templates you answered wrong; review: the templates due for review; exam: the whole "
        "card against the clock (90 s a question), no feedback until it ends. On the deck: "
        "mixed: questions from every card you have answered on (every card before a first "
        "answer), shared evenly and interleaved; mistakes and review: those of every card; "
        "exam: the mixed questions against the clock."
    )
    point: str | None = Field(
        default=None,
        min_length=1,
        max_length=100,
        description="mode point only: the exam point's slug (default: the card's first).",
    )
    templates: list[TemplateId] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SIZE,
        description="mode mistakes only: practise these templates of your mistakes (the summary's "
        "wrong_templates: practise these again); default: every template answered wrong.",
    )
    size: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SIZE,
        description="How many questions (default: 10 for point and mistakes, 20 otherwise; a "
        "review has at most as many as are due).",
    )
    typed: bool = Field(
        default=False,
        description="Type the answer: numeric questions come without choices (mode typed), "
        "answered with a value and a unit.",
    )
    client_session_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=CLIENT_ANSWER_ID_MAX,
        pattern=r"^[A-Za-z0-9._:-]+$",
        description="Unique per start (a UUID): sending the start again with it, its response "
        "lost, starts nothing and answers 200 with the session the first one started, as it "
        "stands now. Sent again with another card, mode or typed, or used by another learner: "
        "409 session_id_reused. Without it every request starts a session.",
    )

    @model_validator(mode="after")
    def _scope_of_its_mode(self) -> SessionCreate:
        if self.scope == "card" and self.card_id is None:
            raise ValueError("card_id is needed for scope card")
        if self.scope == "deck" and self.card_id is not None:
            raise ValueError("scope deck spans every card: no card_id")
        if self.mode not in SCOPE_MODES[self.scope]:
            raise ValueError(f"mode {self.mode} is not one of scope {self.scope}'s")
        if self.point is not None and self.mode != "point":
            raise ValueError("point is for mode point only")
        if self.templates is not None and self.mode != "mistakes":
            raise ValueError("templates is for mode mistakes only")
        return self


class SessionPublic(BaseModel):
    session_id: str
    scope: SessionScope = Field(description="card: on card_id; deck: on every card at once.")
    card_id: str | None = Field(description="The session's card; null for scope deck.")
    mode: SessionMode
    point: str | None = Field(description="mode point: the exam point's slug; else null.")
    typed: bool
    size: int = Field(description="The number of questions.")
    answered: int = Field(description="Questions answered so far.")
    started_at: datetime
    deadline_at: datetime | None = Field(
        description="An exam's deadline, else null. An answer arriving after it is refused "
        f"(exam_over), except within {EXAM_GRACE.seconds} seconds of it (sent as the clock ran "
        "out: it counts)."
    )
    seconds_left: int | None = Field(
        description="Whole seconds to the deadline, rounded up (0: at or past it); null without "
        "one."
    )
    over: bool = Field(
        description="Every question answered, ended by the learner (finish), or past an exam's "
        "deadline: no question is served any more, the summary is complete."
    )
    ended_at: datetime | None = Field(description="When it ended; null while it runs.")
    results_withheld: bool = Field(
        description="An exam still running: its answers are acknowledged without their result "
        "and its summary waits for its end."
    )


class SessionQuestionPublic(BaseModel):
    session_id: str
    position: int = Field(description="The question's place in the session, from 0.")
    size: int
    seconds_left: int | None = Field(description="An exam's time left (see SessionPublic).")
    question: QuestionPublic = Field(
        description="Answer it with POST /me/sessions/{session_id}/answers (or POST /answers): "
        "its token names this place of the session."
    )


class PointScorePublic(BaseModel):
    card_id: str
    point: str = Field(description="The exam point's slug.")
    right: int
    wrong: int
    unanswered: int


class CardScorePublic(BaseModel):
    card_id: str
    right: int
    wrong: int
    unanswered: int
    points: list[PointScorePublic] = Field(description="Per exam point, in the card's order.")


class PitfallFallenPublic(BaseModel):
    card_id: str
    template_id: str
    pitfall_id: str
    title: str
    times: int = Field(description="Answers of the session that fell for it.")


class SummaryQuestionPublic(BaseModel):
    """One question of the session: what was asked, the answer given, the key."""

    position: int
    card_id: str = Field(description="The card the question is from.")
    point: str
    template_id: str
    stem: str
    answered: bool
    correct: bool
    choice_id: str | None = Field(description="The choice made; null: unanswered or typed.")
    choice_text: str | None
    typed: str | None = Field(description="A typed answer's value and unit, as typed.")
    correct_choice_id: str
    correct_text: str = Field(description="The key as the question shows it.")
    pitfall: PitfallPublic | None = Field(description="The pitfall a wrong answer fell for.")
    attempt_id: int | None


class SessionSummaryPublic(BaseModel):
    session: SessionPublic
    right: int
    wrong: int
    unanswered: int
    seconds: int = Field(description="Time spent, from the start to the end (or the last answer).")
    cards: list[CardScorePublic] = Field(
        description="Per card, in learning order (one for a session on a card), each with its "
        "exam points."
    )
    points: list[PointScorePublic] = Field(
        description="Per exam point, card after card (the cards' points, flat)."
    )
    pitfalls: list[PitfallFallenPublic] = Field(description="Most often fallen for first.")
    wrong_templates: list[str] = Field(
        description="The templates answered wrong: a mistakes session's templates to practise "
        "these again (in the session's scope: on the deck for a session on the deck)."
    )
    questions: list[SummaryQuestionPublic] = Field(
        description="The questions answered so far; every question once the session is over."
    )


class ExamResultPublic(BaseModel):
    session_id: str
    started_at: datetime
    right: int
    size: int
    seconds: int = Field(description="The time the exam used.")
