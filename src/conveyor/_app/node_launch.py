"""Starting the node of an app that has queues (``Conveyor.start``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from conveyor._runtime.node import Node
from conveyor.engine.base import Engine

if TYPE_CHECKING:
    from conveyor.app import Conveyor


async def launch_node(app: Conveyor, engine: Engine) -> None:
    """Build ``app.node`` for its queues on ``engine`` and start it, once the schema is found in
    place (the app holds it before it starts, so a failed start is stopped by ``app.stop()``)."""
    node = Node(
        app.settings,
        engine,
        app.resolver,
        app.telemetry,
        crontab=app.crontab(),
        clock=app.clock,
        app=app,
    )
    # Process workers take ~70 ms to import what they need: let them start while the schema
    # is checked (a round trip of several ms).
    await node.start_pool()
    try:
        await engine.check_schema()
    except BaseException:
        await node.stop_pool()
        raise
    app.node = node
    await node.start()
