"""``conveyor queues | pause | resume | scale | stop``: steer queues on one node or all."""

from __future__ import annotations

import click

from conveyor import _options as opt
from conveyor.cli.common import build_app, database_options, json_option, print_json, print_table
from conveyor.errors import ValidationError


@click.command()
@database_options
@json_option
def queues(dsn: str | None, prefix: str | None, as_json: bool) -> None:
    """List every queue on every live node: limits (local, global, rate), running jobs, paused."""
    app = build_app(dsn, prefix)
    try:
        found = app.queues_sync()
    finally:
        app.close_sync()
    if as_json:
        print_json(found)
        return
    rows = [
        (
            q.queue,
            q.node,
            q.limit,
            "-" if q.global_limit is None else q.global_limit,
            "-" if q.rate_limit is None else f"{q.rate_limit.allowed}/{q.rate_limit.period:g}s",
            q.running,
            "yes" if q.paused else "no",
            q.updated_at,
        )
        for q in found
    ]
    columns = ("queue", "node", "limit", "global", "rate", "running", "paused", "heartbeat")
    print_table("Queues", columns, rows)


def _queue_command(
    action: str, help_text: str, with_limit: bool = False, persist: bool = True
) -> click.Command:
    def run(dsn: str | None, prefix: str | None, queue: str, node: str | None, **rest: object) -> None:
        if queue != "*":
            try:
                opt.check_queue(queue)
            except ValidationError as exc:
                raise click.BadParameter(f"{queue!r} {exc.problem}", param_hint="QUEUE") from None
        if node is not None and not node.strip():
            raise click.BadParameter(
                "must be a node name (leave --node out for every node)", param_hint="--node"
            )
        app = build_app(dsn, prefix)
        options: dict[str, object] = {"node": node}
        if with_limit:
            options["limit"] = rest["limit"]
        if persist:
            options["persist"] = rest["persist"]
        try:
            getattr(app, f"{action}_queue_sync")(queue, **options)
        finally:
            app.close_sync()
        target = f"node {node}" if node else "every node"
        click.echo(f"{action} {queue} sent to {target}")

    command = click.command(name=action, help=help_text)(run)
    if persist:
        command = click.option("--persist", is_flag=True, help="Keep it across restarts.")(command)
    command = click.option("--node", default=None, help="Only this node (default: every node).")(command)
    # Arguments added to a built command keep the order they are added in: QUEUE, then LIMIT.
    command = click.argument("queue")(command)
    if with_limit:
        command = click.argument("limit", type=click.IntRange(min=1))(command)
    return database_options(command)


pause = _queue_command("pause", "Pause QUEUE ('*' for all): running jobs finish, nothing new starts.")
resume = _queue_command("resume", "Resume QUEUE ('*' for all).")
scale = _queue_command("scale", "Set the per-node LIMIT (concurrency) of QUEUE.", with_limit=True)
stop = _queue_command("stop", "Stop QUEUE on the nodes; running jobs finish first.", persist=False)
