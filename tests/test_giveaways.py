"""Content-blind guessers: how often picking by length, by sorted rank or by register alone wins.

Golden values of the scoring are worked out by hand below; the card's report is printed (run with
``-s`` to read it) and every template must stay within 1/choices + 0.2, the whole card within
chance + 0.1.
"""

from fractions import Fraction
from pathlib import Path

import pytest

from app.domain.cards import read_card
from app.domain.giveaways import (
    GIVEAWAY_MARGIN,
    ShownChoice,
    card_giveaways,
    overall_best_guess,
    register,
    report_lines,
    variant_wins,
)
from app.domain.texts import Text

CARD_PATH = Path(__file__).resolve().parents[1] / "cards" / "zero-memory-offload.yaml"


def number(text, value, correct=False):
    return ShownChoice(Text(text, text), Fraction(value), correct)


def words(en, zh, correct=False):
    return ShownChoice(Text(en, zh), None, correct)


def test_numeric_scores_by_rank_and_by_text_length():
    shown = [
        number("70 GB", 70),
        number("1120 GB", 1120),
        number("332.5 GB", 332.5, True),
        number("201.25 GB", 201.25),
    ]
    wins = variant_wins(shown)
    # sorted: 70 < 201.25 < 332.5 < 1120, so the key is third
    assert wins["value rank 3"] == 1.0
    assert wins["value rank 1"] == wins["value rank 2"] == wins["value rank 4"] == 0.0
    assert wins["longest"] == 0.0  # "201.25 GB" is the longest text
    assert wins["shortest"] == 0.0
    tied = variant_wins([number("10 GB", 10, True), number("20 GB", 20), number("5 GB", 5)])
    assert tied["longest"] == pytest.approx(1 / 2)  # two texts of 5 characters, one is the key
    assert tied["shortest"] == 0.0


def test_statements_score_by_length_in_each_language_and_by_register():
    shown = [
        words("Usually worth it.", "通常值得。", True),
        words("Always worth it, on any link.", "总是值得，任何链路都一样。"),
        words("Never worth it at all.", "从不值得。"),
        words("Always, whatever N_d is.", "无论 N_d 多大都总是值得。"),
    ]
    wins = variant_wins(shown)
    assert wins["shortest (en)"] == 1.0 and wins["longest (en)"] == 0.0
    # zh lengths 5, 13, 5, 14: the key shares the shortest length with one pitfall
    assert wins["shortest (zh)"] == pytest.approx(1 / 2)
    assert wins["length rank 2 (zh)"] == pytest.approx(1 / 2)
    assert wins["odd register (en)"] == 1.0  # the only hedged choice among absolutes
    assert wins["odd register (zh)"] == 1.0


def test_register():
    assert register("Usually, if memory is the limit", "en") == "hedged"
    assert register("Always: it moves 2Ψ", "en") == "absolute"
    assert register("It adds NVMe as a tier", "en") == "plain"
    assert register("通常值得", "zh") == "hedged" and register("总是值得", "zh") == "absolute"


@pytest.fixture(scope="module")
def reports():
    return card_giveaways(read_card(CARD_PATH))


def test_the_card_report_lists_every_template(reports, capsys):
    card = read_card(CARD_PATH)
    with capsys.disabled():
        print()
        print("\n".join(report_lines(card)))
    assert [r.template_id for r in reports] == [t.id for t in card.templates()]


def test_no_content_blind_strategy_wins_beyond_the_limit(reports):
    for report in reports:
        strategy, share = report.worst
        assert share <= float(Fraction(1, report.choices) + GIVEAWAY_MARGIN), (
            report.template_id,
            strategy,
            share,
        )


def test_the_numeric_key_is_at_each_sorted_rank_equally_often(reports):
    for report in reports:
        ranks = [v for k, v in report.shares.items() if k.startswith("value rank")]
        if ranks:
            assert all(abs(share - 1 / report.choices) < 0.03 for share in ranks), report


def test_over_the_card_a_best_strategy_guesser_stays_near_chance(reports):
    score, chance = overall_best_guess(reports)
    assert score <= chance + 0.1, (score, chance)
