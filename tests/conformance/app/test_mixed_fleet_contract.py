"""A mixed fleet (Conveyor and oban-py nodes on one database) behaves the same on every engine.

oban-py itself runs only on PostgreSQL (tests/test_oban_mixed.py drives the real one); here its
nodes are stood in for by what they leave in the database: producer rows without Conveyor's mark,
named ``Oban``, and signals addressed ``Oban.<node>``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from conveyor import Conveyor, NodeNotFoundError, ValidationError
from conveyor._runtime.producer import Producer
from conveyor.engine.base import Engine
from conveyor.fleet import ProducerBeat
from conveyor.settings import Settings
from tests.conformance.contract import Heard, listening, uid
from tests.helpers import poll

OBAN_ROW = {"local_limit": 5, "paused": False}  # what oban-py writes in its producer rows


@pytest.fixture
async def mixed_node(fleet_engines: list[Engine]) -> AsyncIterator[Conveyor]:
    """A Conveyor node of a mixed fleet on the first engine: queue "default", instance ``Oban``."""
    app = Conveyor(
        engine=fleet_engines[0],
        queues={"default": 2},
        mixed_fleet=True,
        poll_interval=0.1,
        leadership=False,
    )
    await app.start()
    try:
        yield app
    finally:
        await app.stop(grace=1)


async def until(check: object, what: str, timeout: float = 5.0) -> None:
    await poll(check, timeout=timeout, what=what)  # type: ignore[arg-type]


def test_a_mixed_fleet_is_named_as_oban_py_names_its_instance() -> None:
    assert Settings(mixed_fleet=True).name == "Oban"
    assert Settings(mixed_fleet=True, name="Billing").name == "Billing"  # oban-py's Oban(name=...)
    assert Settings().name == "conveyor"
    with pytest.raises(ValidationError):
        Settings(foreign_heartbeat_interval=20, foreign_producer_timeout=10)
    assert Settings(foreign_heartbeat_interval=5).foreign_timeout == 20  # four missed beats
    assert Settings(foreign_producer_timeout=600).foreign_timeout == 600


def node_and_producer(app: Conveyor) -> tuple[str, Producer]:
    assert app.node is not None
    return app.node.name, app.node.producers["default"]


async def test_node_signals_reach_nodes_of_either_runtime_and_unknown_ones_fail(
    mixed_node: Conveyor, fleet_engines: list[Engine]
) -> None:
    node, producer = node_and_producer(mixed_node)
    # An oban-py node, as its rows show it (no Conveyor mark, instance "Oban").
    await fleet_engines[1].record_producers("Oban", "oban-1", [ProducerBeat(uid(0x0B), "default", OBAN_ROW)])
    # A separate client with the default instance name, as `conveyor pause --node` builds one.
    client = Conveyor(engine=fleet_engines[1])
    async with listening(fleet_engines[2], ["signal"]) as heard:
        await client.pause_queue("default", node=node)
        await until(lambda: producer.paused, "the mixed node to pause")
        await client.resume_queue("default", node=node)
        await until(lambda: not producer.paused, "the mixed node to resume")
        await client.pause_queue("default", node="oban-1")
        with pytest.raises(NodeNotFoundError) as exc:
            await client.scale_queue("default", 3, node="nobody")
        assert exc.value.node == "nobody" and set(exc.value.live) == {node, "oban-1"}
        await settle(fleet_engines[1], heard)
    # Each addressed by the instance name its rows carry; nothing sent to the unknown node.
    assert [p["ident"] for p in heard.on("signal") if "ident" in p] == [
        f"Oban.{node}",
        f"Oban.{node}",
        "Oban.oban-1",
    ]
    assert producer.limit == 2


async def test_a_mixed_node_obeys_what_oban_py_sends_it(
    mixed_node: Conveyor, fleet_engines: list[Engine]
) -> None:
    node, producer = node_and_producer(mixed_node)
    # oban-py's Oban.pause_queue("default", node=...) sends exactly this.
    await fleet_engines[1].notify("signal", {"action": "pause", "queue": "default", "ident": f"Oban.{node}"})
    await until(lambda: producer.paused, "oban-py's pause")
    await fleet_engines[1].notify("signal", {"action": "resume", "queue": "default", "ident": "Oban.other"})
    await fleet_engines[1].notify(
        "signal", {"action": "resume", "queue": "default", "ident": f"conveyor.{node}"}
    )
    # A scale addressed to this node, sent after them, is applied: the node handles signals in
    # order, so by then it has seen both resumes, addressed to other nodes (conveyor.<node> is
    # another instance's), and left the queue paused.
    limit = producer.limit
    scale = {"action": "scale", "queue": "default", "limit": limit + 1, "ident": f"Oban.{node}"}
    await fleet_engines[1].notify("signal", scale)
    await until(lambda: producer.limit == limit + 1, "oban-py's scale, sent after the resumes")
    assert producer.paused
    await fleet_engines[1].notify("signal", {"action": "resume", "queue": "*", "ident": f"Oban.{node}"})
    await until(lambda: not producer.paused, "oban-py's resume")


async def settle(engine: Engine, heard: Heard) -> None:
    """What was sent before a marker has arrived once the marker has."""
    await engine.notify("signal", {"action": "marker"})
    await heard.wait_for("signal", {"action": "marker"})
