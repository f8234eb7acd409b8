"""Variants are reproducible, have one correct choice and distinct choices; grading names the
pitfall; validation refuses templates whose pitfalls can clash with the answer."""

import copy

import pytest
from conftest import CARD_ID, CARDS_DIR

from app.domain.cards import CardError, parse_card
from app.domain.generation import (
    MIN_RELATIVE_GAP,
    Combination,
    UnknownChoice,
    generate,
    generate_for_point,
    grade,
)
from app.domain.validation import validate_card


def t(text):
    return {"en": text, "zh": text + "（中文）"}


def pitfall(pid, formula, explanation="wrong: {value}"):
    return {"id": pid, "title": t(pid), "formula": formula, "explanation": t(explanation)}


TEMPLATE = {
    "id": "zero1-per-rank",
    "version": 1,
    "kind": "numeric",
    "params": {
        "psi": {"values": ["1.3e9", "7e9", "70e9", "175e9"], "format": "count"},
        "n_d": {"values": [4, 8, 16, 64]},
    },
    "stem": t("ZeRO-1, {psi} parameters, {n_d} ranks: memory per rank?"),
    "answer": "zero1",
    "unit": "GB",
    "precision": 4,
    "solution": [t("$2\\Psi + 2\\Psi + 12\\Psi/N_d$ = {=zero1:GB:4}"), t("answer {answer}")],
    # Three pitfalls below the answer and three above it for every parameter combination, so
    # that every rank of the answer can be drawn.
    "pitfalls": [
        pitfall("shards-grads-too", "zero2"),
        pitfall("shards-everything", "ddp/n_d"),
        pitfall("optimizer-shard-only", "12*psi/n_d"),
        pitfall("ddp-no-sharding", "ddp"),
        pitfall("cluster-total", "zero1*n_d"),
        pitfall("counted-twice", "zero1*2"),
    ],
}


def statement(pid, text):
    return {"id": pid, "title": t(pid), "statement": t(text), "explanation": t("no")}


CARD = {
    "id": "mini",
    "version": 1,
    "params": ["psi", "n_d"],
    "title": t("Mini"),
    "definition": t("d"),
    "use_cases": t("u"),
    "problems_solved": t("p"),
    "formulas": [
        {"id": "ddp", "title": t("DDP"), "expr": "16*psi", "latex": "16\\Psi"},
        {"id": "zero1", "title": t("Z1"), "expr": "2*psi + 2*psi + 12*psi/n_d", "latex": "x"},
        {"id": "zero2", "title": t("Z2"), "expr": "2*psi + (2*psi + 12*psi)/n_d", "latex": "x"},
    ],
    "points": [
        {
            "number": 1,
            "slug": "the-point",
            "title": t("Point"),
            "explanation": t("e"),
            "templates": [
                TEMPLATE,
                {
                    "id": "what-zero1-shards",
                    "version": 1,
                    "kind": "statement",
                    "stem": t("What does ZeRO-1 shard?"),
                    "answer": t("Only the optimizer states."),
                    # a second wording, so that a retry does not show the key by its text
                    "answer_phrasings": [t("Just the optimizer states.")],
                    "solution": [t("ZeRO-1 partitions the 12Ψ optimizer states.")],
                    # three shorter and three longer than the answer, in both languages
                    "pitfalls": [
                        statement("grads", "Only the gradients."),
                        statement("params", "Only the fp16 weights."),
                        statement("activations", "The activations only."),
                        statement("all", "All three kinds of model state."),
                        statement("weights-and-grads", "The weights and the gradients."),
                        statement("activations-and-grads", "The activations and the gradients."),
                    ],
                },
            ],
        }
    ],
}


def card_with(template_changes=None, data=None):
    data = copy.deepcopy(data or CARD)
    data["points"][0]["templates"][0].update(template_changes or {})
    card = parse_card(data)
    validate_card(card)
    return card


@pytest.fixture(scope="module")
def card():
    return card_with()


def test_same_seed_same_variant(card):
    template = card.points[0].templates[0]
    a, b = generate(card, template, 1234), generate(card, template, 1234)
    assert a.params == b.params and a.stem == b.stem
    assert [(c.id, c.text, c.pitfall_id) for c in a.choices] == [
        (c.id, c.text, c.pitfall_id) for c in b.choices
    ]


