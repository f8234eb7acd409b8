"""The deck as the card list shows it: each card in learning order, with the learner's
progress on it when a token comes along."""

from __future__ import annotations

from pydantic import BaseModel, Field


class PointSummaryPublic(BaseModel):
    slug: str = Field(description="The exam point's stable id.")
    number: int = Field(description="Its position on the card (display only).")
    title: str


class CardProgressSummaryPublic(BaseModel):
    answered: int = Field(description="Questions of the card answered (first answers).")
    right: int = Field(description="Of those, answered right the first time.")
    due: int = Field(description="Its reviews due now.")


class CardSummaryPublic(BaseModel):
    id: str
    version: int
    title: str
    points: list[PointSummaryPublic]
    prerequisites: list[str] = Field(
        default_factory=list, description="The cards to meet before this one (learning order)."
    )
    progress: CardProgressSummaryPublic | None = Field(
        default=None, description="The learner's, with a bearer token; null without one."
    )
