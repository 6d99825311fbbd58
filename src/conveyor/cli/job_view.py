"""How ``conveyor job ID`` shows one job: a JSON object for scripts (``job_json``) and, for people,
a table of its fields followed by its args, meta, recorded result and errors with their tracebacks."""

from __future__ import annotations

import dataclasses
from typing import Any

import click
import orjson

from conveyor.cli.common import print_table
from conveyor.encryption import shown_args
from conveyor.errors import ConveyorError
from conveyor.job import Job

#: orjson's integers are 64-bit: larger ones (Erlang bignums in a recorded result) become text.
_INT_RANGE = range(-(2**63), 2**64)


def printable(value: Any) -> Any:
    """``value`` as JSON can hold it: bytes that are not UTF-8 as their Python literal, dict keys as
    text, integers beyond 64 bits as text (recorded results may hold any of these)."""
    if isinstance(value, bytes):
        return repr(value)
    if isinstance(value, dict):
        return {k if isinstance(k, str) else str(k): printable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [printable(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool) and value not in _INT_RANGE:
        return str(value)
    return value


def recorded_result(job: Job) -> tuple[bool, Any, str | None]:
    """Whether the job recorded a result, the decoded value, and why it cannot be read (or None)."""
    recorded = isinstance(job.meta, dict) and bool(job.meta.get("recorded")) and "return" in job.meta
    try:
        return recorded, printable(job.result), None
    except ConveyorError as exc:  # another client's value that cannot be decoded: say so
        return recorded, None, str(exc)


def workflow_of(job: Job) -> dict[str, Any] | None:
    """The job's workflow id, step name and workflow name, when it is a workflow step."""
    meta = job.meta if isinstance(job.meta, dict) else {}
    workflow_id = meta.get("workflow_id")
    if not isinstance(workflow_id, str):
        return None
    step, name = meta.get("name"), meta.get("workflow_name")
    return {
        "id": workflow_id,
        "step": step if isinstance(step, str) else None,
        "name": name if isinstance(name, str) else None,
    }


def job_json(job: Job) -> dict[str, Any]:
    """Every stored field of the job, plus what ``conveyor job`` decodes from ``meta``: progress,
    signals, the recorded result (``result``, ``recorded``, ``result_error``) and the workflow."""
    recorded, result, problem = recorded_result(job)
    fields = {field.name: getattr(job, field.name) for field in dataclasses.fields(job)}
    return {
        **fields,
        "args": shown_args(printable(job.args), job.meta),
        "meta": printable(job.meta),
        "errors": [printable(error) for error in job.errors],
        "progress": printable(job.progress),
        "signals": printable(job.signals),
        "recorded": recorded,
        "result": result,
        "result_error": problem,
        "workflow": workflow_of(job),
    }


def pretty(value: Any) -> str:
    """Indented JSON text of a JSON-like value."""
    return orjson.dumps(printable(value), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def show_job(job: Job, shown: dict[str, Any]) -> None:
    """Print the job for people: fields, then args, meta, result and each error in its own panel."""
    workflow = shown["workflow"]
    rows: list[tuple[str, Any]] = [
        ("id", job.id),
        ("state", job.state.value),
        ("queue", job.queue),
        ("worker", job.worker),
        ("attempt", f"{job.attempt}/{job.max_attempts}"),
        ("priority", job.priority),
        ("tags", ",".join(job.tags)),
        ("inserted_at", job.inserted_at),
        ("scheduled_at", job.scheduled_at),
        ("attempted_at", job.attempted_at),
        ("attempted_by", ",".join(job.attempted_by)),
        ("completed_at", job.completed_at),
        ("cancelled_at", job.cancelled_at),
        ("discarded_at", job.discarded_at),
        ("progress", orjson.dumps(shown["progress"]).decode() if shown["progress"] else ""),
        ("signals", len(job.signals)),
        ("errors", len(job.errors)),
    ]
    if workflow is not None:
        rows.append(("workflow", f"{workflow['id']} step {workflow['step'] or '?'}"))
    print_table(f"Job {job.id}", ("field", "value"), rows)
    # Imported here: ``conveyor jobs`` loads this module too, and needs none of rich's syntax colouring.
    from rich.console import Console
    from rich.panel import Panel
    from rich.syntax import Syntax

    console = Console()
    console.print(
        Panel(Syntax(pretty(shown_args(job.args, job.meta)), "json"), title="args", title_align="left")
    )
    meta = dict(job.meta) if isinstance(job.meta, dict) else {}
    if "return" in meta and shown["recorded"]:  # the base64 term: shown decoded as the result below
        meta["return"] = "(the recorded result, shown decoded)"
    console.print(Panel(Syntax(pretty(meta), "json"), title="meta", title_align="left"))
    if shown["result_error"] is not None:
        click.echo(f"result: not shown, {shown['result_error']}")
    elif shown["recorded"]:
        console.print(Panel(Syntax(pretty(shown["result"]), "json"), title="result", title_align="left"))
    for error in job.errors:
        title = f"error (attempt {error.get('attempt', '?')}, at {error.get('at', '?')})"
        console.print(Panel(str(error.get("error", "")), title=title, title_align="left"))
    if job.unreadable is not None:
        click.echo(f"its row could not be read: {job.unreadable}")