def test_kept_variants_are_bounded_and_the_oldest_goes_first(card, monkeypatch):
    """A process keeps the variants it made lately (an answer regenerates its question's) and
    no more than VARIANTS_KEPT of them: the oldest made is the first made again."""
    import app.domain.generation as generation

    monkeypatch.setattr(generation, "VARIANTS_KEPT", 3)
    template = card.points[0].templates[0]
    seeds = range(910_000, 910_005)
    first = [generate(card, template, seed) for seed in seeds]  # the last three are kept
    assert generate(card, template, seeds[-1]) is first[-1]
    assert generate(card, template, seeds[-3]) is first[-3]
    again = generate(card, template, seeds[0])  # made anew; seeds[-3] is now the oldest
    assert again is not first[0] and again.stem == first[0].stem
    assert generate(card, template, seeds[-2]) is first[-2]
    assert generate(card, template, seeds[-3]) is not first[-3]


def test_seeds_vary_parameters_and_choice_order(card):
    template = card.points[0].templates[0]
    variants = [generate(card, template, seed) for seed in range(200)]
    assert len({tuple(v.params.items()) for v in variants}) == 16
    assert len({v.correct_choice_id for v in variants}) == 4


def test_every_variant_has_one_correct_choice_and_distinct_choices(card):
    template = card.points[0].templates[0]
    for seed in range(500):
        variant = generate(card, template, seed)
        assert len(variant.choices) == 4
        assert sum(c.pitfall is None for c in variant.choices) == 1
        texts = [c.text.en for c in variant.choices]
        assert len(set(texts)) == len(texts)
        values = sorted(c.value for c in variant.choices)
        for low, high in zip(values, values[1:], strict=False):
            assert (high - low) / high >= float(MIN_RELATIVE_GAP) * 0.99


def test_variant_renders_numbers_into_texts(card):
    template = card.points[0].templates[0]
    variant = next(
        v
        for v in (generate(card, template, s) for s in range(500))
        if v.params == {"psi": "70000000000", "n_d": "16"}
    )
    assert variant.stem.en == "ZeRO-1, 70B parameters, 16 ranks: memory per rank?"
    correct = variant.choice(variant.correct_choice_id)
    # every choice shows as many decimals as the most precise one needs (332.5 or 332.50)
    decimals = max(len(c.text.en.split(" ")[0].partition(".")[2]) for c in variant.choices)
    shown = f"{332.5:.{decimals}f} GB"
    assert correct.text.en == shown and correct.value == 332.5 and correct.unit == "GB"
    assert variant.solution[0].en.endswith("= 332.5 GB")
    assert variant.solution[1].en == f"answer {shown}"


def test_grade_names_the_pitfall_with_this_variants_numbers(card):
    template = card.points[0].templates[0]
    variant = generate(card, template, 7)
    wrong = next(c for c in variant.choices if c.pitfall is not None)
    result = grade(variant, wrong.id)
    assert not result.correct
    assert result.correct_choice_id == variant.correct_choice_id
    assert result.pitfall.id == wrong.pitfall_id
    assert result.pitfall_explanation.en == f"wrong: {wrong.text.en}"
    assert wrong.text.en in result.explanation.en
    right = grade(variant, variant.correct_choice_id)
    assert right.correct and right.pitfall is None and right.pitfall_explanation is None
    assert right.solution == variant.solution


def test_unknown_choice(card):
    variant = generate(card, card.points[0].templates[0], 1)
    with pytest.raises(UnknownChoice):
        grade(variant, "z")


def test_statement_variants(card):
    template = card.points[0].templates[1]
    variant = generate(card, template, 3)
    assert all(c.value is None and c.unit is None for c in variant.choices)
    assert variant.choice(variant.correct_choice_id).text.en == "Only the optimizer states."


def test_point_seed_picks_template_reproducibly(card):
    picked = {generate_for_point(card, "the-point", s).id.template_id for s in range(50)}
    assert picked == {"zero1-per-rank", "what-zero1-shards"}
    assert (
        generate_for_point(card, "the-point", 9).stem
        == generate_for_point(card, "the-point", 9).stem
    )
    with pytest.raises(KeyError):
        generate_for_point(card, "no-such-point", 1)


