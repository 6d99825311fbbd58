"""Runtime scenarios: how fast a node runs jobs, how quickly it starts one, how well it uses cores.

``drain``: ``jobs`` no-op async jobs (default 50,000) are inserted first; then one node with
``queues={"default": C}`` is started and timed until the acker has written the last ack. Run for
C = 20 and C = 100 unless ``--concurrency`` names one; one result per concurrency.
``latency``: an idle node; ``jobs`` (default 200) jobs are enqueued one at a time 50 ms apart and
each is timed from the moment its insert has committed (``enqueue`` returned) to its first line.
Between two samples, the floor: a job of a queue no node serves is inserted and claimed by a bare
``fetch_jobs`` (the claim's round trip and commit, which every pickup pays), timed the same way.
``cpu``: ``jobs`` (default 40) pure-Python jobs of ``--job-ms`` (default 100 ms) each, run by a node
with ``processes=2`` and ``executor="process"`` (queue limit 4 unless ``--concurrency``), against the
same work run one job after another in this process (the sequential baseline) and by a plain
``multiprocessing`` pool of 2 (what the machine allows), in alternating rounds of one run.
``drain-history``: ``drain`` at C = 100 on a table that already holds ``--history`` (default
2,000,000) completed jobs, against a plain ``drain`` measured in the same run (before and after).

The nodes run with ``leadership=False``: rescue, pruning and cron are leader duties with nothing to
do here, and a pruner deleting the history in the middle of a measurement would only add noise.
Everything else (listener, heartbeat, stager, acker) runs as in production.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import statistics
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

import bench_jobs
import statement_times
from common import Figures, Settings, compared, fresh_app, latency_figures, percentile, rate
from cpu_account import CpuWindow
from loading import load_without_indexes
from statement_times import StatementTimes

from conveyor import Conveyor, JobRequest, JobState, Workflow
from conveyor.acks import Ack
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.sqlite import SqliteEngine
from conveyor.limits import FetchLimits, GlobalLimit, Partition

DRAIN_JOBS = 50_000
DRAIN_CONCURRENCY = (20, 100)
HISTORY_CONCURRENCY = 100
HISTORY_ROWS = 2_000_000
LATENCY_JOBS = 200
LATENCY_GAP = 0.050
#: Jobs enqueued (and not counted) before the latency clock starts: statements get prepared.
LATENCY_WARMUP = 20
#: A queue no node serves: the latency scenario's floor claims its jobs with bare fetches.
FLOOR_QUEUE = "latency_floor"
CPU_JOBS = 40
CPU_JOB_MS = 100.0
CPU_PROCESSES = 2
#: Rounds of (sequential, Conveyor, plain multiprocessing), the second in reverse order, so a drift
#: of the shared machine's load weighs on every variant alike.
CPU_ROUNDS = 2
#: Connections of the engine a node runs on (producer, acker, heartbeat, stager, inserts).
NODE_POOL = 10
#: How often a scenario looks at the acker's count while it waits for the last ack.
POLL = 0.002
NOT_DONE = ("available", "scheduled", "executing", "retryable", "discarded", "cancelled")


@asynccontextmanager
async def running_node(
    base: Conveyor,
    queues: dict[str, Any],
    prepare: Callable[[Conveyor], object] | None = None,
    **options: Any,
) -> AsyncIterator[Conveyor]:
    """A node on ``base``'s engine (its schema), stopped afterwards without closing the engine.
    ``prepare`` gets the app before its node starts (to attach telemetry handlers, say)."""
    app = Conveyor(engine=await base.engine(), queues=queues, leadership=False, **options)
    if prepare is not None:
        prepare(app)
    await app.start()
    try:
        yield app
    finally:
        if app.node is not None:
            await app.node.stop()
            app.node = None


async def written(app: Conveyor, count: int, timeout: float, poll: float = POLL) -> None:
    """Wait until the node's acker has written ``count`` acks (looking every ``poll`` seconds)."""
    assert app.node is not None
    acker = app.node.acker
    deadline = time.perf_counter() + timeout
    while acker.written < count:
        if time.perf_counter() > deadline:
            raise TimeoutError(f"only {acker.written} of {count} jobs were acked within {timeout:g}s")
        await asyncio.sleep(poll)


