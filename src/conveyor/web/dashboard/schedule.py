"""Cron entries as the cron page shows them: when each last ran across the fleet, when it runs next."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from conveyor.cron import CronEntry, load_zone

#: How far ahead the next run is looked for (a 29 February entry runs at least once in 8 years).
HORIZON_DAYS = 366 * 8


@dataclass(frozen=True, slots=True)
class CronRow:
    entry: CronEntry
    last: datetime | None
    next: datetime | None
    #: The live nodes that announce the entry (none: only this app's own configuration lists it).
    nodes: tuple[str, ...] = ()
    #: Stored in the database (dynamic cron): the leader runs it whatever the nodes announce.
    stored: bool = False
    paused: bool = False


def next_run(entry: CronEntry, after: datetime) -> datetime | None:
    """The first tick of ``entry`` after ``after`` (aware UTC), or None (``@reboot``, or none ahead).

    Whole days that cannot match are skipped by their date alone; a day that can is walked minute
    by minute by ``CronEntry.ticks``, so daylight-saving rules stay those the scheduler applies."""
    expression = entry.expression
    if expression.reboot:
        return None
    zone = load_zone(entry.timezone)
    day = after.astimezone(zone).date()
    for _ in range(HORIZON_DAYS):
        weekday = day.isoweekday() % 7
        day_ok, weekday_ok = day.day in expression.days, weekday in expression.weekdays
        matches = (
            day_ok or weekday_ok
            if expression.days_restricted and expression.weekdays_restricted
            else day_ok and weekday_ok
        )
        if day.month in expression.months and matches:
            start = datetime(day.year, day.month, day.day, tzinfo=zone).astimezone(UTC)
            # A day is 23 to 25 hours long; ticks() returns those in (start, end], so begin earlier.
            for tick in entry.ticks(max(after, start - timedelta(minutes=1)), start + timedelta(hours=26)):
                if tick > after:
                    return tick
        day += timedelta(days=1)
    return None
