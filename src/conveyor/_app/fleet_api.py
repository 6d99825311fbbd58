"""The documented API of ``Conveyor`` for steering the fleet: pause, resume, scale, start and stop
queues on every node or one, list the queues and the leader, read cron ticks, nudge producers.
``Conveyor`` inherits it; the signals themselves are ``conveyor._app.control``'s."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from types import EllipsisType
from typing import Any

from conveyor._app.binding import EngineBinding, blocking_twin
from conveyor._app.control import fleet_crontab, list_queues, scale_changes, send_queue_signal
from conveyor._options import check_queue, check_texts
from conveyor._runtime.node import Node
from conveyor.cron import AnnouncedEntry
from conveyor.fleet import LeaderInfo, QueueInfo
from conveyor.limits import GlobalLimit, RateLimit
from conveyor.settings import Settings


class FleetApi:
    """Queue control across the fleet, and what the fleet is doing (part of ``Conveyor``)."""

    settings: Settings
    node: Node | None
    _binding: EngineBinding

    async def pause_queue(self, queue: str, *, node: str | None = None, persist: bool = False) -> None:
        """Pause ``queue`` ("*" for all) on every node, or on ``node``: running jobs finish and are
        acked, nothing new is fetched. ``persist`` keeps the pause across restarts. A ``node`` is
        reached whichever runtime runs it (Conveyor or oban-py); one that no live producer row
        names raises ``NodeNotFoundError`` (nothing is sent). The other queue methods alike."""
        await self._signal("pause", queue, node=node, persist=persist)

    async def resume_queue(self, queue: str, *, node: str | None = None, persist: bool = False) -> None:
        """Resume ``queue`` ("*" for all) on every node, or on ``node``: fetching starts again.
        ``persist`` keeps it across restarts (see ``pause_queue``)."""
        await self._signal("resume", queue, node=node, persist=persist)

    async def scale_queue(
        self,
        queue: str,
        limit: int | None = None,
        *,
        global_limit: int | GlobalLimit | Mapping[str, Any] | EllipsisType | None = ...,
        rate_limit: RateLimit | Mapping[str, Any] | EllipsisType | None = ...,
        node: str | None = None,
        persist: bool = False,
    ) -> None:
        """Change the local limit (concurrency) of ``queue`` on every node, or on ``node``, and/or its
        fleet-wide limits: ``global_limit`` (an int, or None to lift it) and ``rate_limit``
        (``{"allowed": n, "period": s}``, or None to lift it), each with an optional ``partition``;
        left out, they stay as they are. ``persist`` keeps the changes across restarts: a node
        starting the queue applies them over its configuration."""
        changes = scale_changes(limit, global_limit, rate_limit)
        await self._signal("scale", queue, node=node, limit=limit, persist=persist, limits=changes)

    async def start_queue(self, queue: str, limit: int, *, node: str | None = None) -> None:
        """Start running ``queue`` with ``limit`` on every node, or on ``node``."""
        await self._signal("start", queue, node=node, limit=limit)

    async def stop_queue(self, queue: str, *, node: str | None = None) -> None:
        """Stop ``queue`` on every node, or on ``node``; running jobs finish first."""
        await self._signal("stop", queue, node=node)

    async def queues(self) -> list[QueueInfo]:
        """Every queue on every live node: limit, running count, paused flag."""
        return await self._binding.run(lambda e: list_queues(e, self.settings))

    async def leader(self) -> LeaderInfo | None:
        """The node that leads this instance (``settings.name``) now, or None when none does."""
        return await self._binding.run(lambda e: e.get_leader(self.settings.name))

    async def cron_ticks(self, names: Sequence[str]) -> dict[str, datetime]:
        """The latest tick the fleet ran of each named cron entry (aware UTC); an entry that never
        ticked is absent."""
        wanted = check_texts("names", names)
        return await self._binding.run(lambda e: e.last_cron_ticks(wanted))

    async def fleet_crontab(self) -> list[AnnouncedEntry]:
        """The cron entries the live nodes run, as they announce them in their heartbeats (name,
        expression, zone, worker, queue; not args), each with the nodes announcing it: what a web
        process can list without importing the job modules. Only nodes that may lead (``leadership``)
        run, and so announce, a crontab."""
        return await self._binding.run(lambda e: fleet_crontab(e, self.settings))

    pause_queue_sync = blocking_twin(pause_queue)
    resume_queue_sync = blocking_twin(resume_queue)
    scale_queue_sync = blocking_twin(scale_queue)
    start_queue_sync = blocking_twin(start_queue)
    stop_queue_sync = blocking_twin(stop_queue)
    queues_sync = blocking_twin(queues)
    leader_sync = blocking_twin(leader)
    cron_ticks_sync = blocking_twin(cron_ticks)
    fleet_crontab_sync = blocking_twin(fleet_crontab)

    async def _signal(self, action: str, queue: str, **options: Any) -> None:
        node = self._local_node()
        await self._binding.run(lambda e: send_queue_signal(e, self.settings, node, action, queue, **options))

    async def nudge(self, queue: str | None = None) -> None:
        """Make producers fetch now: this node's directly, every node's through a notification."""
        if queue is not None:
            check_queue(queue)
        node = self._local_node()
        if node is not None:
            node.nudge(queue)
        await self._binding.run(lambda e: e.notify("insert", {"queue": queue or "*"}))

    nudge_sync = blocking_twin(nudge)

    def _local_node(self) -> Node | None:
        """This process's node, when the caller runs on its loop; from the portal (a ``_sync``
        twin) the node is reached like any other, through the database: it lives on another loop."""
        return None if self._binding.portal.is_current() else self.node

    async def last_cron_ticks(self, names: Iterable[str]) -> dict[str, datetime]:
        """The latest tick a leader inserted for each named cron entry (entries never run: absent)."""
        wanted = check_texts("names", names)
        return await self._binding.run(lambda e: e.last_cron_ticks(wanted))

    last_cron_ticks_sync = blocking_twin(last_cron_ticks)
