"""Publishing stays flat: a publication compiles the new version only, start-up compiles each
card's current version only, an old question compiles its version once into a bounded cache,
no learner request waits for a catalog being built, a second app on the same database picks a
publication up by itself, and the audit log keeps what changed, not the document twice.

Compilations are counted at ``app.catalog.service.parse_card`` (the catalog's one compile call);
the grading golden values are computed here from the question's parameters (the KV cache's
bytes), not by the code under test.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from pathlib import Path

import pytest
from conftest import CARD_ID, TestClient
from sqlalchemy import select, text
from test_authoring import (
    API,
    CARD,
    instructor_headers,
    kv_bytes,
    learner_headers,
    publish,
)

from app.catalog import service as catalog_service
from app.domain.catalog import OLD_VERSIONS_CACHED
from app.domain.patches import apply_patch
from app.models import AuditEntry, CardVersion

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def prof(client, app):
    return instructor_headers(client, app)


@pytest.fixture
def compiled(monkeypatch):
    """The (card id, version) of every card document the catalog compiles, in order."""
    seen: list[tuple[str, int]] = []
    compile_card = catalog_service.parse_card

    def counting(document, **kwargs):
        seen.append((document["id"], document["version"]))
        return compile_card(document, **kwargs)

    monkeypatch.setattr(catalog_service, "parse_card", counting)
    return seen


def edition(number: int) -> dict:
    """The kv-cache card with edition ``number`` of its first template: its stem says which,
    and a pitfall's values change with each edition (a wording change alone would keep the
    template's version: tests/test_authoring.py)."""
    card = copy.deepcopy(CARD)
    template = card["points"][0]["templates"][0]
    template["stem"]["en"] = (
        f"Edition {number}: how many GB does the KV cache of {{batch}} sequences take?"
    )
    assert template["pitfalls"][5]["formula"] == "kv*heads"
    template["pitfalls"][5]["formula"] = f"kv*(heads+{number})"
    return card


def question(client, seed: int, headers=None) -> dict:
    response = client.get(
        f"{API}/cards/kv-cache/points/kv-bytes/question", params={"seed": seed}, headers=headers
    )
    assert response.status_code == 200, response.text
    return response.json()


def right_choice(shown: dict) -> str:
    """The choice whose value is the KV cache's size, in GB, computed here."""
    expected_gb = kv_bytes({k: int(v) for k, v in shown["params"].items()}) / 1e9
    return next(c["id"] for c in shown["choices"] if abs(c["value"] / expected_gb - 1) < 0.03)


def answer(client, learner, shown: dict, answer_id: str) -> dict:
    response = client.post(
        f"{API}/answers",
        headers=learner,
        json={
            "token": shown["token"],
            "choice_id": right_choice(shown),
            "client_answer_id": answer_id,
        },
    )
    assert response.status_code == 200, response.text
    return response.json()


def test_publishing_version_n_compiles_version_n_only_and_start_up_the_current_ones(
    client, app, prof, settings, cards, compiled
):
    client.post(f"{API}/instructor/cards", json=edition(1), headers=prof)
    for number in range(1, 6):
        compiled.clear()
        assert publish(client, prof, edition(number)) == number
        assert compiled == [("kv-cache", number)]  # once, in the publishing request
        # The publishing process serves it at once; the template's version rose with it.
        shown = question(client, seed=3)
        assert shown["template_version"] == number and shown["stem"].startswith(
            f"Edition {number}:"
        )
    assert compiled == [("kv-cache", 5)]

    from app.main import create_app

    compiled.clear()
    with TestClient(create_app(settings, cards=cards)) as restarted:
        # The shipped card's file is its stored version (not compiled again); kv-cache's
        # current version is compiled, none of its four older ones.
        assert compiled == [("kv-cache", 5)]
        assert question(restarted, seed=3)["template_version"] == 5
    assert compiled == [("kv-cache", 5)]


