"""A declared queue whose start fails after its producer began (its first heartbeat lost a deadlock,
say) is still the declaration's: the retry rescales it and its deletion stops it."""

from __future__ import annotations

from typing import Any

from conveyor._runtime.clock import FakeClock
from conveyor._runtime.queue_declarations import QueueDeclarations
from conveyor.fleet import StoredQueue


class Node:
    """The part of a node the service drives: a start that begins the producer, then fails once."""

    name = "n1"

    def __init__(self) -> None:
        self.producers: dict[str, Any] = {}
        self.stopped: list[str] = []
        self.failures = 1

    async def start_queue(self, name: str, limit: int, *, settings: Any) -> None:
        self.producers[name] = limit
        if self.failures:
            self.failures -= 1
            raise RuntimeError("the first heartbeat failed")

    def scale(self, name: str, limit: int) -> None:
        self.producers[name] = limit

    def targets(self, name: str) -> list[Any]:
        return []

    def pause(self, name: str) -> None: ...

    def resume(self, name: str) -> None: ...

    async def stop_queue(self, name: str) -> None:
        self.stopped.append(name)
        del self.producers[name]


class Declarations:
    def __init__(self) -> None:
        self.rows = [StoredQueue("reports", {"local_limit": 3})]

    async def list_stored_queues(self) -> list[StoredQueue]:
        return list(self.rows)


async def test_a_start_that_failed_after_its_producer_began_is_still_stopped_by_the_deletion() -> None:
    node, engine = Node(), Declarations()
    service = QueueDeclarations(node, engine, 1.0, FakeClock())  # type: ignore[arg-type]
    try:
        await service.tick()
    except RuntimeError:
        pass
    else:
        raise AssertionError("the failing start should have raised")
    await service.tick()  # the Service's retry
    assert node.producers == {"reports": 3}
    engine.rows = []
    await service.tick()
    assert node.stopped == ["reports"] and node.producers == {}
