"""The Today page's facts and the charts of progress, one function each for the web page and the
API: what is due and how long it takes, the session to resume, the streak, the days to the exam,
the one suggested action; the review forecast, the activity calendar, mastery per pitfall, and
when the item of an answer comes back. The rules are app.domain.habits'; days are the learner's
(their time zone)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, func, select
from sqlalchemy.orm import Session

from app.auth.service import as_utc, exam_date_of
from app.domain import habits
from app.domain.calendar import day_start, local_day
from app.domain.cards import Card, Pitfall
from app.domain.catalog import Catalog
from app.domain.practice import Scope
from app.models import Attempt, PracticeSession, ReviewItem, ReviewLog
from app.practice.scopes import NOTHING_TO_DO, DeckReach, deck_reach
from app.review.service import due_counts

RECENT_TIMES = 50  # the learner's median answer time is taken over their last 50 timed answers
STREAK_HORIZON_DAYS = 800  # answers older than this do not extend a streak shown today
# When an answer was given: an offline answer's answered_at (kept before its arrival), else when
# it was stored. Streaks and the calendar count it on that day; queries bound created_at (indexed,
# never before the answer).
ANSWERED = func.coalesce(Attempt.answered_at, Attempt.created_at)


@dataclass(frozen=True)
class Resume:
    session_id: str
    card_id: str | None  # None: a session spanning the deck
    mode: str
    answered: int
    size: int

    @property
    def scope(self) -> Scope:
        return "deck" if self.card_id is None else "card"


@dataclass(frozen=True)
class NextAction:
    """The one button of Today: ``review`` (start a review session on ``card_id``, or on the
    deck when reviews are due on several cards), ``resume`` (open ``session_id``), ``start``
    (start a session of ``mode`` on ``card_id``, ``point`` for a first visit; a mixed session
    on the deck once several cards are started). ``scope`` is ``deck`` for a session on every
    card (``card_id`` None)."""

    action: habits.Action
    card_id: str | None
    mode: str | None
    point: str | None
    session_id: str | None
    scope: Scope = "card"


@dataclass(frozen=True)
class Today:
    today: date
    time_zone: str
    due_now: int
    due_later_today: int
    review_card_id: str | None  # the card with the most reviews due
    deck: DeckReach  # what there is to do on each card
    minutes: int
    seconds_per_question: float
    own_time: bool  # True: the learner's median answer time, False: the stated default
    resume: Resume | None
    streak: habits.Streak
    answers: int  # every answer the learner gave (0: a first visit)
    answers_today: int
    exam_date: date | None
    days_to_exam: int | None
    next: NextAction


def today(
    *,
    db: Session,
    catalog: Catalog,
    learner_id: str | None,
    now: datetime,
    zone_name: str,
    told: ColumnElement[bool] | None = None,
) -> Today:
    """The Today facts of a learner (None: a visitor who never answered); ``told``: the
    attempts whose result may be told (app.practice.mistakes.results_told)."""
    local_today = local_day(now, zone_name)
    if learner_id is None:
        return _first_visit(catalog, local_today, zone_name)
    due_now, due_later = due_counts(
        db=db, catalog=catalog, learner_id=learner_id, now=now, zone_name=zone_name
    )
    deck = deck_reach(db=db, catalog=catalog, learner_id=learner_id, now=now, told=told)
    review_card = deck.most_due
    durations = db.scalars(
        select(Attempt.duration_ms)
        .where(Attempt.learner_id == learner_id, Attempt.duration_ms.is_not(None))
        .order_by(Attempt.id.desc())
        .limit(RECENT_TIMES)
    ).all()
    median = habits.median_answer_seconds(durations)
    since = day_start(local_today - timedelta(days=STREAK_HORIZON_DAYS), zone_name)
    moments = [
        as_utc(m)
        for m in db.scalars(
            select(ANSWERED).where(Attempt.learner_id == learner_id, Attempt.created_at >= since)
        ).all()
    ]
    total = db.scalar(select(func.count()).where(Attempt.learner_id == learner_id)) or 0
    last_card = db.scalar(
        select(Attempt.card_id)
        .where(Attempt.learner_id == learner_id)
        .order_by(Attempt.id.desc())
        .limit(1)
    )
    resume = _resume(db, catalog, learner_id, now)
    exam = exam_date_of(db=db, learner_id=learner_id)
    db.commit()
    days = habits.answer_days(moments, zone_name)
    action = habits.next_action(
        due_now=due_now, resume_session_id=resume.session_id if resume else None
    )
    card = catalog.offered(last_card) if last_card else None
    card = card or _first_card(catalog)
    if action == "review" and deck.review:
        next_ = NextAction("review", None, "review", None, None, "deck")
    elif action == "review":
        next_ = NextAction("review", review_card, "review", None, None)
    elif action == "resume":
        assert resume is not None
        next_ = NextAction(
            "resume", resume.card_id, resume.mode, None, resume.session_id, resume.scope
        )
    elif total == 0 and card is not None:
        next_ = NextAction("start", card.id, "point", card.points[0].slug, None)
    elif deck.mixed:
        next_ = NextAction("start", None, "mixed", None, None, "deck")
    else:
        next_ = NextAction("start", card.id if card else None, "card", None, None)
    return Today(
        today=local_today,
        time_zone=zone_name,
        due_now=due_now,
        due_later_today=due_later,
        review_card_id=review_card,
        deck=deck,
        minutes=habits.minutes_for(due_now, median),
        seconds_per_question=median if median is not None else habits.DEFAULT_SECONDS_PER_QUESTION,
        own_time=median is not None,
        resume=resume,
        streak=habits.streak(days, local_today),
        answers=int(total),
        answers_today=sum(1 for m in moments if local_day(m, zone_name) == local_today),
        exam_date=exam,
        days_to_exam=habits.days_to(exam, local_today),
        next=next_,
    )


def _first_card(catalog: Catalog) -> Card | None:
    cards = catalog.cards()
    return cards[0] if cards else None


def _first_visit(catalog: Catalog, local_today: date, zone_name: str) -> Today:
    card = _first_card(catalog)
    return Today(
        today=local_today,
        time_zone=zone_name,
        due_now=0,
        due_later_today=0,
        review_card_id=None,
        deck=NOTHING_TO_DO,
        minutes=0,
        seconds_per_question=habits.DEFAULT_SECONDS_PER_QUESTION,
        own_time=False,
        resume=None,
        streak=habits.Streak(0, False),
        answers=0,
        answers_today=0,
        exam_date=None,
        days_to_exam=None,
        next=NextAction(
            "start",
            card.id if card else None,
            "point" if card else None,
            card.points[0].slug if card else None,
            None,
        ),
    )


def _resume(db: Session, catalog: Catalog, learner_id: str, now: datetime) -> Resume | None:
    """The latest session not finished, with a question left and time left, on a card offered
    (or on the deck)."""
    rows = db.scalars(
        select(PracticeSession)
        .where(PracticeSession.learner_id == learner_id, PracticeSession.finished_at.is_(None))
        .order_by(PracticeSession.started_at.desc())
        .limit(5)
    ).all()
    for row in rows:
        if row.deadline_at is not None and as_utc(row.deadline_at) < now:
            continue
        if row.card_id is not None and catalog.offered(row.card_id) is None:
            continue
        answered = (
            db.scalar(
                select(func.count(func.distinct(Attempt.position))).where(
                    Attempt.practice_session_id == row.id, Attempt.position.is_not(None)
                )
            )
            or 0
        )
        if answered < len(row.plan):
            return Resume(row.id, row.card_id, row.mode, int(answered), len(row.plan))
    return None


# --- charts -----------------------------------------------------------------------------------


def review_forecast(
    *, db: Session, catalog: Catalog, learner_id: str | None, now: datetime, zone_name: str
) -> list[tuple[date, int]]:
    """Reviews due per day of the learner's next 14 days (today counts the overdue), of the
    templates offered, as the header and Today count them (ReviewItem.served)."""
    if learner_id is None:
        return habits.forecast([], now=now, zone_name=zone_name)
    horizon = day_start(local_day(now, zone_name) + timedelta(days=habits.FORECAST_DAYS), zone_name)
    moments = db.scalars(
        select(ReviewItem.due_at).where(
            ReviewItem.learner_id == learner_id,
            ReviewItem.served(catalog.offered_templates),
            ReviewItem.due_at < horizon,
        )
    ).all()
    db.commit()
    return habits.forecast([as_utc(m) for m in moments], now=now, zone_name=zone_name)


def answer_activity(
    *, db: Session, learner_id: str | None, now: datetime, zone_name: str
) -> list[tuple[date, int]]:
    """Answers per day over the learner's last 26 weeks (whole weeks, Monday first)."""
    local_today = local_day(now, zone_name)
    if learner_id is None:
        return habits.activity([], today=local_today, zone_name=zone_name)
    first = local_today - timedelta(days=local_today.weekday(), weeks=habits.ACTIVITY_WEEKS - 1)
    moments = db.scalars(
        select(ANSWERED).where(
            Attempt.learner_id == learner_id, Attempt.created_at >= day_start(first, zone_name)
        )
    ).all()
    db.commit()
    return habits.activity([as_utc(m) for m in moments], today=local_today, zone_name=zone_name)


