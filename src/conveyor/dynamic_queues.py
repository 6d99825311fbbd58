"""Dynamic queues: queues declared in the database (``oban_queues``), which every node, or the nodes
a declaration names, starts, changes and stops at runtime (``_runtime/queue_declarations.py``).

A declaration holds what a queue of the ``queues`` setting holds, in Oban Pro DynamicQueues' form:
``opts`` with ``local_limit``, ``global_limit``, ``rate_limit`` (each limit may be partitioned) and
``paused``; ``only`` with the ``nodes`` that run it (Pro's single ``node`` is read too).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from conveyor.errors import ValidationError
from conveyor.fleet import StoredQueue
from conveyor.limits import GlobalLimit, RateLimit
from conveyor.queue_settings import QueueSettings


def stored_queue(
    name: str,
    limit: int,
    *,
    global_limit: int | GlobalLimit | Mapping[str, Any] | None = None,
    rate_limit: RateLimit | Mapping[str, Any] | None = None,
    paused: bool = False,
    nodes: Iterable[str] | None = None,
) -> StoredQueue:
    """A declaration, checked as a queue of the ``queues`` setting is (errors name the field)."""
    settings = QueueSettings(name, limit, global_limit=global_limit, rate_limit=rate_limit)  # type: ignore[arg-type]
    if not isinstance(paused, bool):
        raise ValidationError("paused", paused, "must be True or False")
    opts: dict[str, Any] = {"local_limit": settings.limit, "paused": paused}
    if settings.global_limit is not None:
        opts["global_limit"] = settings.global_limit.to_json()
    if settings.rate_limit is not None:
        opts["rate_limit"] = settings.rate_limit.to_json()
    return StoredQueue(name, opts, {"nodes": _nodes(nodes)} if nodes is not None else {})


def _nodes(nodes: Iterable[str]) -> list[str]:
    if isinstance(nodes, str | bytes) or not isinstance(nodes, Iterable):
        raise ValidationError("nodes", nodes, "must be a list of node names (or None for every node)")
    found = list(nodes)
    if not found or not all(isinstance(node, str) and node for node in found):
        raise ValidationError(
            "nodes", nodes, "must be a non-empty list of node names (or None for every node)"
        )
    return found


def declared(queue: StoredQueue) -> tuple[QueueSettings, bool]:
    """The queue settings and pause a declaration asks for (``ValidationError`` for a row that asks
    for none: rows may come from another client)."""
    opts = queue.opts
    settings = QueueSettings(
        queue.name,
        opts.get("local_limit", 10),
        global_limit=opts.get("global_limit"),
        rate_limit=opts.get("rate_limit"),
    )
    return settings, bool(opts.get("paused", False))


def runs_on(queue: StoredQueue, node: str) -> bool:
    """Whether ``node`` runs the declared queue: every node, unless ``only`` names nodes."""
    nodes = queue.only.get("nodes")
    single = queue.only.get("node")
    if isinstance(nodes, list):
        return node in nodes
    if isinstance(single, str):
        return node == single
    return not queue.only  # a filter of another kind (Pro's sys_env): not one this node can judge
