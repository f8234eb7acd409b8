"""The learner's day for the app: their time zone (``PATCH /me``), Today, the review forecast and
the activity calendar, from the same services as the web pages (app.review.habits)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Request, Response

from app.api.problem_schemas import ProblemPublic
from app.api.responses import conditional_responses, not_modified
from app.api.today_schemas import (
    ActivityDayPublic,
    ActivityPublic,
    ForecastDayPublic,
    ForecastPublic,
    LearnerUpdate,
    NextActionPublic,
    ResumePublic,
    StreakPublic,
    TodayPublic,
)
from app.auth.service import LearnerRef, check_exam_date, set_exam_date, set_time_zone
from app.deps import ApiLearner, ContextDep, DbDep
from app.domain.calendar import is_time_zone, local_day
from app.domain.messages import Message
from app.practice.mistakes import results_told
from app.problems import Problem
from app.review.habits import answer_activity, review_forecast, today
from app.schemas import LearnerPublic

router = APIRouter(tags=["me"], responses={401: {"model": ProblemPublic}})


class UnknownTimeZone(Problem):
    status_code = 422
    code = "invalid_time_zone"
    title = "Unprocessable content"


def _zone(learner: LearnerRef) -> str:
    return learner.time_zone if is_time_zone(learner.time_zone) else "UTC"  # type: ignore[return-value]


@router.patch(
    "/me",
    response_model=LearnerPublic,
    responses={
        400: {
            "model": ProblemPublic,
            "description": "A body that is not JSON; invalid_date: an exam date before today.",
        },
        422: {"model": ProblemPublic, "description": "An unknown time zone."},
    },
)
def update_me(
    body: Annotated[LearnerUpdate, Body()],
    db: DbDep,
    ctx: ContextDep,
    learner: ApiLearner,
) -> LearnerPublic:
    """Set what is sent of the learner's time zone (an IANA name; null: UTC), in which Today,
    streaks and the forecast count the learner's days, and exam date (null: none; today or
    later, in that time zone). Nothing is changed when a field is refused."""
    sent = body.model_fields_set
    zone = body.time_zone if "time_zone" in sent else learner.time_zone
    if "time_zone" in sent and zone is not None and not is_time_zone(zone):
        raise UnknownTimeZone(
            Message(
                "Unknown time zone %(zone)s: use an IANA name such as Asia/Shanghai.",
                zone=repr(zone),
            )
        )
    today_there = local_day(ctx.clock(), zone if is_time_zone(zone) else None)
    exam_date = check_exam_date(body.exam_date, today_there)
    if "time_zone" in sent:
        set_time_zone(db=db, learner_id=learner.id, time_zone=zone)
    if "exam_date" in sent:
        set_exam_date(db=db, learner_id=learner.id, exam_date=exam_date)
    return LearnerPublic(
        learner_id=learner.id,
        kind=learner.kind,
        role=learner.role,
        email=learner.email,
        time_zone=zone,
    )


@router.get(
    "/me/today",
    response_model=TodayPublic,
    responses=conditional_responses("Today's summary"),
)
def read_my_today(
    request: Request, response: Response, db: DbDep, ctx: ContextDep, learner: ApiLearner
) -> Any:
    """What the Today page shows: reviews due now and the minutes they take, the session to
    resume, the streak, the days to the exam, and the one suggested next action. Sends an
    ``ETag``: an app refreshing with ``If-None-Match`` gets a 304 while nothing changed."""
    told = results_told(db=db, catalog=ctx.catalog, learner_id=learner.id, now=ctx.clock())
    facts = today(
        db=db,
        catalog=ctx.catalog,
        learner_id=learner.id,
        now=ctx.clock(),
        zone_name=_zone(learner),
        told=told,
    )
    resume = facts.resume
    body = TodayPublic(
        date=facts.today,
        time_zone=facts.time_zone,
        due_now=facts.due_now,
        due_later_today=facts.due_later_today,
        minutes=facts.minutes,
        seconds_per_question=facts.seconds_per_question,
        own_time=facts.own_time,
        resume=ResumePublic(
            session_id=resume.session_id,
            scope=resume.scope,
            card_id=resume.card_id,
            mode=resume.mode,
            answered=resume.answered,
            size=resume.size,
            url=f"/sessions/{resume.session_id}",
        )
        if resume
        else None,
        streak=StreakPublic(days=facts.streak.days, answered_today=facts.streak.answered_today),
        answers=facts.answers,
        answers_today=facts.answers_today,
        exam_date=facts.exam_date,
        days_to_exam=facts.days_to_exam,
        next=NextActionPublic(
            action=facts.next.action,
            scope=facts.next.scope,
            card_id=facts.next.card_id,
            mode=facts.next.mode,
            point=facts.next.point,
            session_id=facts.next.session_id,
        ),
    )
    return not_modified(request, response, body, vary="Authorization", private=True) or body


@router.get("/me/forecast", response_model=ForecastPublic)
def read_my_forecast(db: DbDep, ctx: ContextDep, learner: ApiLearner) -> ForecastPublic:
    """Reviews due per day of the learner's next 14 days (today first, overdue included)."""
    zone_name = _zone(learner)
    days = review_forecast(
        db=db, catalog=ctx.catalog, learner_id=learner.id, now=ctx.clock(), zone_name=zone_name
    )
    return ForecastPublic(
        time_zone=zone_name, days=[ForecastDayPublic(date=d, due=n) for d, n in days]
    )


@router.get("/me/activity", response_model=ActivityPublic)
def read_my_activity(db: DbDep, ctx: ContextDep, learner: ApiLearner) -> ActivityPublic:
    """Answers per day of the learner's last 26 weeks (whole weeks from a Monday, to today)."""
    zone_name = _zone(learner)
    days = answer_activity(db=db, learner_id=learner.id, now=ctx.clock(), zone_name=zone_name)
    return ActivityPublic(
        time_zone=zone_name, days=[ActivityDayPublic(date=d, answers=n) for d, n in days]
    )
