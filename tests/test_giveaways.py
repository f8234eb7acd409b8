"""Content-blind guessers: how often picking by length, sorted rank, unit, form, richness,
register, shared words, ratios, magnitude or a retry alone wins, held out.

Golden values of the scoring are worked out by hand below; the card's report is printed (run
with ``-s`` to read it) and every template must keep each enforced family within 1/choices +
0.2 in both languages.
"""

import re
from fractions import Fraction
from pathlib import Path

import pytest

from app.domain.cards import read_card
from app.domain.giveaways import (
    ENFORCED_FAMILIES,
    FAMILIES,
    GIVEAWAY_MARGIN,
    LanguageGiveaways,
    ShownChoice,
    TemplateGiveaways,
    card_best_guess,
    card_giveaways,
    family,
    measure,
    register,
    report_lines,
    template_giveaways,
    variant_wins,
    words,
)
from app.domain.texts import Text

CARD_PATH = Path(__file__).resolve().parents[1] / "cards" / "zero-memory-offload.yaml"


def number(text, value, correct=False, unit="GB"):
    return ShownChoice(Text(text, text), Fraction(value), correct, unit)


def says(en, zh, correct=False):
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


def test_the_ratio_hub_is_the_value_the_others_are_simple_multiples_of():
    # 52.5 = 1.5 x 35, 175 = 5 x 35, 560 = 16 x 35; between themselves 175/52.5 = 3.33,
    # 560/52.5 = 10.7, 560/175 = 3.2: no simple ratio. The key has three partners, the others
    # one each.
    shown = [
        number("35 GB", 35, True),
        number("52.5 GB", 52.5),
        number("175 GB", 175),
        number("560 GB", 560),
    ]
    wins = variant_wins(shown)
    assert wins["ratio hub"] == 1.0
    # no simple ratio anywhere (7/5 = 1.4, 9.1/5 = 1.82, 9.1/7 = 1.3): nobody is a hub, a blind pick
    plain = [number("5 GB", 5, True), number("7 GB", 7), number("9.1 GB", 9.1)]
    assert variant_wins(plain)["ratio hub"] == pytest.approx(1 / 3)


def test_implausible_magnitudes_are_left_out_by_a_guesser():
    # median of log10 of 70, 80, 90, 7000 is between 80 and 90: 7000 is ~80x away
    shown = [
        number("70 GB", 70, True),
        number("80 GB", 80),
        number("90 GB", 90),
        number("7000 GB", 7000),
    ]
    wins = variant_wins(shown)
    assert wins["within 10x of the median"] == pytest.approx(1 / 3)
    assert wins["within 5x of the median"] == pytest.approx(1 / 3)


def test_a_number_in_a_unit_of_its_own_is_found_by_looking():
    shown = [
        number("40.6 MB", 0.0406, True, "MB"),
        number("2.60 GB", 2.6),
        number("1.30 GB", 1.3),
        number("5.20 GB", 5.2),
    ]
    wins = variant_wins(shown)
    assert wins["odd unit"] == 1.0 and wins["common unit"] == 0.0


def test_statements_score_by_length_in_each_language_and_by_register():
    shown = [
        says("Usually worth it.", "通常值得。", True),
        says("Always worth it, on any link.", "总是值得，任何链路都一样。"),
        says("Never worth it at all.", "从不值得。"),
        says("Always, whatever N_d is.", "无论 N_d 多大都总是值得。"),
    ]
    en, zh = variant_wins(shown, "en"), variant_wins(shown, "zh")
    assert en["shortest"] == 1.0 and en["longest"] == 0.0
    # zh lengths 5, 13, 5, 14: the key shares the shortest length with one pitfall
    assert zh["shortest"] == pytest.approx(1 / 2)
    assert zh["length rank 2"] == pytest.approx(1 / 2)
    assert en["odd register"] == 1.0  # the only hedged choice among absolutes
    assert zh["odd register"] == 1.0
    # the key alone has no absolute word (always, any, never, whatever / 总是, 任何, 无论)
    assert en["without absolute words"] == 1.0 and en["with absolute words"] == 0.0
    assert zh["without absolute words"] == 1.0


