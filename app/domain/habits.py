"""The daily habit and honest progress, as plain rules: streaks, how long the reviews due take,
what to do next, FSRS retrievability per exam point, the review forecast, the activity calendar
and whether a pitfall is fixed.

Days are the learner's own (app.domain.calendar): callers pass moments and the learner's zone.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Literal

from fsrs import State

from app.domain.calendar import local_day
from app.domain.scheduling import FsrsState, decay_and_factor

# --- streaks ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Streak:
    """Consecutive days with at least one answer, ending today or yesterday.

    A streak is not broken until a day ends without an answer: at 9:00 with no answer yet today,
    yesterday's streak is still alive (``days`` counts up to yesterday, ``answered_today`` is
    False: answer today to keep it)."""

    days: int
    answered_today: bool

    @property
    def alive(self) -> bool:
        return self.days > 0


def streak(answer_days: Iterable[date], today: date) -> Streak:
    """The streak on ``today`` given the learner's days with an answer (their own calendar)."""
    days = set(answer_days)
    answered_today = today in days
    day = today if answered_today else today - timedelta(days=1)
    count = 0
    while day in days:
        count += 1
        day -= timedelta(days=1)
    return Streak(days=count, answered_today=answered_today)


def answer_days(moments: Iterable[datetime], zone_name: str | None) -> set[date]:
    """The learner's calendar days on which these answers were given."""
    return {local_day(moment, zone_name) for moment in moments}


# --- how long the reviews due take ------------------------------------------------------------

DEFAULT_SECONDS_PER_QUESTION = 60  # stated on the page when the learner's own time is not known
MIN_TIMED_ANSWERS = 5  # the learner's median is used from this many timed answers on
MAX_ANSWER_S = 600  # longer (a tab left open) is not a time spent on the question


def median_answer_seconds(durations_ms: Iterable[int | None]) -> float | None:
    """The median time of the learner's timed answers (None below MIN_TIMED_ANSWERS); answers
    over MAX_ANSWER_S count as MAX_ANSWER_S."""
    seconds = [min(d / 1000, MAX_ANSWER_S) for d in durations_ms if d is not None and d >= 0]
    if len(seconds) < MIN_TIMED_ANSWERS:
        return None
    return float(statistics.median(seconds))


def minutes_for(count: int, seconds_per_question: float | None) -> int:
    """Whole minutes ``count`` questions take (rounded up; 0 for none)."""
    if count <= 0:
        return 0
    per = DEFAULT_SECONDS_PER_QUESTION if seconds_per_question is None else seconds_per_question
    return max(1, math.ceil(count * per / 60))


# --- the one thing to do next -----------------------------------------------------------------

Action = Literal["review", "resume", "start"]


def next_action(*, due_now: int, resume_session_id: str | None) -> Action:
    """Reviews due come first (they are what is being forgotten), then the unfinished session,
    else a new session on the card."""
    if due_now > 0:
        return "review"
    if resume_session_id is not None:
        return "resume"
    return "start"


def days_to(exam_date: date | None, today: date) -> int | None:
    return (exam_date - today).days if exam_date is not None else None


# --- FSRS retrievability ----------------------------------------------------------------------


def retrievability(stability: float, elapsed_days: float) -> float:
    """FSRS-6's forgetting curve R(t, S) = (1 + FACTOR·t/S)^DECAY (the fsrs package's DECAY and
    FACTOR), with ``t`` in (fractional) days since the last review: 0.9 when t = S."""
    decay, factor = decay_and_factor()
    return float((1 + factor * max(0.0, elapsed_days) / stability) ** decay)


@dataclass(frozen=True)
class Memory:
    """What FSRS knows of an exam point's review items.

    ``retrievability`` is the mean R of the items in FSRS's Review state (last answered right,
    graduated): the chance of recalling one of them now. Items still learning (last answer wrong,
    or not yet graduated) are counted in ``learning`` and left out of the mean: right after a
    wrong answer R is near 1 only because the answer was just shown. None when no item is in
    Review: no figure rather than 100 %."""

    retrievability: float | None
    reviewed: int
    learning: int