async def acked(app: Conveyor, count: int, timeout: float) -> None:
    """Wait until the node's acker has written ``count`` acks, woken by the acker itself (an ack
    hook) instead of polling: in a CPU-bound run every wake-up of this process takes CPU from the
    busy workers (a 10 ms poll cost ~0.08 s of CPU in a 4 s run), and a poll adds up to its
    interval to the figure."""
    assert app.node is not None
    acker = app.node.acker
    done = asyncio.Event()

    async def look(_: object) -> None:
        if acker.written >= count:
            done.set()

    acker.hooks.append(look)
    try:
        if acker.written < count:
            await asyncio.wait_for(done.wait(), timeout)
    except TimeoutError:
        raise TimeoutError(f"only {acker.written} of {count} jobs were acked within {timeout:g}s") from None
    finally:
        acker.hooks.remove(look)


async def check_all_completed(app: Conveyor) -> None:
    left = await app.list_jobs(states=NOT_DONE, limit=5)
    if left:
        raise AssertionError(f"jobs not completed: {[(j.id, j.state.value) for j in left]}")


async def enqueue_all(app: Conveyor, requests: Iterable[JobRequest]) -> int:
    return len(await app.enqueue_many(requests))


# -- drain ---------------------------------------------------------------------------------------
async def drain_once(
    settings: Settings,
    jobs: int,
    concurrency: int,
    history: int = 0,
    global_limit: int | None = None,
    prepare: Callable[[Conveyor], object] | None = None,
    window: CpuWindow | None = None,
    synchronous_commit: bool = True,
    statements: StatementTimes | None = None,
) -> Figures:
    """Drain ``jobs`` no-op jobs with one node from its start; ``window`` (if given) measures the
    CPU used over the same span (``cpu_account.py``), ``statements`` the server's execution time of
    its statements (``statement_times.py``; read just outside the span)."""
    queue: Any = concurrency if global_limit is None else {"limit": concurrency, "global_limit": global_limit}
    async with fresh_app(settings, pool_size=NODE_POOL, synchronous_commit=synchronous_commit) as base:
        if history:
            await load_history(base, history)
        await enqueue_all(base, (bench_jobs.noop.new(n=n) for n in range(jobs)))
        before = await statement_times.read(settings.dsn) if statements is not None else None
        if window is not None:
            window.start()
        started = time.perf_counter()
        async with running_node(base, {"default": queue}, prepare) as app:
            await written(app, jobs, timeout=max(60.0, jobs / 500))
            seconds = time.perf_counter() - started
            if window is not None:
                window.stop()
        if statements is not None and before is not None:
            after = await statement_times.read(settings.dsn)
            if after is not None:
                statements.add(before, after, jobs)
        await check_all_completed(base)
    return {
        "jobs": jobs,
        "concurrency": concurrency,
        "seconds": round(seconds, 4),
        "jobs_per_s": rate(jobs, seconds),
        "leadership": False,
    }


async def drain(settings: Settings) -> list[Figures]:
    jobs = settings.job_count(DRAIN_JOBS)
    levels = (settings.concurrency,) if settings.concurrency is not None else DRAIN_CONCURRENCY
    return [await drain_once(settings, jobs, level) for level in levels]


#: Rounds of each variant of ``drain-global``, alternated.
GLOBAL_ROUNDS = 3


async def drain_global(settings: Settings) -> Figures:
    """Drain at c=100 with ``global_limit=100`` against a plain drain in the same run: what a
    fleet-wide cap costs one node (each capped claim takes the queue's lock and counts its running
    jobs). Target: >= 0.7x plain."""
    jobs = settings.job_count(DRAIN_JOBS)
    concurrency = settings.concurrency or 100
    plain: list[float] = []
    capped: list[float] = []
    for _ in range(GLOBAL_ROUNDS):
        plain.append((await drain_once(settings, jobs, concurrency))["jobs_per_s"])
        capped.append((await drain_once(settings, jobs, concurrency, global_limit=concurrency))["jobs_per_s"])
    return {"jobs": jobs, "concurrency": concurrency, **compared("capped", capped, plain)}


