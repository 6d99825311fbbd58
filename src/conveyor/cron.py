"""Crontab entries: a job to insert on every tick of a cron expression, in a time zone.

The expressions themselves (their syntax, their errors, matching a minute) are
``conveyor.cron_expression``, re-exported here. Entries need more than the expression: building one
from a worker's name imports its definition (``_resolver``), and the node's cron duty asks an entry
for its ticks over a span of time (daylight saving included) and the job of each.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from types import ModuleType
from typing import Any

import orjson

from conveyor._resolver import import_definition
from conveyor.cron_expression import CronError as CronError
from conveyor.cron_expression import CronExpression as CronExpression
from conveyor.cron_expression import load_zone as load_zone
from conveyor.definition import JobDefinition, definition_of
from conveyor.errors import ValidationError, WorkerNotFoundError
from conveyor.request import JobRequest


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


#: The most entries a node announces in its heartbeat (what the dashboard's cron page lists).
MAX_ANNOUNCED = 500


def announcement(entries: Iterable[CronEntry]) -> list[dict[str, str]]:
    """What a node tells the fleet of the cron entries it runs, in its producer row's meta (see
    ``Heartbeat``): each entry's name, expression, zone, worker and queue (not its args, which may
    be large or private). A web process reads them there instead of importing the job modules."""
    return [
        {
            "name": e.name,
            "expr": e.expression.text,
            "tz": e.timezone,
            "worker": e.request.worker,
            "queue": e.request.queue,
        }
        for e in list(entries)[:MAX_ANNOUNCED]
    ]


def from_announcement(value: Any) -> CronEntry | None:
    """An entry as a node announced it (``announcement``), or None for anything else: the row may
    come from another client, or a node of another version."""
    if not isinstance(value, Mapping):
        return None
    try:
        request = JobRequest(worker=value["worker"], args={}, queue=value["queue"])
        return CronEntry(
            CronExpression.parse(value["expr"]), request, timezone=value.get("tz", "UTC"), name=value["name"]
        )
    except Exception:  # junk of any shape: left out rather than failing the page that lists them
        return None


@dataclass(frozen=True, slots=True)
class AnnouncedEntry:
    """A cron entry live nodes announce, and which nodes do (``Conveyor.fleet_crontab``)."""

    entry: CronEntry
    nodes: tuple[str, ...]


def parse_crontab(value: Any) -> tuple[CronEntry, ...]:
    """Entries as ``CronEntry`` values, ``(expression, job[, args])`` tuples, or mappings with
    expression, worker (a @job/@worker or its name), and optional args, timezone, name, backfill,
    and job options."""
    if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
        raise ValidationError("crontab", value, "must be a list of cron entries")
    entries = [_crontab_entry(index, item) for index, item in enumerate(value)]
    names = [e.name for e in entries]
    if len(names) != len(set(names)):
        raise ValidationError("crontab", names, "two entries have the same name; give them distinct names")
    return tuple(entries)


def _crontab_entry(index: int, item: Any) -> CronEntry:
    """One entry of ``parse_crontab``; its errors name the entry and the field
    (``crontab[2].timezone``)."""
    try:
        if isinstance(item, CronEntry):
            return item
        if isinstance(item, tuple | list) and 2 <= len(item) <= 3:
            return CronEntry.build(*item)
        if isinstance(item, Mapping):
            spec = dict(item)
            try:
                expression, target = spec.pop("expression"), spec.pop("worker")
            except KeyError as exc:
                raise ValidationError("crontab", item, f"an entry needs {exc.args[0]!r}") from None
            if not all(isinstance(key, str) for key in spec):
                raise ValidationError("crontab", item, "an entry's keys are field names (strings)")
            return CronEntry.build(expression, target, spec.pop("args", None), **spec)
        raise ValidationError("crontab", item, "entries are (expression, job, args) or mappings")
    except ValidationError as exc:
        field = f"crontab[{index}]" if exc.field == "crontab" else f"crontab[{index}].{exc.field}"
        raise ValidationError(field, exc.value, exc.problem) from None
