"""What the template editor keeps of a template's parameters: a template saved as the editor shows
it changes nothing (decimal values a card file holds as numbers included), and a parameter typed
on two lines is refused at its field rather than the later line silently replacing the earlier.

Golden values (the card file's values, the refusals' words) are written here."""

from __future__ import annotations

import pytest
from test_authoring_forms import field_problems, zero_draft
from test_authoring_web import log_in
from test_card_editing import posted

from app.authoring import history, service

MEGATRON = "/instructor/cards/megatron-3d-pipeline"
ZERO_TEMPLATE = "/instructor/cards/zero-memory-offload/templates/p1-total-16psi"


def megatron_template(app, template_id: str) -> dict:
    with app.state.sessionmaker() as db:
        document = service.get_draft(db=db, card_id="megatron-3d-pipeline").document
    for point in document["points"]:
        for template in point["templates"]:
            if template["id"] == template_id:
                return template
    raise KeyError(template_id)


@pytest.mark.parametrize(
    ("template_id", "name", "values"),
    [
        ("p1-step-time", "t_f", [0.0005, 0.001, 0.002, 0.004]),
        ("p2-micro-batches-for-target", "target", [0.05, 0.1, 0.2]),
    ],
)
def test_a_template_with_decimal_values_saved_unchanged_changes_nothing(
    client, app, template_id, name, values
):
    log_in(client, app)
    path = f"{MEGATRON}/templates/{template_id}"
    assert megatron_template(app, template_id)["params"][name]["values"] == values
    saved = client.post(path, data=posted(client.get(path).text) | {"kind": "numeric"})
    assert saved.status_code == 200, saved.text[:300]
    with app.state.sessionmaker() as db:
        _, changes = history.draft_diff(db=db, card_id="megatron-3d-pipeline")
    assert changes == []
    assert megatron_template(app, template_id)["params"][name]["values"] == values


def test_a_decimal_value_typed_differently_is_saved_as_typed(client, app):
    log_in(client, app)
    path = f"{MEGATRON}/templates/p1-step-time"
    form = posted(client.get(path).text) | {"kind": "numeric"}
    assert form["params"].startswith("t_f = 0.0005, 0.001, 0.002, 0.004 | ms\n")
    form["params"] = form["params"].replace("0.004 | ms", "0.008 | ms")
    assert client.post(path, data=form).status_code == 200
    values = megatron_template(app, "p1-step-time")["params"]["t_f"]["values"]
    assert values == ["0.0005", "0.001", "0.002", "0.008"]


@pytest.mark.parametrize(
    ("field", "typed", "shown"),
    [
        (
            "params",
            "psi = 7e9, 13e9\nn_d = 8, 16\npsi = 70e9",
            "parameters, line 3: 'psi' is given on an earlier line already",
        ),
        (
            "derived",
            "h = psi/n_d\nh = psi*2",
            "derived parameters, line 2: 'h' is given on an earlier line already",
        ),
    ],
)
def test_a_parameter_given_twice_is_refused_at_its_field(client, app, field, typed, shown):
    log_in(client, app)
    before = zero_draft(app)
    form = posted(client.get(ZERO_TEMPLATE).text) | {"kind": "numeric", field: typed}
    refused = client.post(ZERO_TEMPLATE, data=form)
    assert refused.status_code == 400, refused.text[:300]
    assert field_problems(refused.text, f"f-{field}") == [shown]
    assert posted(refused.text)[field] == typed
    assert zero_draft(app) == before


def test_a_parameter_given_twice_is_refused_in_chinese(client, app):
    log_in(client, app)
    form = posted(client.get(ZERO_TEMPLATE).text) | {
        "kind": "numeric",
        "params": "psi = 7e9\npsi = 13e9",
    }
    refused = client.post(ZERO_TEMPLATE + "?lang=zh", data=form)
    assert refused.status_code == 400
    assert field_problems(refused.text, "f-params") == ["参数第 2 行：'psi' 在前面的行里已经给出"]


STEP_TIME = f"{MEGATRON}/templates/p1-step-time"
AT = "{t_f=0.5 ms, pp=8, n_m=24}"


@pytest.mark.parametrize(
    ("lang", "field", "typed", "shown"),
    [
        (
            "en",
            "derived",
            "h = 1/(pp-pp)",
            f"derived parameter 'h', with the parameters {AT}: division by zero: the value is "
            "undefined (at column 2)",
        ),
        (
            "zh",
            "constraints",
            "n_m >= 1\nn_m <= sqrt(pp-100)",
            f"约束 2，参数为 {AT} 时：负数（-92）的平方根不是实数 （第 1 列）",
        ),
    ],
)
def test_a_rule_failing_at_some_values_is_shown_at_its_field(
    client, app, lang, field, typed, shown
):
    log_in(client, app)
    form = posted(client.get(STEP_TIME).text) | {"kind": "numeric", field: typed}
    page = client.post(f"{STEP_TIME}?lang={lang}", data=form)
    assert field_problems(page.text, f"f-{field}") == [shown], page.status_code
    assert posted(page.text)[field] == typed
