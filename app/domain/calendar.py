"""Days as the learner lives them: a moment read in the learner's time zone (an IANA name).

Streaks, "today", days to the exam and an exam's end are read in the learner's own zone; an
unknown or missing zone reads as UTC. Pure: the zone database is the standard library's.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, tzinfo
from functools import lru_cache
from zoneinfo import ZoneInfo, available_timezones

TIME_ZONE_MAX = 64  # the longest name stored (the longest IANA name has 32 characters)


@lru_cache(maxsize=1)
def time_zone_names() -> frozenset[str]:
    """Every IANA zone name this system knows."""
    return frozenset(available_timezones())


def is_time_zone(name: str | None) -> bool:
    """Whether ``name`` is a known IANA zone name (``Europe/Berlin``, ``Asia/Shanghai``, ``UTC``)."""
    return name is not None and len(name) <= TIME_ZONE_MAX and name in time_zone_names()


@lru_cache(maxsize=512)
def zone(name: str | None) -> tzinfo:
    """The zone named ``name``; UTC for None or a name this system does not know."""
    if name is None or not is_time_zone(name):
        return UTC
    return ZoneInfo(name)


def local_time(moment: datetime, zone_name: str | None) -> datetime:
    """``moment`` (timezone-aware) on the learner's clock."""
    return moment.astimezone(zone(zone_name))


def local_day(moment: datetime, zone_name: str | None) -> date:
    """The learner's calendar day at ``moment``."""
    return local_time(moment, zone_name).date()


def day_start(day: date, zone_name: str | None) -> datetime:
    """The first moment of ``day`` on the learner's clock, in UTC."""
    local = datetime(day.year, day.month, day.day, tzinfo=zone(zone_name))
    return local.astimezone(UTC)


def day_end(day: date, zone_name: str | None) -> datetime:
    """The first moment after ``day`` on the learner's clock, in UTC."""
    return day_start(day + timedelta(days=1), zone_name)
