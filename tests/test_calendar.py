"""Days in the learner's time zone (app.domain.calendar), and the zone a web visitor has."""

from __future__ import annotations

from datetime import UTC, date, datetime

from fastapi.testclient import TestClient

from app.domain.calendar import day_end, day_start, is_time_zone, local_day, zone


def test_known_and_unknown_zone_names() -> None:
    assert is_time_zone("Asia/Shanghai")
    assert is_time_zone("America/Los_Angeles")
    assert is_time_zone("UTC")
    assert not is_time_zone("Mars/Olympus_Mons")
    assert not is_time_zone("../../etc/passwd")
    assert not is_time_zone("")
    assert not is_time_zone(None)
    assert zone("Mars/Olympus_Mons") is UTC
    assert zone(None) is UTC


def test_a_moment_is_on_the_learner_s_own_day() -> None:
    late_utc = datetime(2026, 12, 3, 20, 30, tzinfo=UTC)
    assert local_day(late_utc, "UTC") == date(2026, 12, 3)
    # 20:30 UTC is 04:30 the next morning in Shanghai (UTC+8, no daylight saving)
    assert local_day(late_utc, "Asia/Shanghai") == date(2026, 12, 4)
    early_utc = datetime(2026, 12, 3, 5, 0, tzinfo=UTC)
    # 05:00 UTC is 21:00 the evening before in Los Angeles (UTC-8 in December)
    assert local_day(early_utc, "America/Los_Angeles") == date(2026, 12, 2)


def test_a_day_s_bounds_in_utc_follow_daylight_saving() -> None:
    assert day_start(date(2026, 12, 4), "Asia/Shanghai") == datetime(2026, 12, 3, 16, tzinfo=UTC)
    assert day_end(date(2026, 12, 3), "Asia/Shanghai") == datetime(2026, 12, 3, 16, tzinfo=UTC)
    # Berlin's clocks went forward on 2026-03-29: that day is 23 hours long
    start = day_start(date(2026, 3, 29), "Europe/Berlin")
    end = day_end(date(2026, 3, 29), "Europe/Berlin")
    assert start == datetime(2026, 3, 28, 23, tzinfo=UTC)
    assert (end - start).total_seconds() == 23 * 3600


def test_the_page_script_reports_the_browser_zone(client: TestClient) -> None:
    page = client.get("/")
    assert '<script src="/static/timezone.js" defer></script>' in page.text
    script = client.get("/static/timezone.js")
    assert script.status_code == 200
    assert "infracards_tz=" in script.text
