"""Planning a session that spans the deck (app.domain.practice): the questions shared between
the cards, each card's spread evenly over the session, and each card's questions chosen as a
one-card session chooses them. The expected orders are worked out here by hand."""

from __future__ import annotations

import random

import pytest

from app.domain.practice import (
    CardPart,
    interleave,
    plan_deck_session,
    plan_session,
    same_points,
    share,
    spans_the_deck,
)
from app.domain.selection import SeenQuestion, question_key

MEGATRON, ZERO = "megatron-3d-pipeline", "zero-memory-offload"


@pytest.mark.parametrize(
    "counts,order",
    [
        ([2, 2], [0, 1, 0, 1]),
        ([3, 1], [0, 0, 1, 0]),  # 1/6, 1/2 | 1/2, 5/6: the tie to the earlier card
        ([2, 2, 1], [0, 1, 2, 0, 1]),
        ([4, 2], [0, 1, 0, 0, 1, 0]),  # 1/8, 1/4, 3/8, 5/8, 3/4, 7/8
        ([3, 3, 3], [0, 1, 2] * 3),
        ([0, 3], [1, 1, 1]),
        ([1], [0]),
        ([], []),
    ],
)
def test_each_cards_questions_are_spread_over_the_session(counts, order):
    assert interleave(counts) == order


@pytest.mark.parametrize(
    "size,weights,counts",
    [
        (6, [1, 1, 1], [2, 2, 2]),
        (5, [1, 1, 1], [2, 2, 1]),  # the one left over to the first
        (2, [1, 1, 1], [1, 1, 0]),
        (10, [3, 1], [8, 2]),  # 7.5 and 2.5: the half left over to the first
        (10, [1, 3], [3, 7]),  # 2.5 and 7.5: the tie goes to the first again
        (4, [2, 1, 1], [2, 1, 1]),
        (7, [5, 1], [6, 1]),  # 5.83 and 1.17
        (3, [], []),
        (3, [0, 0], [0, 0]),
    ],
)
def test_the_questions_are_shared_in_proportion(size, weights, counts):
    assert share(size, weights) == counts
    assert sum(counts) == (size if sum(weights) else 0)


def test_a_deck_session_is_offered_for_more_than_one_card():
    assert [spans_the_deck(n) for n in (0, 1, 2, 3)] == [False, False, True, True]


def seeds(position: int, draw: int) -> int:
    return position * 1000 + draw


def test_a_deck_plan_takes_each_card_in_turn_from_its_own_scope(cards):
    megatron, zero = cards[MEGATRON], cards[ZERO]
    parts = [
        CardPart(megatron, megatron.templates(), 3),
        CardPart(zero, zero.points[0].templates, 2),
    ]
    plan = plan_deck_session(parts, seen=[], seeds=seeds, rng=random.Random(7))
    assert [p.card_id for p in plan] == [MEGATRON, ZERO, MEGATRON, ZERO, MEGATRON]
    for planned in plan:
        card = cards[planned.card_id]
        template = card.template(planned.template_id)
        assert template is not None and template.point == planned.point
        assert planned.to_json()["card_id"] == planned.card_id
    zero_points = {p.point for p in plan if p.card_id == ZERO}
    assert zero_points == {zero.points[0].slug}
    megatron_ids = [p.template_id for p in plan if p.card_id == MEGATRON]
    assert len(set(megatron_ids)) == 3  # a round over the card's templates
    # Megatron's three questions go round its exam points, as a one-card session's do.
    assert len({p.point for p in plan if p.card_id == MEGATRON}) == 3


def test_one_card_on_its_own_is_planned_as_a_one_card_session(cards):
    zero = cards[ZERO]
    alone = plan_deck_session(
        [CardPart(zero, zero.templates(), 8)], seen=[], seeds=seeds, rng=random.Random(3)
    )
    session = plan_session(zero, zero.templates(), 8, seen=[], seeds=seeds, rng=random.Random(3))
    assert alone == session


def test_a_card_with_nothing_to_ask_takes_no_turn(cards):
    megatron, zero = cards[MEGATRON], cards[ZERO]
    parts = [CardPart(megatron, megatron.templates(), 0), CardPart(zero, zero.templates(), 2)]
    plan = plan_deck_session(parts, seen=[], seeds=seeds, rng=random.Random(1))
    assert [p.card_id for p in plan] == [ZERO, ZERO]


def test_the_cards_share_one_history_of_keys(cards):
    """Every question, whichever its card, joins the history the next choice reads: a key seen
    ten answers ago is blocked for a card asked at once, and free again once another card's
    question has pushed it out of the last ten."""
    megatron, zero = cards[MEGATRON], cards[ZERO]
    statement = next(t for t in zero.templates() if t.kind == "statement")
    seen = [SeenQuestion(ZERO, statement.id, question_key(statement, {}), {})] + [
        SeenQuestion(MEGATRON, f"other-{n}", f"other-key-{n}", {}) for n in range(9)
    ]
    zero_part = CardPart(zero, [statement], 1, wider=same_points(zero, [statement]))
    alone = plan_deck_session([zero_part], seen=seen, seeds=seeds, rng=random.Random(5))
    assert alone[0].template_id != statement.id  # its key is among the last ten answers
    after = plan_deck_session(
        [CardPart(megatron, megatron.templates(), 1), zero_part],
        seen=seen,
        seeds=seeds,
        rng=random.Random(5),
    )
    assert [p.card_id for p in after] == [MEGATRON, ZERO]
    assert after[1].template_id == statement.id  # Megatron's question pushed it out
