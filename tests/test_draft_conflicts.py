"""Two requests on one draft: publishing twice at once publishes once (the others are told
there is no draft left, never a 500); an edit saved while a publication is being checked is
kept, not published and not deleted; and a form or an API client saving over a draft changed
since it was read is refused (409 on the pages, 412 for If-Match) with nothing lost.

The conflicts are made deterministic by holding the publication's validation until the other
requests are there (a barrier) or until the test has saved an edit."""

from __future__ import annotations

import copy
import html
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from test_authoring import API, CARD, instructor_headers
from test_authoring_web import csrf, kv_draft, log_in, me_ref

from app.authoring import service
from app.models import CardDraft, CardVersion

PUBLISH = "/instructor/cards/kv-cache/publish"


def hold_validation(monkeypatch, on_validate):
    """Run ``on_validate()`` inside each publication's validation (after it read the draft)."""
    validate = service.validate

    def held(document):
        on_validate()
        return validate(document)

    monkeypatch.setattr(service, "validate", held)


def stored_versions(app) -> int:
    """The kv-cache card's stored versions."""
    with app.state.sessionmaker() as db:
        count = select(func.count()).where(CardVersion.card_id == "kv-cache")
        return db.scalar(count) or 0


# --- publishing twice at once -----------------------------------------------------------------


def test_three_publications_of_one_draft_at_once_publish_it_once(client, app, monkeypatch):
    log_in(client, app)
    page = kv_draft(client, app)
    token = csrf(page.text)
    together = threading.Barrier(3, timeout=20)
    hold_validation(monkeypatch, together.wait)

    def publish_once():
        return client.post(PUBLISH, data={"csrf_token": token}, follow_redirects=False)

    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda _: publish_once(), range(3)))
    assert sorted(a.status_code for a in answers) == [303, 404, 404], [a.text for a in answers]
    for refused in (a for a in answers if a.status_code == 404):
        assert "This card has no draft to publish." in html.unescape(refused.text)
    assert stored_versions(app) == 1


def test_a_publication_that_lost_the_race_for_its_version_number_is_no_draft(
    app, client, monkeypatch
):
    """The unique version number is the last guard: a version stored meanwhile (here, by a
    publication of the same content whose draft was saved again since) is a 404, not a 500."""
    from app.problems import NotFound

    log_in(client, app)
    kv_draft(client, app)
    live = app.state.live_catalog
    raced = []

    def publish_and_save_again():
        if raced:
            return
        raced.append(True)
        with app.state.sessionmaker() as other:
            service.publish(db=other, actor=me_ref(app), live=live, card_id="kv-cache")
            service.save_draft(db=other, actor=me_ref(app), card_id="kv-cache", document=CARD)

    hold_validation(monkeypatch, publish_and_save_again)
    with app.state.sessionmaker() as db, pytest.raises(NotFound) as refused:
        service.publish(db=db, actor=me_ref(app), live=live, card_id="kv-cache")
    assert refused.value.code == "no_draft"
    assert stored_versions(app) == 1


@pytest.mark.postgres
def test_three_publications_at_once_publish_once_on_postgres(pg_url, tmp_path, cards, monkeypatch):
    from conftest import make_settings

    from app.cli import migrate
    from app.main import create_app

    migrate(pg_url)
    app = create_app(make_settings(tmp_path, pg_url), cards=cards)
    with TestClient(app) as client:
        prof = instructor_headers(client, app)
        assert client.post(f"{API}/instructor/cards", json=CARD, headers=prof).status_code == 201
        together = threading.Barrier(3, timeout=20)
        hold_validation(monkeypatch, together.wait)
        with ThreadPoolExecutor(3) as pool:
            answers = list(
                pool.map(
                    lambda _: client.post(f"{API}/instructor/cards/kv-cache/publish", headers=prof),
                    range(3),
                )
            )
        codes = sorted(a.status_code for a in answers)
        assert codes == [200, 404, 404], [a.text for a in answers]
        assert {a.json()["code"] for a in answers if a.status_code == 404} == {"no_draft"}
        assert stored_versions(app) == 1


# --- an edit saved while the publication is being checked ------------------------------------


def edited(document=None):
    changed = copy.deepcopy(document or CARD)
    changed["definition"]["en"] += " Edited while publishing."
    return changed


def test_an_edit_saved_while_publishing_is_kept_and_the_card_page_says_so(client, app, monkeypatch):
    log_in(client, app)
    page = kv_draft(client, app)

    def save_an_edit():
        with app.state.sessionmaker() as db:
            service.save_draft(db=db, actor=me_ref(app), card_id="kv-cache", document=edited())

    hold_validation(monkeypatch, save_an_edit)
    refused = client.post(PUBLISH, data={"csrf_token": csrf(page.text)}, follow_redirects=False)
    assert refused.status_code == 409
    assert refused.template.name == "instructor_card.html"
    assert (
        "The draft changed while it was being checked; nothing was published."
        " Check it and publish again." in html.unescape(refused.text)
    )
    assert stored_versions(app) == 0
    with app.state.sessionmaker() as db:
        assert db.get(CardDraft, "kv-cache").document == edited()


def test_the_api_refuses_publishing_a_draft_changed_while_checked(client, app, monkeypatch):
    prof = instructor_headers(client, app)
    assert client.post(f"{API}/instructor/cards", json=CARD, headers=prof).status_code == 201

    def save_an_edit():
        with app.state.sessionmaker() as db:
            service.save_draft(db=db, actor=me_ref(app), card_id="kv-cache", document=edited())

    hold_validation(monkeypatch, save_an_edit)
    refused = client.post(f"{API}/instructor/cards/kv-cache/publish", headers=prof)
    assert refused.status_code == 409 and refused.json()["code"] == "draft_changed"
    assert (
        client.get(f"{API}/instructor/cards/kv-cache/draft", headers=prof).json()["document"]
        == edited()
    )
