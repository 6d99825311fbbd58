"""The PostgreSQL hot path: fetch_jobs.sql and ack_jobs.sql run on sessions of their own with one
generic plan each (see PostgresEngine), so their plans must read through the indexes whatever the
table held when the plan was made. (What they return is proved on every engine by the conformance
suite.)"""

from __future__ import annotations

import asyncio
import json

import pytest
from psycopg import sql

from conveyor import JobRequest, ValidationError
from conveyor.acks import Ack
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.postgres.core import CLAIM_PARTS
from conveyor.job import JobState
from conveyor.limits import FetchLimits
from tests.helpers import poll

NODE, PRODUCER = "node-1", "producer-1"


# The claim's own parts first: fetch_room.sql holds running_jobs (see CLAIM_PARTS).
PLAIN_PARTS = {
    "room": "nothing",
    "demand": "fetch_demand",
    "record_starts": "nothing",
    "claimed_rows": "claimed_rows",
} | CLAIM_PARTS
LIMITED_PARTS = {
    "room": "fetch_room",
    "demand": "fetch_demand_limited",
    "record_starts": "nothing",
    "claimed_rows": "claimed_limited",
} | CLAIM_PARTS


def positional(statement: str, names: list[str]) -> str:
    """A statement with psycopg's %(name)s placeholders as PREPARE's $1, $2, ..."""
    for index, name in enumerate(names, start=1):
        statement = statement.replace(f"%({name})s", f"${index}")
    return statement


def on_jobs(plan: str) -> str:
    """The plan without its reads of ``oban_producers``: the list of cancelled runs still going
    (stopping_ids.sql) is read from that table, one row per producer, in full; only when a candidate
    has an ordered lock or the queue a global limit (an init plan, run at its first use)."""
    return plan.replace("Seq Scan on oban_producers", "")


async def generic_plan(engine: PostgresEngine, statement: str, types: str, args: list[object]) -> str:
    """EXPLAIN of ``statement`` prepared on a hot-path session, as that session plans it."""
    async with engine.hot_pool.connection() as conn:
        await conn.execute(f"PREPARE conveyor_plan_test ({types}) AS {statement}".encode(), prepare=False)
        try:
            literals = sql.SQL(", ").join(sql.Literal(arg) for arg in args)
            query = sql.SQL("EXPLAIN EXECUTE conveyor_plan_test ({})").format(literals)
            cur = await conn.execute(query, prepare=False)
            return "\n".join(row[0] for row in await cur.fetchall())
        finally:
            await conn.execute(b"DEALLOCATE conveyor_plan_test", prepare=False)


async def test_fetch_and_ack_plans_use_the_indexes_even_when_planned_on_a_tiny_table(
    engine: PostgresEngine,
) -> None:
    # Three rows: on a default session the planner reads them with sequential scans, and a generic
    # plan made now would keep doing so after the table has grown to millions of rows.
    ids = await engine.insert([JobRequest(worker="tests.noop", args={"n": n}) for n in range(3)])
    fetch = positional(
        engine.sql.compose("fetch_jobs", **PLAIN_PARTS),
        ["queue", "demand", "node", "producer", "now"],
    )
    plan = await generic_plan(
        engine, fetch, "text, int, text, text, timestamp", ["default", 2, NODE, PRODUCER, None]
    )
    assert "Seq Scan" not in on_jobs(plan) and "Bitmap" not in plan, plan
    assert "Index Scan using oban_jobs_state_queue_priority_scheduled_at_id_index" in plan, plan
    assert "Index Scan using oban_jobs_pkey" in plan, plan
    # A job with an ordered lock looks for the earlier ones of its key through the lock index.
    assert "conveyor_ordered_lock_index" in plan, plan

    # Under a global limit the executing jobs of the queue are counted through the fetch index too.
    fetch_global = positional(
        engine.sql.compose("fetch_jobs", **LIMITED_PARTS),
        [
            "queue",
            "demand",
            "node",
            "producer",
            "now",
            "global_limit",
            "rate_allowed",
            "rate_period",
            "ended_ids",
            "ended_attempts",
            "dead_after",
        ],
    )
    plan = await generic_plan(
        engine,
        fetch_global,
        "text, int, text, text, timestamp, int, int, float8, bigint[], int[], float8",
        ["default", 2, NODE, PRODUCER, None, 4, None, None, [ids[0]], [1], 15.0],
    )
    assert "Seq Scan on oban_jobs" not in plan and "Bitmap" not in plan, plan
    assert "Index Scan using oban_jobs_state_queue_priority_scheduled_at_id_index" in plan, plan

    ack = positional(
        engine.sql.compose("ack_jobs", append_error="append_error_jsonb"),
        ["acks", "now", "ended_channel", "node"],
    )
    records = json.dumps([{"id": ids[0], "attempt": 1, "state": "completed"}])
    plan = await generic_plan(
        engine, ack, "jsonb, timestamp, text, text", [records, None, engine.ended_channel, NODE]
    )
    assert "Seq Scan" not in on_jobs(plan) and "Bitmap" not in plan, plan
    assert "Index Scan using oban_jobs_pkey" in plan, plan
    # Never through the (state, queue, ...) index: its 'executing' entries include every dead one.
    assert "oban_jobs_state_queue_priority_scheduled_at_id_index" not in plan, plan


