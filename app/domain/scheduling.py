"""Spaced review with FSRS: when a (learner, template) item is due again, given how it went.

A wrong first answer rates ``Again`` (the item comes back within FSRS's learning steps, minutes
away, so the learner meets it again in the same sitting with new numbers); a right one ``Good``,
or ``Hard`` when it took long and ``Easy`` when it was quick (only when the time is known); a
right typed answer one step stronger (recall, not recognition: :func:`rating_for`). Fuzzing is off, so schedules are
reproducible for a given clock.

With an exam date, an item whose next review would fall after the exam is pulled before it: FSRS
retention decays with the time since the last review, so the best single review for the exam is
as late as possible while still before it; items are spread over the last part of the remaining
window (by a stable hash of the item) so they do not all fall on the eve. The exam day is the
learner's: it starts at midnight in their time zone (UTC when none is known).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import TypedDict

from fsrs import Card as FsrsCard
from fsrs import Rating, Scheduler

from app.domain.calendar import day_start

# One short step: a wrong answer comes back two minutes later, in the same sitting; a right one
# graduates at once (FSRS's first interval for Good is its initial stability, about 2 days).
LEARNING_STEPS = (timedelta(minutes=2),)
RELEARNING_STEPS = (timedelta(minutes=2),)
SLOW_ANSWER_S = 90  # a right answer slower than this rates Hard
FAST_ANSWER_S = 8  # and faster than this, Easy (a statement can be read and known at once)
# The last review before an exam is placed in the final part of the window left, not earlier.
EXAM_WINDOW_SHARE = 0.5
EXAM_EVE = timedelta(hours=12)  # the latest a review is put before the exam day starts

_SCHEDULER = Scheduler(
    learning_steps=LEARNING_STEPS,
    relearning_steps=RELEARNING_STEPS,
    enable_fuzzing=False,
)


class FsrsState(TypedDict):
    """An item's FSRS card as stored: ``fsrs.Card.to_dict()``, a JSON object (the fields of
    fsrs's own ``CardDict``, which the type checker holds this to)."""

    card_id: int
    state: int
    step: int | None
    stability: float | None
    difficulty: float | None
    due: str
    last_review: str | None


@dataclass(frozen=True)
class Review:
    """The outcome of one rating: the new state and when the item is due next."""

    state: FsrsState
    rating: int
    due: datetime


def rating_for(correct: bool, duration_ms: int | None, typed: bool = False) -> Rating:
    """Again for a wrong answer; for a right one Good, Hard when slow, Easy when quick.

    A right *typed* answer (the number recalled and worked out, no choices to recognise or to
    eliminate) is stronger evidence than a right choice: one step up (Hard -> Good, Good ->
    Easy, Easy stays Easy). A wrong typed answer is Again, like a wrong choice."""
    if not correct:
        return Rating.Again
    if duration_ms is None:
        rating = Rating.Good
    elif duration_ms > SLOW_ANSWER_S * 1000:
        rating = Rating.Hard
    elif duration_ms < FAST_ANSWER_S * 1000:
        rating = Rating.Easy
    else:
        rating = Rating.Good
    if typed:
        return Rating(min(int(rating) + 1, int(Rating.Easy)))
    return rating


def new_state(item_id: int, now: datetime) -> FsrsState:
    """A fresh FSRS card (``item_id`` names it: FSRS's default id would read the clock)."""
    return FsrsCard(card_id=item_id, due=now).to_dict()


def review(
    state: FsrsState,
    *,
    correct: bool,
    duration_ms: int | None,
    now: datetime,
    exam_date: date | None = None,
    item_key: str = "",
    typed: bool = False,
    zone_name: str | None = None,
) -> Review:
    """Rate an item and schedule it; ``exam_date`` (a day in the learner's zone ``zone_name``)
    pulls a later due date before the exam; ``typed``: the answer was typed, not chosen (see
    :func:`rating_for`)."""
    rating = rating_for(correct, duration_ms, typed)
    card, _log = _SCHEDULER.review_card(FsrsCard.from_dict(state), rating, review_datetime=now)
    due = card.due
    if exam_date is not None:
        due = before_exam(due, now=now, exam_date=exam_date, item_key=item_key, zone_name=zone_name)
        card.due = due
    return Review(state=card.to_dict(), rating=int(rating), due=due)


def before_exam(
    due: datetime, *, now: datetime, exam_date: date, item_key: str, zone_name: str | None = None
) -> datetime:
    """``due``, or a moment before the exam when ``due`` would miss it; the exam day starts at
    midnight on the learner's clock (``zone_name``)."""
    exam_start = day_start(exam_date, zone_name)
    latest = exam_start - EXAM_EVE
    if due <= latest or latest <= now:
        return due
    window = latest - now
    spread = (1 - EXAM_WINDOW_SHARE) + EXAM_WINDOW_SHARE * _unit_hash(item_key)
    return now + window * spread


def retrievability(state: FsrsState, at: datetime) -> float:
    """FSRS's estimate that the learner still knows the item at ``at`` (0..1)."""
    return float(_SCHEDULER.get_card_retrievability(FsrsCard.from_dict(state), at))


def decay_and_factor() -> tuple[float, float]:
    """FSRS-6's forgetting-curve constants for the scheduler's parameters: DECAY = -w20 and
    FACTOR = 0.9^(1/DECAY) - 1, so that R(S, S) = 0.9."""
    decay = -float(_SCHEDULER.parameters[20])
    return decay, 0.9 ** (1 / decay) - 1


def bring_forward(state: FsrsState, now: datetime) -> FsrsState:
    """The same state, due now (a pitfall fallen for again makes its templates urgent)."""
    card = FsrsCard.from_dict(state)
    card.due = min(card.due, now)
    return card.to_dict()


def _unit_hash(key: str) -> float:
    digest = hashlib.sha256(key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64
