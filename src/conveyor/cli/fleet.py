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
            "-" if q.global_limit is None else q.global_limit.describe(),
            "-" if q.rate_limit is None else q.rate_limit.describe(),
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
        options: dict[str, object] = {"node": node}
        if with_limit:
            options["limit"] = rest["limit"]
        if action == "scale":
            options |= _fleet_limits(rest.get("global_limit"), rest.get("rate_limit"), rest.get("partition"))
            if options["limit"] is None and len(options) == 2:
                raise click.UsageError("give a LIMIT, --global-limit or --rate-limit")
        app = build_app(dsn, prefix)
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
        command = click.argument("limit", type=click.IntRange(min=1), required=action != "scale")(command)
    if action == "scale":
        command = click.option(
            "--partition",
            default=None,
            metavar="FIELDS",
            help="Count the limits given per partition: worker, args.KEY, meta.KEY (comma-separated).",
        )(command)
        command = click.option(
            "--rate-limit",
            default=None,
            metavar="ALLOWED/SECONDS",
            help="Fleet-wide starts per period, e.g. 50/1 ('none' lifts it).",
        )(command)
        command = click.option(
            "--global-limit",
            default=None,
            metavar="N",
            help="Jobs running at once on all nodes together ('none' lifts it).",
        )(command)
    return database_options(command)


def _partition(text: str) -> dict[str, object]:
    """``--partition worker,args.tenant,meta.region`` as ``Partition.build`` takes it."""
    worker = False
    keys: dict[str, list[str]] = {"args": [], "meta": []}
    for item in (part.strip() for part in text.split(",")):
        field, dot, key = item.partition(".")
        if item == "worker":
            worker = True
        elif dot and field in keys and key:
            keys[field].append(key)
        else:
            raise click.BadParameter(
                f"{item!r} is not worker, args.KEY or meta.KEY", param_hint="--partition"
            )
    return {"worker": worker} | {field: names for field, names in keys.items() if names}


def _fleet_limits(global_limit: object, rate_limit: object, partition: object = None) -> dict[str, object]:
    """The fleet-wide limits a ``conveyor scale`` changes, as ``scale_queue`` takes them."""
    changes: dict[str, object] = {}
    if isinstance(global_limit, str):
        if global_limit.strip().lower() == "none":
            changes["global_limit"] = None
        else:
            try:
                changes["global_limit"] = int(global_limit)
            except ValueError:
                raise click.BadParameter(
                    f"{global_limit!r} is not an integer or 'none'", param_hint="--global-limit"
                ) from None
    if isinstance(rate_limit, str):
        if rate_limit.strip().lower() == "none":
            changes["rate_limit"] = None
        else:
            allowed, _, period = rate_limit.strip().partition("/")
            try:
                changes["rate_limit"] = {"allowed": int(allowed), "period": float(period.rstrip("s") or 1)}
            except ValueError:
                raise click.BadParameter(
                    f"{rate_limit!r} is not ALLOWED/SECONDS (e.g. 50/1) or 'none'", param_hint="--rate-limit"
                ) from None
    if isinstance(partition, str):
        given = {key: value for key, value in changes.items() if value is not None}
        if not given:
            raise click.UsageError("--partition needs --global-limit or --rate-limit (not 'none')")
        shape = _partition(partition)
        for key, value in given.items():
            if isinstance(value, dict):
                value["partition"] = shape
            else:
                changes[key] = {"allowed": value, "partition": shape}
    return changes


pause = _queue_command("pause", "Pause QUEUE ('*' for all): running jobs finish, nothing new starts.")
resume = _queue_command("resume", "Resume QUEUE ('*' for all).")
scale = _queue_command(
    "scale",
    "Set the per-node LIMIT (concurrency) of QUEUE, and/or its fleet-wide --global-limit and --rate-limit.",
    with_limit=True,
)
stop = _queue_command("stop", "Stop QUEUE on the nodes; running jobs finish first.", persist=False)
