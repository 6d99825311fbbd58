"""The job filter options shared by ``jobs``, ``cancel``, ``retry`` and ``delete``: they become one
``JobFilter`` before the command connects, so a bad value is a usage error (exit 2) naming the option."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from conveyor.errors import ValidationError
from conveyor.filters import TIME_RANGES, JobFilter
from conveyor.job import JobState
from conveyor.retention import parse_duration

#: The options each command gets, by the ``JobFilter`` field they fill.
SIMPLE_OPTIONS = {
    "states": click.option(
        "--state", "states", multiple=True, type=click.Choice([s.value for s in JobState]), help="Repeatable."
    ),
    "queues": click.option("--queue", "queues", multiple=True, help="Repeatable."),
    "workers": click.option("--worker", "workers", multiple=True, help="Exact worker name; repeatable."),
    "worker_suffix": click.option(
        "--worker-suffix",
        default=None,
        help="Workers named this or ending with '.' and this (SendEmail matches app.mail.SendEmail).",
    ),
    "tags": click.option("--tag", "tags", multiple=True, help="Jobs carrying all of these tags."),
}
#: The time options: ``--scheduled-after`` and so on, by the ``JobFilter`` field they fill.
TIME_OPTIONS = {
    f"{name}_{side}": click.option(
        f"--{name}-{side}",
        f"{name}_{side}",
        default=None,
        metavar="WHEN",
        help=f"{TIME_RANGES[name]} {'at or after' if side == 'after' else 'before'} WHEN: ISO 8601 with "
        "an offset (2024-05-01T12:00:00Z) or a duration ago (30m, 2h, 7d).",
    )
    for name in TIME_RANGES
    for side in ("after", "before")
}
FILTER_FIELDS = (*SIMPLE_OPTIONS, *TIME_OPTIONS)


def option_name(field: str) -> str:
    """How the command line spells the option filling a ``JobFilter`` field."""
    return {"states": "--state", "queues": "--queue", "workers": "--worker", "tags": "--tag"}.get(
        field, "--" + field.replace("_", "-")
    )


def parse_moment(text: str, field: str, now: datetime) -> datetime:
    """An aware datetime from ISO 8601 text with an offset (or ``Z``), or from a duration meaning that
    long before ``now`` (``30m``, ``2h``, ``7d``, ``1d12h``)."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        pass
    else:
        if moment.tzinfo is None:
            raise ValidationError(field, text, "needs a UTC offset (e.g. +02:00) or Z")
        return moment
    try:
        return now - timedelta(seconds=parse_duration(text, field))
    except ValidationError:
        raise ValidationError(
            field,
            text,
            "must be ISO 8601 with an offset (2024-05-01T12:00:00Z) or a duration ago (30m, 2h, 7d)",
        ) from None


def usage_error(exc: ValidationError) -> click.UsageError:
    """A filter's refusal as a usage error naming the option, not the Python field."""
    return click.UsageError(f"invalid {option_name(exc.field)} {exc.value!r}: {exc.problem}")


def build_filter(values: dict[str, Any], now: datetime | None = None, **extra: Any) -> JobFilter:
    """The ``JobFilter`` the options ask for (``extra``: ids, limit, before_id); a usage error if bad."""
    now = now or datetime.now(UTC)
    criteria: dict[str, Any] = {name: value for name, value in values.items() if value not in (None, ())}
    try:
        for name in TIME_OPTIONS:
            if name in criteria:
                criteria[name] = parse_moment(criteria[name], name, now)
        return JobFilter.build(**criteria, **{k: v for k, v in extra.items() if v not in (None, ())})
    except ValidationError as exc:
        raise usage_error(exc) from None


def filter_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Add the filter options to a command; it receives them as ``filters``, a dict by field name
    (checked later by ``build_filter``, with the command's own ids, limit or page)."""

    @functools.wraps(fn)
    def command(*args: Any, **kwargs: Any) -> Any:
        filters = {name: kwargs.pop(name) for name in FILTER_FIELDS}
        return fn(*args, filters=filters, **kwargs)

    decorated: Callable[..., Any] = command
    for option in reversed((*SIMPLE_OPTIONS.values(), *TIME_OPTIONS.values())):
        decorated = option(decorated)
    return decorated


def is_empty(filters: dict[str, Any]) -> bool:
    """True when no filter option was given."""
    return all(value in (None, ()) for value in filters.values())