def test_absolute_words_count_in_plain_statements_too():
    shown = [
        says("It shards the states over the ranks.", "它把状态切分到各 rank。", True),
        says("It only moves the gradients.", "它只有梯度会移动。"),
        says("Every rank keeps every state.", "所有 rank 都保存全部状态。"),
        says("It compresses the weights.", "它压缩权重。"),
    ]
    en = variant_wins(shown, "en")
    # with: "only", "Every"; without: the key and "compresses": one chance in two
    assert en["without absolute words"] == pytest.approx(1 / 2)
    assert en["with absolute words"] == 0.0


def test_a_key_alone_in_its_form_is_found_by_looking():
    """A guesser picking among the choices with (or without) a mark of form: the only choice
    with an aside, a formula or a semicolon is the key here; the only one without a number is
    a pitfall."""
    shown = [
        says(
            "It moves the states (and the Adam step) to the CPU.", "状态（和 Adam）移到 CPU。", True
        ),
        says("It shards them; nothing moves, $2\\Psi$ stays.", "切分它们；不移动，$2\\Psi$ 不变。"),
        says("It compresses them to 8 bits over 16 ranks.", "压缩到 8 位，共 16 个 rank。"),
        says("It spreads them over 4 more GPUs.", "分散到另外 4 张 GPU。"),
    ]
    for lang in ("en", "zh"):
        wins = variant_wins(shown, lang)
        assert wins["with aside"] == 1.0
        assert wins["without aside"] == 0.0
        assert wins["with formula"] == 0.0  # the formula is a pitfall's
        assert wins["without formula"] == pytest.approx(1 / 3)
        assert wins["with semicolon"] == 0.0
        # numbers: "8 bits", "16 ranks", "4 more": the key and the formula one have none
        assert wins["without number"] == pytest.approx(1 / 2)
        assert wins["with number"] == 0.0
        # marks: key 0, formula one 1, "8 ... 16" 2, "4" 1: the richest is a pitfall and the
        # plainest is the key
        assert wins["richest"] == 0.0 and wins["plainest"] == 1.0
    none = variant_wins([says("a", "甲", True), says("bb", "乙乙"), says("ccc", "丙丙丙")])
    assert none["with aside"] == pytest.approx(1 / 3)  # nobody has one: a blind pick


def test_convergence_finds_the_key_each_distractor_changed_one_slot_of():
    # Each distractor swaps one word of the key: the key shares the most words with the rest.
    key = "ZeRO-2 shards gradients and optimizer states"
    shown = [
        says(key, "甲", True),
        says("ZeRO-2 shards weights and optimizer states", "乙"),
        says("ZeRO-2 copies gradients and optimizer states", "丙"),
        says("ZeRO-2 shards gradients and activation states", "丁"),
    ]
    # word sets of 6 (zero, 2, shards, gradients, and, optimizer, states: 7 words); the key
    # shares 6 of 8 words with each distractor (Jaccard 6/8 each, 2.25 in all); a distractor
    # shares 6/8 with the key and 5/9 with the two others (0.75 + 1.11 = 1.86)
    assert words(key, "en") == {"zero", "2", "shards", "gradients", "and", "optimizer", "states"}
    en = variant_wins(shown, "en")
    assert en["most shared words"] == 1.0 and en["fewest shared words"] == 0.0
    assert words("切分梯度", "zh") == {"切分", "分梯", "梯度"}


def test_a_retry_shows_a_key_that_never_changes():
    first = [says("K", "K", True), says("A", "A"), says("B", "B"), says("C", "C")]
    again = [says("D", "D"), says("K", "K", True), says("A", "A"), says("E", "E")]
    wins = variant_wins(again, "en", first)
    assert wins["shown before"] == pytest.approx(1 / 2)  # K and A were shown before
    assert wins["not shown before"] == 0.0  # D and E are new
    assert variant_wins(again, "en")["shown before"] == pytest.approx(1 / 4)


