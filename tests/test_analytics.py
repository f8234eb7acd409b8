"""Instructor analytics: a seeded set of attempts analysed through the page, the API and the CSV
equals the figures computed independently here (facility, corrected item-rest correlation by a
plain Pearson formula, pitfall selection rates over the variants showing them, medians,
per-parameter facility, the flags); learners get 403; the SVG charts are escaped and script-free.
"""

from __future__ import annotations

import csv
import html
import io
import math
import random
import re
import uuid
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta

import pytest
from conftest import CARD_ID

from app.auth.service import register
from app.domain.analytics import (
    AttemptRow,
    Bar,
    Dot,
    TemplateOutline,
    Thresholds,
    analyse,
    bars_svg,
    pearson,
    pitfall_bars_svg,
    scatter_svg,
)
from app.domain.generation import generate
from app.models import Attempt, Learner
from app.practice.storing import stored_choices

API = "/api/v1"
PASSWORD = "correct horse battery"
PAGE = f"/instructor/cards/{CARD_ID}/analytics"
START = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)


# --- independent arithmetic ---------------------------------------------------------------------


def plain_pearson(xs, ys):
    """r = (nΣxy − ΣxΣy) / sqrt((nΣx² − (Σx)²)(nΣy² − (Σy)²)), or None without variance."""
    n = len(xs)
    sx, sy = sum(xs), sum(ys)
    sxy = sum(x * y for x, y in zip(xs, ys, strict=True))
    sxx, syy = sum(x * x for x in xs), sum(y * y for y in ys)
    den = (n * sxx - sx * sx) * (n * syy - sy * sy)
    if n < 2 or den <= 1e-12:
        return None
    return (n * sxy - sx * sy) / math.sqrt(den)


def plain_median(values):
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def surely_negative(r, n):
    """Whether r over n learners is below zero with 95 % confidence: Fisher's z, atanh(r), is
    about normal with standard error 1/sqrt(n - 3)."""
    z = 0.5 * math.log((1 + r) / (1 - r))
    return z + 1.959964 / math.sqrt(n - 3) < 0


def expected_discrimination(rows, template_id, *, min_rest=3, min_learners=5, value=None):
    """Item: the learner's share right on the template (or its variants with ``value``); rest:
    the learner's share right on all their attempts at the card's other templates."""
    xs, ys = [], []
    for learner in sorted({r["learner_id"] for r in rows}):
        mine = [r for r in rows if r["learner_id"] == learner]
        item = [r for r in mine if r["template_id"] == template_id]
        if value is not None:
            item = [r for r in item if r["params"].get(value[0]) == value[1]]
        rest = [r for r in mine if r["template_id"] != template_id]
        if not item or len(rest) < min_rest:
            continue
        xs.append(sum(r["correct"] for r in item) / len(item))
        ys.append(sum(r["correct"] for r in rest) / len(rest))
    if len(xs) < min_learners:
        return None, len(xs)
    return plain_pearson(xs, ys), len(xs)


# --- seeding ------------------------------------------------------------------------------------


def seed(db, card, *, learners=10, rounds=5):
    """Attempts with chosen patterns; returns the counted rows (first answers, current versions)
    as dicts, the learner ids, and the templates used."""
    numeric = [t for t in card.templates() if "n_d" in t.params][:3]
    statement = next(t for t in card.templates() if t.kind == "statement")
    strong_wins, also_strong, reversed_ = numeric
    rng = random.Random(20261201)
    learner_ids = [uuid.uuid4().hex for _ in range(learners)]
    for learner_id in learner_ids:
        db.add(Learner(id=learner_id, kind="guest", role="learner"))
    db.flush()
    counted, others = [], []
    clock = START

    def add(learner_index, template, seed_, *, right, first=True, card_id=CARD_ID, version=None):
        nonlocal clock
        variant = generate(card, template, seed_)
        wrong = sorted(
            (c for c in variant.choices if c.pitfall_id is not None), key=lambda c: c.pitfall_id
        )
        # A wrong learner picks the alphabetically first pitfall shown: the others are never
        # picked where that one is shown.
        chosen = (
            next(c for c in variant.choices if c.id == variant.correct_choice_id)
            if right
            else wrong[0]
        )
        clock += timedelta(minutes=1)
        row = {
            "learner_id": learner_ids[learner_index],
            "card_id": card_id,
            "card_version": card.version,
            "point": template.point,
            "template_id": template.id,
            "template_version": version or template.version,
            "seed": seed_,
            "params": dict(variant.params),
            "choices": stored_choices(variant),
            "choice_id": chosen.id,
            "correct_choice_id": variant.correct_choice_id,
            "correct": right,
            "pitfall_id": None if right else chosen.pitfall_id,
            "client_answer_id": uuid.uuid4().hex,
            "first_answer": first,
            "duration_ms": 1000 + 137 * len(counted) + rng.randrange(500),
            "created_at": clock,
        }
        db.add(Attempt(**row))
        shown = [c["pitfall_id"] for c in row["choices"] if c["pitfall_id"]]
        target = counted if first and card_id == CARD_ID and version is None else others
        target.append({**row, "shown": shown})

    for i in range(learners):
        for k in range(rounds):
            seed_ = 1000 * i + k
            # Stronger learners (higher i) are right more often; n_d = 64 is harder.
            n_d = generate(card, strong_wins, seed_).params.get("n_d")
            add(i, strong_wins, seed_, right=i >= 3 and n_d != "64")
            add(i, also_strong, seed_ + 7, right=i >= 2 and rng.random() < 0.9)
            add(i, reversed_, seed_ + 11, right=i < 4)  # weaker learners do better
            add(i, statement, seed_ + 13, right=True)  # everybody right
        # Ignored: a retry of the same question, another card, an older template version.
        add(i, strong_wins, 1000 * i, right=True, first=False)
        add(i, strong_wins, 5 + i, right=False, card_id="another-card")
        add(i, also_strong, 77 + i, right=False, version=also_strong.version + 100)
    db.commit()
    return counted, others, learner_ids, numeric, statement