@dataclass(frozen=True)
class PitfallMastery:
    card_id: str
    point: str
    pitfall_id: str
    title_pitfall: Pitfall
    state: habits.Mastery
    offered: int  # answers that showed it as a choice (a typed answer: every one of its template)
    fell: int  # answers that chose it


def pitfall_mastery(
    *,
    db: Session,
    catalog: Catalog,
    learner_id: str | None,
    told: ColumnElement[bool] | None = None,
) -> list[PitfallMastery]:
    """Every pitfall of the offered cards the learner met, in the card's order (exam point, then
    template, then the pitfall's place), with its state (app.domain.habits.pitfall_mastery);
    ``told``: which of the learner's attempts may be counted (not a running exam's)."""
    if learner_id is None:
        return []
    rows = db.execute(
        select(Attempt.card_id, Attempt.template_id, Attempt.choices, Attempt.pitfall_id)
        .where(Attempt.learner_id == learner_id if told is None else told)
        .order_by(Attempt.id)
    ).all()
    db.commit()
    cards = {card.id: card for card in catalog.cards()}
    answers = _shown_answers(rows, cards)
    result: list[PitfallMastery] = []
    for card in cards.values():
        if card.id not in answers:
            continue
        seen: set[str] = set()
        for point in card.points:
            for template in point.templates:
                for pitfall in template.pitfalls:
                    if pitfall.id in seen:
                        continue
                    seen.add(pitfall.id)
                    fell = habits.falls_when_offered(answers[card.id], pitfall.id)
                    if fell:
                        result.append(
                            PitfallMastery(
                                card_id=card.id,
                                point=point.slug,
                                pitfall_id=pitfall.id,
                                title_pitfall=pitfall,
                                state=habits.pitfall_mastery(fell),
                                offered=len(fell),
                                fell=sum(fell),
                            )
                        )
    return result