def test_every_strategy_has_a_family():
    shown = [number("70 GB", 70, True), number("80 GB", 80), number("140 GB", 140)]
    statements = [says("a (b)", "甲", True), says("bb", "乙乙"), says("ccc", "丙丙丙")]
    names = set(variant_wins(shown)) | set(variant_wins(statements))
    assert {family(name) for name in names} == set(FAMILIES)


def test_held_out_scores_a_strategy_chosen_on_the_other_half():
    """Strategy 'longest' wins every even draw and no odd one; 'shortest' the reverse. A
    guesser choosing on the even draws picks 'longest' and scores 0 on the odd ones; the other
    way round it picks 'shortest' and scores 0: held out, the length family is worth 0, where
    the best in-sample strategy would claim 50%."""
    a = [says("aaaa", "甲甲甲甲", True), says("b", "乙"), says("cc", "丙丙")]
    b = [says("a", "甲", True), says("bbbb", "乙乙乙乙"), says("cc", "丙丙")]
    report = measure("t", 3, [(a, (), None), (b, (), None), (a, (), None), (b, (), None)])
    en = report.languages["en"]
    assert en.shares["longest"] == pytest.approx(0.5)
    assert en.families["length"][1] == 0.0
    # consistent winners stay winners held out: the key is always the only aside
    c = [says("a (x)", "甲（乙）", True), says("bb", "乙乙"), says("cc", "丙丙")]
    steady = measure("t", 3, [(c, (), None)] * 4)
    assert steady.languages["zh"].families["form"] == ("with aside", 1.0)
    family_name, lang, strategy, share = steady.worst(["form", "register"])
    assert (family_name, strategy, share) == ("form", "with aside", 1.0)


def test_the_card_guesser_averages_templates_and_languages():
    def one(share):
        halves = ({"longest": share}, {"longest": share})
        return LanguageGiveaways("en", halves)

    reports = [
        TemplateGiveaways("a", 4, 10, {"en": one(0.25), "zh": one(0.45)}),
        TemplateGiveaways("b", 2, 10, {"en": one(0.5), "zh": one(0.5)}),
    ]
    score, chance = card_best_guess(reports)
    assert score == pytest.approx((0.25 + 0.45 + 0.5 + 0.5) / 4)
    assert chance == pytest.approx((0.25 + 0.25 + 0.5 + 0.5) / 4)


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
    return card_giveaways(read_card(CARD_PATH), 1000)


def test_the_card_report_lists_every_template_and_language(capsys):
    card = read_card(CARD_PATH)
    lines = "\n".join(report_lines(card, 200)).splitlines()
    with capsys.disabled():
        print()
        print("\n".join(lines))
    for template in card.templates():
        for lang in ("en", "zh"):
            assert any(line.strip().startswith(f"{template.id} ({lang}):") for line in lines)
    assert "best held-out guesser over the card" in lines[-1]
    # Every family is enforced: none is marked as reported only.
    assert not any("(reported)" in line for line in lines)


def test_no_enforced_family_wins_beyond_the_limit(reports):
    for report in reports:
        family_name, lang, strategy, share = report.worst(ENFORCED_FAMILIES)
        assert share <= float(Fraction(1, report.choices) + GIVEAWAY_MARGIN), (
            report.template_id,
            family_name,
            lang,
            strategy,
            share,
        )


def test_the_numeric_key_is_at_each_sorted_rank_equally_often(reports):
    def ranks(report):
        shares = report.languages["en"].shares
        return [v for k, v in shares.items() if k.startswith("value rank")]

    card = read_card(CARD_PATH)
    for report in reports:
        if all(abs(share - 1 / report.choices) < 0.04 for share in ranks(report)):
            continue
        # 1000 arrangements put a share within about 0.014 (one standard error) of 1/4, so
        # over some sixty numeric templates one may stray past 0.04 by chance: measure that
        # template again on eight times as many, where a real bias stays and noise shrinks
        again = template_giveaways(card.template(report.template_id), 8000)
        assert all(abs(share - 1 / again.choices) < 0.02 for share in ranks(again)), again


def _t(text):
    return {"en": text, "zh": text + "（中文）"}


