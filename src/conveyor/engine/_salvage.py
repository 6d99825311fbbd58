"""Reading the rows that an engine's fast decoder refuses.

Another client (or a hand-written UPDATE) can leave anything in ``oban_jobs``: JSON a decoder
cannot hold (``1e400``, nesting deeper than 1,024), JSON of the wrong shape (``errors`` = null,
``args`` = a list), times out of Python's range (``infinity``, year 20000), states no Oban knows,
or, on SQLite, text that is not JSON at all. The engines decode a whole batch quickly and, only when
that fails, decode each row column by column here: a row with bad fields still becomes a ``Job``,
with those fields neutral and ``Job.unreadable`` saying what was wrong, so one bad row neither hides
its neighbours from ``list_jobs`` nor strands the jobs claimed with it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from conveyor.job import Job, JobState

#: The columns of ``job_columns.sql``, in order (both engines use it).
COLUMNS = (
    "id",
    "state",
    "queue",
    "worker",
    "args",
    "meta",
    "tags",
    "errors",
    "attempt",
    "max_attempts",
    "priority",
    "attempted_by",
    "inserted_at",
    "scheduled_at",
    "attempted_at",
    "cancelled_at",
    "completed_at",
    "discarded_at",
)
#: Stands for a time that could not be read where the field must have one.
NEUTRAL_TIME = datetime(1970, 1, 1, tzinfo=UTC)
_STATES = {state.value: state for state in JobState}
_REQUIRED_TIMES = frozenset({"inserted_at", "scheduled_at"})


class Unread:
    """Marks a column whose stored value could not be decoded (the reason is kept beside it)."""


UNREAD = Unread()


def describe(exc: BaseException) -> str:
    """A one-line reason for a decoding failure."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


#: Positions in ``job_columns.sql`` of the columns stored as JSON and as times.
JSON_COLUMNS = frozenset({4, 5, 6, 7, 11})
TIME_COLUMNS = frozenset(range(12, 18))


def read_or_salvage(
    rows: Sequence[Sequence[Any]],
    decode: Callable[[Sequence[Any]], Job],
    salvage: Callable[[Sequence[Any]], Job],
) -> list[Job]:
    """Every row through ``decode``; when any row fails, every row through ``salvage`` instead
    (the fast path costs one try per batch, and one bad row never fails the rows around it)."""
    try:
        return [decode(row) for row in rows]
    except Exception:
        return [salvage(row) for row in rows]


def salvage_columns(
    row: Sequence[Any], decode_json: Callable[[Any], Any], decode_time: Callable[[Any], datetime]
) -> Job:
    """One row of ``job_columns.sql`` decoded column by column with the engine's own decoders of a
    stored JSON value and a stored time: what cannot be decoded is named in ``Job.unreadable``."""
    values: list[Any] = []
    problems: dict[str, str] = {}
    for index, raw in enumerate(row):
        try:
            if raw is None or not (index in JSON_COLUMNS or index in TIME_COLUMNS):
                values.append(raw)
            elif index in JSON_COLUMNS:
                values.append(decode_json(raw))
            else:
                values.append(decode_time(raw))
        except Exception as exc:
            values.append(UNREAD)
            problems[COLUMNS[index]] = describe(exc)
    return salvage_job(values, problems)


def salvage_job(values: Sequence[Any], problems: Mapping[str, str]) -> Job:
    """A ``Job`` from decoded column values (``UNREAD`` where decoding failed, with the reason in
    ``problems``): every field checked, bad ones replaced by neutral values and named in
    ``Job.unreadable``."""
    found = dict(zip(COLUMNS, values, strict=True))
    issues = dict(problems)

    def pick(name: str, ok: bool, neutral: Any, why: str) -> Any:
        value = found[name]
        if name in issues:
            return neutral
        if not ok:
            issues[name] = why
            return neutral
        return value

    def is_int(value: Any) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    def is_str_list(value: Any) -> bool:
        return isinstance(value, list | tuple) and all(isinstance(v, str) for v in value)

    job_id = found["id"]
    if not is_int(job_id):  # no engine can return a row without its integer key
        raise TypeError(f"a job row without an integer id: {job_id!r}")
    state_text = found["state"]
    state = _STATES.get(state_text) if isinstance(state_text, str) else None
    if state is None and "state" not in issues:
        issues["state"] = f"{state_text!r} is not a job state"
    meta = found["meta"]
    errors = found["errors"]
    tags = found["tags"]
    attempted_by = found["attempted_by"]
    times: dict[str, datetime | None] = {}
    for name in COLUMNS[12:]:
        value = found[name]
        required = name in _REQUIRED_TIMES
        ok = isinstance(value, datetime) or (value is None and not required)
        times[name] = pick(name, ok, NEUTRAL_TIME if required else None, f"{value!r} is not a time")
    job = Job(
        job_id,
        state if state is not None else JobState.DISCARDED,
        pick("queue", isinstance(found["queue"], str), "", "not text"),
        pick("worker", isinstance(found["worker"], str), "", "not text"),
        pick("args", isinstance(found["args"], dict), {}, "not a JSON object"),
        pick("meta", meta is None or isinstance(meta, dict), {}, "not a JSON object") or {},
        tuple(pick("tags", tags is None or is_str_list(tags), (), "not a list of text") or ()),
        tuple(
            pick(
                "errors",
                isinstance(errors, list | tuple) and all(isinstance(e, dict) for e in errors),
                (),
                "not a list of JSON objects",
            )
        ),
        pick("attempt", is_int(found["attempt"]), 0, "not an integer"),
        pick("max_attempts", is_int(found["max_attempts"]), 1, "not an integer"),
        pick("priority", is_int(found["priority"]), 0, "not an integer"),
        tuple(pick("attempted_by", attempted_by is None or is_str_list(attempted_by), (), "not text") or ()),
        times["inserted_at"],  # type: ignore[arg-type]
        times["scheduled_at"],  # type: ignore[arg-type]
        times["attempted_at"],
        times["cancelled_at"],
        times["completed_at"],
        times["discarded_at"],
    )
    if not issues:
        return job
    ordered = sorted(issues.items(), key=lambda item: COLUMNS.index(item[0]))
    return replace(job, unreadable="; ".join(f"{name}: {why}" for name, why in ordered))