def _shown_answers(
    rows: Sequence[tuple[str, str, list[dict[str, Any]] | None, str | None]],
    cards: Mapping[str, Card],
) -> dict[str, list[habits.ShownAnswer]]:
    """The answers on each offered card, oldest first, with the pitfalls each offered (the
    choices it showed: app.domain.habits.offered_by)."""
    template_pitfalls: dict[tuple[str, str], list[str]] = {}
    answers: dict[str, list[habits.ShownAnswer]] = {}
    for card_id, template_id, choices, chosen in rows:
        card = cards.get(card_id)
        if card is None:
            continue
        key = (card_id, template_id)
        if key not in template_pitfalls:
            template = card.template(template_id)
            template_pitfalls[key] = [p.id for p in template.pitfalls] if template else []
        shown = (choice.get("pitfall_id") for choice in choices or ())
        offered = habits.offered_by(shown, template_pitfalls[key])
        answers.setdefault(card_id, []).append(habits.ShownAnswer(offered, chosen))
    return answers


# --- after an answer --------------------------------------------------------------------------


@dataclass(frozen=True)
class NextReview:
    due_at: datetime
    days: int  # learner's days from today (0: later today)


def next_review(
    *, db: Session, attempt: Attempt, now: datetime, zone_name: str
) -> NextReview | None:
    """When the review item of this answer is due next: the due date its rating set (a first
    answer), else the item's current due date; in the learner's days from today."""
    due = db.scalar(select(ReviewLog.due_after).where(ReviewLog.attempt_id == attempt.id))
    if due is None:
        due = db.scalar(
            select(ReviewItem.due_at).where(
                ReviewItem.learner_id == attempt.learner_id,
                ReviewItem.card_id == attempt.card_id,
                ReviewItem.template_id == attempt.template_id,
            )
        )
    db.commit()
    if due is None:
        return None
    due = as_utc(due)
    days = (local_day(due, zone_name) - local_day(now, zone_name)).days
    return NextReview(due_at=due, days=max(0, days))
