"""Dynamic cron: cron entries stored in the database (``oban_crons``), changed at runtime.

A stored entry is the same thing as a ``CronEntry`` of the code's crontab, kept as a row: its name,
expression and worker in columns, everything else (args, time zone, back-fill, job options) in
``opts``, as Oban Pro's DynamicCron keeps them. The leader reads the rows at every tick and merges
them with the entries defined in code (``merged``): a stored entry replaces the code entry of the
same name, and a paused one stops it, so an operator can pause or retime a code entry at runtime
and deleting the stored row gives the code its entry back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from conveyor._resolver import import_definition
from conveyor.cron import CronEntry
from conveyor.definition import definition_of
from conveyor.errors import ValidationError, WorkerNotFoundError
from conveyor.fleet import StoredCron

#: The job options a stored entry may carry in ``opts`` (JSON values another runtime reads too).
OPTION_KEYS = ("queue", "priority", "max_attempts", "tags", "meta")
#: The default limit of ticks back-filled at once (``CronEntry.backfill_limit``).
DEFAULT_BACKFILL_LIMIT = 1440


def stored_cron(
    name: str,
    expression: str,
    worker: Any,
    args: Mapping[str, Any] | None = None,
    *,
    timezone: str = "UTC",
    paused: bool = False,
    backfill: bool = False,
    backfill_limit: int = DEFAULT_BACKFILL_LIMIT,
    foreign: bool = False,
    **options: Any,
) -> StoredCron:
    """A stored entry, checked as a crontab entry is (expression, zone, args, options), named.

    ``worker`` is a ``@job``/``@worker`` or its name; a name this process cannot import is refused
    unless ``foreign`` says another runtime (Elixir Oban, oban-py) runs that worker."""
    if not isinstance(name, str) or not name.strip():
        raise ValidationError("name", name, "a stored cron entry needs a name (a non-empty string)")
    if not isinstance(paused, bool):
        raise ValidationError("paused", paused, "must be True or False")
    unknown = sorted(set(options) - set(OPTION_KEYS))
    if unknown:
        raise ValidationError(
            unknown[0],
            options[unknown[0]],
            f"stored cron entries take only the job options {', '.join(OPTION_KEYS)}",
        )
    if definition_of(worker) is None and isinstance(worker, str) and not foreign:
        try:
            import_definition(worker)
        except WorkerNotFoundError as exc:
            raise ValidationError(
                "worker",
                worker,
                f"is not a job this process can import ({exc}); pass foreign=True (--foreign) for "
                "a worker another runtime runs",
            ) from None
    entry = CronEntry.build(
        expression,
        worker,
        args,
        timezone=timezone,
        name=name,
        backfill=backfill,
        backfill_limit=backfill_limit,
        **options,
    )
    if entry.expression.reboot:
        raise ValidationError(
            "expression", expression, "@reboot runs when a node starts: define such an entry in code"
        )
    opts: dict[str, Any] = {"args": entry.request.args, "timezone": entry.timezone}
    opts |= {key: list(value) if key == "tags" else value for key, value in options.items()}
    if backfill:
        opts |= {"backfill": True, "backfill_limit": backfill_limit}
    return StoredCron(name, entry.expression.text, entry.request.worker, opts, paused)


def entry_of(cron: StoredCron) -> CronEntry:
    """The crontab entry a stored row describes (``ValidationError`` for a row that describes none:
    rows may come from another client). Keys of ``opts`` Conveyor does not know are left out;
    Pro's ``guaranteed`` counts as ``backfill``."""
    opts = cron.opts if isinstance(cron.opts, Mapping) else {}
    return CronEntry.build(
        cron.expression,
        cron.worker,
        opts.get("args") or {},
        timezone=opts.get("timezone") or "UTC",
        name=cron.name,
        backfill=bool(opts.get("backfill") or opts.get("guaranteed")),
        backfill_limit=opts.get("backfill_limit", DEFAULT_BACKFILL_LIMIT),
        **{key: opts[key] for key in OPTION_KEYS if opts.get(key) is not None},
    )


def copied(entry: CronEntry, *, paused: bool = False) -> StoredCron:
    """A stored row that repeats a code entry (what pausing or changing a code entry stores first)."""
    request = entry.request
    opts: dict[str, Any] = {
        "args": request.args,
        "timezone": entry.timezone,
        "queue": request.queue,
        "priority": request.priority,
        "max_attempts": request.max_attempts,
        "tags": list(request.tags),
        "meta": dict(request.meta),
    }
    if entry.backfill:
        opts |= {"backfill": True, "backfill_limit": entry.backfill_limit}
    return StoredCron(entry.name, entry.expression.text, request.worker, opts, paused)


def changed(cron: StoredCron, changes: Mapping[str, Any], *, foreign: bool = False) -> StoredCron:
    """``cron`` with ``changes`` (expression, worker, args, timezone, paused, backfill,
    backfill_limit or job options; None leaves a field as it is), checked as a new entry is."""
    given = {key: value for key, value in changes.items() if value is not None}
    opts = dict(cron.opts)
    fields: dict[str, Any] = {
        "expression": cron.expression,
        "worker": cron.worker,
        "args": opts.pop("args", None),
        "timezone": opts.pop("timezone", "UTC"),
        "paused": cron.paused,
        "backfill": bool(opts.pop("backfill", False) or opts.pop("guaranteed", False)),
        "backfill_limit": opts.pop("backfill_limit", DEFAULT_BACKFILL_LIMIT),
        **{key: opts[key] for key in OPTION_KEYS if key in opts},
    }
    # The worker was accepted when stored; only a new one must be importable here.
    foreign = foreign or "worker" not in given
    fields |= given
    expression, worker, args = fields.pop("expression"), fields.pop("worker"), fields.pop("args")
    return stored_cron(cron.name, expression, worker, args, foreign=foreign, **fields)


def merged(
    code: Iterable[CronEntry],
    stored: Iterable[StoredCron],
    on_bad: Callable[[StoredCron, Exception], None] = lambda cron, exc: None,
) -> list[CronEntry]:
    """The entries a leader runs: the code's, each replaced by the stored entry of its name, without
    the paused ones, then the other stored entries. A row that describes no entry goes to
    ``on_bad`` and changes nothing (the code entry of its name, if any, keeps running)."""
    entries = {entry.name: entry for entry in code}
    for cron in stored:
        try:
            entry = entry_of(cron)
        except Exception as exc:  # junk from another client or an older version: reported, skipped
            on_bad(cron, exc)
            continue
        if cron.paused:
            entries.pop(cron.name, None)
        else:
            entries[cron.name] = entry
    return list(entries.values())