def test_clashing_pitfalls_are_resolved_by_seeded_order():
    # 64Ψ/N_d equals DDP's 16Ψ at N_d = 4 only: there a variant shows one of the two.
    card = card_with({"pitfalls": [*TEMPLATE["pitfalls"], pitfall("odd", "64*psi/n_d")]})
    template = card.points[0].templates[0]
    seen = set()
    for seed in range(400):
        variant = generate(card, template, seed)
        ids = {c.pitfall_id for c in variant.choices}
        if variant.params["n_d"] == "4":
            assert len(variant.choices) == 4
            assert not {"ddp-no-sharding", "odd"} <= ids
            seen |= ids & {"ddp-no-sharding", "odd"}
    assert seen == {"ddp-no-sharding", "odd"}


def test_validation_refuses_a_pitfall_equal_to_the_answer():
    with pytest.raises(CardError) as caught:
        card_with({"pitfalls": [*TEMPLATE["pitfalls"][:3], pitfall("same", "4*psi + 12*psi/n_d")]})
    message = str(caught.value)
    assert "template 'zero1-per-rank'" in message and "pitfall 'same'" in message
    assert "psi=1.3B" in message and "clashes with the answer" in message


def test_validation_refuses_a_pitfall_within_one_percent_of_the_answer():
    with pytest.raises(CardError, match="clashes with the answer"):
        card_with({"pitfalls": [*TEMPLATE["pitfalls"][:3], pitfall("close", "zero1*1.005")]})


def test_validation_refuses_formula_errors_with_parameters():
    with pytest.raises(CardError, match=r"parameters \{psi=1.3B, n_d=4\}.*undefined"):
        card_with({"pitfalls": [*TEMPLATE["pitfalls"][:3], pitfall("div0", "psi/(n_d - 4)")]})


def test_validation_refuses_too_few_distinct_pitfalls():
    pitfalls = [
        *TEMPLATE["pitfalls"][:3],
        pitfall("a", "16*psi"),
        pitfall("b", "16*psi*1.001"),
        pitfall("c", "zero1*2"),
    ]
    with pytest.raises(CardError, match="only 2 distinct pitfall.s. above the answer"):
        card_with({"pitfalls": pitfalls})


def test_validation_refuses_a_pitfall_that_never_has_its_own_value():
    pitfalls = [*TEMPLATE["pitfalls"], pitfall("twin", "ddp")]
    with pytest.raises(CardError, match="never show a value of their own"):
        card_with({"pitfalls": pitfalls, "choices": 3})


def test_unsafe_formula_in_card_is_refused_at_load():
    with pytest.raises(CardError, match="attribute access"):
        card_with({"answer": "psi.__class__"})


def test_shape_errors_are_readable():
    data = copy.deepcopy(CARD)
    del data["points"][0]["templates"][0]["stem"]["zh"]
    data["points"][0]["templates"][0]["pitfalls"] = TEMPLATE["pitfalls"][:2]
    with pytest.raises(CardError) as caught:
        parse_card(data)
    assert "points[0].templates[0].stem.zh: Field required" in str(caught.value)
    assert "pitfalls: List should have at least 3 items" in str(caught.value)


def test_validation_refuses_an_answer_without_three_pitfalls_above_it():
    # Only two pitfalls above 4Ψ + 12Ψ/N_d: the answer could never be the smallest of four.
    pitfalls = [*TEMPLATE["pitfalls"][:3], pitfall("a", "ddp"), pitfall("b", "zero1*2")]
    with pytest.raises(CardError, match="answer can be the smallest choice"):
        card_with({"pitfalls": pitfalls})


def test_validation_refuses_an_answer_without_three_pitfalls_below_it():
    pitfalls = [*TEMPLATE["pitfalls"][3:], pitfall("a", "zero2"), pitfall("b", "ddp/n_d")]
    with pytest.raises(CardError, match="answer can be the largest choice"):
        card_with({"pitfalls": pitfalls})


