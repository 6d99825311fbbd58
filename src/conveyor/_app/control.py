"""Steering a live fleet: queue signals (pause, resume, scale, start, stop) and the queue listing.

Signals travel on the database's ``signal`` channel in Oban's format, so every node (Conveyor or
Oban) on the database hears them. A persisted change is also written to ``conveyor_queue_states``
so nodes apply it when they (re)start the queue.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from conveyor import _options as opt
from conveyor._runtime.node import Node
from conveyor._runtime.signals import ident_for, queue_signal
from conveyor.cron import MAX_ANNOUNCED, AnnouncedEntry, CronEntry, from_announcement
from conveyor.engine.base import Engine
from conveyor.errors import NodeNotFoundError, ValidationError
from conveyor.fleet import QueueInfo
from conveyor.limits import GlobalLimit, RateLimit
from conveyor.settings import Settings

QUEUE_ACTIONS = ("pause", "resume", "scale", "start", "stop")


def check_target(queue: str, limit: int | None, action: str, *, limits: bool = False) -> None:
    if queue != "*" or action in ("start",):
        opt.check_queue(queue)
    if action == "scale" and limit is None and limits:
        return  # only the fleet-wide limits change
    if action in ("scale", "start") and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValidationError("limit", limit, f"{action} needs an integer limit >= 1")


def scale_changes(limit: int | None, global_limit: Any, rate_limit: Any) -> dict[str, Any]:
    """The fleet-wide limits a scale changes, as the signal carries them (``...``: unchanged; None:
    lifted), checked before anything is sent."""
    changes: dict[str, Any] = {}
    if global_limit is not ...:
        cap = GlobalLimit.build(global_limit)  # refuses 0, negatives, non-integers, bad partitions
        changes["global_limit"] = None if cap is None else cap.to_json()
    if rate_limit is not ...:
        rate = RateLimit.build(rate_limit)
        changes["rate_limit"] = None if rate is None else rate.to_json()
    if limit is None and not changes:
        raise ValidationError("limit", limit, "scale needs a limit, a global_limit or a rate_limit")
    return changes


async def send_queue_signal(
    engine: Engine,
    settings: Settings,
    local: Node | None,
    action: str,
    queue: str,
    *,
    node: str | None = None,
    limit: int | None = None,
    persist: bool = False,
    limits: dict[str, Any] | None = None,
) -> None:
    """Send one queue action to every node (``node=None``) or one node, and apply it here at once
    when this process's node is a target (so it works with notifications off too). A node no live
    producer row names raises ``NodeNotFoundError`` and nothing is sent."""
    if action not in QUEUE_ACTIONS:
        raise ValidationError("action", action, f"must be one of {', '.join(QUEUE_ACTIONS)}")
    check_target(queue, limit, action, limits=bool(limits))
    if persist:
        if action not in ("pause", "resume", "scale") or queue == "*":
            raise ValidationError("persist", persist, "only pause, resume and scale of a named queue persist")
        if node is not None:  # conveyor_queue_states has no node: it would reach every node on restart
            raise ValidationError("persist", persist, "a persisted change reaches every node; pass no node")
        paused = {"pause": True, "resume": False}.get(action)
        await engine.save_queue_state(settings.name, queue, paused=paused, limit=limit, limits=limits)
    idents = ["any"] if node is None else await node_idents(engine, settings, local, node)
    payload = queue_signal(action, queue, idents[0], limit) | (limits or {})
    for ident in idents:
        await engine.notify("signal", payload | {"ident": ident})
    if local is not None and node in (None, local.name):
        local.signalled(payload, "local")
        if action == "pause":
            local.pause(queue)
        elif action == "resume":
            local.resume(queue)
        elif action == "scale":
            local.apply_scale(queue, payload)
        elif action == "start" and limit is not None:
            await local.start_queue(queue, limit)
        elif action == "stop":
            for name in [p.queue for p in local.targets(queue)]:
                await local.stop_queue(name)


async def node_idents(engine: Engine, settings: Settings, local: Node | None, node: str) -> list[str]:
    """How a signal addresses ``node``: ``"<instance name>.<node>"``, with the name its producer
    rows carry (oban-py's ``Oban``, Conveyor's ``name`` setting), so it reaches a node of either
    runtime. ``NodeNotFoundError`` when no live producer row names that node."""
    if local is not None and local.name == node:
        return [ident_for(settings.name, node)]
    now = datetime.now(UTC)
    live = [
        p
        for p in await engine.list_producers()
        if p.alive(now, settings.producer_timeout, settings.foreign_timeout)
    ]
    names = sorted({p.name for p in live if p.node == node})
    if not names:
        raise NodeNotFoundError(node, sorted({p.node for p in live}))
    return [ident_for(name, node) for name in names]


async def list_queues(engine: Engine, settings: Settings, *, now: datetime | None = None) -> list[QueueInfo]:
    """Every queue on every live node (fresh heartbeat, by its runtime's timeout), from the
    producer rows."""
    now = now or datetime.now(UTC)
    result = []
    for producer in await engine.list_producers():
        if not producer.alive(now, settings.producer_timeout, settings.foreign_timeout):
            continue
        meta = producer.meta
        result.append(
            QueueInfo(
                node=producer.node,
                queue=producer.queue,
                limit=int(meta.get("local_limit", 0)),
                running=int(meta.get("running", 0)),
                paused=bool(meta.get("paused", False)),
                started_at=producer.started_at,
                updated_at=producer.updated_at,
                global_limit=_global_limit(meta.get("global_limit")),
                rate_limit=_rate_limit(meta.get("rate_limit")),
            )
        )
    return sorted(result, key=lambda q: (q.queue, q.node))


async def fleet_crontab(
    engine: Engine, settings: Settings, *, now: datetime | None = None
) -> list[AnnouncedEntry]:
    """The cron entries live Conveyor nodes announce in their producer rows, by name, each with the
    nodes announcing it. Should nodes disagree on an entry (a deploy under way), the version of the
    node started last is the one shown."""
    now = now or datetime.now(UTC)
    entries: dict[str, CronEntry] = {}
    nodes: dict[str, set[str]] = {}
    for producer in sorted(await engine.list_producers(), key=lambda p: p.started_at):
        if not producer.is_conveyor or not producer.alive(now, settings.producer_timeout, 0.0):
            continue
        announced = producer.meta.get("crontab")
        for item in announced[:MAX_ANNOUNCED] if isinstance(announced, list) else ():
            entry = from_announcement(item)
            if entry is not None:
                entries[entry.name] = entry
                nodes.setdefault(entry.name, set()).add(producer.node)
    return [AnnouncedEntry(entry, tuple(sorted(nodes[name]))) for name, entry in sorted(entries.items())]


def _global_limit(value: Any) -> GlobalLimit | None:
    """A producer row's global limit, or None: another client may have written anything there."""
    try:
        return GlobalLimit.build(value)
    except Exception:
        return None


def _rate_limit(value: Any) -> RateLimit | None:
    """A producer row's rate limit, or None when it holds none (or something unreadable)."""
    if not isinstance(value, dict):
        return None
    try:
        return RateLimit.build(value)
    except Exception:
        return None