# --- signing in ---------------------------------------------------------------------------------


def web_login(client, app, email, role, *, create=True):
    if create:
        with app.state.sessionmaker() as db:
            register(db=db, email=email, password=PASSWORD, role=role)
    page = client.get("/login")
    token = html.unescape(re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1))
    response = client.post(
        "/login", data={"csrf_token": token, "email": email, "password": PASSWORD}
    )
    assert response.status_code == 200, response.text


def bearer(client, app, email, role):
    with app.state.sessionmaker() as db:
        register(db=db, email=email, password=PASSWORD, role=role)
    response = client.post(
        f"{API}/auth/token", json={"email": email, "password": PASSWORD, "device_name": "t"}
    )
    assert response.status_code == 200, response.text
    return {"Authorization": f"Bearer {response.json()['access_token']}"}


@pytest.fixture
def seeded(db, card):
    return seed(db, card)


# --- the figures, through the API ---------------------------------------------------------------


def test_api_figures_equal_the_independent_computation(client, app, seeded, card):
    check_api_figures(client, app, seeded, card)


@pytest.mark.postgres
def test_postgres_gives_the_same_figures(pg_url, tmp_path, cards, card):
    """The same check on PostgreSQL (where the database lists the pitfalls shown)."""
    from conftest import make_settings
    from fastapi.testclient import TestClient

    from app.cli import migrate
    from app.main import create_app

    migrate(pg_url)
    app = create_app(make_settings(tmp_path, pg_url), cards=cards)
    with TestClient(app) as client, app.state.sessionmaker() as db:
        check_api_figures(client, app, seed(db, card), card)
    app.state.sessionmaker.kw["bind"].dispose()