def _mini_card(template):
    """A one-point card around ``template`` (validation measures it as it would any card)."""
    return {
        "id": "mini",
        "version": 1,
        "params": ["psi"],
        "title": _t("Mini"),
        "definition": _t("d"),
        "use_cases": _t("u"),
        "problems_solved": _t("p"),
        "formulas": [{"id": "ddp", "title": _t("DDP"), "expr": "16*psi", "latex": "16\\Psi"}],
        "points": [
            {
                "number": 1,
                "slug": "the-point",
                "title": _t("Point"),
                "explanation": _t("e"),
                "templates": [template],
            }
        ],
    }


def _statement_card(answer, pitfalls, other_wording=None, stem="What does ZeRO-1 shard?"):
    return _mini_card(
        {
            "id": "what-zero1-shards",
            "version": 1,
            "kind": "statement",
            "stem": _t(stem),
            "answer": {"en": answer, "zh": answer},
            # a second wording of the key: a retry must not show it by its text
            "answer_phrasings": [
                {"en": other_wording or answer + ".", "zh": other_wording or answer + "。"}
            ],
            "solution": [_t("ZeRO-1 partitions the optimizer states.")],
            "pitfalls": [
                {
                    "id": f"p{i}",
                    "title": _t(f"p{i}"),
                    "statement": {"en": text, "zh": text},
                    "explanation": _t("no"),
                }
                for i, text in enumerate(pitfalls)
            ],
        }
    )


def test_validation_refuses_a_template_an_enforced_family_sees_through():
    from app.domain.cards import CardError, parse_card
    from app.domain.validation import validate_card

    shorter = ["The gradients alone", "The fp16 weights alone", "The activations alone"]
    longer = [
        "The weights and the gradients both",
        "The activations and the gradients",
        "All three kinds of model state here",
    ]
    fair = parse_card(_statement_card("The optimizer states alone", shorter + longer))
    validate_card(fair)
    # the key alone carries an aside: a guesser picking it is right every time (form family)
    marked = parse_card(_statement_card("The optimizer states (fp32)", shorter + longer))
    with pytest.raises(CardError, match="by its form:"):
        validate_card(marked)


def test_validation_refuses_a_key_alone_without_absolute_words():
    from app.domain.cards import CardError, parse_card
    from app.domain.validation import validate_card

    shorter = ["Only the gradients", "Only the fp16 weights", "Always activations"]
    longer = [
        "Only the weights and the gradients",
        "Always the activations and gradients",
        "Every kind of model state, always",
    ]
    # the key alone has no absolute word: 'without absolute words' finds it every time
    card = parse_card(_statement_card("The optimizer states alone", shorter + longer))
    with pytest.raises(CardError, match="by its register:"):
        validate_card(card)


def test_a_giveaway_problem_names_its_family_and_shows_sample_variants_with_the_key_marked():
    """The problem says which family gives the key away and shows up to three shown questions
    where the cue points at it: here the key is the one choice without an absolute word."""
    from app.domain.authoring import check_document
    from app.domain.cards import CardError, parse_card
    from app.domain.validation import validate_card

    shorter = ["Only the gradients", "Only the fp16 weights", "Always activations"]
    longer = [
        "Only the weights and the gradients",
        "Always the activations and gradients",
        "Every kind of model state, always",
    ]
    data = _statement_card("The optimizer states alone", shorter + longer)
    with pytest.raises(CardError) as refused:
        validate_card(parse_card(data))
    cue = refused.value.cue
    assert cue is not None and cue.family == "register"
    assert cue.strategy == "without absolute words" and cue.share > 0.45
    assert 2 <= len(cue.examples) <= 3
    key_wordings = {"The optimizer states alone", "The optimizer states alone."}
    for example in cue.examples:
        assert example.params == ()  # the template has no parameters
        labels = [label for label, _text, _correct in example.choices]
        assert labels == list("abcd")[: len(example.choices)]
        [key] = [text.get(cue.lang) for _l, text, correct in example.choices if correct]
        assert key in key_wordings
        # the cue: every other choice shown carries an absolute word
        others = [text.en for _l, text, correct in example.choices if not correct]
        assert all(re.search(r"\b(Only|Always|Every)\b", text) for text in others)
    # The dashboard's and the API's problem carries it as JSON.
    [problem] = [p for p in check_document(data).problems if p.severity == "error"]
    shown = problem.to_json()["giveaway"]
    assert shown["family"] == "register" and len(shown["examples"]) == len(cue.examples)
    assert sum(c["correct"] for c in shown["examples"][0]["choices"]) == 1


