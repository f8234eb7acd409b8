"""Choosing the next question (app.domain.selection): rounds over the templates in scope, no key
the learner saw in their last 10 answers, new numbers for a template seen recently."""

from __future__ import annotations

import itertools
import random
from fractions import Fraction

import pytest

from app.domain.selection import (
    RECENT_ANSWERS,
    SeenQuestion,
    choose_questions,
    draw_values,
    key_params,
    question_key,
)

PSI_VALUES = {Fraction(int(v)) for v in (1.3e9, 7e9, 7.5e9, 13e9, 70e9, 175e9)}


def seeds_from(stream: int):
    """Seeds as a session derives them: fixed by (position, draw)."""
    return lambda position, draw: (stream * 1_000_003 + position * 997 + draw * 31) % (2**31)


def choose(card, scope, count, seen=(), stream=0, wider=()):
    return choose_questions(
        card.id,
        scope,
        count,
        seen=list(seen),
        seeds=seeds_from(stream),
        rng=random.Random(stream),
        wider=wider,
    )


def seen_of(card, template_id, **values):
    template = card.template(template_id)
    exact = {name: Fraction(value) for name, value in values.items()}
    return SeenQuestion(card.id, template_id, question_key(template, exact), exact)


# --- keys -------------------------------------------------------------------------------------


def test_a_numeric_key_is_the_exact_answer_in_base_units_shared_by_templates_and_units(card):
    psi = {"psi": Fraction(175 * 10**9)}
    total = question_key(card.template("p1-total-16psi"), psi)
    assert total == "B:2800000000000"  # 16 bytes x 175e9
    # DDP's per-rank memory is 16Ψ too, and 16Ψ in GiB is the same number of bytes.
    assert question_key(card.template("p1-ddp-per-rank"), {**psi, "n_d": Fraction(8)}) == total
    assert question_key(card.template("p1-gb-vs-gib"), psi) == total
    assert question_key(card.template("p1-pure-bf16-adamw"), psi) == "B:1400000000000"


def test_a_statement_key_is_its_key_sentence(card):
    template = card.template("p1-name-the-terms")
    assert question_key(template, {}) == "says:" + template.answer_statement.en


def test_key_params_are_the_answers_parameters_that_can_change(card):
    assert key_params(card.template("p1-ddp-per-rank")) == ["psi"]  # 16Ψ whatever N_d is
    assert key_params(card.template("p1-ddp-cluster-total")) == ["n_d", "psi"]
    assert key_params(card.template("p1-name-the-terms")) == []


def test_draw_values_are_the_values_the_variant_shows(card):
    from app.domain.generation import generate

    template = card.template("p1-ddp-cluster-total")
    for seed in (0, 7, 123456):
        shown = generate(card, template, seed).params
        drawn = draw_values(card.id, template, seed)
        assert {k: Fraction(v) for k, v in shown.items()} == drawn


# --- rounds -----------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", range(5))
def test_no_template_comes_twice_before_every_template_of_the_card_has_come(card, stream):
    templates = card.templates()
    picks = choose(card, templates, 2 * len(templates), stream=stream)
    first, second = picks[: len(templates)], picks[len(templates) :]
    assert sorted(p.template.id for p in first) == sorted(t.id for t in templates)
    assert sorted(p.template.id for p in second) == sorted(t.id for t in templates)


@pytest.mark.parametrize("stream", range(5))
def test_the_exam_points_take_turns(card, stream):
    per_round = len(card.points)
    fewest = min(len(p.templates) for p in card.points)
    picks = choose(card, card.templates(), per_round * fewest, stream=stream)
    for start in range(0, len(picks), per_round):
        points = {p.template.point for p in picks[start : start + per_round]}
        assert points == {p.slug for p in card.points}


@pytest.mark.parametrize("stream", range(5))
def test_a_point_session_shows_every_template_once_before_any_again(card, stream):
    point = card.point_by_slug("optimizer-memory")
    picks = choose(card, point.templates, 10, stream=stream)
    assert len({p.template.id for p in picks[:9]}) == 9


# --- fresh keys -------------------------------------------------------------------------------


@pytest.mark.parametrize("stream", range(5))
def test_no_key_comes_back_within_ten_answers(card, stream):
    for point in card.points:
        picks = choose(card, point.templates, 40, stream=stream)
        keys = [p.key for p in picks]
        for at, key in enumerate(keys):
            assert key not in keys[max(0, at - RECENT_ANSWERS) : at], (point.slug, at)


def test_keys_seen_before_the_session_are_not_served(card):
    point = card.point_by_slug("optimizer-memory")
    statements = [t for t in point.templates if t.kind == "statement"]
    seen = [seen_of(card, t.id) for t in statements]
    seen.append(seen_of(card, "p1-total-16psi", psi=175 * 10**9))
    for stream in range(10):
        picks = choose(card, point.templates, RECENT_ANSWERS, seen=seen, stream=stream)
        window = [s.key for s in seen] + [p.key for p in picks]
        for at, pick in enumerate(picks, start=len(seen)):
            assert pick.key not in window[at - RECENT_ANSWERS : at]
        assert {t.id for t in statements} & {p.template.id for p in picks}  # once they left


# --- practise again ---------------------------------------------------------------------------


def test_practising_a_numbers_template_again_changes_its_model_every_time(card):
    template = card.template("p1-total-16psi")
    seen = [seen_of(card, template.id, psi=175 * 10**9)]
    for stream in range(10):
        picks = choose(card, [template], 5, seen=seen, stream=stream)
        assert {p.template.id for p in picks} == {template.id}
        # Six model sizes: the five others, each once.
        assert {p.values["psi"] for p in picks} == PSI_VALUES - {Fraction(175 * 10**9)}