def check_api_figures(client, app, seeded, card):
    counted, _others, learner_ids, numeric, statement = seeded
    headers = bearer(client, app, "prof@example.com", "instructor")
    response = client.get(f"{API}/instructor/cards/{CARD_ID}/analytics", headers=headers)
    assert response.status_code == 200, response.text
    body = response.json()
    by_id = {t["template_id"]: t for t in body["templates"]}

    # Every template of the card is listed (in the card's order), answered or not.
    assert [t["template_id"] for t in body["templates"]] == [t.id for t in card.templates()]
    assert body["stats"]["attempts"] == len(counted)
    assert body["stats"]["learners"] == len(learner_ids)
    assert body["stats"]["facility"] == pytest.approx(
        sum(r["correct"] for r in counted) / len(counted)
    )
    assert body["stats"]["median_ms"] == pytest.approx(
        plain_median([r["duration_ms"] for r in counted])
    )
    assert body["excluded_versions"] == len(learner_ids)  # the older-version attempts

    for template in [*numeric, statement]:
        rows = [r for r in counted if r["template_id"] == template.id]
        got = by_id[template.id]
        stats = got["stats"]
        assert stats["attempts"] == len(rows) == 5 * len(learner_ids)
        assert stats["learners"] == len(learner_ids)
        assert stats["right"] == sum(r["correct"] for r in rows)
        assert stats["facility"] == pytest.approx(sum(r["correct"] for r in rows) / len(rows))
        assert stats["median_ms"] == pytest.approx(plain_median([r["duration_ms"] for r in rows]))
        r, n = expected_discrimination(counted, template.id)
        assert stats["discrimination_learners"] == n
        if r is None:
            assert stats["discrimination"] is None
        else:
            assert stats["discrimination"] == pytest.approx(r, abs=1e-9)

        # Selection rates over the variants where each pitfall was shown.
        for pitfall in got["pitfalls"]:
            shown = [r for r in rows if pitfall["pitfall_id"] in r["shown"]]
            picked = [r for r in shown if r["pitfall_id"] == pitfall["pitfall_id"]]
            assert pitfall["shown"] == len(shown), pitfall
            assert pitfall["picked"] == len(picked), pitfall
            wrong = sum(not r["correct"] for r in rows)
            if shown:
                assert pitfall["rate"] == pytest.approx(len(picked) / len(shown))
            else:
                assert pitfall["rate"] is None
            assert pitfall["share_of_wrong"] == (
                pytest.approx(len(picked) / wrong) if wrong else None
            )
        assert {p["pitfall_id"] for p in got["pitfalls"]} == {p.id for p in template.pitfalls}

        # Per parameter value.
        for value in got["params"]:
            subset = [r for r in rows if r["params"].get(value["name"]) == value["value"]]
            assert value["stats"]["attempts"] == len(subset)
            assert value["stats"]["learners"] == len({r["learner_id"] for r in subset})
            assert value["stats"]["facility"] == pytest.approx(
                sum(r["correct"] for r in subset) / len(subset)
            )
            assert value["stats"]["median_ms"] == pytest.approx(
                plain_median([r["duration_ms"] for r in subset])
            )
            vr, vn = expected_discrimination(
                counted, template.id, value=(value["name"], value["value"])
            )
            assert value["stats"]["discrimination_learners"] == vn
            assert value["stats"]["discrimination"] == (
                None if vr is None else pytest.approx(vr, abs=1e-9)
            )
        seen_values = {(n, v) for r in rows for n, v in r["params"].items()}
        assert {(v["name"], v["value"]) for v in got["params"]} == seen_values

    # The strong-wins template: n_d = 64 is where learners fail.
    strong = by_id[numeric[0].id]
    n_d = {v["value"]: v["stats"]["facility"] for v in strong["params"] if v["name"] == "n_d"}
    assert n_d["64"] == 0 < max(n_d.values())

    # Exam points: rest = the other exam points.
    for point in body["points"]:
        rows = [r for r in counted if r["point"] == point["point"]]
        assert point["stats"]["attempts"] == len(rows)
        xs, ys = [], []
        for learner in learner_ids:
            item = [r for r in rows if r["learner_id"] == learner]
            rest = [
                r for r in counted if r["learner_id"] == learner and r["point"] != point["point"]
            ]
            if item and len(rest) >= 3:
                xs.append(sum(r["correct"] for r in item) / len(item))
                ys.append(sum(r["correct"] for r in rest) / len(rest))
        expected = plain_pearson(xs, ys) if len(xs) >= 5 else None
        assert point["stats"]["discrimination"] == (
            None if expected is None else pytest.approx(expected, abs=1e-9)
        )

    # Flags, computed independently.
    expected_flags = set()
    for template in card.templates():
        rows = [r for r in counted if r["template_id"] == template.id]
        for pitfall in template.pitfalls:
            shown = [r for r in rows if pitfall.id in r["shown"]]
            never = not any(r["pitfall_id"] == pitfall.id for r in shown)
            # Not said of a template nobody ever got wrong (everyone_right covers it).
            if len(shown) >= 20 and never and not all(r["correct"] for r in rows):
                expected_flags.add(("unpicked_pitfall", template.id, pitfall.id))
        r, n = expected_discrimination(counted, template.id)
        if r is not None and surely_negative(r, n):
            expected_flags.add(("negative_discrimination", template.id, None))
        learners = {x["learner_id"] for x in rows}
        if len(rows) >= 10 and len(learners) >= 5 and all(x["correct"] for x in rows):
            expected_flags.add(("everyone_right", template.id, None))
    got_flags = {(f["kind"], f["template_id"], f["pitfall_id"]) for f in body["flags"]}
    assert got_flags == expected_flags
    assert ("everyone_right", statement.id, None) in got_flags
    assert ("negative_discrimination", numeric[2].id, None) in got_flags
    assert any(kind == "unpicked_pitfall" for kind, _, _ in got_flags)

    # Misconceptions: a pitfall id over the whole card.
    for m in body["misconceptions"]:
        shown = [r for r in counted if m["pitfall_id"] in r["shown"]]
        assert m["shown"] == len(shown)
        assert m["picked"] == sum(r["pitfall_id"] == m["pitfall_id"] for r in counted)


