"""A fleet of nodes sharing one database: leader election and takeover, cron exactly once per tick,
rescue of a dead node's jobs (and only a dead node's), pruning under load, and the telemetry of
each duty.

Nodes are in-process apps where the database decides the behaviour, and real ``conveyor start``
processes where dying matters (SIGKILL leaves no chance to clean up). Times are injected where a
clock would otherwise make the test wait for minutes.
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar

import pytest
from psycopg import sql

from conveyor import Conveyor, JobState, job
from conveyor._runtime.duties import CronScheduler, Pruner
from conveyor._runtime.leadership import Leadership
from conveyor.cron import CronEntry, CronExpression
from conveyor.engine.postgres import PostgresEngine
from conveyor.fleet import OWN_PRODUCER, CronTick, ProducerBeat
from conveyor.retention import Pruned, Retention
from conveyor.telemetry import Telemetry
from tests import cluster_jobs as jobs
from tests.helpers import Events, holds, make_app, poll
from tests.node_processes import NodeProcess, describe, node_env, node_processes

T = TypeVar("T")

INSTANCE = "conveyor"  # the default Settings.name
#: Seconds of slack on timing assertions: two CPU cores shared with other work.
SLACK = 1.0


# -- helpers --------------------------------------------------------------------------------------


async def query(engine: PostgresEngine, text: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run ``text`` where ``{jobs}``, ``{ticks}``, ``{leaders}``, ``{runs}`` and ``{state}`` name the
    test schema's objects."""
    names = {
        "jobs": "oban_jobs",
        "ticks": "conveyor_cron_ticks",
        "leaders": "oban_leaders",
        "runs": "runs",
        "state": "oban_job_state",
    }
    tables = {key: sql.Identifier(engine.prefix, name) for key, name in names.items()}
    async with engine.pool.connection() as conn:
        cur = await conn.execute(sql.SQL(text).format(**tables), params)
        return await cur.fetchall() if cur.description else []


async def leader_node(engine: PostgresEngine) -> str | None:
    leader = await engine.get_leader(INSTANCE)
    return leader.node if leader else None


def listen(app: Conveyor) -> Events:
    events = Events()
    app.telemetry.attach(events)
    return events


# -- node processes -------------------------------------------------------------------------------
async def producer_nodes(engine: PostgresEngine) -> set[str]:
    return {p.node for p in await engine.list_producers()}


# -- cron: exactly once per tick ------------------------------------------------------------------
BASE = datetime(2030, 1, 7, 10, 0, tzinfo=UTC)  # an even minute: '*/2' ticks at BASE


def cron_entries() -> list[CronEntry]:
    return [
        CronEntry.build("* * * * *", jobs.cron_tick, {"label": "every"}, name="every-minute"),
        CronEntry.build("*/2 * * * *", jobs.cron_tick, {"label": "even"}, name="even-minutes"),
    ]


@asynccontextmanager
async def cron_nodes(
    dsn: str, prefix: str, entries: Sequence[CronEntry], count: int = 3
) -> AsyncIterator[list[CronScheduler]]:
    """``count`` schedulers, each with its own engine (its own pool) and a leadership forced on:
    as many leaders as nodes, the worst case the database has to absorb."""
    engines = [PostgresEngine(dsn, prefix=prefix, max_connections=2) for _ in range(count)]
    try:
        schedulers = []
        for i, engine in enumerate(engines):
            await engine.open()
            leadership = Leadership(engine, Telemetry(), name=INSTANCE, node=f"cron-{i}", ttl=2.0)
            leadership.is_leader = True
            schedulers.append(CronScheduler(engine, Telemetry(), leadership, entries, started_at=BASE))
        yield schedulers
    finally:
        for engine in engines:
            await engine.close()


async def run_everywhere(schedulers: Sequence[CronScheduler], minute: datetime) -> list[int]:
    """Every scheduler runs the same minute at once, each at a different second of it (their clocks
    and wake-ups differ)."""
    assert minute.second == 0 and minute.microsecond == 0
    seconds = [0.05 + 59.9 * i / max(1, len(schedulers) - 1) for i in range(len(schedulers))]
    results = await asyncio.gather(
        *(s.run_at(minute + timedelta(seconds=second)) for s, second in zip(schedulers, seconds, strict=True))
    )
    return [job_id for ids in results for job_id in ids]