def test_an_old_question_grades_after_newer_versions_compiling_its_version_once_into_a_bounded_cache(
    client, app, prof, compiled
):
    live = app.state.live_catalog
    assert live.cache.size == OLD_VERSIONS_CACHED == 4
    client.post(f"{API}/instructor/cards", json=edition(1), headers=prof)
    learner = learner_headers(client)
    shown: dict[int, list[dict]] = {}
    for number in range(1, 6):
        publish(client, prof, edition(number))
        shown[number] = [question(client, seed, learner) for seed in (11, 12, 13)]
        assert {q["template_version"] for q in shown[number]} == {number}

    live.cache.size = 2  # a smaller bound, to see it hold
    compiled.clear()
    assert answer(client, learner, shown[1][0], "v1-a")["correct"] is True
    assert compiled == [("kv-cache", 1)]  # compiled when first needed
    assert answer(client, learner, shown[1][1], "v1-b")["correct"] is True
    assert compiled == [("kv-cache", 1)]  # and then taken from the cache
    for number in (2, 3, 4):
        assert answer(client, learner, shown[number][0], f"v{number}")["correct"] is True
    assert compiled == [("kv-cache", v) for v in (1, 2, 3, 4)]
    assert live.cache.keys() == [("kv-cache", 3), ("kv-cache", 4)]  # bounded: 1 and 2 dropped
    # Version 1 was dropped: it is compiled again, and still grades.
    assert answer(client, learner, shown[1][2], "v1-c")["correct"] is True
    assert compiled == [("kv-cache", v) for v in (1, 2, 3, 4, 1)]
    assert len(live.cache.keys()) == 2
    # The current version is never in the cache: it is the catalog's own.
    assert answer(client, learner, shown[5][0], "v5")["correct"] is True
    assert compiled[-1] == ("kv-cache", 1)


def test_a_learner_request_never_waits_for_a_catalog_being_built(
    client, prof, settings, cards, monkeypatch
):
    """A second app on the same database picks the publication up by its refresher thread;
    while that thread is stuck compiling, its learners get the old catalog at once."""
    from app.main import create_app

    building, release = threading.Event(), threading.Event()
    compile_card = catalog_service.parse_card

    def slow_on_the_refresher(document, **kwargs):
        if threading.current_thread().name == "catalog-refresher":
            building.set()
            assert release.wait(30), "the test never released the refresher"
        return compile_card(document, **kwargs)

    monkeypatch.setattr(catalog_service, "parse_card", slow_on_the_refresher)
    other = create_app(settings, cards=cards)
    other.state.live_catalog.every = 0.05
    try:
        with TestClient(other) as second:
            learner = learner_headers(second)
            client.post(f"{API}/instructor/cards", json=edition(1), headers=prof)
            assert publish(client, prof, edition(1)) == 1
            assert building.wait(10), "the second app's refresher never noticed the publication"
            for _ in range(3):
                started = time.monotonic()
                listed = second.get(f"{API}/cards", headers=learner)
                shown = second.get(
                    f"{API}/cards/{CARD_ID}/question", params={"seed": 4}, headers=learner
                )
                assert time.monotonic() - started < 1.0
                assert listed.status_code == shown.status_code == 200
                assert "kv-cache" not in [c["id"] for c in listed.json()]  # the old catalog
            release.set()
            deadline = time.monotonic() + 10
            while "kv-cache" not in [c["id"] for c in second.get(f"{API}/cards").json()]:
                assert time.monotonic() < deadline, "the second app never swapped its catalog"
                time.sleep(0.05)
            shown = question(second, seed=2, headers=learner)
            assert answer(second, learner, shown, "on-b")["correct"] is True
            refresher = other.state.live_catalog.refresher
            assert refresher is not None and refresher.is_alive()
        assert not refresher.is_alive()  # stopped with the app
    finally:
        release.set()