def test_scopes_versions_and_days(client, app, seeded, card, clock):
    counted, others, learner_ids, numeric, _statement = seeded
    headers = bearer(client, app, "prof@example.com", "instructor")
    url = f"{API}/instructor/cards/{CARD_ID}/analytics"
    earliest = client.get(url, params={"scope": "earliest"}, headers=headers).json()
    template = numeric[0].id
    firsts = {}
    for r in counted:  # in the order stored
        if r["template_id"] == template:
            firsts.setdefault(r["learner_id"], r)
    got = next(t for t in earliest["templates"] if t["template_id"] == template)
    assert got["stats"]["attempts"] == len(firsts) == len(learner_ids)
    assert got["stats"]["facility"] == pytest.approx(
        sum(r["correct"] for r in firsts.values()) / len(firsts)
    )
    everything = client.get(url, params={"versions": "all"}, headers=headers).json()
    assert everything["excluded_versions"] == 0
    assert everything["stats"]["attempts"] == len(counted) + len(learner_ids)
    also = next(t for t in everything["templates"] if t["template_id"] == numeric[1].id)
    assert len(also["versions"]) == 2
    # Days count back from the service's clock.
    clock.now = START + timedelta(days=1, minutes=60)
    since = START + timedelta(minutes=60)
    recent = client.get(url, params={"days": 1}, headers=headers).json()
    expected = [r for r in counted if r["created_at"] >= since]
    assert 0 < len(expected) < len(counted)
    assert recent["stats"]["attempts"] == len(expected)
    assert client.get(url, params={"scope": "bogus"}, headers=headers).status_code == 422
    assert client.get(f"{API}/instructor/cards/nope/analytics", headers=headers).status_code == 404


# --- the page and the CSV -----------------------------------------------------------------------


def test_page_shows_the_figures_charts_and_flags(client, app, seeded, card):
    counted, _others, learner_ids, numeric, statement = seeded
    web_login(client, app, "prof@example.com", "instructor")
    response = client.get(PAGE)
    assert response.status_code == 200, response.text
    page = response.text
    assert f'<dd id="total-attempts">{len(counted)}</dd>' in page
    assert f'<dd id="total-learners">{len(learner_ids)}</dd>' in page
    row = re.search(rf'<tr data-template="{re.escape(statement.id)}">(.*?)</tr>', page, re.S)
    assert row and ">100%<" in row.group(1) and "Everyone gets it right" in row.group(1)
    assert "Negative discrimination" in page and "Nobody picks this pitfall" in page
    svgs = re.findall(r"<svg.*?</svg>", page, re.S)
    assert len(svgs) == 2 + len(card.templates())  # scatter, misconceptions, one per template
    for svg in svgs:
        ET.fromstring(svg)  # well-formed
        assert "<script" not in svg and "style=" not in svg and "on" + "load" not in svg
    # The scatter has a dot for each template with a discrimination.
    with_r = [
        t.id for t in card.templates() if expected_discrimination(counted, t.id)[0] is not None
    ]
    assert len(with_r) >= 2
    assert svgs[0].count("<circle") == len(with_r)
    # The page in Chinese.
    zh = client.get(PAGE, params={"lang": "zh"})
    assert zh.status_code == 200 and "区分度" in zh.text and "正确率" in zh.text


def test_parameter_values_are_shown_as_the_questions_show_them(client, app, seeded):
    web_login(client, app, "prof@example.com", "instructor")
    page = client.get(PAGE).text
    rows = re.findall(
        r'<tr data-param="([^"]+)"[^>]*><td><code>[^<]*</code></td><td>([^<]*)</td>', page
    )
    shown = dict(rows)
    # The card declares psi with 'format: count' (70B, 1.3B); n_d has no format.
    assert shown["psi=7000000000"] == "7B" and shown["psi=1300000000"] == "1.3B"
    assert shown["n_d=16"] == "16"


def test_the_filter_form_sent_unchanged_shows_the_page(client, app, seeded):
    """ "Show" pressed on the form as it came: a blank number of days means every day."""
    web_login(client, app, "prof@example.com", "instructor")
    page = client.get(PAGE).text
    form = page.split('<form class="filters"')[1].split("</form>")[0]
    fields = dict(re.findall(r'<input[^>]*name="(\w+)"[^>]*value="([^"]*)"', form))
    for name, options in re.findall(r'<select name="(\w+)">(.*?)</select>', form, re.S):
        fields[name] = re.search(r'<option value="([^"]*)"[^>]* selected', options).group(1)
    assert fields["days"] == ""
    shown = client.get(PAGE, params=fields)
    assert shown.status_code == 200, shown.text[:300]
    assert shown.text.count("<svg") == page.count("<svg")
    assert client.get(PAGE, params={**fields, "days": "0"}).status_code == 422


