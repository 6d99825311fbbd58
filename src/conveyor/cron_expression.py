"""Cron expressions: parsing the five fields (or a nickname) and matching a minute against them.

Five fields (minute hour day-of-month month day-of-week) with ``*``, ``a``, ``a-b``, ``*/n``,
``a-b/n`` and comma lists, month and weekday names (JAN, MON...), 7 as Sunday, and the nicknames
@hourly, @daily (@midnight), @weekly, @monthly, @yearly (@annually) and @reboot. As in classic cron,
when both day fields are restricted a day matches if either does.

Errors point at the field that is wrong: ``field 4 (month) '13': 13 is out of range 1-12``.

Pure values: nothing here knows jobs or how workers are found (the entries that pair an expression
with a job are ``conveyor.cron``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from conveyor.errors import ValidationError

NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
REBOOT = "@reboot"
MONTHS = {
    m: i
    for i, m in enumerate(
        ["JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"], 1
    )
}
WEEKDAYS = {d: i for i, d in enumerate(["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"])}


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    low: int
    high: int
    names: Mapping[str, int] = field(default_factory=dict)


FIELDS = (
    _Field("minute", 0, 59),
    _Field("hour", 0, 23),
    _Field("day of month", 1, 31),
    _Field("month", 1, 12, MONTHS),
    _Field("day of week", 0, 7, WEEKDAYS),
)


class CronError(ValidationError):
    def __init__(self, expression: Any, problem: str) -> None:
        super().__init__("cron", expression, problem)


def _value(spec: _Field, text: str, position: int, expression: str, part: str) -> int:
    # ASCII only: str.upper() makes "\u017fep" "SEP", and str.isdigit() accepts "²" (which int()
    # refuses) and "٣" (which it reads as 3).
    upper = text.upper() if text.isascii() else ""
    if upper in spec.names:
        return spec.names[upper]
    if not (text.isascii() and text.isdigit()):
        raise CronError(expression, f"field {position} ({spec.name}) {part!r}: {text!r} is not a number")
    value = int(text)
    if not spec.low <= value <= spec.high:
        raise CronError(
            expression,
            f"field {position} ({spec.name}) {part!r}: {value} is out of range {spec.low}-{spec.high}",
        )
    return value


def _parse_field(spec: _Field, text: str, position: int, expression: str) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        if not part:
            raise CronError(expression, f"field {position} ({spec.name}) {text!r}: empty list item")
        base, _, step_text = part.partition("/")
        step = 1
        if step_text:
            if not (step_text.isascii() and step_text.isdigit()) or int(step_text) == 0:
                raise CronError(
                    expression, f"field {position} ({spec.name}) {part!r}: step {step_text!r} must be >= 1"
                )
            step = int(step_text)
        if base == "*":
            low, high = spec.low, spec.high
        elif "-" in base:
            first, _, last = base.partition("-")
            low = _value(spec, first, position, expression, part)
            high = _value(spec, last, position, expression, part)
            if low > high:
                raise CronError(expression, f"field {position} ({spec.name}) {part!r}: range goes backwards")
        else:
            low = _value(spec, base, position, expression, part)
            high = spec.high if step_text else low
        values.update(range(low, high + 1, step))
    if spec.name == "day of week" and 7 in values:
        values = (values - {7}) | {0}
    return frozenset(values)


@dataclass(frozen=True, slots=True)
class CronExpression:
    text: str
    minutes: frozenset[int] = frozenset()
    hours: frozenset[int] = frozenset()
    days: frozenset[int] = frozenset()
    months: frozenset[int] = frozenset()
    weekdays: frozenset[int] = frozenset()
    days_restricted: bool = False
    weekdays_restricted: bool = False
    reboot: bool = False

    @classmethod
    def parse(cls, text: str) -> CronExpression:
        if not isinstance(text, str) or not text.strip():
            raise CronError(text, "must be a non-empty cron expression such as '*/5 * * * *'")
        stripped = text.strip()
        if stripped.lower() == REBOOT:
            return cls(stripped, reboot=True)
        if stripped.startswith("@"):
            if stripped.lower() not in NICKNAMES:
                known = ", ".join([*NICKNAMES, REBOOT])
                raise CronError(text, f"unknown nickname {stripped!r}; expected one of {known}")
            expanded = NICKNAMES[stripped.lower()]
        else:
            expanded = stripped
        parts = expanded.split()
        if len(parts) != 5:
            raise CronError(
                text, f"has {len(parts)} fields; expected 5 (minute hour day-of-month month day-of-week)"
            )
        sets = [
            _parse_field(spec, part, i, text)
            for i, (spec, part) in enumerate(zip(FIELDS, parts, strict=True), 1)
        ]
        return cls(
            stripped,
            minutes=sets[0],
            hours=sets[1],
            days=sets[2],
            months=sets[3],
            weekdays=sets[4],
            days_restricted=parts[2] != "*",
            weekdays_restricted=parts[4] != "*",
        )

    def matches(self, moment: datetime) -> bool:
        """Whether the minute of ``moment`` (in its own time zone) is a tick."""
        if self.reboot:
            return False
        if moment.minute not in self.minutes or moment.hour not in self.hours:
            return False
        if moment.month not in self.months:
            return False
        day_ok = moment.day in self.days
        weekday_ok = (moment.isoweekday() % 7) in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return day_ok or weekday_ok
        return day_ok and weekday_ok


def load_zone(name: str) -> ZoneInfo:
    if not isinstance(name, str):  # ZoneInfo(5) would raise a TypeError naming nothing
        raise ValidationError(
            "timezone", name, "must be an IANA time zone name, a string such as 'Europe/Paris'"
        )
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValidationError(
            "timezone", name, "is not a known IANA time zone (e.g. 'Europe/Paris')"
        ) from None
