"""Cron expressions and entries.

Five fields (minute hour day-of-month month day-of-week) with ``*``, ``a``, ``a-b``, ``*/n``,
``a-b/n`` and comma lists, month and weekday names (JAN, MON...), 7 as Sunday, and the nicknames
@hourly, @daily (@midnight), @weekly, @monthly, @yearly (@annually) and @reboot. As in classic cron,
when both day fields are restricted a day matches if either does.

Errors point at the field that is wrong: ``field 4 (month) '13': 13 is out of range 1-12``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import orjson

from conveyor._resolver import import_definition
from conveyor.definition import JobDefinition, definition_of
from conveyor.errors import ValidationError, WorkerNotFoundError
from conveyor.request import JobRequest

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


def entries_for(definitions: Iterable[JobDefinition]) -> list[CronEntry]:
    """Cron entries for the definitions that carry ``cron=`` (each once)."""
    seen: dict[str, CronEntry] = {}
    for definition in definitions:
        if definition.cron is not None and definition.name not in seen:
            seen[definition.name] = CronEntry(
                CronExpression.parse(definition.cron), definition.new(), timezone=definition.timezone
            )
    return list(seen.values())


def definitions_in(modules: Iterable[ModuleType]) -> list[JobDefinition]:
    """The job definitions found at the top level of ``modules``."""
    found = []
    for module in modules:
        for value in vars(module).values():
            definition = definition_of(value)
            if definition is not None:
                found.append(definition)
    return found


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


#: The longest entry name (it is stored with each tick, and shown by the dashboard and the CLI).
MAX_NAME_LENGTH = 255
#: Back-filling never looks further back than this.
MAX_BACKFILL_SPAN = timedelta(days=7)


def _skipped(before: datetime, after: datetime) -> Iterator[datetime]:
    """The local wall-clock minutes a forward clock change jumped over."""
    moment = before.replace(tzinfo=None) + timedelta(minutes=1)
    while moment < after.replace(tzinfo=None):
        yield moment
        moment += timedelta(minutes=1)


def floor_minute(moment: datetime) -> datetime:
    return moment.astimezone(UTC).replace(second=0, microsecond=0)


@dataclass(frozen=True, slots=True)
class CronEntry:
    """A job to insert on every tick of ``expression`` in ``timezone``.

    ``name`` identifies the entry across the fleet and restarts (default: worker, expression and
    args). With ``backfill``, ticks missed while every node was down are inserted when a leader
    comes back (at most ``backfill_limit`` of them); without it only the current tick counts.
    """

    expression: CronExpression
    request: JobRequest
    timezone: str = "UTC"
    name: str = ""
    backfill: bool = False
    backfill_limit: int = 1440

    def __post_init__(self) -> None:
        if not isinstance(self.expression, CronExpression):
            raise ValidationError(
                "expression",
                self.expression,
                "must be a CronExpression (CronExpression.parse('*/5 * * * *'))",
            )
        if not isinstance(self.request, JobRequest):
            raise ValidationError("request", self.request, "must be a JobRequest (my_job.new(...))")
        load_zone(self.timezone)
        if self.name is None:
            object.__setattr__(self, "name", "")
        if not isinstance(self.name, str) or len(self.name) > MAX_NAME_LENGTH or "\x00" in self.name:
            raise ValidationError(
                "name", self.name, f"must be a string of at most {MAX_NAME_LENGTH} characters, without NUL"
            )
        if not isinstance(self.backfill, bool):
            raise ValidationError("backfill", self.backfill, "must be True or False")
        if (
            isinstance(self.backfill_limit, bool)
            or not isinstance(self.backfill_limit, int)
            or self.backfill_limit < 1
        ):
            raise ValidationError("backfill_limit", self.backfill_limit, "must be an integer >= 1")
        if not self.name:
            digest = hashlib.sha1(
                orjson.dumps(
                    [self.expression.text, self.timezone, self.request.args], option=orjson.OPT_SORT_KEYS
                )
            ).hexdigest()[:10]
            object.__setattr__(self, "name", f"{self.request.worker}@{digest}")

    @classmethod
    def build(
        cls,
        expression: str,
        target: Any,
        args: Mapping[str, Any] | None = None,
        *,
        timezone: str = "UTC",
        name: str = "",
        backfill: bool = False,
        backfill_limit: int = 1440,
        **options: Any,
    ) -> CronEntry:
        """An entry for a ``@job``/``@worker`` target (or a worker name) with its own args and options."""
        if args is not None and not isinstance(args, Mapping):  # dict(5), dict([1, 2]): TypeErrors
            raise ValidationError("args", args, "must be a mapping of argument names to values (a dict)")
        load_zone(timezone)  # before the request: the entry's own fields first
        definition = definition_of(target)
        if definition is not None:
            request = definition.new(**dict(args or {}))
        elif isinstance(target, str):
            try:  # a Python job keeps its own defaults (queue, priority...); others get plain ones
                request = import_definition(target).new(**dict(args or {}))
            except WorkerNotFoundError:
                request = JobRequest(worker=target, args=dict(args or {}))
        else:
            raise ValidationError(
                "crontab", target, "entries take a @job function, a @worker class or a worker name"
            )
        if options:
            request = request.with_options(**options)
        return cls(
            CronExpression.parse(expression),
            request,
            timezone=timezone,
            name=name,
            backfill=backfill,
            backfill_limit=backfill_limit,
        )

    def ticks(self, after: datetime, until: datetime) -> Iterator[datetime]:
        """Tick moments (aware UTC, whole minutes) in (after, until].

        Daylight saving follows classic cron: in the hour that repeats when clocks go back, entries
        with a fixed hour run once (the first pass) while hourly-wildcard entries run in both; a
        time skipped when clocks go forward runs at the first minute after the jump.
        """
        zone = load_zone(self.timezone)
        moment = max(floor_minute(after), floor_minute(until) - MAX_BACKFILL_SPAN) + timedelta(minutes=1)
        end = floor_minute(until)
        fixed_hour = len(self.expression.hours) < 24
        previous = (moment - timedelta(minutes=1)).astimezone(zone)
        while moment <= end:
            local = moment.astimezone(zone)
            due = self.expression.matches(local)
            if not due and local.replace(tzinfo=None) - previous.replace(tzinfo=None) > timedelta(minutes=1):
                due = any(self.expression.matches(skipped) for skipped in _skipped(previous, local))
            if due and fixed_hour and local.fold == 1:
                due = False  # the repeated hour: a fixed-time entry already ran on the first pass
            if due:
                yield moment
            previous = local
            moment += timedelta(minutes=1)

    def job_for(self, tick: datetime) -> JobRequest:
        meta = dict(self.request.meta) | {
            "cron": True,
            "cron_expr": self.expression.text,
            "cron_tz": self.timezone,
            "cron_name": self.name,
        }
        return self.request.with_options(meta=meta)
