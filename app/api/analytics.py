"""Instructor analytics as JSON: the same figures as the analytics page and its CSV.

``GET /api/v1/instructor/cards/{card_id}/analytics`` (definitions in
:mod:`app.domain.analytics`).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field
from typing_extensions import TypeAliasType

from app.analytics.service import card_analytics
from app.api.problem_schemas import ProblemPublic
from app.deps import ApiInstructor, CatalogDep, ContextDep, DbDep
from app.domain.analytics import Scope
from app.practice.questions import get_card

router = APIRouter(tags=["instructor"])
# One named enum in the OpenAPI document, for the query and the answer alike.
AnalyticsScope = TypeAliasType("AnalyticsScope", Scope)

RESPONSES: dict[int | str, dict[str, Any]] = {
    401: {"model": ProblemPublic, "description": "No valid bearer token."},
    403: {"model": ProblemPublic, "description": "The token is not an instructor's."},
    404: {"model": ProblemPublic, "description": "Unknown card."},
}


class _Out(BaseModel):
    model_config = ConfigDict(from_attributes=True)


class StatsPublic(_Out):
    attempts: int
    learners: int
    right: int
    facility: float | None = Field(description="Share right among the attempts counted.")
    discrimination: float | None = Field(
        description="Corrected item-rest correlation (Pearson's r, -1..1); null with too few "
        "learners that have a rest score."
    )
    discrimination_learners: int = Field(description="Learners in that correlation.")
    median_ms: float | None
    timed: int = Field(description="Attempts with a duration.")
    discrimination_low: float | None = Field(
        default=None,
        description="The discrimination's 95 % confidence interval, low end (Fisher's z); "
        "a template is flagged negative only when the high end is below zero.",
    )
    discrimination_high: float | None = Field(default=None, description="The interval's high end.")


class PitfallStatsPublic(_Out):
    pitfall_id: str
    shown: int = Field(description="Attempts whose choices included this pitfall.")
    picked: int
    rate: float | None = Field(description="picked / shown")
    share_of_wrong: float | None = Field(description="picked / wrong answers")


class ParamValuePublic(_Out):
    name: str
    value: str
    stats: StatsPublic
    pitfalls: list[PitfallStatsPublic]


class TemplatePublic(_Out):
    template_id: str
    point: str
    stats: StatsPublic
    pitfalls: list[PitfallStatsPublic]
    params: list[ParamValuePublic]
    versions: list[int]
    flags: list[str]


class PointStatsPublic(_Out):
    point: str
    stats: StatsPublic
    template_ids: list[str]


class MisconceptionPublic(_Out):
    pitfall_id: str
    shown: int
    picked: int
    rate: float | None
    template_ids: list[str]


class FlagPublic(_Out):
    kind: Literal["unpicked_pitfall", "negative_discrimination", "everyone_right"]
    template_id: str
    pitfall_id: str | None
    value: float | None


class ThresholdsPublic(_Out):
    min_rest_attempts: int
    min_learners: int
    min_showings: int
    min_attempts: int


class AnalyticsPublic(_Out):
    card_id: str
    scope: AnalyticsScope
    stats: StatsPublic
    points: list[PointStatsPublic]
    templates: list[TemplatePublic]
    misconceptions: list[MisconceptionPublic]
    flags: list[FlagPublic]
    thresholds: ThresholdsPublic
    excluded_versions: int


@router.get(
    "/instructor/cards/{card_id}/analytics",
    response_model=AnalyticsPublic,
    responses=RESPONSES,
)
def get_card_analytics(
    card_id: Annotated[str, Path(max_length=100, description="The card's id.")],
    instructor: ApiInstructor,
    db: DbDep,
    catalog: CatalogDep,
    context: ContextDep,
    scope: Annotated[
        AnalyticsScope,
        Query(
            description="first_answers: every first answer to a question; earliest: each "
            "learner's earliest answer to each template."
        ),
    ] = "first_answers",
    versions: Annotated[
        Literal["current", "all"],
        Query(description="current: only the templates' current versions."),
    ] = "current",
    days: Annotated[int | None, Query(ge=1, le=3650, description="Only the last N days.")] = None,
) -> AnalyticsPublic:
    """Item analysis of a card from its learners' first attempts: per card, exam point, template
    and parameter value, the attempts, learners, facility, discrimination, pitfall selection
    rates and median time; and the flags (a pitfall nobody picks, negative discrimination, a
    template everybody gets right)."""
    card = get_card(catalog, card_id, offered=False)
    since = context.clock() - timedelta(days=days) if days is not None else None
    analytics = card_analytics(
        db=db,
        card=card,
        scope=scope,
        current_versions_only=versions == "current",
        since=since,
    )
    return AnalyticsPublic.model_validate(analytics)