def memory(states: Iterable[FsrsState], now: datetime) -> Memory:
    values: list[float] = []
    learning = 0
    for state in states:
        stability = state.get("stability")
        last = state.get("last_review")
        if stability is None or last is None:
            continue
        if state.get("state") != State.Review.value:
            learning += 1
            continue
        elapsed = (now - datetime.fromisoformat(last)).total_seconds() / 86400
        values.append(retrievability(float(stability), elapsed))
    mean = sum(values) / len(values) if values else None
    return Memory(retrievability=mean, reviewed=len(values), learning=learning)


# --- the review forecast and the activity calendar --------------------------------------------

FORECAST_DAYS = 14
ACTIVITY_WEEKS = 26


def forecast(
    due_moments: Iterable[datetime],
    *,
    now: datetime,
    zone_name: str | None,
    days: int = FORECAST_DAYS,
) -> list[tuple[date, int]]:
    """Reviews due per day of the learner's next ``days`` days, today first; today counts what is
    overdue too (it is all due today)."""
    today = local_day(now, zone_name)
    counts: Counter[date] = Counter()
    for moment in due_moments:
        counts[max(today, local_day(moment, zone_name))] += 1
    return [(today + timedelta(days=i), counts[today + timedelta(days=i)]) for i in range(days)]


def activity(
    answer_moments: Iterable[datetime],
    *,
    today: date,
    zone_name: str | None,
    weeks: int = ACTIVITY_WEEKS,
) -> list[tuple[date, int]]:
    """Answers per day of the learner's calendar, from the Monday ``weeks - 1`` weeks before this
    week's to today (whole weeks for a calendar grid, the current week up to today)."""
    first = today - timedelta(days=today.weekday()) - timedelta(weeks=weeks - 1)
    counts = Counter(local_day(moment, zone_name) for moment in answer_moments)
    return [
        (first + timedelta(days=i), counts[first + timedelta(days=i)])
        for i in range((today - first).days + 1)
    ]


ACTIVITY_LEVELS = (0, 1, 3, 6, 10)  # the least answers of levels 0..4 in the calendar


def activity_level(count: int) -> int:
    """0 (no answer), 1 (1–2), 2 (3–5), 3 (6–9), 4 (10 or more)."""
    return max(i for i, least in enumerate(ACTIVITY_LEVELS) if count >= least)


# --- mastery per pitfall ----------------------------------------------------------------------

FIXED_AFTER = 3  # a pitfall is fixed once the last 3 answers offering it avoided it

Mastery = Literal["falling", "fixed", "avoided", "unseen"]


def pitfall_mastery(fell: Sequence[bool], n: int = FIXED_AFTER) -> Mastery:
    """The state of one pitfall from the learner's answers on templates offering it, oldest
    first (``True``: the answer chose it):

    - ``unseen``: no answer offered it;
    - ``falling``: chosen in one of the last ``n`` answers offering it (or fewer than ``n``
      answers offering it since the learner last chose it);
    - ``fixed``: chosen once, and the last ``n`` answers offering it all avoided it;
    - ``avoided``: offered but never chosen.
    """
    if not fell:
        return "unseen"
    if not any(fell):
        return "avoided"
    if len(fell) >= n and not any(fell[-n:]):
        return "fixed"
    return "falling"


@dataclass(frozen=True, slots=True)
class ShownAnswer:
    """An answer as mastery sees it: the pitfalls it offered and the one it chose (None: right,
    or a wrong value no pitfall gives)."""

    offered: frozenset[str]
    chosen: str | None


def offered_by(
    shown_pitfalls: Iterable[str | None], template_pitfalls: Iterable[str]
) -> frozenset[str]:
    """The pitfalls an answer offered: those among the choices shown (a question shows a few of
    its template's pitfalls); a typed answer, asked with no choices, offered every pitfall of its
    template (any of their values is recognised)."""
    shown = list(shown_pitfalls)
    if not shown:
        return frozenset(template_pitfalls)
    return frozenset(p for p in shown if p is not None)


def falls_when_offered(answers: Iterable[ShownAnswer], pitfall_id: str) -> list[bool]:
    """For each answer that offered ``pitfall_id``, oldest first, whether it chose it (what
    :func:`pitfall_mastery` reads)."""
    return [a.chosen == pitfall_id for a in answers if pitfall_id in a.offered]
