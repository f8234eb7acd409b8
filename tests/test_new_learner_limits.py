"""New learners are limited: anonymous app installs and accounts per client address (a classroom
behind one address still fits) and by everyone together, answering 429 with Retry-After; a
deployment sets the rates (NEW_LEARNERS_PER_ADDRESS, NEW_LEARNERS_IN_ALL)."""

from __future__ import annotations

import pytest
from conftest import make_settings
from fastapi.testclient import TestClient
from pydantic import ValidationError

from app.config import Settings

API = "/api/v1"


def app_with(tmp_path, db_url, cards, **rates):
    from app.main import create_app

    return create_app(make_settings(tmp_path, db_url, **rates), cards=cards)


def test_installs_and_accounts_from_one_address_are_limited(tmp_path, db_url, cards):
    app = app_with(tmp_path, db_url, cards, new_learners_per_address="3/hour")
    with TestClient(app) as client:
        installs = [client.post(f"{API}/learners").status_code for _ in range(2)]
        account = client.post(
            f"{API}/auth/register", json={"email": "a@example.com", "password": "a fine password"}
        )
        assert installs == [201, 201] and account.status_code == 201
        over = client.post(f"{API}/learners")
        assert over.status_code == 429 and 0 < int(over.headers["Retry-After"]) <= 3600
        assert over.json()["code"] == "rate_limited"
        refused = client.post(
            f"{API}/auth/register", json={"email": "b@example.com", "password": "a fine password"}
        )
        assert refused.status_code == 429 and "Retry-After" in refused.headers
        # Another address is not held back by this one.
        other = TestClient(app, client=("203.0.113.9", 50000))
        assert other.post(f"{API}/learners").status_code == 201


def test_everyone_together_meets_a_ceiling(tmp_path, db_url, cards):
    app = app_with(tmp_path, db_url, cards, new_learners_in_all="4/minute")
    with TestClient(app):
        statuses = [
            TestClient(app, client=(f"198.51.100.{n}", 40000)).post(f"{API}/learners").status_code
            for n in range(6)
        ]
    assert statuses == [201] * 4 + [429] * 2


def test_a_taken_address_counts_like_a_new_one(tmp_path, db_url, cards):
    """Registration answers alike for a taken address: it is counted alike too."""
    app = app_with(tmp_path, db_url, cards, new_learners_per_address="2/hour")
    body = {"email": "same@example.com", "password": "a fine password"}
    with TestClient(app) as client:
        assert client.post(f"{API}/auth/register", json=body).status_code == 201
        assert client.post(f"{API}/auth/register", json=body).status_code == 201
        assert client.post(f"{API}/auth/register", json=body).status_code == 429


def test_a_rate_that_does_not_read_is_a_settings_error(tmp_path):
    with pytest.raises(ValidationError, match="not a rate"):
        Settings(data_dir=tmp_path, new_learners_per_address="lots")
