"""The jobs page's filter, as it travels in query strings and forms, turned into a ``JobFilter``.

Every value comes from a request, so each is checked on its own: a bad one is reported and left out,
and the others still apply. Nothing here reaches SQL except through ``JobFilter``'s bound values.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import orjson

from conveyor import _options as opt
from conveyor.errors import ValidationError
from conveyor.filters import MAX_ARGS_FILTER, JobFilter
from conveyor.job import JobState

PAGE_SIZES = (25, 50, 100, 200)
DEFAULT_PAGE = 50
#: The most values one criterion takes from a request.
MAX_VALUES = 50
MAX_TEXT = 255
#: The times a page may be bounded by (``JobFilter``'s time ranges).
TIME_FIELDS = ("scheduled", "attempted", "completed")


@dataclass(frozen=True, slots=True)
class JobQuery:
    """What the jobs page shows: criteria (combined with AND) and the page."""

    states: tuple[str, ...] = ()
    queues: tuple[str, ...] = ()
    workers: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    #: A JSON object the args must contain (the page's "args" field).
    args: dict[str, Any] | None = field(default=None, compare=False)
    #: Which time ``since``/``until`` bound: "scheduled", "attempted" or "completed".
    time: str = "scheduled"
    since: datetime | None = None
    until: datetime | None = None
    #: Keyset paging: jobs with a smaller id than this (the last one of the page before).
    before: int | None = None
    limit: int = DEFAULT_PAGE
    #: Why some values of the request were left out.
    problems: tuple[str, ...] = field(default=(), compare=False)

    @property
    def filtered(self) -> bool:
        return bool(
            self.states or self.queues or self.workers or self.tags or self.since or self.until or self.args
        )

    def criteria(self, *, paged: bool = True, after: int | None = None) -> JobFilter:
        """The filter to list a page (``paged``; ids above ``after`` only) or to act on every
        matching job."""
        # One worker is matched by its name's end ("send_email" finds "app.mail.send_email").
        suffix = self.workers[0] if len(self.workers) == 1 else None
        times: dict[str, Any] = {f"{self.time}_after": self.since, f"{self.time}_before": self.until}
        return JobFilter(
            states=tuple(JobState(s) for s in self.states),
            queues=self.queues,
            workers=self.workers if suffix is None else (),
            worker_suffix=suffix,
            tags=self.tags,
            args_contains=self.args,
            **times,
            limit=self.limit if paged else None,
            before_id=self.before if paged else None,
            after_id=after if paged else None,
        )

    def params(self, *, paged: bool = True) -> list[tuple[str, str]]:
        """The query as (name, value) pairs: for links and for a form's hidden fields."""
        pairs = [("state", s) for s in self.states] + [("queue", q) for q in self.queues]
        pairs += [("worker", w) for w in self.workers] + [("tag", t) for t in self.tags]
        if self.args:
            pairs.append(("args", orjson.dumps(self.args).decode()))
        if self.since or self.until:
            pairs.append(("time", self.time))
            pairs += [
                (name, _minute(moment))
                for name, moment in (("since", self.since), ("until", self.until))
                if moment
            ]
        if paged:
            if self.before is not None:
                pairs.append(("before", str(self.before)))
            if self.limit != DEFAULT_PAGE:
                pairs.append(("limit", str(self.limit)))
        return pairs

    def link(self, **changes: Any) -> str:
        """The query string (with its ``?``, or empty) of this query with ``changes``."""
        pairs = replace(self, **changes).params() if changes else self.params()
        return f"?{urlencode(pairs)}" if pairs else ""


def _texts(values: Sequence[str]) -> list[str]:
    return [v.strip() for v in values[:MAX_VALUES] if v.strip()]


