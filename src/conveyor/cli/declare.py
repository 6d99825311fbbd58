"""``conveyor declare | undeclare | declared``: queues declared in the database (dynamic queues),
which every node, or the nodes named, starts, changes and stops at once (within five poll intervals
otherwise)."""

from __future__ import annotations

from typing import Any

import click

from conveyor.cli.common import build_app, database_options, json_option, print_json, print_table
from conveyor.cli.fleet import _fleet_limits
from conveyor.errors import ValidationError
from conveyor.fleet import StoredQueue


def _json(queue: StoredQueue) -> dict[str, Any]:
    return {"name": queue.name, "opts": queue.opts, "only": queue.only}


@click.command()
@click.argument("queue")
@click.argument("limit", type=int)
@click.option("--global-limit", default=None, metavar="N", help="Jobs running at once on all nodes together.")
@click.option(
    "--rate-limit", default=None, metavar="ALLOWED/SECONDS", help="Fleet-wide starts per period, e.g. 50/1."
)
@click.option(
    "--partition", default=None, metavar="FIELDS", help="Count the limits per worker, args.KEY, meta.KEY."
)
@click.option("--paused", is_flag=True, help="Declare it paused.")
@click.option("--node", "nodes", multiple=True, help="Only this node (repeatable; default: every node).")
@database_options
@json_option
def declare(
    queue: str,
    limit: int,
    global_limit: str | None,
    rate_limit: str | None,
    partition: str | None,
    paused: bool,
    nodes: tuple[str, ...],
    dsn: str | None,
    prefix: str | None,
    as_json: bool,
) -> None:
    """Declare QUEUE with LIMIT per node (or replace its declaration): every node runs it."""
    limits = _fleet_limits(global_limit, rate_limit, partition)
    app = build_app(dsn, prefix)
    try:
        declared = app.declare_queue_sync(queue, limit, paused=paused, nodes=nodes or None, **limits)  # type: ignore[arg-type]
    except ValidationError as exc:
        raise click.UsageError(str(exc)) from None
    finally:
        app.close_sync()
    if as_json:
        print_json(_json(declared))
    else:
        where = ", ".join(nodes) if nodes else "every node"
        click.echo(f"declared queue {queue} (limit {limit}{', paused' if paused else ''}) on {where}")


@click.command()
@click.argument("queue")
@database_options
def undeclare(queue: str, dsn: str | None, prefix: str | None) -> None:
    """Forget the declaration of QUEUE: the nodes that started it for it stop it."""
    app = build_app(dsn, prefix)
    try:
        app.delete_declared_queue_sync(queue)
    except ValidationError as exc:
        raise click.UsageError(str(exc)) from None
    finally:
        app.close_sync()
    click.echo(f"undeclared queue {queue}")


@click.command()
@database_options
@json_option
def declared(dsn: str | None, prefix: str | None, as_json: bool) -> None:
    """List the queues declared in the database."""
    app = build_app(dsn, prefix)
    try:
        found = app.declared_queues_sync()
    finally:
        app.close_sync()
    if as_json:
        print_json([_json(queue) for queue in found])
        return
    rows = [
        (
            q.name,
            q.opts.get("local_limit"),
            q.opts.get("global_limit", "-"),
            q.opts.get("rate_limit", "-"),
            "yes" if q.opts.get("paused") else "no",
            ", ".join(q.only.get("nodes", [])) or "every node",
        )
        for q in found
    ]
    print_table("Declared queues", ("queue", "limit", "global", "rate", "paused", "nodes"), rows)
