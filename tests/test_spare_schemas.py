"""The spare schemas the ``engine`` fixture recycles (tests/spare_schemas.py): a test gets one empty,
and never one whose definitions a previous test changed."""

from __future__ import annotations

import psycopg

from conveyor.engine.postgres import PostgresEngine
from conveyor.filters import JobFilter
from conveyor.request import JobRequest
from tests.conftest import DSN
from tests.spare_schemas import SpareSchemas


async def installed(spares: SpareSchemas) -> tuple[str, PostgresEngine]:
    name = spares.take()
    engine = PostgresEngine(DSN, prefix=name, max_connections=2)
    await engine.open()
    await engine.install()
    spares.installed(name)
    return name, engine


async def test_an_untouched_schema_comes_back_empty_and_a_changed_one_never() -> None:
    spares = SpareSchemas(DSN)
    try:
        first, engine = await installed(spares)
        await engine.insert([JobRequest("w", args={"n": 1})])
        await engine.close()
        spares.release(first)

        again, engine = await installed(spares)
        assert again == first  # the same schema, installed once
        assert await engine.count_jobs(JobFilter()) == 0  # without the rows of the test before
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f'DROP INDEX "{again}".oban_jobs_completed_at_index'.encode())
        await engine.close()
        spares.release(again)  # dropped: its definitions changed

        third, engine = await installed(spares)
        await engine.close()
        assert third != first
        with psycopg.connect(DSN, autocommit=True) as conn:
            exists = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (first,)).fetchone()
        assert exists == (0,)
        spares.release(third)
    finally:
        spares.drop_all()