# -- workflows -----------------------------------------------------------------------------------
WORKFLOW_STEPS = 10_000
WORKFLOW_ROUNDS = 3


async def workflow_once(settings: Settings, steps: int, concurrency: int) -> tuple[float, float]:
    """One fan-out of ``steps`` no-op steps after a root, then a fan-in after them all: the steps
    enqueued per second (``enqueue_many`` of the workflow) and the steps run per second, timed from
    node start to the fan-in's ack."""
    workflow = Workflow().add("root", bench_jobs.noop.new(n=-1))
    names = [f"s{n}" for n in range(steps)]
    for n, name in enumerate(names):
        workflow.add(name, bench_jobs.noop.new(n=n), deps=["root"])
    workflow.add("join", bench_jobs.noop.new(n=-2), deps=names)
    async with fresh_app(settings, pool_size=NODE_POOL) as base:
        started = time.perf_counter()
        await base.enqueue_many(workflow)
        enqueued = time.perf_counter() - started
        started = time.perf_counter()
        async with running_node(base, {"default": concurrency}) as app:
            await written(app, steps + 2, timeout=max(60.0, steps / 200))
            seconds = time.perf_counter() - started
        await check_all_completed(base)
    return rate(steps + 2, enqueued), rate(steps + 2, seconds)


async def workflow_fanout(settings: Settings) -> Figures:
    """A 10,000-step fan-out then a fan-in, drained at c=100 from node start, against a plain drain
    of as many no-op jobs in the same run, rounds alternated. Targets: >= 0.5x plain; the workflow
    enqueued at >= 20k steps/s."""
    steps = settings.job_count(WORKFLOW_STEPS)
    concurrency = settings.concurrency or 100
    plain: list[float] = []
    flows: list[float] = []
    enqueues: list[float] = []
    for _ in range(WORKFLOW_ROUNDS):
        plain.append((await drain_once(settings, steps + 2, concurrency))["jobs_per_s"])
        enqueue_rate, run_rate = await workflow_once(settings, steps, concurrency)
        flows.append(run_rate)
        enqueues.append(enqueue_rate)
    return {
        "steps": steps,
        "concurrency": concurrency,
        **compared("workflow", flows, plain),
        "enqueue_steps_per_s": statistics.median(enqueues),
        "enqueue_range": [min(enqueues), max(enqueues)],
    }


# -- fetch overhead of limits --------------------------------------------------------------------
OVERHEAD_CALLS = 400
OVERHEAD_DEMAND = 10


async def fetch_overhead(settings: Settings) -> Figures:
    """What a limit adds to one claim: ``fetch_jobs`` of demand 10 then the ack of what it took, timed
    call by call on a backlog of ten tenants' jobs, plain, with ``global_limit`` (one partition) and
    with a global limit per ``args.tenant``, the three kinds interleaved so a drift of the machine's load
    touches each alike. Reported: the median and p95 of each, and the medians as ratios to plain."""
    calls = settings.jobs or OVERHEAD_CALLS
    kinds: dict[str, FetchLimits | None] = {
        "plain": None,
        "global": FetchLimits(global_limit=1000),
        "partitioned": FetchLimits(global_limit=GlobalLimit(1000, Partition(args=("tenant",)))),
    }
    timings: dict[str, list[float]] = {kind: [] for kind in kinds}
    async with fresh_app(settings, pool_size=4) as base:
        engine = await base.engine()
        backlog = calls * OVERHEAD_DEMAND * len(kinds) + 1000
        await enqueue_all(base, (bench_jobs.noop.new(n=n, tenant=f"t{n % 10}") for n in range(backlog)))
        for call in range(calls):
            for kind, limits in kinds.items():
                started = time.perf_counter()
                jobs = await engine.fetch_jobs(
                    "default", OVERHEAD_DEMAND, node="bench", producer=f"bench-{call}", limits=limits
                )
                timings[kind].append(time.perf_counter() - started)
                await engine.ack_jobs([Ack(j.id, j.attempt, JobState.COMPLETED) for j in jobs])
    figures: Figures = {"calls": calls, "demand": OVERHEAD_DEMAND}
    plain = statistics.median(timings["plain"])
    for kind, taken in timings.items():
        ordered = sorted(taken)
        figures[f"{kind}_median_ms"] = round(statistics.median(ordered) * 1000, 3)
        figures[f"{kind}_p95_ms"] = round(ordered[int(len(ordered) * 0.95)] * 1000, 3)
        if kind != "plain":
            figures[f"{kind}_ratio"] = round(statistics.median(ordered) / plain, 2)
    return figures