def test_validation_refuses_a_key_that_never_changes():
    pitfalls = [pitfall(f"p{k}", f"{k}*10**9*psi/psi") for k in (1, 2, 3, 5, 6, 7)]
    with pytest.raises(CardError, match=r"the answer is 4 GB for every parameter combination"):
        card_with({"answer": "4*10**9*psi/psi", "pitfalls": pitfalls})


def test_validation_refuses_a_statement_far_longer_than_the_answer():
    data = copy.deepcopy(CARD)
    statement_template = data["points"][0]["templates"][1]
    statement_template["pitfalls"][3] = statement(
        "all", "All three kinds of model state: weights, gradients, optimizer states, everything."
    )
    with pytest.raises(CardError, match=r"pitfall 'all' is \d+ characters long \(en\)"):
        card_with(data=data)


def test_validation_refuses_a_statement_template_with_no_longer_pitfalls():
    data = copy.deepcopy(CARD)
    statement_template = data["points"][0]["templates"][1]
    statement_template["pitfalls"][3] = statement("fp16-grads", "Only the fp16 gradients.")
    statement_template["pitfalls"][4] = statement("master", "Only the master weights.")
    with pytest.raises(CardError, match="answer can be the shortest choice"):
        card_with(data=data)


def test_the_rank_of_the_key_is_uniform(card):
    """The key is the smallest, second ... largest choice equally often (values, and lengths)."""
    from collections import Counter

    for template in card.points[0].templates:
        ranks = Counter()
        for seed in range(2000):
            variant = generate(card, template, seed)
            if template.kind == "numeric":
                measure = [c.value for c in variant.choices]
            else:
                measure = [len(c.text.en) for c in variant.choices]
            key = variant.choice(variant.correct_choice_id)
            key_measure = key.value if template.kind == "numeric" else len(key.text.en)
            ranks[sorted(measure).index(key_measure)] += 1
        assert set(ranks) == {0, 1, 2, 3}, template.id
        for rank, count in ranks.items():
            assert 0.21 < count / 2000 < 0.29, (template.id, rank, count)


def test_choices_share_one_number_of_significant_figures_each_in_a_readable_unit(card):
    from fractions import Fraction

    from app.domain.units import format_in

    template = card.points[0].templates[0]
    for seed in range(300):
        variant = generate(card, template, seed)
        assert {c.unit for c in variant.choices} <= {"MB", "GB", "TB"}
        exact = {}
        for choice in variant.choices:
            formula = choice.pitfall.formula if choice.pitfall else template.answer_formula
            params = {k: Fraction(v) for k, v in variant.params.items()}
            exact[choice.id] = formula.evaluate(params)
            # no 0.0xx: a value under 1 in its unit has at most one leading zero
            assert not choice.text.en.startswith("0.0"), choice.text.en
        # one number of significant figures (at most the template's 4) shows every choice
        figures = [
            f
            for f in range(1, 5)
            if all(format_in(exact[c.id], c.unit, f) == c.text.en for c in variant.choices)
        ]
        assert figures, [c.text.en for c in variant.choices]


def test_choices_are_shown_in_a_readable_unit():
    # 1.3B on 64 ranks: ZeRO-3's 2Ψ/N_d is 40.6 MB, not 0.0406 GB
    data = copy.deepcopy(CARD)
    template = data["points"][0]["templates"][0]
    template.update(
        {
            "answer": "2*psi/n_d",
            "precision": 3,
            "solution": [t("{=2*psi/n_d:GB:4} + {=2*psi/n_d:GB:4} = {=4*psi/n_d:GB}")],
            "pitfalls": [
                pitfall("a", "psi/n_d"),
                pitfall("b", "psi/n_d/2"),
                pitfall("c", "psi/n_d/4"),
                pitfall("d", "4*psi/n_d"),
                pitfall("e", "8*psi/n_d"),
                pitfall("f", "16*psi/n_d"),
            ],
        }
    )
    card = card_with(data=data)
    variant = next(
        v
        for v in (generate(card, card.points[0].templates[0], s) for s in range(400))
        if v.params == {"psi": "1300000000", "n_d": "64"}
    )
    correct = variant.choice(variant.correct_choice_id)
    assert correct.text.en == "40.6 MB" and correct.unit == "MB" and correct.value == 40.6
    # 40.625 MB to 4 figures is 40.62 (half to even); 40.62 + 40.62 = 81.24 shows as 81.2
    assert variant.solution[0].en == "40.62 MB + 40.62 MB = 81.2 MB"


