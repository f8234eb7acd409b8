"""A numeric template whose formula cannot be evaluated at some parameter values (the square
root of a negative number, a division by zero) is refused at that formula's field and column,
naming the values, as a formula that does not parse is: the dashboard then shows it at the
field, not as a problem of no field.

Golden values: the Megatron card's first combination of p1-step-time is t_f = 0.0005 s
(0.5 ms), pp = 8, n_m = 24, so sqrt(pp - 100) takes the root of -92."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from app.domain.authoring import compile_document, template_problems

ROOT = Path(__file__).resolve().parents[1]
MEGATRON = yaml.safe_load((ROOT / "cards" / "megatron-3d-pipeline.yaml").read_text("utf-8"))
VALUES = "{t_f=0.5 ms, pp=8, n_m=24}"


def with_template(change) -> dict:
    document = copy.deepcopy(MEGATRON)
    for point in document["points"]:
        for template in point["templates"]:
            if template["id"] == "p1-step-time":
                change(template)
    return document


def problems_of(document: dict) -> list:
    compiled = compile_document(document)
    assert compiled.card is not None and compiled.problems == ()
    return template_problems(compiled.card, "p1-step-time")


def set_answer(template):
    template["answer"] = "sqrt(pp-100)"


def set_pitfall(template):
    assert template["pitfalls"][0]["id"] == "ideal-time"
    template["pitfalls"][0]["formula"] = "n_m/(pp-pp)"


@pytest.mark.parametrize(
    ("change", "field", "column", "en", "zh"),
    [
        (
            set_answer,
            "answer",
            1,
            f"with the parameters {VALUES}: the square root of a negative number (-92) is not real",
            f"参数为 {VALUES} 时：负数（-92）的平方根不是实数",
        ),
        (
            set_pitfall,
            "pitfalls.ideal-time.formula",
            4,
            f"with the parameters {VALUES}: division by zero: the value is undefined",
            f"参数为 {VALUES} 时：除以零：值没有定义",
        ),
    ],
)
def test_a_formula_that_fails_at_some_values_is_refused_at_its_field(change, field, column, en, zh):
    [problem] = problems_of(with_template(change))
    assert (problem.template_id, problem.field, problem.position) == ("p1-step-time", field, column)
    assert problem.reason.get("en") == en
    assert problem.reason.get("zh") == zh
    if field.startswith("constraints."):  # a page numbers it from 1, as the message does
        assert problem.shown_field == "constraints.2.at_most"


# A derived parameter or a constraint that cannot be evaluated at some values: refused at its
# own field (not the whole ``derived`` field, nor as a problem of no field), naming the rule and
# the values known when it failed. Without constraints validation finds it; with constraints
# compilation does (it lists the combinations they allow).
def derived_only(template):
    template["derived"] = {"h": {"formula": "1/(pp-pp)"}}


def derived_with_constraint(template):
    template["derived"] = {"h": {"formula": "sqrt(pp-100)"}}
    template["constraints"] = [{"value": "n_m", "at_least": "1"}]


def failing_constraint(template):
    template["derived"] = {"h": {"formula": "2*pp"}}
    template["constraints"] = [
        {"value": "n_m", "at_least": "1"},
        {"value": "n_m", "at_most": "h/(pp-pp)"},
    ]


def located(document: dict) -> list:
    compiled = compile_document(document)
    assert compiled.card is not None
    if compiled.problems:
        return list(compiled.problems)
    return template_problems(compiled.card, "p1-step-time")


WITH_H = "{t_f=0.5 ms, pp=8, n_m=24, h=16}"


@pytest.mark.parametrize(
    ("change", "field", "column", "en", "zh"),
    [
        (
            derived_only,
            "derived.h",
            2,
            f"derived parameter 'h', with the parameters {VALUES}: division by zero: the value "
            "is undefined",
            f"派生参数 'h'，参数为 {VALUES} 时：除以零：值没有定义",
        ),
        (
            derived_with_constraint,
            "derived.h",
            1,
            f"derived parameter 'h', with the parameters {VALUES}: the square root of a negative "
            "number (-92) is not real",
            f"派生参数 'h'，参数为 {VALUES} 时：负数（-92）的平方根不是实数",
        ),
        (
            failing_constraint,
            "constraints.1.at_most",  # the second, as the API indexes lists
            2,
            f"constraint 2, with the parameters {WITH_H}: division by zero: the value is undefined",
            f"约束 2，参数为 {WITH_H} 时：除以零：值没有定义",
        ),
    ],
)
def test_a_rule_that_fails_at_some_values_is_refused_at_its_field(change, field, column, en, zh):
    [problem] = located(with_template(change))
    assert (problem.template_id, problem.field, problem.position) == ("p1-step-time", field, column)
    assert problem.reason.get("en") == en
    assert problem.reason.get("zh") == zh
