"""Dynamic queues on every engine: queues declared in the database by any process are started,
changed and stopped by running nodes (every node, or the nodes a declaration names) without a
restart; bad declarations are refused naming the field."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from conveyor import Conveyor, JobState
from conveyor.errors import ValidationError
from conveyor.fleet import StoredQueue
from conveyor.limits import GlobalLimit, RateLimit
from tests.conformance import hardening_jobs as hj
from tests.conformance.conftest import ENGINES, release_schema
from tests.helpers import poll

FAST = {"poll_interval": 0.1, "stage_interval": 0.1, "leadership": False}


@pytest.fixture
async def pair(engine_name: str, tmp_path: Path) -> AsyncIterator[tuple[Conveyor, Conveyor, Conveyor]]:
    """Two started nodes ("node-a", "node-b", queue "default") and an app without a node, on one
    database of each engine."""
    schemas: list[str] = []
    apps = [
        Conveyor(engine=ENGINES[engine_name](tmp_path, schemas), queues={"default": 2}, node=name, **FAST)
        for name in ("node-a", "node-b")
    ]
    editor = Conveyor(engine=ENGINES[engine_name](tmp_path, schemas))
    await editor.install()
    for app in apps:
        await app.start()
    try:
        yield apps[0], apps[1], editor
    finally:
        for app in [*apps, editor]:
            await app.stop(grace=1)
        for schema in schemas:
            release_schema(schema)


def producer_of(app: Conveyor, queue: str) -> Any:
    assert app.node is not None
    return app.node.producers.get(queue)


async def until(check: Any, what: str) -> None:
    async def look() -> bool:
        return bool(check())

    await poll(look, bool, what=what)


async def test_a_declared_queue_starts_changes_and_stops_on_every_node(
    pair: tuple[Conveyor, Conveyor, Conveyor],
) -> None:
    a, b, editor = pair
    await editor.declare_queue("reports", 3, global_limit={"allowed": 4, "partition": {"args": ["tenant"]}})
    await until(
        lambda: producer_of(a, "reports") and producer_of(b, "reports"), "both nodes to start reports"
    )
    producer = producer_of(a, "reports")
    assert producer.limit == 3 and producer.limits.global_limit == GlobalLimit.build(
        {"allowed": 4, "partition": {"args": ["tenant"]}}
    )
    job_id = await editor.enqueue(hj.quick.new(n=1).with_options(queue="reports"))
    await poll(
        lambda: editor.get_job(job_id), lambda job: job.state is JobState.COMPLETED, what="the job to run"
    )

    await editor.declare_queue("reports", 5, rate_limit={"allowed": 10, "period": 60}, paused=True)
    await until(lambda: producer_of(b, "reports").paused and producer_of(b, "reports").limit == 5, "a change")
    assert producer_of(b, "reports").limits.rate == RateLimit.build({"allowed": 10, "period": 60})
    assert producer_of(b, "reports").limits.global_limit is None  # the declaration replaced it

    await editor.delete_declared_queue("reports")
    await until(lambda: not producer_of(a, "reports") and not producer_of(b, "reports"), "both to stop it")
    assert producer_of(a, "default") is not None  # the configured queue stays
    assert await editor.declared_queues() == []


async def test_a_declaration_naming_nodes_runs_on_those_only_and_leaves_configured_queues_running(
    pair: tuple[Conveyor, Conveyor, Conveyor],
) -> None:
    a, b, editor = pair
    await editor.declare_queue("only-b", 2, nodes=["node-b"])
    await editor.declare_queue("default", 4)  # also configured: takes the declared limit
    await until(lambda: producer_of(b, "only-b"), "node-b to start only-b")
    await until(lambda: producer_of(a, "default").limit == 4, "the declared limit on node-a")
    assert producer_of(a, "only-b") is None
    await editor.declare_queue("only-b", 2, nodes=["node-a"])  # moved
    await until(lambda: producer_of(a, "only-b") and not producer_of(b, "only-b"), "the queue to move")
    await editor.delete_declared_queue("default")
    await editor.declare_queue("marker", 1)
    await until(lambda: producer_of(a, "marker"), "a later look")
    assert producer_of(a, "default") is not None  # configured: never stopped by a declaration
    stored = {q.name: q for q in await editor.declared_queues()}
    assert stored["only-b"] == StoredQueue(
        "only-b", {"local_limit": 2, "paused": False}, {"nodes": ["node-a"]}, stored["only-b"].updated_at
    )


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"name": "", "limit": 1}, "queue"),
        ({"name": "q", "limit": 0}, "queues.q.limit"),
        ({"name": "q", "limit": 1, "global_limit": 0}, "queues.q.global_limit"),
        ({"name": "q", "limit": 1, "rate_limit": {"allowed": 1, "period": 0}}, "queues.q.rate_limit"),
        ({"name": "q", "limit": 1, "paused": "yes"}, "paused"),
        ({"name": "q", "limit": 1, "nodes": "node-a"}, "nodes"),
        ({"name": "q", "limit": 1, "nodes": []}, "nodes"),
    ],
)
async def test_bad_declarations_are_refused_naming_the_field(
    pair: tuple[Conveyor, Conveyor, Conveyor], options: dict[str, Any], field: str
) -> None:
    editor = pair[2]
    with pytest.raises(ValidationError) as caught:
        await editor.declare_queue(**options)
    assert caught.value.field.startswith(field), caught.value
    with pytest.raises(ValidationError, match="no declared queue"):
        await editor.delete_declared_queue("missing")
    assert await editor.declared_queues() == []


async def test_a_declaration_wakes_nodes_at_once_not_at_their_backstop_read(
    engine_name: str, tmp_path: Path
) -> None:
    """Nodes read the declarations every five poll intervals only (an idle node's budget); the
    declaring app's signal makes them read at once, here well before a 150 s backstop."""
    schemas: list[str] = []
    node = Conveyor(
        engine=ENGINES[engine_name](tmp_path, schemas),
        queues={"default": 1},
        poll_interval=30.0,
        leadership=False,
    )
    editor = Conveyor(engine=ENGINES[engine_name](tmp_path, schemas))
    await editor.install()
    await node.start()
    try:
        await editor.declare_queue("woken", 2)
        await until(lambda: producer_of(node, "woken"), "the node to start the declared queue")
        await editor.delete_declared_queue("woken")
        await until(lambda: producer_of(node, "woken") is None, "the node to stop it")
    finally:
        for app in (node, editor):
            await app.stop(grace=1)
        for schema in schemas:
            release_schema(schema)