def test_validation_refuses_a_worked_solution_that_does_not_add_up():
    # 0.040625 GB shown to 2 figures: 0.041 + 0.041 is not 0.081
    data = copy.deepcopy(CARD)
    template = data["points"][0]["templates"][0]
    template["solution"] = [t("{=2*psi/n_d:GB:2} + {=2*psi/n_d:GB:2} = {=4*psi/n_d:GB:2}")]
    with pytest.raises(
        CardError, match=r"solution step 1 \(en\): the displayed arithmetic gives"
    ) as caught:
        card_with(data=data)
    assert caught.value.field == "solution.1.en"  # where the authoring dashboard points


def test_validation_refuses_a_doubled_word():
    data = copy.deepcopy(CARD)
    data["points"][0]["templates"][0]["stem"] = {
        "en": "ZeRO-1, {psi} parameters, {n_d} ranks: memory per rank?",
        "zh": "ZeRO-1，{psi} 参数，{n_d} 个 rank：每个 rank 的的内存？",
    }
    with pytest.raises(CardError, match=r"stem \(zh\): doubled word '的的'") as caught:
        card_with(data=data)
    assert caught.value.template_id == "zero1-per-rank" and caught.value.field == "stem.zh"


def _everything(variant):
    """Every field a learner or the grader can see, for comparing two variants whole."""
    return (
        variant.id,
        variant.params,
        variant.params_display,
        variant.stem,
        variant.correct_choice_id,
        variant.answer,
        variant.solution,
        [(c.id, c.text, c.value, c.unit, c.pitfall_id, c.explanation) for c in variant.choices],
    )


def test_a_cached_combination_gives_the_variant_a_cold_start_gives(monkeypatch, card):
    """Many seeds share one parameter combination (cached per process): the variant of a seed is
    the same whether its combination was cached by other seeds first or built for it alone."""
    import app.domain.generation as generation

    templates = [t for p in card.points for t in p.templates]
    seeds = range(40)
    for template in templates:  # warm: every combination these seeds reach is cached
        for seed in range(1000, 1400):
            generate(card, template, seed)
    warm = {(t.id, s): _everything(generate(card, t, s)) for t in templates for s in seeds}
    monkeypatch.setattr(generation, "COMBINATIONS_KEPT", 0)  # nothing kept: each one built anew
    monkeypatch.setattr(generation, "VARIANTS_KEPT", 0)
    generation._combinations.clear()
    generation._drawn.clear()
    generation._variants.clear()
    cold = {(t.id, s): _everything(generate(card, t, s)) for t in templates for s in seeds}
    assert generation._combinations == {} and generation._variants == {}
    assert generation._drawn == {}
    assert warm == cold


@pytest.mark.parametrize(
    "card_id", ["zero-memory-offload", "megatron-3d-pipeline", "activation-memory"]
)
def test_a_variant_shows_what_arrange_shows_for_its_seed(cards, card_id):
    """generate arranges a combination's choices on positions, keeping each shown form, choice
    and stem by position (Combination.variant); validation and the giveaway measurement arrange
    candidates (arrange). For every template of the shipped cards and 300 seeds each, both show
    the same choices, texts, units and pitfalls, in the same order, with the same stem."""
    from app.domain.generation import arrange, draw_params, question_id, variant_rng

    card = cards[card_id]
    for template in card.templates():
        for seed in range(300):
            seed = seed * 7_919 + 3
            stream = variant_rng(question_id(card, template, seed), template.generator)
            values = draw_params(template, stream)
            reference = Combination(template, values)  # built apart: shares nothing kept
            shown = arrange(template, reference.answer, reference.pitfalls, stream, reference.memo)
            variant = generate(card, template, seed)
            assert [(c.id, c.text, c.unit, c.pitfall_id, c.correct) for c in variant.choices] == [
                (
                    label,
                    c.text,
                    c.unit if c.value is not None else None,
                    c.pitfall.id if c.pitfall else None,
                    c.pitfall is None,
                )
                for label, c in zip("abcdefgh", shown, strict=False)
            ], (template.id, seed)
            answer = next(c for c in shown if c.pitfall is None)
            assert variant.stem == reference.stem(answer)
            assert variant.answer == answer.text
            assert variant.params == reference.params
            assert variant.content.values == values