def test_csv_parses_and_matches(client, app, seeded):
    counted, _others, _learners, numeric, _statement = seeded
    web_login(client, app, "prof@example.com", "instructor")
    for url in (PAGE + ".csv", PAGE + "?format=csv"):
        response = client.get(url)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/csv")
        assert "attachment" in response.headers["content-disposition"]
        table = list(csv.DictReader(io.StringIO(response.text)))
        levels = {row["level"] for row in table}
        assert {"card", "point", "template", "pitfall", "param", "param_pitfall"} <= levels
        assert "misconception" in levels
        card_row = next(row for row in table if row["level"] == "card")
        assert int(card_row["attempts"]) == len(counted)
        template = numeric[0].id
        rows = [r for r in counted if r["template_id"] == template]
        t_row = next(r for r in table if r["level"] == "template" and r["template_id"] == template)
        assert float(t_row["facility"]) == pytest.approx(
            sum(r["correct"] for r in rows) / len(rows), rel=1e-5
        )
        for row in table:
            if row["level"] == "param" and row["template_id"] == template:
                subset = [r for r in rows if r["params"].get(row["param"]) == row["value"]]
                assert int(row["attempts"]) == len(subset)
                assert float(row["facility"]) == pytest.approx(
                    sum(r["correct"] for r in subset) / len(subset), rel=1e-5
                )


# --- who may look -------------------------------------------------------------------------------


def test_learners_get_403_guests_log_in_and_the_api_needs_an_instructor_token(client, app, seeded):
    api_url = f"{API}/instructor/cards/{CARD_ID}/analytics"
    for url in (PAGE, PAGE + ".csv", PAGE + "?format=csv"):
        response = client.get(url, follow_redirects=False)  # a guest: sent to log in first
        assert response.status_code == 303 and response.headers["location"].startswith("/login")
        assert "text/csv" not in response.headers.get("content-type", "")
    assert client.get(api_url).status_code == 401
    headers = bearer(client, app, "ada@example.com", "learner")
    assert client.get(api_url, headers=headers).status_code == 403
    web_login(client, app, "ada@example.com", "learner", create=False)
    for url in (PAGE, PAGE + ".csv", PAGE + "?format=csv"):
        response = client.get(url)
        assert response.status_code == 403, url
        assert "text/csv" not in response.headers.get("content-type", "")


# --- the domain alone ---------------------------------------------------------------------------


def row(
    learner,
    template,
    correct,
    *,
    pitfall=None,
    shown=("p1", "p2", "p3"),
    ms=None,
    point="a",
    params=(),
    version=1,
):
    return AttemptRow(learner, point, template, version, correct, pitfall, ms, params, shown)


def test_small_hand_computed_case():
    rows = [
        row("A", "t1", True, ms=1000, params=(("n", "4"),)),
        row("A", "t1", False, pitfall="p1", ms=3000, params=(("n", "8"),)),
        row("B", "t1", False, pitfall="p2", ms=2000, params=(("n", "8"),), shown=("p2", "p4")),
        row("A", "t1", True, params=(("n", "4"),)),
    ]
    outline = [TemplateOutline("t1", "a", 1, ("p1", "p2", "p3", "p4", "p5"), ("n",))]
    result = analyse(rows, card_id="c", outline=outline)
    t1 = result.template("t1")
    assert (t1.stats.attempts, t1.stats.learners, t1.stats.right) == (4, 2, 2)
    assert t1.stats.facility == 0.5 and t1.stats.median_ms == 2000 and t1.stats.timed == 3
    rates = {p.pitfall_id: (p.shown, p.picked) for p in t1.pitfalls}
    assert rates == {"p1": (3, 1), "p2": (4, 1), "p3": (3, 0), "p4": (1, 0), "p5": (0, 0)}
    assert [p.rate for p in t1.pitfalls][:2] == [1 / 3, 1 / 4]
    assert t1.pitfalls[4].rate is None
    values = {v.value: v.stats for v in t1.params}
    assert list(values) == ["4", "8"]  # numeric order
    assert values["4"].facility == 1.0 and values["8"].facility == 0.0
    assert values["8"].learners == 2
    assert t1.stats.discrimination is None  # no rest: a single template
    assert (
        analyse(rows, card_id="c", outline=outline, scope="earliest").template("t1").stats.attempts
        == 2
    )
    assert analyse([], card_id="c", outline=outline).template("t1").stats.facility is None