def test_validation_refuses_a_key_whose_text_never_changes():
    """Asked again, a learner sees the key's unchanged text among new distractors: with one
    wording a guesser picking what it saw before beats chance + 20 (see test_phrasings)."""
    from app.domain.cards import CardError, parse_card
    from app.domain.validation import validate_card

    shorter = ["The gradients alone", "The fp16 weights alone", "The activations alone"]
    longer = [
        "The weights and the gradients both",
        "The activations and the gradients",
        "All three kinds of model state here",
    ]
    data = _statement_card("The optimizer states alone", shorter + longer)
    del data["points"][0]["templates"][0]["answer_phrasings"]
    with pytest.raises(CardError, match="by its retry:"):
        validate_card(parse_card(data))


def test_validation_refuses_a_key_each_distractor_changed_one_slot_of():
    """Convergence is enforced: each wrong statement below swaps one slot of the key (what,
    how, where), so in every shown set the key shares the most words with the others (it
    differs from each distractor in one slot, they differ from each other in two): a guesser
    picking the most shared words is right every time, 100 % against 25 % + 20."""
    from app.domain.cards import CardError, parse_card
    from app.domain.validation import validate_card

    key = "The optimizer states are sharded across ranks"
    shorter = [
        "The gradients are sharded across ranks",
        "The optimizer states are copied to ranks",
        "The optimizer states are sharded by node",
    ]
    longer = [
        "The fp16 weights and activations are sharded across ranks",
        "The optimizer states are replicated in full across ranks",
        "The optimizer states are sharded across nodes and GPUs",
    ]
    data = _statement_card(key, shorter + longer, other_wording=key + ".")
    template = parse_card(data).templates()[0]
    measured = template_giveaways(template, 300)
    for lang in ("en", "zh"):
        assert measured.languages[lang].families["convergence"] == ("most shared words", 1.0)
    with pytest.raises(CardError, match="by its convergence:"):
        validate_card(parse_card(data))
    # The same key among distractors written as misconceptions of their own passes.
    fair = ["The gradients alone", "The fp16 weights alone", "The activations alone"] + [
        "The weights and the gradients both",
        "The activations and the gradients",
        "All three kinds of model state here",
    ]
    validate_card(parse_card(_statement_card("The optimizer states alone", fair)))


def test_the_card_guesser_limit_refuses_a_card_of_ten_templates_or_more(monkeypatch):
    """The card-level limit (chance + 8 points) is on (the ZeRO card passes it) for cards of
    ten templates or more; smaller cards are judged per template; the switch turns it off."""
    from app.domain import giveaways
    from app.domain.cards import CardError, parse_card
    from app.domain.validation import check_card_guesser

    def one(share):
        return LanguageGiveaways("en", ({"longest": share}, {"longest": share}))

    wrong = ["The gradients alone", "The fp16 weights alone", "The activations alone"]
    card = parse_card(_statement_card("The optimizer states alone", wrong))
    # 4 choices: chance 25 %, limit 33 %. Best guessers at 50 % and 30 %: 40 % over the card.
    giving = [
        TemplateGiveaways(f"a{n}", 4, 10, {"en": one(0.5), "zh": one(0.5)}) for n in range(5)
    ] + [TemplateGiveaways(f"b{n}", 4, 10, {"en": one(0.3), "zh": one(0.3)}) for n in range(5)]
    within = [
        TemplateGiveaways(f"a{n}", 4, 10, {"en": one(0.33), "zh": one(0.3)}) for n in range(10)
    ]
    assert giveaways.CARD_GUESSER_ENFORCED and giveaways.CARD_GUESSER_MIN_TEMPLATES == 10
    with pytest.raises(CardError, match="40.0%"):
        check_card_guesser(card, giving)
    check_card_guesser(card, within)  # 31.5 % <= 33 %
    check_card_guesser(card, giving[4:])  # nine templates: judged per template only
    monkeypatch.setattr(giveaways, "CARD_GUESSER_ENFORCED", False)
    check_card_guesser(card, giving)  # the switch