def parse_query(params: Mapping[str, Sequence[str]]) -> JobQuery:
    """A ``JobQuery`` from request values (a name may repeat); bad values become ``problems``."""
    problems: list[str] = []
    states = []
    for value in _texts(params.get("state", ())):
        if value in JobState.__members__.values():
            states.append(value)
        else:
            problems.append(f"state {value!r} is not a job state")
    queues = []
    # Queue names hold no comma: "a,b" is two queues, as the filter form shows them.
    for value in _texts([part for text in params.get("queue", ()) for part in text.split(",")]):
        try:
            queues.append(opt.check_queue(value))
        except ValidationError as exc:
            problems.append(f"queue {value[:80]!r} {exc.problem}")
    workers: list[str] = []
    tags: list[str] = []
    for name, kept in (("worker", workers), ("tag", tags)):
        for value in _texts(params.get(name, ())):
            if "\x00" in value or len(value) > MAX_TEXT:
                problems.append(f"{name} {value[:80]!r} is not a {name} name")
            else:
                kept.append(value)
    time = (_texts(params.get("time", ())) or ["scheduled"])[0]
    if time not in TIME_FIELDS:
        problems.append(f"time {time[:30]!r} is not one of {', '.join(TIME_FIELDS)}")
        time = "scheduled"
    since = _moment(params.get("since", ()), "since", problems)
    until = _moment(params.get("until", ()), "until", problems)
    if since is not None and until is not None and since >= until:
        problems.append("since must be earlier than until")
        since = until = None
    if len(workers) == 1:
        try:
            JobFilter(worker_suffix=workers[0])
        except ValidationError as exc:
            problems.append(f"worker {workers[0][:80]!r} {exc.problem}")
            workers = []
    args = _args(params.get("args", ()), problems)
    before = _job_id(params.get("before", ()), "before", problems)
    limit = DEFAULT_PAGE
    raw_limit = _texts(params.get("limit", ()))
    if raw_limit:
        if raw_limit[0].isdigit() and int(raw_limit[0]) in PAGE_SIZES:
            limit = int(raw_limit[0])
        else:
            problems.append(f"page size {raw_limit[0][:20]!r} is not one of {PAGE_SIZES}")
    return JobQuery(
        states=tuple(dict.fromkeys(states)),
        queues=tuple(dict.fromkeys(queues)),
        workers=tuple(dict.fromkeys(workers)),
        tags=tuple(dict.fromkeys(tags)),
        args=args,
        time=time,
        since=since,
        until=until,
        before=before,
        limit=limit,
        problems=tuple(problems),
    )


def _args(values: Sequence[str], problems: list[str]) -> dict[str, Any] | None:
    """The args search: a JSON object (``{"user_id": 7}``), checked as ``JobFilter`` will."""
    texts = _texts(values)
    if not texts:
        return None
    try:
        found = orjson.loads(texts[0][:MAX_ARGS_FILTER])
        return JobFilter(args_contains=found).args_contains
    except orjson.JSONDecodeError:
        problems.append('args must be a JSON object, e.g. {"user_id": 7}')
    except ValidationError as exc:
        problems.append(f"args {exc.problem}")
    return None


def _moment(values: Sequence[str], name: str, problems: list[str]) -> datetime | None:
    """A time from a form (``2026-11-25T09:30``, as a datetime-local field sends it): UTC unless it
    names its offset."""
    texts = _texts(values)
    if not texts:
        return None
    try:
        moment = datetime.fromisoformat(texts[0][:40])
    except ValueError:
        problems.append(f"{name} {texts[0][:40]!r} is not a time like 2026-11-25T09:30")
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _minute(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M")


def _job_id(values: Sequence[str], name: str, problems: list[str]) -> int | None:
    texts = _texts(values)
    if not texts:
        return None
    try:
        return opt.check_job_id(int(texts[0]), name)
    except ValueError:
        problems.append(f"{name} {texts[0][:30]!r} is not a job id")
        return None


def parse_ids(values: Sequence[str]) -> tuple[list[int], list[str]]:
    """Job ids from a form (at most ``MAX_PAGE`` of them), and the values that were none."""
    ids, problems = [], []
    for value in values[:10_000]:
        try:
            ids.append(opt.check_job_id(int(value.strip())))
        except ValueError:
            problems.append(f"{value[:30]!r} is not a job id")
    return list(dict.fromkeys(ids)), problems
