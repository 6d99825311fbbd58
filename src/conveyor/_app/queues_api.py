"""The documented API of ``Conveyor`` for dynamic queues: queues declared in the database, which
every node, or the nodes a declaration names, starts, changes and stops at once when signalled
(within five poll intervals otherwise; ``conveyor.dynamic_queues``,
``_runtime/queue_declarations.py``). ``Conveyor`` inherits it."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from conveyor._app.binding import EngineBinding, blocking_twin
from conveyor._runtime.node import Node
from conveyor.dynamic_queues import stored_queue
from conveyor.engine.base import Engine
from conveyor.errors import ValidationError
from conveyor.fleet import StoredQueue
from conveyor.limits import GlobalLimit, RateLimit


class DeclaredQueuesApi:
    """Queues declared in the database (part of ``Conveyor``)."""

    _binding: EngineBinding
    node: Node | None

    async def declare_queue(
        self,
        /,
        name: str,
        limit: int,
        *,
        global_limit: int | GlobalLimit | Mapping[str, Any] | None = None,
        rate_limit: RateLimit | Mapping[str, Any] | None = None,
        paused: bool = False,
        nodes: Iterable[str] | None = None,
    ) -> StoredQueue:
        """Declare the queue ``name`` (or replace its declaration): every node, or only the
        ``nodes`` named, runs it with the local ``limit``, the fleet-wide ``global_limit`` and
        ``rate_limit`` (as in the ``queues`` setting, partitions included), paused or not. Running
        nodes start or change it at once (within five poll intervals when a notification is
        missed), without a restart. Checked as the ``queues`` setting is: a mistake raises
        ``ValidationError`` naming the field."""
        queue = stored_queue(
            name, limit, global_limit=global_limit, rate_limit=rate_limit, paused=paused, nodes=nodes
        )
        await self._binding.run(lambda e: e.put_stored_queue(queue))
        await self._tell_nodes()
        return queue

    async def delete_declared_queue(self, name: str) -> None:
        """Forget the declaration of ``name``: the nodes that started it for the declaration stop
        it (running jobs finish, as with ``stop_queue``); a node configured with it keeps it.
        Raises ``ValidationError`` when no queue of that name is declared."""
        if not await self._binding.run(lambda e: e.delete_stored_queue(name)):
            raise ValidationError("name", name, "no declared queue has that name (see declared_queues)")
        await self._tell_nodes()

    async def _tell_nodes(self) -> None:
        """Wake every node's read of the declarations (this process's at once, so it works with
        notifications off too; the others by a signal other runtimes ignore)."""
        if self.node is not None:
            self.node.declarations.wake()
        await self._binding.run(_signal_nodes)

    async def declared_queues(self) -> list[StoredQueue]:
        """The queues declared in the database, by name."""
        return await self._binding.run(lambda e: e.list_stored_queues())

    declare_queue_sync = blocking_twin(declare_queue)
    delete_declared_queue_sync = blocking_twin(delete_declared_queue)
    declared_queues_sync = blocking_twin(declared_queues)


async def _signal_nodes(engine: Engine) -> None:
    await engine.notify("signal", {"action": "declarations", "ident": "any"})
