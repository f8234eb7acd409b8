"""The JSON models of Today, the review forecast and the activity calendar (``app.api.today``)."""

from __future__ import annotations

import datetime as dt
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from app.api.session_schemas import SessionScope


class LearnerUpdate(BaseModel):
    """``PATCH /me``: what the app tells the server about the learner; a field not sent is
    left as it is."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"time_zone": "Asia/Shanghai"}, {"exam_date": "2026-12-20"}]
        },
    )

    time_zone: str | None = Field(
        default=None,
        max_length=64,
        description="An IANA zone name (Asia/Shanghai); null: UTC. Streaks, Today and the "
        "forecast count the learner's days in it.",
        examples=["Asia/Shanghai"],
    )
    exam_date: dt.date | None = Field(
        default=None,
        description="The day of the learner's exam, today or later on the learner's calendar "
        "(400 invalid_date before it); null: none. Reviews due after it are pulled before it; "
        "GET /me/today shows it and the days to it.",
    )


class ResumePublic(BaseModel):
    session_id: str
    scope: SessionScope
    card_id: str | None = Field(description="The session's card; null for a session on the deck.")
    mode: str
    answered: int
    size: int
    url: str = Field(description="The session's page on the web.")


class StreakPublic(BaseModel):
    days: int = Field(
        description="Consecutive days with an answer ending today, or yesterday while today has "
        "no answer yet (a streak breaks only when a day ends without one)."
    )
    answered_today: bool


class NextActionPublic(BaseModel):
    action: Literal["review", "resume", "start"] = Field(
        description="review: start a review session on card_id (scope deck: on every card, "
        "when reviews are due on several); resume: open session_id; start: start a session of "
        "mode on card_id (point: its first exam point, on a first visit; scope deck: mode mixed "
        "on every card, once several cards are started)."
    )
    scope: SessionScope = Field(description="deck: the session spans every card (no card_id).")
    card_id: str | None
    mode: str | None
    point: str | None
    session_id: str | None


class TodayPublic(BaseModel):
    """The facts of the Today page (``/``), in the learner's time zone."""

    date: dt.date = Field(description="The learner's today.")
    time_zone: str
    due_now: int
    due_later_today: int
    minutes: int = Field(description="Minutes the reviews due now take, rounded up.")
    seconds_per_question: float
    own_time: bool = Field(
        description="true: the learner's median answer time (last 50 timed answers, at least 5); "
        "false: the default of 60 s a question."
    )
    resume: ResumePublic | None
    streak: StreakPublic
    answers: int = Field(description="Every answer the learner gave (0: a first visit).")
    answers_today: int
    exam_date: dt.date | None
    days_to_exam: int | None
    next: NextActionPublic


class ForecastDayPublic(BaseModel):
    date: dt.date
    due: int


class ForecastPublic(BaseModel):
    """Reviews due per day of the learner's next 14 days; the first is today, overdue included."""

    time_zone: str
    days: list[ForecastDayPublic]


class ActivityDayPublic(BaseModel):
    date: dt.date
    answers: int


class ActivityPublic(BaseModel):
    """Answers per day of the learner's calendar, whole weeks from a Monday 25 weeks before this
    week's to today."""

    time_zone: str
    days: list[ActivityDayPublic]
