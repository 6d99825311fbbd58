"""PostgreSQL: an insert of several statements claims its unique keys in one order across them (see
``engine/postgres/unique_claims.py``), here with small statements, so that a batch of a few dozen
requests takes several (the statement path of a connection that cannot COPY, past 5,000 requests)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator

import pytest

from conveyor import JobFilter, JobRequest
from conveyor.engine.postgres import PostgresEngine, inserter
from tests.conftest import DSN

WORKER = "tests.order.Job"
ONCE = {"period": None}
REPLACING = {"period": None, "fields": ["worker"], "keys": [], "replace": {"available": ["args"]}}


@pytest.fixture
def small_statements(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inserter, "INSERT_CHUNK", 8)


@pytest.fixture
async def writers(engine: PostgresEngine, small_statements: None) -> AsyncIterator[list[PostgresEngine]]:
    """``engine`` and four more on its schema, each with a pool of its own."""
    others = [PostgresEngine(DSN, prefix=engine.prefix, max_connections=2) for _ in range(4)]
    for other in others:
        await other.open()
    try:
        yield [engine, *others]
    finally:
        for other in others:
            await other.close()


def batch(seed: int, keys: range) -> list[JobRequest]:
    requests = [JobRequest(WORKER, args={"n": n}, unique=ONCE) for n in keys]
    requests += [JobRequest(WORKER, args={"n": n % 5}, unique=ONCE) for n in range(5)]  # duplicates
    requests += [JobRequest(WORKER, args={"plain": n}) for n in range(10)]
    random.Random(seed).shuffle(requests)
    return requests


async def test_an_insert_of_several_statements_returns_ids_in_input_order(
    engine: PostgresEngine, small_statements: None
) -> None:
    (stored,) = await engine.insert([JobRequest(WORKER, args={"n": 3}, unique=ONCE)])
    requests = batch(1, range(30))
    ids = await engine.insert(requests)
    first: dict[int, int] = {}
    for request, job_id in zip(requests, ids, strict=True):
        n = request.args.get("n")
        if n is None:
            assert not job_id.conflict
        elif n == 3:
            assert job_id == stored and job_id.conflict
        elif n in first:
            assert job_id == first[n] and job_id.conflict
        else:
            first[n] = job_id
            assert not job_id.conflict
    new_ids = [i for i in ids if not i.conflict]
    assert len(new_ids) == 29 + 10 and new_ids == sorted(new_ids)  # new jobs take ids in input order
    jobs = {j.id: j for j in await engine.list_jobs(JobFilter(limit=1000))}
    assert len(jobs) == 1 + 29 + 10
    assert all(jobs[job_id].args == request.args for request, job_id in zip(requests, ids, strict=True))


async def test_a_replace_in_an_insert_of_several_statements(
    engine: PostgresEngine, small_statements: None
) -> None:
    (stored,) = await engine.insert([JobRequest(WORKER, args={"v": 1}, unique=REPLACING)])
    requests = [JobRequest("tests.order.Other", args={"plain": n}) for n in range(20)]
    requests.insert(12, JobRequest(WORKER, args={"v": 2}, unique=REPLACING))
    ids = await engine.insert(requests)
    assert ids[12] == stored and ids[12].conflict
    assert (await engine.get_job(stored)).args == {"v": 2}  # type: ignore[union-attr]


async def test_concurrent_inserts_of_several_statements_never_deadlock(writers: list[PostgresEngine]) -> None:
    for round_ in range(4):
        keys = range(round_ // 2 * 40, (round_ // 2 + 1) * 40)  # new keys, then stored ones
        batches = [batch(round_ * 10 + w, keys) for w in range(len(writers))]
        results = await asyncio.gather(
            *(w.insert(b) for w, b in zip(writers, batches, strict=True)), return_exceptions=True
        )
        assert not [r for r in results if isinstance(r, BaseException)], results
    stored = await writers[0].list_jobs(JobFilter(limit=10_000))
    unique = [j for j in stored if "uniq_key" in j.meta]
    assert len(unique) == len({j.meta["uniq_key"] for j in unique}) == 80
