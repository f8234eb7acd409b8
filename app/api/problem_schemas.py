"""A card problem as the instructor's API shows it (validation, drafts, a refused publication),
with a give-away cue's family and sample variants where validation found one."""

from __future__ import annotations

from pydantic import BaseModel, Field


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