# -- drain with a big history ---------------------------------------------------------------
async def load_history(base: Conveyor, rows: int) -> None:
    """``rows`` completed jobs spread over the last day, written by one INSERT ... SELECT with the
    indexes built afterwards, then vacuumed and analyzed (as autovacuum would have done long ago on
    a live table; doing it now also keeps an autovacuum of the fresh rows out of the measurement)."""
    engine = await base.engine()
    assert isinstance(engine, PostgresEngine)  # drain_history checked the engine
    await load_without_indexes(engine, [(HISTORY, {"rows": rows})])


#: The completed jobs of ``load_history``.
HISTORY = """
    INSERT INTO {table} (state, queue, worker, args, attempt, max_attempts, attempted_by,
                         inserted_at, scheduled_at, attempted_at, completed_at)
    SELECT 'completed', 'default', 'bench_jobs.noop', jsonb_build_object('n', g), 1, 20,
           ARRAY['bench-history-node', 'bench-history-producer'], t, t, t, t + interval '1 ms'
    FROM generate_series(1, %(rows)s) AS g,
         LATERAL (SELECT timezone('UTC', now()) - make_interval(secs => 86000.0 * g / %(rows)s)) AS c(t)
"""


async def drain_history(settings: Settings) -> Figures:
    if settings.engine != "postgres":
        raise RuntimeError("drain-history runs on PostgreSQL only (it writes the history in SQL)")
    jobs = settings.job_count(DRAIN_JOBS)
    history = settings.history if settings.history is not None else HISTORY_ROWS
    concurrency = settings.concurrency or HISTORY_CONCURRENCY
    # A plain drain before and after the history drain, so a drift of the shared machine's load
    # shows in both sides of the ratio.
    before = await drain_once(settings, jobs, concurrency)
    loaded = time.perf_counter()
    measured = await drain_once(settings, jobs, concurrency, history=history)
    total = time.perf_counter() - loaded
    after = await drain_once(settings, jobs, concurrency)
    plain = statistics.mean([before["jobs_per_s"], after["jobs_per_s"]])
    return {
        "jobs": jobs,
        "history": history,
        "concurrency": concurrency,
        "seconds": measured["seconds"],
        "jobs_per_s": measured["jobs_per_s"],
        "plain_jobs_per_s": round(plain, 1),
        "plain_runs_jobs_per_s": [before["jobs_per_s"], after["jobs_per_s"]],
        "ratio": round(measured["jobs_per_s"] / plain, 3),
        "history_setup_s": round(total - measured["seconds"], 1),
        "leadership": False,
    }


# -- latency -------------------------------------------------------------------------------------
async def latency(settings: Settings) -> Figures:
    return await latency_once(settings, settings.job_count(LATENCY_JOBS))


async def latency_once(settings: Settings, jobs: int, synchronous_commit: bool = True) -> Figures:
    """Pickup latency of ``jobs`` jobs enqueued one at a time (see the module doc)."""
    concurrency = settings.concurrency or 10
    committed: dict[int, float] = {}
    bench_jobs.STARTED.clear()
    async with (
        fresh_app(settings, pool_size=NODE_POOL, synchronous_commit=synchronous_commit) as base,
        running_node(base, {"default": concurrency}) as app,
    ):
        warmup = min(LATENCY_WARMUP, jobs)
        engine = await base.engine()
        floor: list[float] = []
        for n in range(-warmup, jobs):
            await app.enqueue(bench_jobs.mark.new(n=n))
            committed[n] = time.perf_counter()
            await asyncio.sleep(LATENCY_GAP / 2)
            # The floor, between two samples: the claim of a job just committed, by a bare fetch
            # (no notification, no node): what any pickup pays, whatever the machine's load.
            await app.enqueue(bench_jobs.mark.new(n=n).with_options(queue=FLOOR_QUEUE))
            began = time.perf_counter()
            claimed = await engine.fetch_jobs(FLOOR_QUEUE, 1, node="floor", producer="floor")
            if n >= 0 and claimed:
                floor.append(time.perf_counter() - began)
            await asyncio.sleep(LATENCY_GAP / 2)
        await written(app, warmup + jobs, timeout=30.0)
    seconds = [bench_jobs.STARTED[n] - committed[n] for n in range(jobs)]
    figures = latency_figures(seconds)
    return {
        "jobs": jobs,
        "concurrency": concurrency,
        "gap_ms": LATENCY_GAP * 1000,
        **figures,
        **latency_figures(floor, prefix="floor_"),
        "p50_over_floor_ms": round(figures["p50_ms"] - percentile(floor, 0.5) * 1000, 3),
        "leadership": False,
    }