def test_a_kept_variant_is_the_one_regenerating_it_gives(monkeypatch, cards):
    """An answer is graded against its question regenerated from its id; the variant the question
    GET kept is served instead, and it is the variant a process that never saw the question
    regenerates (another worker, after a restart)."""
    import app.domain.generation as generation

    card = cards["zero-memory-offload"]
    templates = [t for p in card.points for t in p.templates]
    served = {(t.id, s): generate(card, t, s) for t in templates for s in range(25)}
    again = {(t.id, s): generate(card, t, s) for t in templates for s in range(25)}
    assert all(again[key] is served[key] for key in served)  # kept, not made again
    monkeypatch.setattr(generation, "VARIANTS_KEPT", 0)
    generation._variants.clear()
    fresh = {(t.id, s): generate(card, t, s) for t in templates for s in range(25)}
    assert generation._variants == {}
    assert all(fresh[key] is not served[key] for key in served)
    assert {k: _everything(v) for k, v in fresh.items()} == {
        k: _everything(v) for k, v in served.items()
    }


def test_the_variants_kept_are_bounded_oldest_made_first_out(monkeypatch, card):
    import app.domain.generation as generation

    monkeypatch.setattr(generation, "VARIANTS_KEPT", 3)
    generation._variants.clear()
    template = card.points[0].templates[0]
    first = generate(card, template, 1)
    generate(card, template, 2)
    generate(card, template, 3)
    assert generate(card, template, 1) is first  # kept
    generate(card, template, 4)  # pushes out seed 1, the oldest made
    assert [key[2] for key in generation._variants] == [2, 3, 4]
    assert generate(card, template, 1) is not first  # made again


def test_a_draft_under_the_same_template_id_and_version_is_not_served_the_cached_one(card):
    """An instructor's preview of an edited template (same id and version until published) shows
    the edit, not the combination cached for the published template."""
    published = card.points[0].templates[0]
    before = generate(card, published, 7)
    edited = {**TEMPLATE["stem"], "en": "Edited: " + TEMPLATE["stem"]["en"]}
    draft = card_with({"stem": edited})  # the stem changed, id and version did not
    after = generate(draft, draft.points[0].templates[0], 7)
    assert after.id == before.id and after.params == before.params
    assert before.stem.en.startswith("ZeRO-1, ") and after.stem.en.startswith("Edited: ZeRO-1, ")


def test_a_validated_card_is_served_from_combinations_built_by_its_validation(monkeypatch):
    """Loading a card validates it over its whole parameter domain with the generator's own
    cached evaluation, so the first learners' questions need no formula evaluated, in their
    choices or in their texts."""
    import app.domain.generation as generation
    from app.domain.cards import read_card

    card = read_card(CARDS_DIR / f"{CARD_ID}.yaml")
    validate_card(card)  # as loading the cards does
    built = []

    class Counted(generation.Combination):
        __slots__ = ()

        def __init__(self, template, values):
            built.append((template.id, dict(values)))
            super().__init__(template, values)

    monkeypatch.setattr(generation, "Combination", Counted)
    # Validation also rendered every text of every combination as generation does (the
    # formulas in them evaluated once) and arranged the choices in their units and figures.
    import app.domain.texts as texts

    evaluated = []
    real_format = texts.format_computed

    def counted_format(segment, value, lang):
        evaluated.append(segment)
        return real_format(segment, value, lang)

    monkeypatch.setattr(texts, "format_computed", counted_format)
    templates = [t for p in card.points for t in p.templates]
    assert sum(t.domain_size() for t in templates) <= generation.COMBINATIONS_KEPT
    for template in templates:
        for seed in range(200):
            generate(card, template, seed)
    assert built == []
    assert evaluated == []


