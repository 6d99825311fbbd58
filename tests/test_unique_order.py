"""PostgreSQL: an insert of several statements claims its unique keys in one order across them (see
``engine/postgres/unique_claims.py``), here with small statements, so that a batch of a few dozen
requests takes several (the statement path of a connection that cannot COPY, past 5,000 requests);
and eight processes enqueueing the same unique jobs in shuffled batches never deadlock."""

from __future__ import annotations

import asyncio
import multiprocessing
import random
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest

from conveyor import JobFilter, JobRequest
from conveyor.engine.postgres import PostgresEngine, inserter
from tests import unique_batch_procs
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


#: Eight writer processes: by twos, a batch in a transaction of its own or in the caller's, each as
#: one statement or several (INSERT_CHUNK 8).
WRITERS = [(caller, chunk) for caller in (False, True) for chunk in (None, 8)] * 2


async def test_eight_processes_enqueueing_the_same_unique_jobs_in_shuffled_batches_never_deadlock(
    engine: PostgresEngine,
) -> None:
    """Issue 31.1: eight OS processes each enqueue the same unique jobs, in an order of their own, in
    ``enqueue_many`` batches, round after round (new keys, then the same keys stored): no batch fails
    (no DeadlockDetected), each key is one row, and every process is given that row's id, made by
    exactly one of them. PostgreSQL only: SQLite has one writer at a time, so its batches never
    interleave (the conformance race tests cover it)."""
    rounds, keys, size = 4, 60, 22
    # A fork server that imported the writers' module once forks each writer: eight spawned
    # interpreters importing it each cost seconds of a loaded machine's two cores.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([unique_batch_procs.__name__])
    barrier = context.Barrier(len(WRITERS))
    results: Any = context.Queue()
    processes = [
        context.Process(
            target=unique_batch_procs.insert_shuffled_rounds,
            args=(DSN, engine.prefix, writer, (rounds, keys, size), caller, chunk, barrier, results),
            daemon=True,
        )
        for writer, (caller, chunk) in enumerate(WRITERS)
    ]
    for process in processes:
        process.start()
    try:
        reports = dict([await asyncio.to_thread(results.get, True, 60) for _ in processes])
    finally:
        for process in processes:
            await asyncio.to_thread(process.join, 10)
            if process.is_alive():
                process.kill()
    failed = {w: r for w, r in reports.items() if isinstance(r, str) or r[1]}
    assert not failed, failed
    stored = await engine.list_jobs(JobFilter(limit=10_000))
    rows = {j.args["n"]: j.id for j in stored if "n" in j.args}
    assert len(rows) == len([j for j in stored if "n" in j.args]) == rounds // 2 * keys
    assert len(stored) - len(rows) == len(WRITERS) * rounds * (keys // 10)  # every plain job
    made: Counter[int] = Counter()
    for got, _ in reports.values():
        assert len(got) == rounds * keys
        assert all(job_id == rows[n] for n, job_id, _ in got)
        made.update(n for n, _, conflict in got if not conflict)
    assert made == Counter(list(rows))  # each key made once, by one process