# -- cpu -----------------------------------------------------------------------------------------
def calibrate(job_ms: float) -> int:
    """The loop count that makes ``bench_jobs.spin`` take about ``job_ms`` on this machine."""
    loops = 100_000
    while True:
        started = time.perf_counter()
        bench_jobs.spin(loops)
        took = time.perf_counter() - started
        if took > 0.05 or took * 1000 > job_ms:
            return max(1, round(loops * job_ms / 1000 / took))
        loops *= 4


def run_sequential(loops: int, jobs: int) -> float:
    """Seconds to run the jobs' work one after another in this process (one core)."""
    started = time.perf_counter()
    for _ in range(jobs):
        bench_jobs.spin(loops)
    return time.perf_counter() - started


def run_multiprocessing(pool: Any, loops: int, jobs: int) -> float:
    """Seconds for a plain ``multiprocessing`` pool to run the same work, one job per task: what the
    machine allows, to read Conveyor's figure against."""
    started = time.perf_counter()
    pool.map(bench_jobs.spin, [loops] * jobs, chunksize=1)
    return time.perf_counter() - started


async def run_conveyor(app: Conveyor, loops: int, jobs: int, job_ms: float) -> float:
    """Seconds from enqueueing the jobs to the last ack written."""
    assert app.node is not None
    target = app.node.acker.written + jobs
    started = time.perf_counter()
    await enqueue_all(app, (bench_jobs.burn.new(loops=loops) for _ in range(jobs)))
    await acked(app, target, timeout=60.0 + jobs * job_ms / 1000)
    return time.perf_counter() - started


async def cpu(settings: Settings) -> Figures:
    jobs = settings.job_count(CPU_JOBS)
    job_ms = settings.job_ms if settings.job_ms is not None else CPU_JOB_MS
    processes = CPU_PROCESSES
    # Twice as many slots as processes: a freed process takes the next claimed job at once instead of
    # waiting for an ack and a fetch; the process pool still runs one job per process at a time.
    limit = settings.concurrency or 2 * processes
    loops = calibrate(job_ms)
    sequential: list[float] = []
    pooled: list[float] = []
    plain: list[float] = []
    queue = {"cpu": {"limit": limit, "executor": "process"}}
    with multiprocessing.get_context("spawn").Pool(processes) as mp_pool:
        mp_pool.map(bench_jobs.spin, [1] * processes * 2, chunksize=1)  # spawned and imported
        async with (
            fresh_app(settings, pool_size=NODE_POOL) as base,
            running_node(base, queue, processes=processes) as app,
        ):
            # A process executor on the queue spawns the pool at node start; one short job per
            # process (all at once, each sleeping) also gets every process past its imports and
            # first job before the clock starts.
            await enqueue_all(app, (bench_jobs.pause.new(seconds=0.2) for _ in range(processes)))
            await written(app, processes, timeout=60.0)
            for round_ in range(CPU_ROUNDS):
                # The sequential runs block this loop (and the idle node) for their duration: harmless.
                variants = [
                    lambda: sequential.append(run_sequential(loops, jobs)),
                    lambda: plain.append(run_multiprocessing(mp_pool, loops, jobs)),
                ]
                if round_ % 2:
                    variants.reverse()
                variants[0]()
                pooled.append(await run_conveyor(app, loops, jobs, job_ms))
                variants[1]()
            await check_all_completed(app)
    return {
        "jobs": jobs,
        "job_ms": job_ms,
        "processes": processes,
        "concurrency": limit,
        "rounds": CPU_ROUNDS,
        "sequential_s": round(statistics.mean(sequential), 4),
        "process_pool_s": round(statistics.mean(pooled), 4),
        "speedup": round(sum(sequential) / sum(pooled), 3),
        "multiprocessing_s": round(statistics.mean(plain), 4),
        "multiprocessing_speedup": round(sum(sequential) / sum(plain), 3),
        "warmup": "pool spawned at node start (queue executor=process), then one job per process",
        "leadership": False,
    }