def test_discrimination_thresholds_and_sign():
    # Five learners: ability i/4; t1 follows ability, t2 goes against it, t3 is the rest.
    rows = []
    for i in range(5):
        learner = f"L{i}"
        for k in range(4):
            rows.append(row(learner, "rest", k < i, pitfall=None if k < i else "p1"))
        rows.append(row(learner, "t1", i >= 2, pitfall=None if i >= 2 else "p1"))
        rows.append(row(learner, "t2", i < 2, pitfall=None if i < 2 else "p1"))
    result = analyse(rows, card_id="c")
    xs = [1.0 if i >= 2 else 0.0 for i in range(5)]
    ys = []
    for i in range(5):
        rest = [k < i for k in range(4)] + [i < 2]
        ys.append(sum(rest) / len(rest))
    assert result.template("t1").stats.discrimination == pytest.approx(plain_pearson(xs, ys))
    assert result.template("t2").stats.discrimination < 0
    assert ("negative_discrimination", "t2") in {(f.kind, f.template_id) for f in result.flags}
    strict = analyse(rows, card_id="c", thresholds=Thresholds(min_learners=6))
    assert strict.template("t1").stats.discrimination is None
    assert strict.template("t1").stats.discrimination_learners == 5
    fussy = analyse(rows, card_id="c", thresholds=Thresholds(min_rest_attempts=6))
    assert fussy.template("t1").stats.discrimination_learners == 0
    assert pearson([1, 1, 1], [0, 1, 2]) is None and pearson([1], [2]) is None


def test_current_versions_only_leaves_out_other_versions():
    rows = [row("A", "t1", True, version=1), row("A", "t1", False, pitfall="p1", version=2)]
    outline = [TemplateOutline("t1", "a", 2, ("p1",))]
    result = analyse(rows, card_id="c", outline=outline, current_versions_only=True)
    assert result.template("t1").stats.attempts == 1 and result.excluded_versions == 1
    merged = analyse(rows, card_id="c", outline=outline)
    assert merged.template("t1").stats.attempts == 2 and merged.template("t1").versions == (1, 2)


# --- the charts ---------------------------------------------------------------------------------


def test_charts_escape_labels_and_are_well_formed():
    hostile = '<script>alert("x")</script> & "quotes"'
    svg = bars_svg([Bar(hostile, 0.5, "50% (1/2)", tooltip=hostile)], title=hostile)
    root = ET.fromstring(svg)
    assert "<script>" not in svg and "&lt;script&gt;" in svg
    assert root.tag.endswith("svg") and root.get("role") == "img"
    dots = [Dot("1", 0.8, -0.3, tooltip=hostile), Dot("2", 1.2, 1.5)]  # clamped into the plot
    scatter = scatter_svg(dots, title=hostile, x_label="facility", y_label="r")
    ET.fromstring(scatter)
    assert scatter.count("<circle") == 2 and "<script>" not in scatter
    assert all(f">{tick}</text>" in scatter for tick in ("+1.0", "-0.5", "+0.0", "0%", "100%"))
    assert "style=" not in svg + scatter
    from app.domain.analytics import PitfallStats

    bars = pitfall_bars_svg(
        [PitfallStats("p1", 10, 0, 0.0, 0.0), PitfallStats("p2", 0, 0, None, None)],
        title="t",
        labels={"p1": "Pitfall one"},
        key=("Right answer", 3, 4),
        flagged=["p1"],
    )
    ET.fromstring(bars)
    assert "75% (3/4)" in bars and "0% (0/10)" in bars and "— (0/0)" in bars
    assert 'stroke-dasharray="3 3"' in bars  # nothing to show for p2


def test_flag_thresholds():
    # t1: p3 shown 20 times, never picked, while p1 catches the wrong answers; p4 shown 19 times.
    rows = [
        row(f"L{k % 5}", "t1", k % 2 == 0, pitfall=None if k % 2 == 0 else "p1", shown=("p1", "p3"))
        for k in range(20)
    ]
    rows += [row("L0", "t1", True, shown=("p1", "p4")) for _ in range(19)]
    # t2: everyone right, ten attempts by five learners: no "unpicked" flags on top.
    rows += [row(f"L{k % 5}", "t2", True, shown=("p1", "p2")) for k in range(10)]
    # t3: all right but only nine attempts: no flag at all.
    rows += [row(f"L{k % 5}", "t3", True, shown=("p1", "p2")) for k in range(9)]
    flags = {(f.kind, f.template_id, f.pitfall_id) for f in analyse(rows, card_id="c").flags}
    assert flags == {("unpicked_pitfall", "t1", "p3"), ("everyone_right", "t2", None)}


