"""app.domain.typed: reading a typed number and unit strictly, grading it at the template's
precision, diagnosing it by pitfall (golden values worked out by hand)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from app.domain.generation import generate
from app.domain.scheduling import rating_for
from app.domain.typed import (
    TypedError,
    accepted_units,
    grade_typed,
    parse_number,
    read_typed,
    typed_figures,
)
from app.domain.units import within_figures


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("105", Fraction(105)),
        ("  105 ", Fraction(105)),
        ("3.17", Fraction(317, 100)),
        ("+3.17", Fraction(317, 100)),
        ("-0.5", Fraction(-1, 2)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("1.5e3", Fraction(1500)),
        ("1.5E-3", Fraction(3, 2000)),
        ("2e+9", Fraction(2 * 10**9)),
        ("0.1", Fraction(1, 10)),  # exact: not the float 0.1000000000000000055...
    ],
)
def test_good_numbers_are_read_exactly(text, value):
    assert parse_number(text) == value


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "Type a number."),
        ("   ", "Type a number."),
        ("1,200", "Type the number without thousands separators: 1200, not 1,200."),
        ("12 345 678", "Type the number without thousands separators: 12345678, not 12 345 678."),
        ("3,17", "Use a decimal point, not a comma: 3.17, not 3,17."),
        (
            "abc",
            "'abc' is not a number: type digits, with a decimal point and an exponent "
            "(1.5e3) if you need them.",
        ),
        ("1e", None),
        ("e5", None),
        ("1.2.3", None),
        ("--1", None),
        ("0x10", None),
        ("1_000", "Type the number without thousands separators: 1000, not 1_000."),
        ("inf", None),
        ("nan", None),
        ("１２", None),  # full-width digits are not read
        ("2**10", None),  # nothing is evaluated
        ("1/2", None),
        ("1e31", "1e31 is out of range: exponents go up to 30."),
        ("1e-99999999", "1e-99999999 is out of range: exponents go up to 30."),
        ("1" * 41, "That number is too long: at most 40 characters."),
    ],
)
def test_bad_numbers_are_refused_on_the_value_field(text, message):
    with pytest.raises(TypedError) as caught:
        parse_number(text)
    assert caught.value.field == "value"
    if message is not None:
        assert caught.value.message.en == message
    assert caught.value.message.zh != caught.value.message.en  # translated


def test_within_figures_is_half_a_unit_of_the_last_figure_either_side():
    # 26.25 at 3 figures: 26.2 and 26.3 (both roundings of the half) and the bounds count.
    t = Fraction("26.25")
    assert within_figures(Fraction("26.2"), t, 3) and within_figures(Fraction("26.3"), t, 3)
    assert within_figures(Fraction("26.20"), t, 3) and within_figures(Fraction("26.30"), t, 3)
    assert not within_figures(Fraction("26.19"), t, 3)
    assert not within_figures(Fraction("26.31"), t, 3)
    # 2411.7 at 3 figures: a unit of the third figure is 10, so 2406.7 .. 2416.7.
    t = Fraction("2411.7")
    assert within_figures(Fraction(2410), t, 3) and within_figures(Fraction(2412), t, 3)
    assert not within_figures(Fraction(2400), t, 3)
    # 0.040625 at 3 figures: 0.0406 (a unit is 0.0001).
    assert within_figures(Fraction("0.0406"), Fraction("0.040625"), 3)
    assert not within_figures(Fraction("0.04"), Fraction("0.040625"), 3)
    # Whole numbers: that number only.
    assert within_figures(Fraction(14), Fraction(14), 0)
    assert not within_figures(Fraction(15), Fraction(14), 0)
    # A pitfall's 13.7 GPUs: 14 as shown, or 13.7 as computed.
    assert within_figures(Fraction(14), Fraction("13.7"), 0)
    assert within_figures(Fraction("13.7"), Fraction("13.7"), 0)
    assert not within_figures(Fraction(13), Fraction("13.7"), 0)


def zero2(card, seed=17):
    """The ZeRO-2 template's variant with Ψ = 1.3B, N_d = 32 (key 3.16875e9 bytes)."""
    template = next(t for t in card.templates() if t.id == "p2-zero2-per-rank")
    variant = generate(card, template, seed)
    assert variant.params == {"psi": "1300000000", "n_d": "32"}
    return variant


def test_units_of_the_questions_dimension_only(card):
    variant = zero2(card)
    assert accepted_units(variant) == (
        "B", "KB", "MB", "GB", "TB", "PB", "KiB", "MiB", "GiB", "TiB"
    )  # fmt: skip
    assert typed_figures(variant) == 3
    for unit in ("Gb", "gb", "GB/s", "s", "x", ""):
        with pytest.raises(TypedError) as caught:
            read_typed(variant, "3.17", unit)
        assert caught.value.field == "unit"
    typed = read_typed(variant, " 2.95 ", "GiB")
    assert (typed.text, typed.unit) == ("2.95", "GiB")
    assert typed.value == Fraction(295, 100) * 2**30
    assert typed.shown("en") == "2.95 GiB"


def test_grading_by_value_key_pitfalls_and_nothing(card):
    variant = zero2(card)
    # Key: 2Ψ + 14Ψ/N_d = 2.6e9 + 0.56875e9 = 3.16875e9 B = 2.9511 GiB.
    assert grade_typed(variant, read_typed(variant, "3.17", "GB")).correct
    assert grade_typed(variant, read_typed(variant, "2.95", "GiB")).correct
    assert grade_typed(variant, read_typed(variant, "0.00317", "TB")).correct
    assert not grade_typed(variant, read_typed(variant, "3.18", "GB")).correct
    # Forgot the optimizer states: 2Ψ + 2Ψ/N_d = 2.6e9 + 0.08125e9 = 2.68125e9 B.
    result = grade_typed(variant, read_typed(variant, "2.68", "GB"))
    assert not result.correct and result.pitfall_id == "forgot-optimizer-states"
    assert result.chosen_choice_id is None and result.typed is not None
    assert result.also_matched == ()
    # Summed over all ranks: 32 × 3.16875e9 = 101.4e9 B (not among the shown choices).
    assert grade_typed(variant, read_typed(variant, "101", "GB")).pitfall_id == "cluster-total"
    assert grade_typed(variant, read_typed(variant, "101400", "MB")).pitfall_id == "cluster-total"
    # Nothing: right by no formula of the template.
    nothing = grade_typed(variant, read_typed(variant, "7", "GB"))
    assert not nothing.correct and nothing.pitfall is None
    assert nothing.explanation.en == "7 GB matches no pitfall we know; the answer is 3.17 GB."
    assert len(nothing.solution) == 3


def test_a_statement_cannot_be_typed(card):
    template = next(t for t in card.templates() if t.kind == "statement")
    variant = generate(card, template, 1)
    assert accepted_units(variant) == () and typed_figures(variant) is None
    with pytest.raises(TypedError) as caught:
        read_typed(variant, "1", "GB")
    assert caught.value.field == "value"


def test_a_right_typed_answer_rates_one_step_stronger():
    # Good -> Easy, Hard (slow) -> Good, Easy (quick) stays Easy; wrong stays Again.
    assert (int(rating_for(True, None)), int(rating_for(True, None, typed=True))) == (3, 4)
    assert (int(rating_for(True, 100_000)), int(rating_for(True, 100_000, typed=True))) == (2, 3)
    assert (int(rating_for(True, 5_000)), int(rating_for(True, 5_000, typed=True))) == (4, 4)
    assert int(rating_for(False, None, typed=True)) == 1