def _numeric_card(answer, pitfalls):
    return _mini_card(
        {
            "id": "some-memory",
            "version": 1,
            "kind": "numeric",
            "params": {"psi": {"values": [7e9, 13e9, 70e9], "format": "count"}},
            "stem": _t("How much memory does a {psi}-parameter model need?"),
            "answer": answer,
            "unit": "GB",
            "precision": 3,
            "solution": [_t("{answer}.")],
            "pitfalls": [
                {
                    "id": f"p{i}",
                    "title": _t(f"p{i}"),
                    "formula": formula,
                    "explanation": _t("no: {answer}"),
                }
                for i, formula in enumerate(pitfalls)
            ],
        }
    )


def test_validation_refuses_a_key_the_others_are_simple_multiples_of():
    """The ratio hub is enforced: each distractor below is the key times or over a simple ratio
    (x1.5, x2.5, x4, /5, /6, /16) while no two distractors are simple multiples of each other,
    so the key is the one value with partners: a guesser picking it is right every time."""
    from app.domain.cards import CardError, parse_card
    from app.domain.validation import validate_card

    assert "ratio hub" in ENFORCED_FAMILIES
    hub = parse_card(
        _numeric_card("60*psi", ["90*psi", "150*psi", "240*psi", "12*psi", "10*psi", "3.75*psi"])
    )
    measured = template_giveaways(hub.templates()[0], 300)
    for lang in ("en", "zh"):
        assert measured.languages[lang].families["ratio hub"] == ("ratio hub", 1.0)
    with pytest.raises(CardError, match="by its ratio hub:"):
        validate_card(hub)
    # The same key among distractors that are no simple multiples of it (x1.1, x1.3, x1.75,
    # /1.15, /1.45, /1.8) passes.
    fair = parse_card(
        _numeric_card("60*psi", ["66*psi", "78*psi", "105*psi", "52*psi", "41*psi", "33*psi"])
    )
    validate_card(fair)


def test_echo_finds_the_number_the_stem_gives():
    stem = Text(
        "A model's weights take 48 GB; $p = 8$ stages.", "模型权重占 48 GB；$p = 8$ 个阶段。"
    )
    shown = [number("6 GB", 6), number("48 GB", 48, True), number("42 GB", 42), number("8 GB", 8)]
    for lang in ("en", "zh"):
        wins = variant_wins(shown, lang, stem=stem)
        assert wins["repeats the stem"] == 1.0 and wins["avoids the stem"] == 0.0
    # "8" alone is not "8 GB"; a stem without the key's quantity leaves the key to chance.
    other = Text("Each layer takes 500 MB; $p = 8$.", "每层 500 MB；$p = 8$。")
    assert variant_wins(shown, stem=other)["repeats the stem"] == pytest.approx(1 / 4)
    assert variant_wins(shown)["repeats the stem"] == pytest.approx(1 / 4)  # no stem: blind
    # Statements may repeat the conventions their stem states: not measured.
    statements = [says("uses 2 bytes", "2 字节", True), says("uses 4 bytes", "4 字节")]
    said = variant_wins(statements, stem=Text("At 2 bytes a value", "每个值 2 字节"))
    assert "repeats the stem" not in said and "avoids the stem" not in said


