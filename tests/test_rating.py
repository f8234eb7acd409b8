"""The rating rules as a pure function (app.domain.rating): golden values from the rules as the
product states them (a wrong first answer rates Again and comes back two minutes later; only
first answers rate; a pitfall fallen for twice makes its other templates due now)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from app.domain import rating
from app.domain.scheduling import new_state

AT = datetime(2026, 5, 6, 7, 8, 9, tzinfo=UTC)
AGAIN, GOOD = 1, 3  # FSRS's ratings


def answer(template="t1", *, correct=False, pitfall="p", first=True, carriers=None):
    return rating.Answer(
        "learner", "card", "point-1", template, correct, None if correct else pitfall, None, AT,
        first, carriers or {},
    )  # fmt: skip


def known(items=None, falls=None):
    return rating.Known(items=items or {}, exam_dates={}, falls=falls or {})


def test_only_a_first_answer_to_a_question_counts():
    assert rating.first_answers(["q1", "q2", "q1", "q3"], ["q3"]) == [True, True, False, False]
    writes = rating.rate([answer(first=False)], known())
    assert (writes.created, writes.changed, writes.logs) == ({}, {}, [])
    assert rating.needs([answer(first=False)]) == rating.Needs(set(), set(), set())


def test_a_wrong_first_answer_creates_its_item_rated_again_two_minutes_away():
    writes = rating.rate([answer(correct=False)], known())
    item = writes.created[("learner", "card", "t1")]
    assert (item.point, item.reviews, item.lapses, item.last_review_at) == ("point-1", 1, 1, AT)
    assert item.due_at == AT + timedelta(minutes=2)
    (log,) = writes.logs
    assert (log.answer, log.item, log.rating) == (0, ("learner", "card", "t1"), AGAIN)
    assert (log.reviewed_at, log.due_before, log.due_after) == (AT, None, item.due_at)
    assert writes.changed == {}


def test_a_stored_item_is_changed_in_place_and_logs_its_previous_due_date():
    stored = rating.Item("point-0", new_state(1, AT), AT - timedelta(days=1), 1, 0, AT)
    writes = rating.rate([answer(correct=True)], known({("learner", "card", "t1"): (41, stored)}))
    assert writes.created == {} and list(writes.changed) == [41]
    changed = writes.changed[41]
    assert (changed.point, changed.reviews, changed.lapses) == ("point-1", 2, 0)
    assert changed.due_at > AT + timedelta(days=1)  # a right answer graduates: days away
    (log,) = writes.logs
    assert (log.rating, log.due_before) == (GOOD, AT - timedelta(days=1))
    assert writes.ids == {("learner", "card", "t1"): 41}


def test_a_pitfall_fallen_for_twice_brings_the_templates_carrying_it_forward():
    carriers = {"t1": "point-1", "t2": "point-2", "t3": "point-3"}
    later = rating.Item("point-2", new_state(2, AT), AT + timedelta(days=9), 3, 0, AT)
    items = {("learner", "card", "t2"): (7, later)}
    fall = answer(carriers=carriers)
    assert rating.needs([fall]).items == {("learner", "card", t) for t in carriers}
    assert rating.needs([fall]).falls == {("learner", "card", "p")}
    # The first fall brings nothing forward.
    once = rating.rate([fall], known(items))
    assert set(once.created) == {("learner", "card", "t1")} and once.changed == {}
    # The second (one stored before): t2 is due now, t3 is created due now; t1 is rated.
    twice = rating.rate([fall], known(items, {("learner", "card", "p"): 1}))
    assert twice.changed[7].due_at == AT and twice.changed[7].reviews == 3
    created = twice.created[("learner", "card", "t3")]
    assert (created.point, created.due_at, created.reviews) == ("point-3", AT, 0)
    assert [log.item for log in twice.logs] == [("learner", "card", "t1")]
    # Two falls in one call count each other; a right answer or a retry is no fall.
    together = rating.rate([fall, answer("t2", carriers=carriers)], known())
    assert together.created[("learner", "card", "t3")].due_at == AT
    for no_fall in (answer(correct=True, carriers=carriers), answer(first=False)):
        assert no_fall.fall is None and no_fall.forward() == []


def test_a_new_items_fsrs_card_is_named_by_its_key_alone():
    key = ("learner", "card", "t1")
    assert rating.fsrs_card_id(key) == rating.fsrs_card_id(tuple(key))
    assert rating.fsrs_card_id(key) != rating.fsrs_card_id(("learner", "card", "t2"))
    assert 0 <= rating.fsrs_card_id(key) < 2**48


def offline(*, correct, answered_at, arrived):
    return rating.Answer(
        "learner", "card", "point-1", "t1", correct, None if correct else "p", None, arrived,
        True, {}, answered_at=answered_at,
    )  # fmt: skip


def test_an_answer_synced_later_is_rated_when_it_was_given():
    """Given at 22:00 offline and synced at 09:00: due as if rated at 22:00 (a wrong one two
    minutes after it was given, a right one its interval after), not 11 hours later."""
    given, arrived = AT, AT + timedelta(hours=11)
    for correct in (False, True):
        synced = rating.rate(
            [offline(correct=correct, answered_at=given, arrived=arrived)], known()
        )
        online = rating.rate([offline(correct=correct, answered_at=None, arrived=given)], known())
        item = synced.created[("learner", "card", "t1")]
        assert item.due_at == online.created[("learner", "card", "t1")].due_at
        assert item.last_review_at == given and synced.logs[0].reviewed_at == given
    shanghai = given.astimezone(timezone(timedelta(hours=8)))  # as a client may send it
    wrong = rating.rate([offline(correct=False, answered_at=shanghai, arrived=arrived)], known())
    assert wrong.created[("learner", "card", "t1")].due_at == given + timedelta(minutes=2)


def test_an_answer_given_before_the_items_last_review_is_rated_after_it():
    """Another device's answer, given before the review already rated but synced after it, is
    rated at that review's moment: the item's reviews stay in order."""
    first = rating.rate([offline(correct=True, answered_at=None, arrived=AT)], known())
    item = first.created[("learner", "card", "t1")]
    late = offline(correct=False, answered_at=AT - timedelta(hours=3), arrived=AT + timedelta(1))
    writes = rating.rate([late], known(items={("learner", "card", "t1"): (7, item)}))
    changed = writes.changed[7]
    assert changed.last_review_at == AT and writes.logs[0].reviewed_at == AT
    assert changed.due_at == AT + timedelta(minutes=2) and changed.reviews == 2
