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


def test_a_key_alone_in_its_form_is_found_by_looking():
    """A guesser picking among the choices with (or without) a mark of form: the only choice
    with an aside, a formula or a semicolon is the key here; the only one without a number is
    a pitfall."""
    shown = [
        words(
            "It moves the states (and the Adam step) to the CPU.", "状态（和 Adam）移到 CPU。", True
        ),
        words(
            "It shards them; nothing moves, $2\\Psi$ stays.", "切分它们；不移动，$2\\Psi$ 不变。"
        ),
        words("It compresses them to 8 bits over 16 ranks.", "压缩到 8 位，共 16 个 rank。"),
        words("It spreads them over 4 more GPUs.", "分散到另外 4 张 GPU。"),
    ]
    wins = variant_wins(shown)
    for lang in ("en", "zh"):
        assert wins[f"with aside ({lang})"] == 1.0
        assert wins[f"without aside ({lang})"] == 0.0
        assert wins[f"with formula ({lang})"] == 0.0  # the formula is a pitfall's
        assert wins[f"without formula ({lang})"] == pytest.approx(1 / 3)
        assert wins[f"with semicolon ({lang})"] == 0.0
        # numbers: "8 bits", "16 ranks", "4 more": the key and the formula one have none
        assert wins[f"without number ({lang})"] == pytest.approx(1 / 2)
        assert wins[f"with number ({lang})"] == 0.0
    none = variant_wins([words("a", "甲", True), words("bb", "乙乙"), words("ccc", "丙丙丙")])
    assert none["with aside (en)"] == pytest.approx(1 / 3)  # nobody has one: a blind pick


def test_digits_inside_names_are_not_numbers():
    from app.domain.giveaways import FORMS

    number = FORMS["number"]
    for text in ("fp16 weights", "ZeRO-3 with offload", "a V100", "$12\\Psi$ bytes", "NVMe"):
        assert not number(text), text
    for text in ("32 GB", "1.5× DDP", "8 bits", "13B on one GPU", "8 位", "（约 13B）"):
        assert number(text), text


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
