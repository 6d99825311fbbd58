"""Starting the node of an app that has queues (``Conveyor.start``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conveyor._runtime.node import Node
from conveyor._runtime.process_jobs import start_process_pool
from conveyor._runtime.process_pool import ProcessPool

if TYPE_CHECKING:
    from conveyor.app import Conveyor


async def launch_node(app: Conveyor) -> None:
    """Open ``app``'s database, build ``app.node`` for its queues and start it, once the schema is
    found in place (the app holds it before it starts, so a failed start is stopped by
    ``app.stop()``). The process pool starts first: its workers are fresh interpreters that import
    Conveyor and the job modules (hundreds of ms with heavy ones), which then overlaps connecting
    and the schema check (several round trips) instead of following them."""
    processes = ProcessPool(app.settings.processes)
    await start_process_pool(processes, app.settings, app.resolver)
    try:
        engine = await app.engine()
        node = Node(
            app.settings,
            engine,
            app.resolver,
            app.telemetry,
            crontab=app.crontab(),
            clock=app.clock,
            app=app,
            processes=processes,
        )
        await engine.check_schema()
    except BaseException:
        await processes.stop()
        raise
    app.node = node
    await node.start()
