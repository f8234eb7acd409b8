"""Statements with several wordings: a question shows one wording of each choice, drawn with the
variant, so that a learner asking again does not recognise the key by its unchanged text; every
wording sorts on the same side of the key (the rank by length holds), and a template without
other wordings draws exactly as before."""

import copy

import pytest

from app.domain.cards import CardError, parse_card
from app.domain.generation import generate, grade
from app.domain.giveaways import template_giveaways
from app.domain.validation import validate_card


def t(en, zh):
    return {"en": en, "zh": zh}


# The Chinese key ends like the distractors (了): without it the key shared the fewest character
# pairs with them, a convergence giveaway (46% held out) validation now refuses.
KEY = t("The optimizer states alone", "只有优化器状态被切分了")
KEY_2 = t("Just the optimizer states", "被切分的只是优化器状态")
SHORT = [
    (
        "grads",
        t("The gradients alone", "只有梯度被切分了"),
        t("Just the gradients", "被切分的只是梯度"),
    ),
    (
        "weights",
        t("The fp16 weights alone", "只有权重被切分了"),
        t("Just the fp16 weights", "被切分的只是权重"),
    ),
    (
        "acts",
        t("The activations alone", "只有激活值被切分"),
        t("Just the activations", "被切分的只是激活值"),
    ),
]
LONG = [
    (
        "w-and-g",
        t("The weights and the gradients both", "权重和梯度两者都被切分了"),
        t("Both the weights and the gradients", "被切分的是权重和梯度两者"),
    ),
    (
        "a-and-g",
        t("The activations and the gradients", "激活值和梯度两者都被切分了"),
        t("Both the activations and gradients", "被切分的是激活值和梯度两者"),
    ),
    (
        "all",
        t("All three kinds of model state here", "三种模型状态全部都被切分了"),
        t("Every one of the three model states", "被切分的是全部三种模型状态"),
    ),
]


def card_data(phrased=True):
    pitfalls = []
    for pid, first, second in SHORT + LONG:
        pitfall = {
            "id": pid,
            "title": t(pid, pid),
            "statement": first,
            "explanation": t("no", "不"),
        }
        if phrased:
            pitfall["phrasings"] = [second]
        pitfalls.append(pitfall)
    template = {
        "id": "what-zero1-shards",
        "version": 1,
        "kind": "statement",
        "stem": t("What does ZeRO-1 shard?", "ZeRO-1 切分什么？"),
        "answer": KEY,
        "solution": [t("ZeRO-1 partitions the optimizer states.", "ZeRO-1 切分优化器状态。")],
        "pitfalls": pitfalls,
    }
    if phrased:
        template["answer_phrasings"] = [KEY_2]
    return {
        "id": "mini",
        "version": 1,
        "generator": 2,
        "title": t("Mini", "迷你"),
        "definition": t("d", "定义"),
        "use_cases": t("u", "用途"),
        "problems_solved": t("p", "问题"),
        "points": [
            {
                "number": 1,
                "slug": "the-point",
                "title": t("Point", "要点"),
                "explanation": t("e", "解释"),
                "templates": [template],
            }
        ],
    }


def test_a_question_shows_one_wording_of_each_choice_and_grades_it():
    card = parse_card(card_data())
    validate_card(card)
    template = card.templates()[0]
    keys = set()
    for seed in range(200):
        variant = generate(card, template, seed)
        again = generate(card, template, seed)  # the same seed shows the same wordings
        assert [c.text for c in again.choices] == [c.text for c in variant.choices]
        correct = variant.choice(variant.correct_choice_id)
        assert correct.text.en in (KEY["en"], KEY_2["en"])
        keys.add(correct.text.en)
        assert grade(variant, correct.id).correct
        for choice in variant.choices:
            if choice.pitfall is not None:
                wordings = (
                    {p.statement.en, *(w.en for w in p.phrasings)}
                    if (p := choice.pitfall)
                    else set()
                )
                assert choice.text.en in wordings
    assert keys == {KEY["en"], KEY_2["en"]}


def test_a_template_without_other_wordings_draws_as_before():
    """Phrasings are drawn after the order is fixed: the same seeds put the same choices (by
    pitfall) in the same places whether or not the choices have other wordings."""
    plain = parse_card(card_data(phrased=False))
    phrased = parse_card(card_data(phrased=True))
    for seed in range(50):
        a = generate(plain, plain.templates()[0], seed)
        b = generate(phrased, phrased.templates()[0], seed)
        assert [c.pitfall_id for c in a.choices] == [c.pitfall_id for c in b.choices]
        assert all(
            c.text.en in {w["en"] for _, w, _ in SHORT + LONG} | {KEY["en"]} for c in a.choices
        )


def test_asked_again_the_key_no_longer_stands_out_by_its_text():
    plain = template_giveaways(parse_card(card_data(phrased=False)).templates()[0], 2000)
    phrased = template_giveaways(parse_card(card_data(phrased=True)).templates()[0], 2000)
    for lang in ("en", "zh"):
        before = plain.languages[lang].families["retry"][1]
        after = phrased.languages[lang].families["retry"][1]
        # One wording: the key is among the texts shown before every time, each pitfall only
        # when it was drawn again (three of six): a retry finds the key beyond chance + 20.
        # Two wordings: the key repeats its text half the time, a pitfall a quarter of the time,
        # and with no text repeated the guesser is blind: within the limit.
        assert before > 0.45, before
        assert after < 0.45, after


def test_validation_keeps_every_wording_on_its_side_and_distinct():
    data = card_data()
    broken = copy.deepcopy(data)
    # a wording of a shorter pitfall that is longer than the key
    broken["points"][0]["templates"][0]["pitfalls"][0]["phrasings"] = [
        t("Just the gradients, and nothing more", "切分的只是梯度而已别无其他")
    ]
    with pytest.raises(CardError, match="same side"):
        validate_card(parse_card(broken))
    twice = copy.deepcopy(data)
    twice["points"][0]["templates"][0]["pitfalls"][0]["phrasings"] = [KEY_2]
    with pytest.raises(CardError, match="twice"):
        validate_card(parse_card(twice))


def test_numeric_choices_have_no_wordings():
    data = card_data()
    template = data["points"][0]["templates"][0]
    template.update(kind="numeric", answer="1", unit="GB")
    for pitfall in template["pitfalls"]:
        pitfall["formula"] = "2"
        del pitfall["statement"]
    with pytest.raises(CardError):
        parse_card(data)