def test_the_refresher_backs_off_on_its_own_engine_while_the_database_fails(
    settings, cards, monkeypatch
):
    from app.db import engine_health
    from app.main import create_app

    app = create_app(settings, cards=cards)
    live = app.state.live_catalog
    live.every = 0.02
    calls: list[float] = []

    def failing(db):
        calls.append(time.monotonic())
        db.execute(text("SELECT version FROM no_such_table"))  # an OperationalError

    monkeypatch.setattr(catalog_service, "catalog_stamp", failing)
    with TestClient(app):
        time.sleep(1.0)
        refresher = live.refresher
        assert refresher is not None and refresher.failures >= 3
        # Twice as long after each failure: 0.04 + 0.08 + 0.16 + 0.32 + 0.64 > 1 s.
        assert len(calls) <= 6
        assert refresher.sessions.kw["bind"] is not app.state.engine  # an engine of its own
    assert engine_health(app.state.engine).last_failure is None


def test_audit_entries_keep_what_changed_not_the_document(client, app, prof):
    """The same one-line edit costs the same few hundred bytes in the audit log on the small
    kv-cache card and on the shipped card (half a megabyte), and its patch rebuilds the
    published version from the one before."""
    sizes = {}
    for card_id, document in (
        ("kv-cache", copy.deepcopy(CARD)),
        (CARD_ID, client.get(f"{API}/instructor/cards/{CARD_ID}/draft", headers=prof).json()),
    ):
        document = document.get("document", document)
        if card_id == "kv-cache":
            client.post(f"{API}/instructor/cards", json=document, headers=prof)
            publish(client, prof, document)
        edited = copy.deepcopy(document)
        edited["points"][0]["templates"][0]["stem"]["en"] += " (edited)"
        version = publish(client, prof, edited)
        with app.state.sessionmaker() as db:
            entries = db.scalars(
                select(AuditEntry)
                .where(
                    AuditEntry.card_id == card_id, AuditEntry.action.in_(["save_draft", "publish"])
                )
                .order_by(AuditEntry.id.desc())
                .limit(2)
            ).all()
            before, after = (
                db.scalar(
                    select(CardVersion.document).where(
                        CardVersion.card_id == card_id, CardVersion.version == v
                    )
                )
                for v in (version - 1, version)
            )
        published, saved = entries
        assert (published.action, saved.action) == ("publish", "save_draft")
        for entry in entries:
            assert entry.before is None and entry.after is None
        assert published.changes["from_version"] == version - 1
        assert published.changes["to_version"] == version
        assert apply_patch(before, published.changes["patch"]) == after
        sizes[card_id] = (
            len(json.dumps(published.changes)),
            len(json.dumps(saved.changes)),
            len(json.dumps(after)),
        )
    assert sizes[CARD_ID][2] > 100_000  # the shipped card's document
    for card_id in sizes:
        assert sizes[card_id][0] < 1000 and sizes[card_id][1] < 1000, sizes


def test_versions_stored_before_manifests_get_theirs_at_start_up(
    client, app, prof, settings, cards, compiled
):
    """A database migrated from before manifests: the next start-up writes each version's
    manifest from its document (compiling none), and an old question still grades."""
    from sqlalchemy import null, update

    from app.main import create_app

    client.post(f"{API}/instructor/cards", json=edition(1), headers=prof)
    publish(client, prof, edition(1))
    learner = learner_headers(client)
    old = question(client, seed=8, headers=learner)
    publish(client, prof, edition(2))
    with app.state.sessionmaker() as db:
        stored = db.scalar(
            select(CardVersion.manifest).where(
                CardVersion.card_id == "kv-cache", CardVersion.version == 1
            )
        )
        db.execute(update(CardVersion).values(manifest=null()))  # as the migration leaves it
        db.commit()
    assert stored["templates"]["kv-total"][:2] == [1, "kv-bytes"]  # version, exam point

    compiled.clear()
    restarted = create_app(settings, cards=cards)
    with TestClient(restarted) as again:
        assert compiled == [("kv-cache", 2)]
        with restarted.state.sessionmaker() as db:
            manifests = dict(
                db.execute(
                    select(CardVersion.version, CardVersion.manifest).where(
                        CardVersion.card_id == "kv-cache"
                    )
                ).all()
            )
        assert manifests[1] == stored and manifests[2]["templates"]["kv-total"][0] == 2
        assert answer(again, learner, old, "before-manifests")["correct"] is True
        assert compiled == [("kv-cache", 2), ("kv-cache", 1)]