async def names_of(engine: PostgresEngine, ids: Sequence[int]) -> dict[str, int]:
    rows = await query(
        engine,
        "SELECT meta ->> 'cron_name', count(*) FROM {jobs} WHERE id = ANY(%s) GROUP BY 1",
        (list(ids),),
    )
    return {name: int(n) for name, n in rows}


async def recorded_ticks(engine: PostgresEngine) -> dict[str, list[datetime]]:
    ticks: dict[str, list[datetime]] = {}
    for name, tick in await query(engine, "SELECT name, tick FROM {ticks} ORDER BY name, tick"):
        ticks.setdefault(name, []).append(tick.replace(tzinfo=UTC))
    return ticks


async def cron_job_counts(engine: PostgresEngine) -> dict[str, int]:
    rows = await query(engine, "SELECT meta ->> 'cron_name', count(*) FROM {jobs} GROUP BY 1")
    return {name: int(n) for name, n in rows if name is not None}


def minutes(*offsets: int) -> list[datetime]:
    return [BASE + timedelta(minutes=m) for m in offsets]


async def test_cron_inserts_each_tick_once_with_three_concurrent_leaders(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    entries = cron_entries()
    async with cron_nodes(dsn, prefix, entries) as schedulers:
        for offset in range(3):  # 10:00, 10:01, 10:02
            minute = BASE + timedelta(minutes=offset)
            ids = await run_everywhere(schedulers, minute)
            expected = {"every-minute": 1} | ({"even-minutes": 1} if offset % 2 == 0 else {})
            assert await names_of(engine, ids) == expected, minute
        assert await cron_job_counts(engine) == {"every-minute": 3, "even-minutes": 2}
        assert await recorded_ticks(engine) == {
            "even-minutes": minutes(0, 2),
            "every-minute": minutes(0, 1, 2),
        }

        # A restart within the same minute (new schedulers, same entries): nothing new.
        async with cron_nodes(dsn, prefix, entries) as restarted:
            assert await run_everywhere(restarted, BASE + timedelta(minutes=2)) == []
        assert await cron_job_counts(engine) == {"every-minute": 3, "even-minutes": 2}

    # Every node down for ten minutes; without backfill only the current tick counts.
    async with cron_nodes(dsn, prefix, entries) as later:
        ids = await run_everywhere(later, BASE + timedelta(minutes=12))
        assert await names_of(engine, ids) == {"every-minute": 1, "even-minutes": 1}
    assert await cron_job_counts(engine) == {"every-minute": 4, "even-minutes": 3}
    ticks = await recorded_ticks(engine)
    assert ticks["every-minute"] == minutes(0, 1, 2, 12)
    assert ticks["even-minutes"] == minutes(0, 2, 12)

    # The jobs are ordinary available jobs carrying the entry's identity.
    rows = await query(
        engine, "SELECT DISTINCT state::text, worker, args ->> 'label', meta ->> 'cron_expr' FROM {jobs}"
    )
    assert sorted(rows) == [
        ("available", "tests.cluster_jobs.cron_tick", "even", "*/2 * * * *"),
        ("available", "tests.cluster_jobs.cron_tick", "every", "* * * * *"),
    ]


async def test_cron_backfill_inserts_missed_ticks_once_and_bounded(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    request = jobs.cron_tick.new(label="backfill")
    every = CronExpression.parse("* * * * *")
    entries = [
        CronEntry(every, request, name="backfill-all", backfill=True),
        CronEntry(every, request, name="backfill-5", backfill=True, backfill_limit=5),
        CronEntry(CronExpression.parse("*/3 * * * *"), request, name="backfill-thirds", backfill=True),
        CronEntry(every, request, name="no-backfill"),
    ]
    async with cron_nodes(dsn, prefix, entries) as schedulers:
        # Never ran before: back-filling starts from the current tick, not from the dawn of time.
        ids = await run_everywhere(schedulers, BASE)
        assert await names_of(engine, ids) == {
            "backfill-all": 1,
            "backfill-5": 1,
            "backfill-thirds": 1,
            "no-backfill": 1,
        }
    async with cron_nodes(dsn, prefix, entries) as schedulers:
        ids = await run_everywhere(schedulers, BASE + timedelta(minutes=12))
        assert await names_of(engine, ids) == {
            "backfill-all": 12,  # 10:01 .. 10:12
            "backfill-5": 5,  # bounded: the newest five, 10:08 .. 10:12
            "backfill-thirds": 4,  # 10:03, 10:06, 10:09, 10:12
            "no-backfill": 1,
        }
        # Running the minute again (another leader, a restart) back-fills nothing twice.
        assert await run_everywhere(schedulers, BASE + timedelta(minutes=12)) == []
    ticks = await recorded_ticks(engine)
    assert ticks["backfill-all"] == minutes(*range(13))
    assert ticks["backfill-5"] == minutes(0, 8, 9, 10, 11, 12)
    assert ticks["backfill-thirds"] == minutes(0, 3, 6, 9, 12)
    assert ticks["no-backfill"] == minutes(0, 12)
    assert await cron_job_counts(engine) == {
        "backfill-all": 13,
        "backfill-5": 6,
        "backfill-thirds": 5,
        "no-backfill": 2,
    }


@job(cron="* * * * *", queue="cron-twice")
async def configured_twice() -> None:
    """A job with ``cron=`` that an app also lists in its crontab (the same entry twice)."""


async def test_an_entry_configured_twice_still_inserts_one_job_per_tick(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    entry = CronEntry.build("* * * * *", jobs.cron_tick, {"label": "twice"})
    tick = CronTick(entry.name, BASE.replace(tzinfo=None), entry.job_for(BASE))
    ids = await engine.insert_cron_jobs([tick, tick])
    assert len(ids) == 1
    assert await engine.insert_cron_jobs([tick, tick]) == []

    # Through an app: the decorator's entry and the crontab's are the same entry.
    app = make_app(
        dsn,
        prefix,
        queues={"other": 1},
        jobs=[configured_twice],
        crontab=[CronEntry.build("* * * * *", configured_twice)],
    )
    events = listen(app)
    try:
        await app.start()
        await events.wait("cron.inserted")
    finally:
        await app.stop()
    name = CronEntry.build("* * * * *", configured_twice).name
    ticks = await recorded_ticks(engine)
    assert 1 <= len(ticks[name]) <= 2  # the start may straddle a minute
    assert (await cron_job_counts(engine))[name] == len(ticks[name])
    assert sum(e["count"] for e in events.named("cron.inserted")) == len(ticks[name])


async def test_reboot_entry_inserts_once_per_boot_minute(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    entries = [CronEntry.build("@reboot", jobs.cron_tick, {"label": "boot"}, name="at-boot")]
    async with cron_nodes(dsn, prefix, entries) as schedulers:
        ids = await run_everywhere(schedulers, BASE + timedelta(minutes=1))
        assert await names_of(engine, ids) == {"at-boot": 1}
        # Later minutes of the same boot insert nothing more.
        assert await run_everywhere(schedulers, BASE + timedelta(minutes=2)) == []
    assert await recorded_ticks(engine) == {"at-boot": [BASE]}


async def test_cron_runs_the_current_minute_soon_after_a_node_takes_over(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    """A follower that becomes leader must not wait out a whole minute-long sleep begun while it
    followed: the leaderless stretch plus that sleep would skip ticks."""
    entry = CronEntry.build("* * * * *", jobs.cron_tick, {"label": "takeover"}, name="takeover")
    leadership = Leadership(engine, Telemetry(), name=INSTANCE, node="follower", ttl=2.0)
    scheduler = CronScheduler(engine, Telemetry(), leadership, [entry], started_at=datetime.now(UTC))
    await scheduler.start()
    try:

        async def count() -> int:
            return (await cron_job_counts(engine)).get("takeover", 0)

        await holds(count, lambda n: n == 0, during=0.5, what="a follower inserted cron jobs")
        leadership.is_leader = True
        started = time.monotonic()
        await poll(count, lambda n: n == 1, timeout=5.0, what="the new leader's cron job")
        took = time.monotonic() - started
    finally:
        await scheduler.stop()
    assert took < leadership.check_interval + SLACK, took


async def test_leadership_emits_elected_lost_and_resigned(engine: PostgresEngine) -> None:
    telemetry = Telemetry()
    events = Events()
    telemetry.attach(events, "leader.")
    a = Leadership(engine, telemetry, name=INSTANCE, node="a", ttl=2.0)
    b = Leadership(engine, telemetry, name=INSTANCE, node="b", ttl=2.0)
    await a.tick()
    await b.tick()
    assert (a.is_leader, b.is_leader) == (True, False)
    # Someone else grabs the lease (say a's renewal came too late): a learns it lost.
    await query(engine, "UPDATE {leaders} SET expires_at = timezone('UTC', now()) - interval '1 second'")
    await b.tick()
    await a.tick()
    assert (a.is_leader, b.is_leader) == (False, True)
    await a.stop()  # not leading: nothing to resign
    await b.stop()
    assert await engine.get_leader(INSTANCE) is None
    assert events.seen == [
        ("leader.elected", {"node": "a", "name": INSTANCE}),
        ("leader.elected", {"node": "b", "name": INSTANCE}),
        ("leader.lost", {"node": "a", "name": INSTANCE}),
        ("leader.resigned", {"node": "b", "name": INSTANCE}),
    ]


async def test_three_nodes_elect_one_leader_and_a_clean_stop_hands_over_at_once(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    key = uuid.uuid4().hex[:6]
    ttl = 2.0
    # Every node has the same crontab; only a leader inserts, and never twice per tick.
    entry = CronEntry.build("* * * * *", jobs.cron_tick, {"label": "fleet"}, name="fleet")
    apps = {
        name: make_app(
            dsn, prefix, node=f"{name}-{key}", leader_ttl=ttl, heartbeat_interval=0.5, crontab=[entry]
        )
        for name in ("a", "b", "c")
    }
    events = {name: listen(app) for name, app in apps.items()}
    try:
        for app in apps.values():
            await app.start()

        def leaders() -> list[str]:
            return [
                a.settings.node for a in apps.values() if a.node is not None and a.node.leadership.is_leader
            ]

        first = await poll(lambda: leader_node(engine), bool, timeout=5, what="a leader")
        assert first is not None
        assert leaders() == [first]
        # It stays that way while the leader renews (the lease is renewed every ttl/2).
        await holds(
            lambda: leader_node(engine),
            lambda n: n == first and leaders() == [first],
            during=ttl * 1.25,
            what="the leader changed while nobody stopped",
        )
        assert sum(len(e.named("leader.elected")) for e in events.values()) == 1
        name_of = {app.settings.node: name for name, app in apps.items()}
        assert [n for n, e in events.items() if e.named("cron.inserted")] == [name_of[first]]

        leader = next(app for app in apps.values() if app.settings.node == first)
        started = time.monotonic()
        stopping = asyncio.create_task(leader.stop())
        second = await poll(
            lambda: leader_node(engine),
            lambda n: n is not None and n != first,
            timeout=ttl * 2,
            what="a new leader",
        )
        took = time.monotonic() - started
        assert second is not None
        await stopping
        print(f"\nclean stop: new leader {second} after {took:.3f}s (ttl {ttl}s)")
        assert took < ttl / 2, took
        assert leaders() == [second]
        assert events[name_of[first]].named("leader.resigned") == [{"node": first, "name": INSTANCE}]
        assert events[name_of[second]].named("leader.elected") == [{"node": second, "name": INSTANCE}]
    finally:
        for app in apps.values():
            await app.stop()
    ticks = (await recorded_ticks(engine))["fleet"]
    assert 1 <= len(ticks) <= 2  # the test may straddle a minute
    assert (await cron_job_counts(engine))["fleet"] == len(ticks)
    inserted = [d for e in events.values() for d in e.named("cron.inserted")]
    assert sum(d["count"] for d in inserted) == len(ticks)


async def test_resign_notification_beats_the_followers_check_interval(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    """With a 30 s lease followers look only every 3 s: a takeover well under that is the
    notification's doing."""
    key = uuid.uuid4().hex[:6]
    first = make_app(dsn, prefix, node=f"first-{key}", leader_ttl=30.0)
    second = make_app(dsn, prefix, node=f"second-{key}", leader_ttl=30.0)
    try:
        await first.start()
        await second.start()
        assert await leader_node(engine) == f"first-{key}"
        assert second.node is not None
        check_interval = second.node.leadership.check_interval
        started = time.monotonic()
        await first.stop()
        await poll(lambda: leader_node(engine), lambda n: n == f"second-{key}", timeout=10, what="takeover")
        took = time.monotonic() - started
        print(f"\nresign with ttl 30s: takeover after {took:.3f}s (followers check every {check_interval}s)")
        assert took < check_interval / 2, took
    finally:
        await first.stop()
        await second.stop()


async def kill_leader(engine: PostgresEngine, alive: list[NodeProcess], ttl: float) -> float:
    """SIGKILL the leading process right after it renewed its lease (the worst case: a whole lease
    still to run); return the seconds until another live process leads."""
    current = await poll(lambda: leader_node(engine), bool, timeout=10, what="a leader")
    victim = next(n for n in alive if n.owns(current))
    lease = await engine.get_leader(INSTANCE)
    assert lease is not None
    await poll(
        lambda: engine.get_leader(INSTANCE),
        lambda info: info is not None and info.expires_at != lease.expires_at,
        timeout=ttl,
        what="a renewal",
        every=0.005,
    )
    victim.process.send_signal(signal.SIGKILL)
    killed = time.monotonic()
    await victim.process.exited()
    alive.remove(victim)
    successor = await poll(
        lambda: leader_node(engine),
        lambda n: n is not None and n != current,
        timeout=ttl * 3,
        what=f"a new leader\n{describe(alive)}",
        every=0.01,
    )
    took = time.monotonic() - killed
    assert any(n.owns(successor) for n in alive), (successor, describe(alive))
    return took


@pytest.mark.slow
async def test_killed_leader_process_is_replaced_within_one_ttl(
    dsn: str, prefix: str, engine: PostgresEngine, tmp_path: Path
) -> None:
    ttl = 2.0
    env = {"CONVEYOR_LEADER_TTL": str(ttl), "CONVEYOR_HEARTBEAT_INTERVAL": "0.5"}
    async with node_processes(dsn, tmp_path, 3, env, "--prefix", prefix, "-q", "default:2") as nodes:
        names = await poll(
            lambda: producer_nodes(engine),
            lambda s: len(s) == 3,
            timeout=30,
            what=f"three nodes\n{describe(nodes)}",
        )
        # Default node names are unique per process, and carry the process id.
        for node in nodes:
            assert sum(node.owns(name) for name in names) == 1, (names, node.pid)
        assert len({name.rsplit("-", 2)[0] for name in names}) == 1  # same host part
        alive = list(nodes)
        takeovers = [await kill_leader(engine, alive, ttl), await kill_leader(engine, alive, ttl)]
        print(f"\nSIGKILL takeovers after {', '.join(f'{t:.3f}s' for t in takeovers)} (ttl {ttl}s)")
        for took in takeovers:
            assert took < ttl + 0.5, (took, takeovers)
        assert all(n.process.returncode is None for n in alive), describe(nodes)


# -- rescue ---------------------------------------------------------------------------------------
async def runs_of(engine: PostgresEngine, job_id: int) -> list[tuple[int, int]]:
    """(pid, attempt) of each start of the job, in order."""
    rows = await query(
        engine, "SELECT pid, attempt FROM {runs} WHERE job_id = %s ORDER BY started_at", (job_id,)
    )
    return [(int(pid), int(attempt)) for pid, attempt in rows]


@pytest.mark.slow
async def test_jobs_of_a_killed_node_run_again_once_on_a_live_node(
    dsn: str, prefix: str, engine: PostgresEngine, tmp_path: Path
) -> None:
    jobs.create_runs_table(dsn, prefix)
    producer_timeout, rescue_interval, heartbeat = 2.0, 0.5, 0.5
    inserter = Conveyor(dsn, prefix=prefix)
    try:
        job_id = await inserter.enqueue(jobs.record_run.new(dsn=dsn, prefix=prefix, first=30.0, later=0.2))
    finally:
        await inserter.close()
    env = node_env(heartbeat, producer_timeout)
    survivor = make_app(
        dsn,
        prefix,
        node=f"survivor-{uuid.uuid4().hex[:6]}",
        leader_ttl=2.0,
        heartbeat_interval=heartbeat,
        producer_timeout=producer_timeout,
        rescue_interval=rescue_interval,
    )
    events = listen(survivor)
    async with node_processes(dsn, tmp_path, 1, env, "--prefix", prefix, "-q", "default:2") as nodes:
        try:
            (doomed,) = nodes
            first = await poll(
                lambda: runs_of(engine, job_id), bool, timeout=30, what=f"the first run\n{describe(nodes)}"
            )
            assert first == [(doomed.pid, 1)]
            await survivor.start()
            assert survivor.node is not None and survivor.node.leadership.is_leader
            doomed_node = next(n for n in await producer_nodes(engine) if doomed.owns(n))
            running = await engine.get_job(job_id)
            assert running is not None and running.state is JobState.EXECUTING
            assert running.attempted_by[0] == doomed_node

            doomed.process.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            await doomed.process.exited()
            runs = await poll(
                lambda: runs_of(engine, job_id),
                lambda r: len(r) >= 2,
                timeout=producer_timeout + rescue_interval + 10,
                what="the rescued run",
                every=0.01,
            )
            took = time.monotonic() - killed
            print(f"\nrescued job started again {took:.3f}s after SIGKILL (timeout {producer_timeout}s)")
            assert runs == [(doomed.pid, 1), (os.getpid(), 2)]
            assert took < producer_timeout + rescue_interval + SLACK, took

            done = await poll(
                lambda: engine.get_job(job_id),
                lambda j: j is not None and j.state is JobState.COMPLETED,
                timeout=10,
                what="the rescued job to complete",
            )
            assert done is not None
            # Exactly once more: a few more rescue rounds change nothing.
            await holds(
                lambda: runs_of(engine, job_id),
                lambda r: len(r) == 2,
                during=rescue_interval * 3,
                what="runs",
            )
            assert done.meta.get("rescued") == 1
            assert done.attempt == 2
            assert done.attempted_by[0] == survivor.settings.node
            rescued = events.named("lifeline.rescued")
            assert [e["available"] for e in rescued] == [(job_id,)]
            assert rescued[0]["count"] == 1 and rescued[0]["discarded"] == ()
            # The dead node's producer row is forgotten once it owns no executing job.
            assert doomed_node not in await producer_nodes(engine)
        finally:
            await survivor.stop()


@pytest.mark.slow
async def test_a_killed_leaders_jobs_and_fleet_slots_come_back_long_before_its_lease_ends(
    dsn: str, prefix: str, engine: PostgresEngine, tmp_path: Path
) -> None:
    """The only worker of a globally limited queue leads, and is killed mid-job. With the lease at
    its default 30 s, a surviving node takes it once the dead leader's heartbeats are
    ``producer_timeout`` old, rescues at once, and the dead node's slot of the global limit is
    free by then too: both the rescued job and the one waiting for the slot run within
    ``producer_timeout`` + ``rescue_interval`` + 2 s of the kill."""
    jobs.create_runs_table(dsn, prefix)
    producer_timeout, rescue_interval, heartbeat = 2.0, 1.0, 0.5
    config = tmp_path / "conveyor.toml"
    config.write_text("[queues.limited]\nlimit = 2\nglobal_limit = 1\n")
    settings = {
        "CONVEYOR_HEARTBEAT_INTERVAL": str(heartbeat),
        "CONVEYOR_PRODUCER_TIMEOUT": str(producer_timeout),
        "CONVEYOR_RESCUE_INTERVAL": str(rescue_interval),
    }
    options = ("--prefix", prefix, "--config", str(config))
    survivor = make_app(
        dsn,
        prefix,
        queues={"limited": {"limit": 2, "global_limit": 1}},
        node=f"survivor-{uuid.uuid4().hex[:6]}",
        heartbeat_interval=heartbeat,
        producer_timeout=producer_timeout,
        rescue_interval=rescue_interval,
    )
    assert survivor.settings.leader_ttl == 30.0  # the default lease
    async with node_processes(dsn, tmp_path, 1, settings, *options) as nodes:
        try:
            (doomed,) = nodes
            await poll(
                lambda: leader_node(engine), doomed.owns, timeout=30, what=f"a leader\n{describe(nodes)}"
            )
            first, waiting = [
                await survivor.enqueue(
                    jobs.record_run.new(dsn=dsn, prefix=prefix, first=first, later=0.1).with_options(
                        queue="limited"
                    )
                )
                for first in (60.0, 0.1)
            ]
            await poll(
                lambda: runs_of(engine, first), bool, timeout=30, what=f"the first run\n{describe(nodes)}"
            )
            claimed = await engine.get_job(first)
            assert claimed is not None and doomed.owns(claimed.attempted_by[0])
            doomed_node = claimed.attempted_by[0]
            await survivor.start()
            # The global limit holds the waiting job back while the doomed node's contact outlasts
            # producer_timeout.
            await holds(
                lambda: runs_of(engine, waiting),
                lambda runs: runs == [],
                during=producer_timeout + heartbeat,
                what="the waiting job ran past the global limit",
            )
            assert survivor.node is not None and not survivor.node.leadership.is_leader

            doomed.process.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            await doomed.process.exited()
            rerun = await poll(
                lambda: runs_of(engine, first),
                lambda r: len(r) == 2,
                timeout=30,
                what="the rescued run",
                every=0.01,
            )
            rescued_after = time.monotonic() - killed
            await poll(lambda: runs_of(engine, waiting), bool, timeout=30, what="the waiting job", every=0.01)
            waited = time.monotonic() - killed
            print(
                f"\nkilled leader: its job ran again {rescued_after:.2f}s, the waiting job started "
                f"{waited:.2f}s after SIGKILL (producer_timeout {producer_timeout}s, lease 30s)"
            )
            assert rerun == [(doomed.pid, 1), (os.getpid(), 2)]
            assert survivor.node.leadership.is_leader
            target = producer_timeout + rescue_interval + 2
            assert rescued_after < target + SLACK and waited < target + SLACK, (rescued_after, waited)
            done = await poll(
                lambda: engine.get_job(first),
                lambda j: j is not None and j.state is JobState.COMPLETED,
                timeout=10,
                what="the rescued job to complete",
            )
            assert done is not None and [e["error"] for e in done.errors] == [
                f"the node running this job ({doomed_node}) stopped sending heartbeats; rescued to run again"
            ]
        finally:
            await survivor.stop()


# -- pruning --------------------------------------------------------------------------------------
#: Twelve batches of PRUNE_LIMIT: enough for ten of them to interleave with a drain and for the
#: batch size and the total to be checked. (A million rows of the default limit, 10,000, took over a
#: minute of the suite to prove nothing more, and 120,000 still 4 s of the server's CPU; how long a
#: batch takes on a large table is a benchmark's to measure: `large-tables`.)
PRUNE_LIMIT = 1_000
OLD_JOBS = 12 * PRUNE_LIMIT
FRESH_JOBS = 2_000


class TimedEngine(PostgresEngine):
    """A PostgreSQL engine that times every prune batch."""

    def __init__(self, dsn: str, *, prefix: str) -> None:
        super().__init__(dsn, prefix=prefix, max_connections=2)
        self.batches: list[tuple[float, int]] = []
        #: When (time.monotonic) each batch finished.
        self.finished: list[float] = []

    async def prune_jobs(self, retention: Retention, *, limit: int, now: datetime | None = None) -> Pruned:
        started = time.perf_counter()
        deleted = await super().prune_jobs(retention, limit=limit, now=now)
        self.batches.append((time.perf_counter() - started, deleted.count))
        self.finished.append(time.monotonic())
        return deleted


@pytest.mark.slow
async def test_pruning_old_jobs_in_short_batches_while_a_node_drains(
    dsn: str, prefix: str, engine: PostgresEngine
) -> None:
    started = time.monotonic()
    await query(
        engine,
        """
        INSERT INTO {jobs} (state, queue, worker, attempt, attempted_by, inserted_at, scheduled_at,
                            attempted_at, completed_at)
        SELECT 'completed', 'old-' || (g %% 4), 'tests.cluster_jobs.noop', 1, ARRAY['gone', 'gone'],
               t - interval '1 minute', t - interval '1 minute', t - interval '1 second', t
        FROM generate_series(1, %s) AS g,
             LATERAL (
                 SELECT timezone('UTC', now()) - interval '2 days' - make_interval(secs => g %% 86400)
             ) AS c(t)
        """,
        (OLD_JOBS,),
    )
    await query(
        engine,
        """
        INSERT INTO {jobs} (state, queue, worker, attempt, completed_at)
        SELECT 'completed', 'young', 'tests.cluster_jobs.noop', 1, timezone('UTC', now()) - interval '1 hour'
        FROM generate_series(1, 1000)
        """,
    )
    inserted = time.monotonic() - started

    timed = TimedEngine(dsn, prefix=prefix)
    await timed.open()
    telemetry = Telemetry()
    pruned = Events()
    telemetry.attach(pruned, "pruner.")
    leadership = Leadership(timed, telemetry, name=INSTANCE, node="pruner", ttl=30.0)
    leadership.is_leader = True
    pruner = Pruner(timed, telemetry, leadership, interval=60.0, retention=Retention(), limit=PRUNE_LIMIT)
    drainer = make_app(dsn, prefix, node="drainer", leadership=False, queues={"default": 20})
    try:
        await drainer.start()

        async def completed() -> int:
            rows = await query(
                engine, "SELECT count(*) FROM {jobs} WHERE queue = 'default' AND state = 'completed'"
            )
            return int(rows[0][0])

        async def drain() -> tuple[float, int]:
            """Feed the node in waves, each once the pruner has finished one more batch, so it
            fetches and acks throughout the pruning however fast either goes; the drain's time and
            what the node had completed when the pruner finished its eleventh batch."""
            begun = time.monotonic()
            waves = 10
            for wave in range(waves):
                size = FRESH_JOBS // waves
                await drainer.enqueue_many(jobs.noop.new(n=wave * size + i) for i in range(size))
                await poll(
                    lambda: len(timed.finished),
                    lambda n, wave=wave: n >= wave + 2,
                    timeout=30,
                    what=f"prune batch {wave + 2}",
                    every=0.005,
                )
            during = await completed()
            await poll(completed, lambda n: n == FRESH_JOBS, timeout=60, what="the drain", every=0.1)
            return time.monotonic() - begun, during

        prune_started = time.monotonic()
        pruning = asyncio.create_task(pruner.lead())
        drained, completed_during = await drain()
        drain_ended = time.monotonic()
        await pruning
        pruning_took = time.monotonic() - prune_started
    finally:
        await drainer.stop()
        await timed.close()

    times = [t for t, _ in timed.batches]
    print(
        f"\ninserted {OLD_JOBS} old jobs in {inserted:.1f}s; pruned in {pruning_took:.1f}s over "
        f"{len(times)} batches (max {max(times):.3f}s, mean {sum(times) / len(times):.3f}s); "
        f"drained {FRESH_JOBS} fresh jobs in {drained:.1f}s meanwhile ({completed_during} by the "
        "eleventh batch)"
    )
    overlapping = sum(1 for at in timed.finished if at <= drain_ended)
    assert overlapping >= 10, f"only {overlapping} prune batches ran while the node drained"
    assert completed_during > 0, "the node completed nothing while the pruner ran eleven batches"
    assert sum(n for _, n in timed.batches) == OLD_JOBS
    assert all(n == PRUNE_LIMIT for _, n in timed.batches[:-1])
    assert pruned.named("pruner.pruned") == [
        {"count": OLD_JOBS, "completed": OLD_JOBS, "cancelled": 0, "discarded": 0}
    ]
    assert max(times) < 2.0, sorted(times)[-5:]
    counts = dict(await query(engine, "SELECT queue || ':' || state::text, count(*) FROM {jobs} GROUP BY 1"))
    assert counts == {"default:completed": FRESH_JOBS, "young:completed": 1000}, counts


# -- telemetry of the duties ----------------------------------------------------------------------
async def test_duties_emit_their_events(dsn: str, prefix: str, engine: PostgresEngine) -> None:
    # Two orphans of a dead producer, three old completed jobs, one cron entry due every minute.
    dead = str(uuid.uuid4())
    orphans = await engine.insert([jobs.noop.new(n=i).with_options(queue="orphans") for i in range(2)])
    claimed = await engine.fetch_jobs("orphans", 2, node="gone", producer=dead)
    assert sorted(j.id for j in claimed) == orphans
    await engine.record_producers(
        INSTANCE,
        "gone",
        [ProducerBeat(dead, "orphans", OWN_PRODUCER)],
        now=datetime.now(UTC) - timedelta(minutes=1),
    )
    await query(
        engine,
        """
        INSERT INTO {jobs} (state, queue, worker, completed_at)
        SELECT 'completed', 'old', 'tests.cluster_jobs.noop', timezone('UTC', now()) - interval '3 days'
        FROM generate_series(1, 3)
        """,
    )
    entry = CronEntry.build("* * * * *", jobs.cron_tick, {"label": "events"}, name="events")
    app = make_app(
        dsn,
        prefix,
        node="eventful",
        crontab=[entry],
        leader_ttl=2.0,
        heartbeat_interval=0.3,
        producer_timeout=1.0,
        rescue_interval=0.3,
    )
    events = listen(app)
    try:
        await app.start()
        assert events.named("leader.elected") == [{"node": "eventful", "name": INSTANCE}]
        rescued = await events.wait("lifeline.rescued")
        assert rescued[0]["count"] == 2
        assert sorted(rescued[0]["available"]) == orphans and rescued[0]["discarded"] == ()
        pruned = [{"count": 3, "completed": 3, "cancelled": 0, "discarded": 0}]
        assert (await events.wait("pruner.pruned")) == pruned
        inserted = await events.wait("cron.inserted")
        assert inserted[0]["count"] == len(inserted[0]["job_ids"]) == 1
        (cron_job,) = inserted[0]["job_ids"]
        found = await engine.get_job(cron_job)
        assert found is not None and found.meta["cron_name"] == "events"
    finally:
        await app.stop()
    assert events.named("leader.resigned") == [{"node": "eventful", "name": INSTANCE}]
    assert events.named("leader.lost") == []
    order = [name for name, _ in events.seen if name.startswith("leader.")]
    assert order == ["leader.elected", "leader.resigned"]