# --- classes ------------------------------------------------------------------------------------


def test_a_class_by_join_code_and_each_members_progress(client, app, db, card, cards, clock):
    from fastapi.testclient import TestClient

    from app.analytics.models import ClassMember
    from app.models import ReviewItem

    web_login(client, app, "prof@example.com", "instructor")
    page = client.get("/instructor/classes")
    assert page.status_code == 200 and "No classes yet." in page.text
    token = html.unescape(re.search(r'name="csrf_token" value="([^"]+)"', page.text).group(1))
    refused = client.post("/instructor/classes", data={"csrf_token": token, "name": "  "})
    assert refused.status_code == 400 and 'role="alert"' in refused.text
    created = client.post(
        "/instructor/classes", data={"csrf_token": token, "name": "ZeRO <b>week</b>"}
    )
    assert created.status_code == 200  # followed the 303 to the class page
    assert "ZeRO &lt;b&gt;week&lt;/b&gt;" in created.text
    code = re.search(r'<code class="join-code" id="join-code">([A-Z0-9-]+)</code>', created.text)
    code = code.group(1)
    assert re.fullmatch(r"[A-HJ-NP-Z2-9]{4}-[A-HJ-NP-Z2-9]{4}", code)
    class_url = str(created.url.path)
    assert "Nobody has joined yet" in created.text
    # The link to send is whole (it was a path, useless pasted into a message).
    assert f'<code id="join-link">http://testserver/classes/join?code={code}</code>' in created.text

    with TestClient(app) as guest:
        form = guest.get("/classes/join")
        token = html.unescape(re.search(r'name="csrf_token" value="([^"]+)"', form.text).group(1))
        refused = guest.post("/classes/join", data={"csrf_token": token, "code": code})
        assert refused.status_code == 403  # a guest needs an account first

    with TestClient(app) as learner:
        web_login(learner, app, "ada@example.com", "learner")
        assert learner.get("/instructor/classes").status_code == 403
        assert learner.get(class_url).status_code == 403
        form = learner.get("/classes/join")
        token = html.unescape(re.search(r'name="csrf_token" value="([^"]+)"', form.text).group(1))
        wrong = learner.post("/classes/join", data={"csrf_token": token, "code": "ZZZZ-ZZZZ"})
        assert wrong.status_code == 404 and "No class has this code" in wrong.text
        for typed in (code.lower().replace("-", ""), code):  # any case, dash or not; twice
            joined = learner.post("/classes/join", data={"csrf_token": token, "code": typed})
            assert joined.status_code == 200 and "You are in the class" in joined.text
    db.commit()
    ada = db.query(Learner).filter(Learner.email == "ada@example.com").one()
    assert db.query(ClassMember).filter(ClassMember.learner_id == ada.id).count() == 1

    # Ada's history: 3 first answers on one exam point (2 right), 1 on another, one retry.
    templates = card.templates()
    first, other = templates[0], next(t for t in templates if t.point != templates[0].point)
    answers = [(first, True, True), (first, False, True), (first, True, True), (other, False, True)]
    answers.append((first, True, False))  # a retry: not counted
    # And one first answer, right, on another card's exam point.
    other_card = cards["activation-memory"]
    answers.append((other_card.templates()[0], True, True))
    for k, (template, right, is_first) in enumerate(answers):
        answered_card = card if template in card.templates() else other_card
        variant = generate(answered_card, template, 500 + k)
        wrong_choice = next(c for c in variant.choices if c.pitfall_id)
        chosen = variant.correct_choice_id if right else wrong_choice.id
        db.add(
            Attempt(
                learner_id=ada.id,
                card_id=answered_card.id,
                card_version=answered_card.version,
                point=template.point,
                template_id=template.id,
                template_version=template.version,
                seed=500 + k,
                params=dict(variant.params),
                choices=stored_choices(variant),
                choice_id=chosen,
                correct_choice_id=variant.correct_choice_id,
                correct=right,
                pitfall_id=None if right else wrong_choice.pitfall_id,
                client_answer_id=uuid.uuid4().hex,
                first_answer=is_first,
                created_at=clock.now - timedelta(hours=5 - k),
            )
        )
    db.add(
        ReviewItem(
            learner_id=ada.id,
            card_id=CARD_ID,
            point=first.point,
            template_id=first.id,
            state={},
            due_at=clock.now - timedelta(minutes=1),
        )
    )
    db.commit()

    page = client.get(class_url).text
    row = re.search(rf'<tr data-learner="{ada.id}">(.*?)</tr>', page, re.S).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
    assert cells[0] == "5" and cells[1] == "ada@example.com" and cells[2] == "60%"
    assert cells[3] == "1"  # one review due
    assert f'data-point="{first.point}">67% <span class="muted">(2/3)</span>' in row
    assert f'data-point="{other.point}">0% <span class="muted">(0/1)</span>' in row
    # Both cards have an "Exam point 1": each card heads its own exam points' columns.
    groups = re.findall(
        r'<th scope="colgroup" colspan="(\d+)" class="card-group" data-card="([^"]+)">', page
    )
    assert groups == [("1", "activation-memory"), ("2", CARD_ID)]
    heads = re.findall(r'<th scope="col" data-card="([^"]+)">Exam point (\d+)</th>', page)
    assert [h[0] for h in heads] == ["activation-memory", CARD_ID, CARD_ID]
    listing = client.get("/instructor/classes").text
    assert re.search(r'<tr data-class="\d+"><td>1</td>', listing)

    # Another instructor does not see this class.
    with TestClient(app) as colleague:
        web_login(colleague, app, "other@example.com", "instructor")
        assert colleague.get(class_url).status_code == 404
        assert code not in colleague.get("/instructor/classes").text