def test_a_text_bound_to_a_combination_fills_in_as_it_renders():
    """Formulas and parameters are put into a text once per combination (bind); the shown
    answer's text, which follows the shown set, is filled in per variant: both ways give the
    rendered text."""
    from fractions import Fraction

    from app.domain.texts import Text, compile_text

    text = compile_text(
        Text(
            "{psi} on {n_d} ranks: {=2*psi/n_d:GB} of weights; {answer} in all", "{answer}（{n_d}）"
        ),
        names=frozenset({"psi", "n_d"}),
        named=frozenset({"psi", "n_d", "answer"}),
        definitions={},
    )
    values = {"psi": Fraction(7 * 10**9), "n_d": Fraction(8)}
    params = {"psi": "7B", "n_d": "8"}
    bound = text.bind(values, params, frozenset({"answer"}))
    for answer in (Text("31.5 GB", "31.5 GB"), Text("32 GB", "32 GB")):
        filled = bound.fill({"answer": answer})
        assert filled == text.render(values, {**params, "answer": answer})
        assert filled.en == f"7B on 8 ranks: 1.75 GB of weights; {answer.en} in all"
        assert filled.zh == f"{answer.zh}（8）"
    closed = text.bind(values, {**params, "answer": "x"}, frozenset())
    assert closed.whole == Text("7B on 8 ranks: 1.75 GB of weights; x in all", "x（8）")


def test_draws_are_what_random_s_own_methods_draw_for_the_same_seed():
    """Variants draw through Draws (getrandbits only); every draw equals what random.Random's
    randrange, choice and shuffle give for the same seed, so stored questions regenerate as
    they were first shown, and the stream stays in step after each kind of draw."""
    import random

    from app.domain.generation import Draws, seeded

    for seed in range(300):
        key = f"zero-memory-offload:tpl-{seed}:3:{seed * 7919}"
        ours, theirs = seeded(key), random.Random(key)
        for size in (1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 100, 2**31 - 1):
            assert ours.below(size) == theirs.randrange(size)
            items = list(range(size if size < 200 else 3))
            assert ours.choice(items) == theirs.choice(items)
            mine, reference = list(items), list(items)
            ours.shuffle(mine)
            theirs.shuffle(reference)
            assert mine == reference
        assert ours.below(10**12) == theirs.randrange(10**12)
    assert isinstance(seeded("x"), Draws)
    with pytest.raises(IndexError):
        seeded("x").choice([])


def test_choices_shared_between_variants_belong_to_each_variant(card):
    """Choices are made once per combination and shown pair and shared by every seed showing
    them: each variant's choices still carry its own label, text, answer and explanation."""
    template = card.points[0].templates[0]
    seen = {}
    for seed in range(400):
        variant = generate(card, template, seed)
        correct = variant.choice(variant.correct_choice_id)
        assert [c.id for c in variant.choices] == list("abcdefgh"[: len(variant.choices)])
        for choice in variant.choices:
            assert choice.shown_answer is variant.shown_answer
            assert choice.content is variant.content
            assert choice.text == choice.shown.text
            result = grade(variant, choice.id)
            assert result.correct == (choice is correct)
            assert correct.text.en in result.explanation.en
            key = (id(variant.content), choice.id, id(choice.shown), id(variant.shown_answer))
            seen.setdefault(key, set()).add(id(choice))
    assert len(seen) < 400 * len(variant.choices)  # seeds did share them
    assert all(len(ids) == 1 for ids in seen.values())  # one object per label and shown pair


def test_the_seed_picks_each_template_of_a_point_about_equally_and_always_the_same(card):
    """generate_for_point: over 5,000 seeds every template of each point is shown 20 % ± 3
    points of the time (5 templates a point; the sampling error is 0.6 points), and a seed
    gives the same template again."""
    from collections import Counter

    from app.domain.generation import generate_for_point

    for point in card.points:
        templates = [t.id for t in point.templates]
        shown = Counter(
            generate_for_point(card, point.slug, seed).id.template_id for seed in range(5000)
        )
        assert set(shown) == set(templates)
        for template_id in templates:
            assert abs(shown[template_id] / 5000 - 1 / len(templates)) < 0.03, template_id
        for seed in (0, 1, 2**31 - 1):
            first = generate_for_point(card, point.slug, seed)
            assert generate_for_point(card, point.slug, seed).id == first.id