def test_practising_again_changes_only_what_the_key_depends_on_but_all_of_it(card):
    template = card.template("p1-ddp-cluster-total")
    seen = [seen_of(card, template.id, psi=175 * 10**9, n_d=8)]
    for stream in range(20):
        (pick,) = choose(card, [template], 1, seen=seen, stream=stream)
        assert pick.values["psi"] != 175 * 10**9 and pick.values["n_d"] != 8


def test_another_cards_template_of_the_same_id_is_another_template(card):
    """Templates are named within their card: an answer to another card's "p1-total-16psi"
    (in a deck session's shared history) neither asks for new numbers here nor moves this card's
    template back in its round; only its key, a number the learner saw, is blocked."""
    template = card.template("p1-total-16psi")
    mine = seen_of(card, template.id, psi=175 * 10**9)
    theirs = SeenQuestion("another-card", template.id, "B:1", mine.values)
    for stream in range(10):
        (fresh,) = choose(card, [template], 1, stream=stream)
        (pick,) = choose(card, [template], 1, seen=[theirs], stream=stream)
        assert (pick.seed, pick.values) == (fresh.seed, fresh.values)
        (again,) = choose(card, [template], 1, seen=[mine], stream=stream)
        assert again.values["psi"] != 175 * 10**9
    other = next(t for t in card.point_by_slug(template.point).templates if t.id != template.id)
    # This card's own answer to the template puts it after the other one; another card's not.
    orders = {
        tuple(p.template.id for p in choose(card, [template, other], 2, seen=[theirs], stream=s))
        for s in range(20)
    }
    assert len(orders) == 2  # as with no history: either comes first, by the tie-break
    assert {
        choose(card, [template, other], 1, seen=[mine], stream=s)[0].template.id for s in range(20)
    } == {other.id}


def test_a_statement_practised_again_gives_way_to_another_template_of_its_point(card):
    template = card.template("p1-name-the-terms")
    point = card.point_by_slug(template.point)
    seen = [seen_of(card, template.id)]
    for stream in range(10):
        picks = choose(card, [template], 3, seen=seen, stream=stream, wider=point.templates)
        assert all(p.template.id != template.id for p in picks)
        assert all(p.template.point == template.point for p in picks)
        assert len({p.template.id for p in picks}) == 3


def test_a_stale_template_with_nothing_to_give_way_to_is_still_served(card):
    template = card.template("p1-name-the-terms")
    picks = choose(card, [template], 2, seen=[seen_of(card, template.id)])
    assert [p.template.id for p in picks] == [template.id, template.id]


@pytest.mark.parametrize("stream", range(40))
def test_after_a_session_the_next_round_still_covers_the_point_whenever_keys_allow(card, stream):
    """The last session's statements are stale until they leave the last ten answers: the next
    round places them once they are fresh, with numbers questions in between, whenever that
    can cover every template (its statements at answers 0-5, 0-6 and 0-7 of the ten)."""
    point = card.point_by_slug("optimizer-memory")
    order = random.Random(stream).sample(list(point.templates), len(point.templates))
    numeric = next(t for t in order if t.kind == "numeric")
    before = [*order, numeric]  # ten answers, one template twice
    seen = []
    for at, template in enumerate(before):
        (pick,) = choose(card, [template], 1, seen=seen, stream=1000 + at)
        seen.append(pick.seen())
    at_statements = sorted(i for i, t in enumerate(before) if t.kind == "statement")
    room = all(i <= RECENT_ANSWERS - 5 + k for k, i in enumerate(at_statements))
    picks = choose(card, point.templates, len(point.templates), seen=seen, stream=stream)
    keys = [s.key for s in seen] + [p.key for p in picks]
    for at in range(len(seen), len(keys)):
        assert keys[at] not in keys[at - RECENT_ANSWERS : at]
    if room:
        assert len({p.template.id for p in picks}) == len(point.templates)


def can_bring_new_numbers(template, last):
    """Whether some combination the template allows changes every parameter its key depends on
    from ``last`` (its values last time): worked out from the card, not by the chooser. A template
    whose constraints tie its parameters together (Megatron's layouts within 80 GB a GPU) may
    have none."""
    names = key_params(template)
    if template.allowed is not None:
        combos = [dict(zip(template.params, combo, strict=True)) for combo in template.allowed]
    else:
        combos = [
            dict(zip(template.params, combo, strict=True))
            for combo in itertools.product(*(p.values for p in template.params.values()))
        ]
    return any(all(combo[n] != last[n] for n in names) for combo in combos)


@pytest.mark.parametrize("stream", range(5))
def test_of_the_templates_due_in_a_round_the_one_seen_longest_ago_comes_first(card, stream):
    """The second round comes in the first round's order, but for a template that cannot bring
    new numbers: it waits while the others can (the fresh keys win over the rounds), and may
    come once its last question has left the last ten answers."""
    scope = [t for t in card.point_by_slug("zero-stage-memory").templates if t.kind == "numeric"]
    picks = choose(card, scope, 2 * len(scope), stream=stream)
    first, second = picks[: len(scope)], picks[len(scope) :]
    able = [p.template.id for p in first if can_bring_new_numbers(p.template, p.values)]
    assert len(able) >= len(scope) - 1
    in_turn = [p.template.id for p in second if p.template.id in able]
    assert in_turn[: len(able)] == able