def test_a_negative_discrimination_is_flagged_only_when_its_confidence_interval_excludes_zero():
    from app.domain.analytics import discrimination_interval

    # r = -0.3 on 19 learners: the 95 % interval is about -0.66 to +0.18 (Fisher's z).
    low, high = discrimination_interval(-0.3, 19)
    assert (round(low, 2), round(high, 2)) == (-0.66, 0.18)
    assert discrimination_interval(-0.3, 3) is None and discrimination_interval(None, 50) is None

    # Six learners of rising ability on the rest; t2 is answered right by learners 0 and 3
    # only: a negative correlation, but not a sure one.
    rows = []
    for i in range(6):
        for k in range(5):
            rows.append(row(f"L{i}", "rest", k < i, pitfall=None if k < i else "p1"))
        right = i in (0, 3)
        rows.append(row(f"L{i}", "t2", right, pitfall=None if right else "p1"))
    stats = analyse(rows, card_id="c").template("t2").stats
    xs = [1.0 if i in (0, 3) else 0.0 for i in range(6)]
    ys = [i / 5 for i in range(6)]  # the rest: 'rest' only (t2 is the item)
    r = plain_pearson(xs, ys)
    assert r < 0 and stats.discrimination == pytest.approx(r)
    assert (
        stats.discrimination_low < r < stats.discrimination_high and stats.discrimination_high > 0
    )
    assert "negative_discrimination" not in {
        f.kind for f in analyse(rows, card_id="c").flags if f.template_id == "t2"
    }


def test_scatter_labels_of_dots_at_the_same_place_do_not_cover_each_other():
    from app.domain.analytics import Dot, scatter_svg

    # Seven templates with the same facility and discrimination, two beside them, one at the
    # right edge: every label is drawn, none on another label or on another template's dot.
    dots = [Dot(str(n), 0.5, 0.2) for n in range(1, 8)]
    dots += [Dot("8", 0.52, 0.22), Dot("9", 0.48, 0.2), Dot("10", 1.0, -0.5)]
    svg = scatter_svg(dots, title="t", x_label="x", y_label="y")
    root = ET.fromstring(svg)
    ns = "{http://www.w3.org/2000/svg}"
    circles = [(float(c.get("cx")), float(c.get("cy"))) for c in root.iter(f"{ns}circle")]
    labels = []
    for text in root.iter(f"{ns}text"):
        if text.get("font-size") != "11":
            continue
        x, y, width = float(text.get("x")), float(text.get("y")), 6.1 * len(text.text)
        start = {"end": x - width, "middle": x - width / 2}.get(text.get("text-anchor"), x)
        labels.append((text.text, (start, y - 9, start + width, y + 1)))
    assert sorted(label for label, _ in labels) == sorted(d.label for d in dots)

    def overlap(a, b):
        return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]

    for i, (label, box) in enumerate(labels):
        for other, other_box in labels[i + 1 :]:
            assert not overlap(box, other_box), (label, other)
        own = int(label) - 1
        for j, (cx, cy) in enumerate(circles):
            if j != own:
                assert not overlap(box, (cx - 6, cy - 6, cx + 6, cy + 6)), (label, j + 1)
