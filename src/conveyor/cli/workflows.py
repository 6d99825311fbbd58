"""``conveyor workflow ID``: where a workflow stands as a whole (its state, phase, progress and
steps), read once or, with ``--wait``, once it has finished."""

from __future__ import annotations

from typing import Any

import click

from conveyor.cli.common import build_app, database_options, json_option, print_json, print_table
from conveyor.errors import WorkflowNotFoundError
from conveyor.workflow_state import WorkflowStatus


def status_json(status: WorkflowStatus) -> dict[str, Any]:
    """The status as JSON: the workflow's state, phase, progress and each step's job id and state."""
    return {
        "workflow_id": status.id,
        "state": None if status.state is None else status.state.value,
        "progress": round(status.progress, 4),
        "phase": list(status.phase),
        "waiting": list(status.waiting),
        "failed_step": status.failed_step,
        "steps": {name: {"id": job.id, "state": job.state.value} for name, job in status.steps.items()},
        "counts": {state.value: count for state, count in status.counts.items()},
        "recorded": status.record is not None,
    }


@click.command(name="workflow")
@database_options
@json_option
@click.argument("workflow_id")
@click.option("--wait", "wait", is_flag=True, help="Wait until it has finished (exit 1 unless it completed).")
@click.option(
    "--timeout",
    type=click.FloatRange(0, 86_400),
    default=None,
    help="With --wait: seconds (default: no limit).",
)
def workflow(
    dsn: str | None, prefix: str | None, as_json: bool, workflow_id: str, wait: bool, timeout: float | None
) -> None:
    """Show a workflow as a whole: its state (running, completed, failed, cancelled), progress,
    the steps running or ready, the step that failed it, and each step. With --wait, wait until it
    has finished first: a failed or cancelled workflow exits 1 naming the step."""
    if timeout is not None and not wait:
        raise click.UsageError("--timeout applies to --wait only")
    app = build_app(dsn, prefix)
    try:
        if wait:
            status = app.wait_workflow_sync(workflow_id, timeout=timeout)
        else:
            status = app.workflow_status_sync(workflow_id)
            if status.state is None:
                raise WorkflowNotFoundError(workflow_id)
    finally:
        app.close_sync()
    if as_json:
        print_json(status_json(status))
        return
    assert status.state is not None
    line = f"workflow {status.id}: {status.state.value}, {status.progress:.0%} done"
    if status.phase:
        line += f"; now: {', '.join(status.phase)}"
    if status.failed_step is not None:
        line += f"; failed at step {status.failed_step!r}"
    click.echo(line)
    if status.steps:
        rows = [(name, job.id, job.state.value, job.worker) for name, job in status.steps.items()]
        print_table("steps", ("step", "job", "state", "worker"), rows)
    elif status.record is not None:
        counts = ", ".join(f"{count} {state.value}" for state, count in status.counts.items())
        click.echo(f"its steps were pruned; recorded: {counts}")