async def test_no_session_compiles_plans_even_when_their_cost_is_high(engine: PostgresEngine) -> None:
    # On a big table a generic plan of the fetch can cost more than jit_above_cost: compiling it
    # took 18 ms of a 20 ms fetch. No statement of the engine reads enough rows to gain from JIT.
    for pool in (engine.pool, engine.hot_pool):
        async with pool.connection() as conn, conn.transaction():
            await conn.execute(b"SET LOCAL jit_above_cost = 0", prepare=False)  # every plan qualifies
            cur = await conn.execute(
                b"EXPLAIN (ANALYZE, FORMAT JSON) SELECT sum(g * 2) FROM generate_series(1, 10) AS g",
                prepare=False,
            )
            row = await cur.fetchone()
            assert row is not None and "JIT" not in row[0][0], row


async def session_setting(pool: object, name: str) -> str:
    async with pool.connection() as conn:  # type: ignore[attr-defined]
        cur = await conn.execute(f"SHOW {name}".encode(), prepare=False)
        row = await cur.fetchone()
        assert row is not None
        return str(row[0])


async def test_claims_and_acks_wait_for_the_disk_unless_told_otherwise(
    engine: PostgresEngine, dsn: str
) -> None:
    # By default the hot sessions keep the server's synchronous_commit (on here): a claim a node
    # was told of survives a crash of the server.
    assert await session_setting(engine.hot_pool, "synchronous_commit") == "on"
    fast = PostgresEngine(dsn, prefix=engine.prefix, max_connections=2, synchronous_commit=False)
    await fast.open()
    try:
        assert await session_setting(fast.hot_pool, "synchronous_commit") == "off"
        assert await session_setting(fast.hot_pool, "plan_cache_mode") == "force_generic_plan"
        # Everything else (inserts, cluster duties, the caller's work) keeps the server's setting.
        assert await session_setting(fast.pool, "synchronous_commit") == "on"
        # And the hot path works as ever: claimed, acked, completed.
        [job_id] = await fast.insert([JobRequest(worker="w", queue="fast")])
        [job] = await fast.fetch_jobs("fast", 5, node=NODE, producer=PRODUCER)
        assert job.id == job_id and job.attempt == 1
        assert await fast.ack_jobs([Ack(job_id, 1, JobState.COMPLETED)]) == [job_id]
        stored = await fast.get_job(job_id)
        assert stored is not None and stored.state is JobState.COMPLETED
    finally:
        await fast.close()


@pytest.mark.parametrize("value", ["false", 0, 1, None, "off"])
def test_synchronous_commit_must_be_a_boolean(dsn: str, value: object) -> None:
    with pytest.raises(ValidationError, match=r"synchronous_commit=.*must be true or false"):
        PostgresEngine(dsn, synchronous_commit=value)  # type: ignore[arg-type]


