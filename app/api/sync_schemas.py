"""The shapes of delta sync and of the mistake book's dismissals (app.api.sync, app.api.me)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from app.schemas import AttemptPublic


class ReviewStatePublic(BaseModel):
    """A review item's schedule (one per card and template the learner answered)."""

    card_id: str
    point: str
    template_id: str
    due_at: datetime
    reviews: int
    lapses: int
    last_review_at: datetime | None
    stability: float | None = Field(description="FSRS stability in days (null: new).")
    difficulty: float | None = Field(description="FSRS difficulty, 1..10 (null: new).")


class ChangesPublic(BaseModel):
    attempts: list[AttemptPublic]
    review_items: list[ReviewStatePublic]
    next_cursor: str = Field(description="Pass as cursor next time (also when nothing changed).")
    more: bool = Field(description="More changes wait: call again with next_cursor now.")
    reset: bool = Field(
        description="The cursor was another learner's: drop what was synced before this page."
    )


class DismissCreate(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "card_id": "zero-memory-offload",
                    "point": "offload",
                    "pitfall_id": "offload-keeps-params",
                    "template_id": "p5-offload-gpu-bytes",
                }
            ]
        }
    )

    card_id: str = Field(min_length=1, max_length=100)
    point: str = Field(min_length=1, max_length=100)
    template_id: str = Field(min_length=1, max_length=100)
    pitfall_id: str | None = Field(
        default=None, max_length=100, description="Null: the template's wrong answers."
    )


class DismissedPublic(BaseModel):
    dismissed: int = Field(description="How many wrong answers were hidden.")
