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


# --- two tabs on one draft --------------------------------------------------------------------

CONFLICT = (
    "The draft changed since this page was opened (in another tab or by someone else);"
    " nothing was saved."
)


def two_tabs(client, path):
    """The same form opened twice: each tab's fields as its page would post them."""
    from test_card_editing import posted

    return posted(client.get(path).text), posted(client.get(path).text)


def assert_refused_as_typed(answer, typed: str, reload_path: str):
    assert answer.status_code == 409, answer.text[:500]
    text = html.unescape(answer.text)
    assert CONFLICT in text
    assert f'href="{reload_path}' in text  # the form as the draft is now
    assert typed in text  # what the second tab typed is still in its form


@pytest.mark.parametrize(
    ("path", "field", "stored"),
    [
        ("/instructor/cards/kv-cache/edit", "definition_en", lambda d: d["definition"]["en"]),
        (
            "/instructor/cards/kv-cache/points/kv-bytes",
            "explanation_en",
            lambda d: d["points"][0]["explanation"]["en"],
        ),
        (
            "/instructor/cards/kv-cache/templates/kv-total",
            "stem_en",
            lambda d: d["points"][0]["templates"][0]["stem"]["en"],
        ),
    ],
    ids=["card form", "exam point form", "template editor"],
)
def test_the_second_tab_saving_over_the_first_is_refused_with_its_typing_kept(
    client, app, path, field, stored
):
    log_in(client, app)
    kv_draft(client, app)
    first, second = two_tabs(client, path)
    for tab in (first, second):
        if "precision" in tab:  # the fixture's 2 figures, refused by the editor
            tab["precision"] = "3"
    first[field] = "Typed in the first tab."
    saved = client.post(path, data=first)
    assert saved.status_code == 200, saved.text[:500]
    second[field] = "Typed in the second tab."
    refused = client.post(path, data=second)
    assert_refused_as_typed(refused, "Typed in the second tab.", path)
    with app.state.sessionmaker() as db:
        assert stored(service.get_draft(db=db, card_id="kv-cache").document) == (
            "Typed in the first tab."
        )
    # Opened again, the form saves over the draft as it is now.
    again = two_tabs(client, path)[0]
    if "precision" in again:
        again["precision"] = "3"
    again[field] = "Typed in the second tab."
    assert client.post(path, data=again).status_code == 200


def test_the_api_draft_has_its_revision_as_etag_and_a_put_honours_if_match(client, app):
    prof = instructor_headers(client, app)
    assert client.post(f"{API}/instructor/cards", json=CARD, headers=prof).status_code == 201
    url = f"{API}/instructor/cards/kv-cache/draft"
    etag = client.get(url, headers=prof).headers["ETag"]
    assert etag.startswith('"') and etag.endswith('"')
    first = client.put(url, json=edited(), headers={**prof, "If-Match": etag})
    assert first.status_code == 200 and first.headers["ETag"] != etag
    assert client.get(url, headers=prof).headers["ETag"] == first.headers["ETag"]
    stale = client.put(url, json=CARD, headers={**prof, "If-Match": etag})
    assert stale.status_code == 412 and stale.json()["code"] == "draft_changed"
    assert client.get(url, headers=prof).json()["document"] == edited()
    weak = client.put(url, json=CARD, headers={**prof, "If-Match": f"W/{first.headers['ETag']}"})
    assert weak.status_code == 412  # If-Match compares strongly
    listed = client.put(
        url, json=CARD, headers={**prof, "If-Match": f'"x", {first.headers["ETag"]}'}
    )
    assert listed.status_code == 200
    assert client.put(url, json=edited(), headers=prof).status_code == 200  # no If-Match: as before
    assert client.put(url, json=CARD, headers={**prof, "If-Match": "*"}).status_code == 200
    spec = client.get("/openapi.json").json()["paths"]["/api/v1/instructor/cards/{card_id}/draft"]
    assert "412" in spec["put"]["responses"]
    assert "ETag" in spec["get"]["responses"]["200"]["headers"]
    assert any(p["name"] == "If-Match" for p in spec["put"]["parameters"])