def test_hot_statements_are_sent_without_comment_lines_and_fit_psycopgs_query_cache() -> None:
    """psycopg caches its conversion of a query only up to MAX_CACHED_STATEMENT_LENGTH bytes; the
    fetch and the ack are sent without their comment lines, so they fit even under a long prefix."""
    from psycopg._queries import MAX_CACHED_STATEMENT_LENGTH

    from conveyor.engine._sqlfiles import without_comment_lines

    text = "SELECT 1\n  -- a comment\n\nFROM t WHERE a = 'x\n-- kept: inside a literal\n' -- trailing\n"
    kept = "SELECT 1\nFROM t WHERE a = 'x\n-- kept: inside a literal\n' -- trailing"
    assert without_comment_lines(text) == kept
    dollar = "DO $$ BEGIN\n-- kept\nEND $$"
    assert without_comment_lines(dollar) == dollar
    indented = "SELECT 1\n    FROM t WHERE a = 'x\n    kept\n'\n    AND b"
    assert without_comment_lines(indented) == "SELECT 1\nFROM t WHERE a = 'x\n    kept\n'\nAND b"
    engine = PostgresEngine("postgresql://", prefix="a_rather_long_schema_prefix_name")
    ack = engine.sql.compose("ack_jobs", append_error="append_error_jsonb")
    for statement in (engine._fetch_statement, without_comment_lines(ack).encode()):
        assert b"\n--" not in statement and len(statement) <= MAX_CACHED_STATEMENT_LENGTH
    # The claim under limits fits under a prefix of 25 characters (the benchmarks' length).
    limited = PostgresEngine("postgresql://", prefix="p" * 25)._fetch_limited_statement
    assert b"\n--" not in limited and len(limited) <= MAX_CACHED_STATEMENT_LENGTH
    # So do the inserts, the unique one among them (4.5 kB with its comments).
    inserter = PostgresEngine("postgresql://", prefix="p" * 25)._inserter
    for name in ("_statement", "_unique_statement", "_one_unique_statement", "_hold_statement"):
        statement = getattr(inserter, name)
        assert b"\n--" not in statement and len(statement) <= MAX_CACHED_STATEMENT_LENGTH, name


async def waiting_on_an_advisory_lock(engine: PostgresEngine) -> int:
    async with engine.pool.connection() as conn:
        cur = await conn.execute(
            b"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted", prepare=False
        )
        row = await cur.fetchone()
        return int(row[0]) if row else 0


async def test_a_limited_claim_that_waited_for_the_queue_counts_the_claim_it_waited_for(
    engine: PostgresEngine,
) -> None:
    """The lock and the claim go in one round trip without BEGIN (an implicit transaction): the
    claim must still start after the lock is granted, with a snapshot that holds the claim that held
    it. A snapshot from before the wait would count none of those jobs and overrun the limit."""
    ids = await engine.insert([JobRequest(worker="w", queue="capped") for _ in range(6)])
    async with engine.pool.connection() as other:
        async with other.transaction():
            # Another node's claim of two jobs, holding the queue's lock until it commits.
            await other.execute(engine.sql["lock_queue"].encode(), {"queue": "capped"})
            await other.execute(
                f"UPDATE {engine.prefix}.oban_jobs SET state = 'executing', attempt = 1,"
                " attempted_by = ARRAY['other', %(uuid)s] WHERE id = ANY(%(ids)s)".encode(),
                {"ids": [int(i) for i in ids[:2]], "uuid": "00000000-0000-0000-0000-000000000002"},
            )
            waiting = asyncio.ensure_future(
                engine.fetch_jobs(
                    "capped", 5, node=NODE, producer=PRODUCER, limits=FetchLimits(global_limit=3)
                )
            )
            await poll(lambda: waiting_on_an_advisory_lock(engine), what="the claim to wait for the lock")
            assert not waiting.done()
        claimed = await waiting
    assert [job.id for job in claimed] == ids[2:3]  # 3 allowed, 2 claimed by the other
    assert getattr(claimed, "capped", False)
