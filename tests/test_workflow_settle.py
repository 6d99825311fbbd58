"""The settle of workflow steps on PostgreSQL (settle_steps.sql): after an ack it runs on the ack's
hot session with one generic plan, so that plan must read through the indexes whatever the table
held when it was made; and a step whose row another transaction is changing is waited for, then
let go on. (What a settle decides is proved on every engine by the conformance suite.)"""

from __future__ import annotations

import asyncio

import psycopg

from conveyor import JobState, Workflow
from conveyor.acks import Ack
from conveyor.engine.postgres import PostgresEngine
from tests.conformance.contract import T0, req, uid
from tests.helpers import blocked_by, poll
from tests.test_hot_path import generic_plan, positional

SETTLE_PARAMS = ["ids", "skip", "take", "now", "channel"]


async def enqueue(engine: PostgresEngine, workflow: Workflow) -> dict[str, int]:
    requests, hold = workflow.requests()
    ids = await engine.insert(requests, now=T0, hold=hold)
    return {s.name: int(i) for s, i in zip(workflow.steps, ids, strict=True)}


async def test_the_settle_plan_uses_the_indexes_even_when_planned_on_a_tiny_table(
    engine: PostgresEngine,
) -> None:
    ids = await enqueue(engine, Workflow().add("a", req()).add("b", req(), deps=["a"]))
    statement = positional(engine._settle_statement("settle_steps").decode(), SETTLE_PARAMS)
    plan = await generic_plan(
        engine,
        statement,
        "bigint[], int, int, timestamp, text",
        [[ids["a"]], 0, 500, None, engine.insert_channel],
    )
    assert "Seq Scan on oban_jobs" not in plan and "Bitmap" not in plan, plan
    assert "Index Scan using oban_jobs_pkey" in plan, plan
    assert "conveyor_workflow_step_names_index" in plan, plan  # each dependent and dependency by name


async def test_a_step_whose_row_another_transaction_changes_is_waited_for_then_let_go_on(
    engine: PostgresEngine, dsn: str
) -> None:
    """A settle finds the step ready, but another transaction holds its row (a graft appending to
    its dependents): the settle waits for that commit, then finds the latest row and lets it go."""
    ids = await enqueue(engine, Workflow().add("a", req()).add("b", req(), deps=["a"]))
    (claimed,) = await engine.fetch_jobs("default", 10, node="n", producer=uid(1), now=T0)
    table = f'"{engine.prefix}".oban_jobs'
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as other:
        async with other.transaction():
            touch = f"UPDATE {table} SET meta = meta || '{{\"touched\": true}}' WHERE id = %s"
            await other.execute(touch.encode(), [ids["b"]])
            ack = asyncio.create_task(engine.ack_jobs([Ack(claimed.id, 1, JobState.COMPLETED)], now=T0))
            await poll(
                lambda: blocked_by(dsn, other.info.backend_pid),
                what="a statement of the ack waiting for the row the other transaction holds",
            )
            assert not ack.done()  # the settle after the ack waits for the row
        await asyncio.wait_for(ack, 10)
    settled = await engine.get_job(ids["b"])
    assert settled is not None and settled.state is JobState.AVAILABLE and settled.meta["touched"] is True
