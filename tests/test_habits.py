"""The daily habit's rules (app.domain.habits), with values worked out by hand: streaks in the
learner's days, minutes of reviews, the next action, FSRS retrievability from its published
formula, the forecast's and the calendar's buckets, and mastery per pitfall."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from app.domain import habits
from app.domain.habits import (
    ShownAnswer,
    Streak,
    activity,
    activity_level,
    answer_days,
    falls_when_offered,
    forecast,
    median_answer_seconds,
    memory,
    minutes_for,
    next_action,
    offered_by,
    pitfall_mastery,
    retrievability,
    streak,
)
from app.domain.scheduling import FsrsState

# --- streaks ----------------------------------------------------------------------------------

# 15:30 UTC is 23:30 in Shanghai (UTC+8) and 07:30 in Los Angeles (UTC-8 in December);
# 16:30 UTC is 00:30 the next day in Shanghai, 08:30 the same day in Los Angeles.
LATE = datetime(2026, 12, 1, 15, 30, tzinfo=UTC)
AFTER_MIDNIGHT_IN_SHANGHAI = datetime(2026, 12, 1, 16, 30, tzinfo=UTC)


def test_a_streak_across_midnight_counts_two_days_in_shanghai_one_in_los_angeles() -> None:
    moments = [LATE, AFTER_MIDNIGHT_IN_SHANGHAI]
    shanghai = answer_days(moments, "Asia/Shanghai")
    assert shanghai == {date(2026, 12, 1), date(2026, 12, 2)}
    assert streak(shanghai, date(2026, 12, 2)) == Streak(days=2, answered_today=True)
    los_angeles = answer_days(moments, "America/Los_Angeles")
    assert los_angeles == {date(2026, 12, 1)}
    # Los Angeles' Dec 2 has no answer yet: yesterday's one-day streak is still alive
    assert streak(los_angeles, date(2026, 12, 2)) == Streak(days=1, answered_today=False)


def test_today_without_an_answer_yet_keeps_yesterday_s_streak_alive() -> None:
    days = {date(2026, 11, 29), date(2026, 11, 30), date(2026, 12, 1)}
    morning = streak(days, date(2026, 12, 2))
    assert morning == Streak(days=3, answered_today=False) and morning.alive
    assert streak(days | {date(2026, 12, 2)}, date(2026, 12, 2)) == Streak(4, True)


def test_a_day_without_an_answer_breaks_the_streak() -> None:
    days = {date(2026, 12, 1), date(2026, 12, 2), date(2026, 12, 4)}  # nothing on Dec 3
    assert streak(days, date(2026, 12, 4)) == Streak(days=1, answered_today=True)
    assert streak(days, date(2026, 12, 5)) == Streak(days=1, answered_today=False)
    # Dec 5 ended without an answer: on Dec 6 there is no streak
    assert streak(days, date(2026, 12, 6)) == Streak(days=0, answered_today=False)
    assert not streak(set(), date(2026, 12, 6)).alive


# --- minutes and the next action --------------------------------------------------------------


def test_minutes_come_from_the_learner_s_median_time_else_the_stated_default() -> None:
    # 10, 20, 30, 40 s and a tab left open for 1000 s (counted as 600): the median is 30 s
    assert median_answer_seconds([10_000, 20_000, 30_000, 40_000, 1_000_000]) == 30
    assert median_answer_seconds([10_000, 20_000, None, 30_000, 40_000]) is None  # four timed
    assert minutes_for(5, 40) == 4  # 200 s, rounded up to whole minutes
    assert minutes_for(7, None) == 7  # the default: 60 s a question
    assert habits.DEFAULT_SECONDS_PER_QUESTION == 60
    assert minutes_for(1, 5) == 1 and minutes_for(0, 30) == 0


def test_reviews_come_first_then_the_unfinished_session_then_a_new_one() -> None:
    assert next_action(due_now=3, resume_session_id="s1") == "review"
    assert next_action(due_now=0, resume_session_id="s1") == "resume"
    assert next_action(due_now=0, resume_session_id=None) == "start"


# --- FSRS retrievability ----------------------------------------------------------------------

# FSRS-6's published default w20 = 0.1542: DECAY = -0.1542, FACTOR = 0.9^(1/DECAY) - 1
DECAY = -0.1542
FACTOR = 0.9 ** (1 / DECAY) - 1  # = 0.98035


def test_retrievability_is_fsrs_s_forgetting_curve() -> None:
    assert FACTOR == pytest.approx(0.98035, abs=1e-5)
    # R(t, S) = (1 + FACTOR·t/S)^DECAY: 10 days after a first Good (S = w2 = 2.3065 days)
    # (1 + 0.98035·10/2.3065)^-0.1542 = 5.2504^-0.1542 = 0.77437
    assert retrievability(2.3065, 10) == pytest.approx(0.77437, abs=1e-5)
    assert retrievability(8.2956, 8.2956) == pytest.approx(0.9)  # t = S: 90 % by definition
    assert retrievability(2.3065, 0) == 1.0
    # fractional days count: half a day after, not 100 %
    assert retrievability(0.5, 0.5) == pytest.approx(0.9)


def _state(state: int, stability: float | None, last: datetime | None) -> FsrsState:
    return FsrsState(
        card_id=1,
        state=state,
        step=None,
        stability=stability,
        difficulty=5.0,
        due=T.isoformat(),
        last_review=last.isoformat() if last else None,
    )


T = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
REVIEW, LEARNING, RELEARNING = 2, 1, 3  # fsrs.State


def test_an_exam_point_s_memory_is_the_mean_of_its_graduated_questions() -> None:
    states = [
        _state(REVIEW, 2.3065, T - timedelta(days=10)),  # 0.77437
        _state(REVIEW, 8.2956, T - timedelta(days=8.2956)),  # 0.9
        _state(LEARNING, 0.212, T - timedelta(minutes=2)),  # last answer wrong: left out
        _state(RELEARNING, 1.0, T - timedelta(hours=1)),
    ]
    found = memory(states, T)
    assert found.retrievability == pytest.approx((0.77437 + 0.9) / 2, abs=1e-5)  # 0.83718
    assert found.reviewed == 2 and found.learning == 2


def test_no_review_yet_is_no_figure_not_100_percent() -> None:
    # five wrong answers just now: R would read 0.998 for each, but nothing is known yet
    wrong = [_state(LEARNING, 0.212, T - timedelta(minutes=2)) for _ in range(5)]
    assert memory(wrong, T) == habits.Memory(retrievability=None, reviewed=0, learning=5)
    assert memory([], T).retrievability is None


# --- the forecast and the calendar ------------------------------------------------------------


def test_the_forecast_buckets_due_reviews_into_the_learner_s_next_14_days() -> None:
    now = datetime(2026, 12, 3, 15, 0, tzinfo=UTC)  # 23:00 on Dec 3 in Shanghai
    dues = [
        datetime(2026, 12, 1, 9, 0, tzinfo=UTC),  # overdue: today
        datetime(2026, 12, 3, 15, 30, tzinfo=UTC),  # 23:30 Dec 3 in Shanghai: today
        datetime(2026, 12, 3, 16, 30, tzinfo=UTC),  # 00:30 Dec 4 in Shanghai: tomorrow
        datetime(2026, 12, 16, 15, 0, tzinfo=UTC),  # 23:00 Dec 16: the 14th day
        datetime(2026, 12, 16, 16, 0, tzinfo=UTC),  # 00:00 Dec 17: after the 14 days
    ]
    days = forecast(dues, now=now, zone_name="Asia/Shanghai")
    assert len(days) == 14
    assert days[0] == (date(2026, 12, 3), 2)
    assert days[1] == (date(2026, 12, 4), 1)
    assert days[13] == (date(2026, 12, 16), 1)
    assert sum(n for _, n in days) == 4
    # in UTC the 16:30 review is still on Dec 3
    utc = forecast(dues, now=now, zone_name="UTC")
    assert utc[0] == (date(2026, 12, 3), 3) and utc[1] == (date(2026, 12, 4), 0)


def test_the_activity_calendar_is_26_whole_weeks_from_a_monday_to_today() -> None:
    today = date(2026, 12, 3)  # a Thursday; that week's Monday is Nov 30
    answers = [
        datetime(2026, 12, 3, 1, 0, tzinfo=UTC),
        datetime(2026, 12, 2, 16, 30, tzinfo=UTC),  # 00:30 Dec 3 in Shanghai
        datetime(2026, 6, 7, 12, 0, tzinfo=UTC),  # the Sunday before the first Monday
    ]
    days = activity(answers, today=today, zone_name="Asia/Shanghai")
    assert days[0][0] == date(2026, 6, 8) and days[0][0].weekday() == 0  # Nov 30 - 25 weeks
    assert days[-1] == (date(2026, 12, 3), 2)
    assert len(days) == 25 * 7 + 4
    assert sum(n for _, n in days) == 2


def test_activity_levels() -> None:
    assert [activity_level(n) for n in (0, 1, 2, 3, 5, 6, 9, 10, 40)] == [0, 1, 1, 2, 2, 3, 3, 4, 4]


# --- mastery per pitfall ----------------------------------------------------------------------


def test_a_pitfall_is_fixed_after_three_answers_offering_it_avoided_it() -> None:
    assert pitfall_mastery([]) == "unseen"
    assert pitfall_mastery([False, False]) == "avoided"
    assert pitfall_mastery([True]) == "falling"
    assert pitfall_mastery([True, False, False]) == "falling"  # two avoidances only
    assert pitfall_mastery([True, False, False, False]) == "fixed"
    assert pitfall_mastery([True, False, False, False, True]) == "falling"
    assert pitfall_mastery([False, True, False, False, False]) == "fixed"


def test_an_answer_offered_the_pitfalls_it_showed() -> None:
    template = ["a", "b", "c", "d", "e"]
    # three of the template's five pitfalls among the choices, and the key (no pitfall)
    assert offered_by(["b", None, "d", "e"], template) == {"b", "d", "e"}
    assert offered_by([], template) == set(template)  # typed: any value could be typed
    answers = [
        ShownAnswer(frozenset({"a", "b", "c"}), "a"),
        ShownAnswer(frozenset({"b", "c", "d"}), None),  # "a" not shown: not an avoidance
        ShownAnswer(frozenset({"a", "c", "d"}), None),
    ]
    assert falls_when_offered(answers, "a") == [True, False]
    assert falls_when_offered(answers, "d") == [False, False]
    assert falls_when_offered(answers, "e") == []