def echo_template(stem_gives_key=True):
    """A numeric template asking for the weights' size, which its stem gives
    (``stem_gives_key``) or leaves to be computed from a parameter count."""
    return {
        "id": "replica-weights",
        "version": 1,
        "kind": "numeric",
        "params": {
            "w": {"values": [420e9, 780e9, 4200e9], "format": "GB"},
            "n_d": {"values": [4, 8]},
        },
        "stem": _t(
            "Plain data parallelism over $N_d = {n_d}$ GPUs, the 16-bit weights taking "
            + ("{w}" if stem_gives_key else "{=w/2:count} parameters")
            + ": how much do the weights take on each GPU?"
        ),
        "answer": "w",
        "unit": "GB",
        "precision": 3,
        "solution": [_t("Every replica holds them all: {answer}.")],
        "pitfalls": [
            {"id": f"p{i}", "title": _t(f"p{i}"), "formula": f, "explanation": _t("{answer}")}
            for i, f in enumerate(["1.1*w", "1.3*w", "1.75*w", "w/1.15", "w/1.45", "w/1.8"])
        ],
    }


def test_validation_refuses_a_stem_that_gives_its_key():
    """The echo family is enforced: a stem stating the very quantity the key shows gives it
    away whatever the distractors; the same key computed from what the stem gives passes."""
    from app.domain.cards import CardError, parse_card
    from app.domain.validation import validate_card

    assert "echo" in ENFORCED_FAMILIES
    echoed = parse_card(_mini_card(echo_template()))
    measured = template_giveaways(echoed.templates()[0], 300)
    for lang in ("en", "zh"):
        assert measured.languages[lang].families["echo"] == ("repeats the stem", 1.0)
    with pytest.raises(
        CardError, match="by its echo of the stem: a content-blind guesser .'repeats the stem'"
    ):
        validate_card(echoed)
    validate_card(parse_card(_mini_card(echo_template(stem_gives_key=False))))


def stem_words_statements(*, key_repeats_the_stem: bool = True) -> dict:
    """A statement template whose key alone repeats a word of its stem ("optimizer"), or, with
    ``key_repeats_the_stem=False``, the same choices under a stem none of them echoes."""
    shorter = ["The gradients alone", "The fp16 weights alone", "The activations alone"]
    longer = [
        "The weights and the gradients both",
        "The activations and the gradients",
        "All three kinds of model state here",
    ]
    stem = (
        "What does ZeRO-1 shard of the optimizer?"
        if key_repeats_the_stem
        else "What does ZeRO-1 shard?"
    )
    card = _statement_card("The optimizer states alone", shorter + longer, stem=stem)
    return card["points"][0]["templates"][0]


def test_validation_refuses_a_statement_key_that_alone_repeats_its_stem():
    """The stem words family is enforced: the key alone repeating a word of the stem is found
    every time, in both languages, and refused; the same choices under a stem that none of them
    echoes are left to chance by this family and pass."""
    from app.domain.cards import CardError, parse_card
    from app.domain.validation import validate_card

    assert "stem words" in ENFORCED_FAMILIES
    card = parse_card(_mini_card(stem_words_statements()))
    measured = template_giveaways(card.templates()[0], 300)
    for lang in ("en", "zh"):
        shares = measured.languages[lang]
        assert shares.families["stem words"] == ("most words shared with the stem", 1.0)
        assert shares.best == ("most words shared with the stem", 1.0)
    assert measured.line().count("stem words 100%!") == 2 and "GIVEAWAY" in measured.line()
    with pytest.raises(CardError) as refused:
        validate_card(card)
    # The refusal names the family in the reader's language (the dashboard shows it).
    said = refused.value.text
    assert (
        "by its words shared with the stem: a content-blind guesser ('most words shared" in said.en
    )
    assert "与题干共用的词" in said.zh and "stem words" not in said.zh
    fair = parse_card(_mini_card(stem_words_statements(key_repeats_the_stem=False)))
    plain = template_giveaways(fair.templates()[0], 300).languages["en"].families["stem words"]
    assert plain[1] == pytest.approx(1 / 4)
    validate_card(fair)


def test_every_family_has_a_label_people_read_in_both_languages():
    """The dashboard's cue line and validation's refusal name a family by its label: every
    family has one, and the Chinese label is translated (not the English words)."""
    from app.domain.cues import FAMILY_LABELS

    assert set(FAMILY_LABELS) == set(FAMILIES)
    for name, label in FAMILY_LABELS.items():
        assert label.en and label.zh and label.zh != label.en, name