# -- rate limit ----------------------------------------------------------------------------------------
RATE_ALLOWED = 50
RATE_SECONDS = 30
RATE_NODES = 3


async def rate_limit(settings: Settings) -> Figures:
    """Three nodes (each with its own engine, on one schema) share ``rate_limit`` 50 starts a second
    on a queue with a deep backlog, for 30 s (``--jobs`` sets the seconds). The starts are counted per
    1 s window of the start times the database recorded, from the first start on; every window after
    the first should hold 50 +/- 5%."""
    return await _rated_fleet(settings, tenants=None)


async def rate_limit_tenants(settings: Settings) -> Figures:
    """As ``rate-limit``, with the rate partitioned by ``args.tenant`` and three tenants' jobs mixed in
    one backlog: each tenant should get its own 50 starts a second, every window after the first."""
    return await _rated_fleet(settings, tenants=["a", "b", "c"])


async def _rated_fleet(settings: Settings, tenants: list[str] | None) -> Figures:
    seconds = settings.jobs or RATE_SECONDS
    rate: dict[str, Any] = {"allowed": RATE_ALLOWED, "period": 1}
    if tenants:
        rate["partition"] = {"args": ["tenant"]}
    queue = {"rated": {"limit": 20, "rate_limit": rate}}
    groups = tenants or [None]
    async with fresh_app(settings, pool_size=NODE_POOL) as base:
        backlog = RATE_ALLOWED * (seconds + 5)
        requests = (
            bench_jobs.noop.new(n=n, tenant=group).with_options(queue="rated")
            for n in range(backlog)
            for group in groups
        )
        await enqueue_all(base, requests)
        engines = [engine_like(await base.engine()) for _ in range(RATE_NODES)]
        nodes = [
            Conveyor(engine=engine, queues=queue, leadership=False, node=f"rate-{i}")
            for i, engine in enumerate(engines)
        ]
        for node in nodes:
            await node.start()
        try:
            await asyncio.sleep(seconds + 1)
        finally:
            for node in nodes:
                await node.stop()
        started = await base.list_jobs(states=["completed", "executing"], queues=["rated"], limit=10_000)
    moments = [j.attempted_at for j in started if j.attempted_at is not None]
    first = min(moments)
    measured: list[int] = []
    for group in groups:
        windows = [0] * (seconds + 1)
        for job in started:
            if job.attempted_at is not None and job.args.get("tenant") == group:
                index = int((job.attempted_at - first).total_seconds())
                if index < len(windows):
                    windows[index] += 1
        measured += windows[1:seconds]  # after the first, before the last (cut short by the stop)
    within = sum(1 for count in measured if abs(count - RATE_ALLOWED) <= RATE_ALLOWED * 0.05)
    return {
        "jobs": len(moments),
        "nodes": RATE_NODES,
        "allowed_per_s": RATE_ALLOWED,
        "partitions": len(groups),
        "windows": len(measured),
        "median_per_s": statistics.median(measured),
        "min_per_s": min(measured),
        "max_per_s": max(measured),
        "windows_within_5pct": within,
    }


def engine_like(engine: Any) -> Any:
    """Another engine on the same database and schema as ``engine`` (as another node would have);
    ``Conveyor.stop`` closes it."""
    if isinstance(engine, PostgresEngine):
        return PostgresEngine(engine.dsn, prefix=engine.prefix, max_connections=4)
    return SqliteEngine(engine.path)
