"""Fleet control against real node processes: pause, resume, scale, stop and start queues on every node
or one, cancel running jobs on another node in each executor kind, list the fleet's queues, drive it all
from the command line, and speak Oban's signal format on ``<prefix>.oban_signal``.

Nodes are ``conveyor start`` processes with distinct ``CONVEYOR_NODE`` names (the installed script,
forked from a server that imported Conveyor once: ``tests.forked``); the test process runs no node, it
only signals and looks at the database. Jobs (``tests.fleet_jobs``) report what they did
through a ``fleet_marks`` table in the test's schema.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import orjson
import pytest
from click.testing import CliRunner, Result
from psycopg import sql

from conveyor import Conveyor, NodeNotFoundError, ValidationError
from conveyor.cli import main as cli
from conveyor.engine.postgres import PostgresEngine
from conveyor.fleet import QueueInfo
from tests import fleet_jobs, forked
from tests.helpers import holds, listening, poll, signal_channel, table

ROOT = Path(__file__).resolve().parent.parent
CONVEYOR = Path(sys.executable).with_name("conveyor")
#: What the brief promises: pause stops fetching, and cancel stops a running job, within this.
PROMPT = 1.0
#: Settings every node subprocess runs with: fast polls and heartbeats, a short shutdown.
NODE_ENV = {
    "CONVEYOR_POLL_INTERVAL": "0.2",
    "CONVEYOR_HEARTBEAT_INTERVAL": "0.25",
    "CONVEYOR_STAGE_INTERVAL": "0.2",
    "CONVEYOR_SHUTDOWN_GRACE": "1",
    "CONVEYOR_PROCESSES": "1",
}

T = TypeVar("T")


# -- node subprocesses ----------------------------------------------------------------------------
class NodeProcess:
    """One ``conveyor start`` subprocess, its output kept in a log file."""

    def __init__(self, dsn: str, prefix: str, name: str, queues: str, log_dir: Path) -> None:
        self.dsn, self.prefix, self.name, self.queues = dsn, prefix, name, queues
        self.log_path = log_dir / f"{name}.log"
        self.process: forked.Started | None = None

    async def spawn(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")}
        env |= NODE_ENV | {"CONVEYOR_NODE": self.name}
        command = [str(CONVEYOR), "start", "--dsn", self.dsn, "--prefix", self.prefix, "-q", self.queues]
        command += ["--import", "tests.fleet_jobs"]
        self.process = forked.start_python(command, cwd=ROOT, env=env, output=self.log_path)

    def output(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    async def ready(self, app: Conveyor, timeout: float = 30.0) -> None:
        """Wait until every queue of the node has a live producer row (it fetches right after)."""
        wanted = {part.split(":")[0] for part in self.queues.split(",")}

        async def check() -> bool:
            if self.process is not None and self.process.returncode is not None:
                raise AssertionError(
                    f"node {self.name} exited with {self.process.returncode}:\n{self.output()}"
                )
            return wanted <= {q.queue for q in await app.queues() if q.node == self.name}

        await poll(check, timeout=timeout, what=f"node {self.name} to start\n{self.output()}")

    async def terminate(self, timeout: float = 10.0) -> int | None:
        """SIGTERM (a graceful stop), then SIGKILL if it does not exit in time."""
        process, self.process = self.process, None
        if process is None:
            return None
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.exited(), timeout)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.exited()
        return process.returncode


@asynccontextmanager
async def fleet(
    app: Conveyor, dsn: str, prefix: str, log_dir: Path, names: Sequence[str], queues: str
) -> AsyncIterator[dict[str, NodeProcess]]:
    """Start one node subprocess per name, wait until all run their queues; always stop them all."""
    nodes = {name: NodeProcess(dsn, prefix, name, queues, log_dir) for name in names}
    try:
        for node in nodes.values():
            await node.spawn()
        await asyncio.gather(*(node.ready(app) for node in nodes.values()))
        yield nodes
    finally:
        await asyncio.gather(*(node.terminate() for node in nodes.values()), return_exceptions=True)


# -- polling and queries --------------------------------------------------------------------------
async def query(engine: PostgresEngine, text: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run ``text``; ``{jobs}``, ``{marks}`` and ``{states}`` stand for the test's tables."""
    composed = sql.SQL(text).format(
        jobs=table(engine.prefix),
        marks=fleet_jobs.marks_table(engine.prefix),
        states=table(engine.prefix, "conveyor_queue_states"),
    )
    async with engine.pool.connection() as conn:
        cur = await conn.execute(composed, params)
        return await cur.fetchall() if cur.description else []


async def create_marks(engine: PostgresEngine) -> None:
    async with engine.pool.connection() as conn:
        await conn.execute(fleet_jobs.create_marks_sql(engine.prefix))


async def states(engine: PostgresEngine, ids: Iterable[int]) -> dict[int, str]:
    rows = await query(engine, "SELECT id, state::text FROM {jobs} WHERE id = ANY(%s)", (list(ids),))
    return {int(i): s for i, s in rows}


async def wait_states(engine: PostgresEngine, ids: Sequence[int], state: str, timeout: float = 15.0) -> None:
    async def check() -> bool:
        return set((await states(engine, ids)).values()) == {state} and len(ids) > 0

    try:
        await poll(check, timeout=timeout, what=f"jobs to be {state}")
    except AssertionError:
        raise AssertionError(f"jobs are not all {state}: {await states(engine, ids)}") from None


async def runners(engine: PostgresEngine, ids: Sequence[int]) -> dict[int, str]:
    """Which node claimed each job (``attempted_by[1]``)."""
    rows = await query(engine, "SELECT id, attempted_by[1] FROM {jobs} WHERE id = ANY(%s)", (list(ids),))
    return {int(i): node for i, node in rows}


async def marks(engine: PostgresEngine, job_id: int) -> list[tuple[str, int]]:
    rows = await query(engine, "SELECT mark, pid FROM {marks} WHERE job_id = %s ORDER BY at", (job_id,))
    return [(m, int(p)) for m, p in rows]


async def max_overlap(engine: PostgresEngine, ids: Sequence[int]) -> dict[str, int]:
    """Per node, the most jobs that were between their "start" and "end" marks at the same moment."""
    rows = await query(
        engine,
        "SELECT node, job_id, mark, at FROM {marks} WHERE job_id = ANY(%s) AND mark IN ('start', 'end')",
        (list(ids),),
    )
    events: defaultdict[str, list[tuple[datetime, int]]] = defaultdict(list)
    for node, _job_id, what, at in rows:
        events[node].append((at, 1 if what == "start" else -1))
    result = {}
    for node, node_events in events.items():
        current = peak = 0
        for _at, step in sorted(node_events):  # at equal times an end (-1) sorts before a start
            current += step
            peak = max(peak, current)
        result[node] = peak
    return result


async def queue_table(app: Conveyor) -> dict[tuple[str, str], QueueInfo]:
    return {(q.node, q.queue): q for q in await app.queues()}


async def wait_queues(
    app: Conveyor,
    predicate: Callable[[dict[tuple[str, str], QueueInfo]], bool],
    what: str,
    timeout: float = 5,
) -> dict[tuple[str, str], QueueInfo]:
    """Poll ``app.queues()`` (fed by heartbeats) until ``predicate`` holds."""
    last: dict[tuple[str, str], QueueInfo] = {}

    async def check() -> bool:
        nonlocal last
        last = await queue_table(app)
        return predicate(last)

    try:
        await poll(check, timeout=timeout, what=what, every=0.05)
    except AssertionError:
        raise AssertionError(f"timed out waiting for {what}; queues: {list(last.values())}") from None
    return last


async def stays(check: Callable[[], Awaitable[bool]], seconds: float, what: str) -> None:
    """Assert ``check`` holds every time it is polled for ``seconds`` (``helpers.holds``)."""
    await holds(check, during=seconds, what=what, every=0.1)


async def all_available(engine: PostgresEngine, ids: Sequence[int]) -> bool:
    return set((await states(engine, ids)).values()) == {"available"}


def report(text: str) -> None:
    """Measured figures, shown with ``pytest -s`` (or in the captured output of a failure)."""
    print(f"[fleet] {text}")


# -- 1. pause and resume --------------------------------------------------------------------------
async def test_pause_stops_fetching_on_every_node_and_running_jobs_still_finish(
    dsn: str, prefix: str, engine: PostgresEngine, app: Conveyor, tmp_path: Path
) -> None:
    loop = asyncio.get_running_loop()
    async with fleet(app, dsn, prefix, tmp_path, ["node-a", "node-b"], "default:3"):
        busy = await app.enqueue_many(fleet_jobs.sleep_for.new(seconds=1.5) for _ in range(6))
        await wait_states(engine, busy, "executing", timeout=5)
        assert set((await runners(engine, busy)).values()) == {"node-a", "node-b"}

        paused_at = loop.time()
        await app.pause_queue("default")
        flagged = asyncio.create_task(
            wait_queues(
                app,
                lambda qs: len(qs) == 2 and all(q.paused for q in qs.values()),
                "both nodes to report paused",
            )
        )
        flagged.add_done_callback(
            lambda _: report(f"pause -> both heartbeats say paused after {loop.time() - paused_at:.3f}s")
        )
        probes: list[tuple[float, int]] = []  # (seconds after the pause, job id)
        while loop.time() - paused_at < PROMPT:
            probes.append((loop.time() - paused_at, await app.enqueue(fleet_jobs.noop.new())))
            await asyncio.sleep(0.1)
        assert {node for node, _ in await flagged} == {"node-a", "node-b"}

        # Jobs that were running when the pause came finish and are acked; freed slots fetch nothing.
        await wait_states(engine, busy, "completed", timeout=5)
        probe_ids = [job_id for _, job_id in probes]
        await stays(
            lambda: all_available(engine, probe_ids),
            2.0,
            "a paused queue fetched a job inserted after the pause",
        )
        report(f"pause -> no probe fetched; first probe inserted {probes[0][0] * 1000:.1f}ms after the pause")

        resumed_at = loop.time()
        await app.resume_queue("default")
        await wait_states(engine, probe_ids, "completed", timeout=5)
        report(f"resume -> {len(probe_ids)} waiting jobs completed in {loop.time() - resumed_at:.3f}s")


async def test_pause_and_resume_one_node(
    dsn: str, prefix: str, engine: PostgresEngine, app: Conveyor, tmp_path: Path
) -> None:
    async with fleet(app, dsn, prefix, tmp_path, ["node-a", "node-b"], "default:3"):
        await app.pause_queue("default", node="node-a")
        await wait_queues(
            app,
            lambda qs: qs[("node-a", "default")].paused and not qs[("node-b", "default")].paused,
            "node-a alone to report paused",
        )
        ids = await app.enqueue_many(fleet_jobs.sleep_for.new(seconds=0.1) for _ in range(8))
        await wait_states(engine, ids, "completed")
        assert set((await runners(engine, ids)).values()) == {"node-b"}

        await app.resume_queue("default", node="node-a")
        await app.pause_queue("default", node="node-b")
        await wait_queues(
            app,
            lambda qs: not qs[("node-a", "default")].paused and qs[("node-b", "default")].paused,
            "node-b alone to report paused",
        )
        ids = await app.enqueue_many(fleet_jobs.sleep_for.new(seconds=0.1) for _ in range(8))
        await wait_states(engine, ids, "completed")
        assert set((await runners(engine, ids)).values()) == {"node-a"}


# -- 2. scale -------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["async", "thread"])
async def test_scale_changes_the_concurrency_jobs_see(
    kind: str, dsn: str, prefix: str, engine: PostgresEngine, app: Conveyor, tmp_path: Path
) -> None:
    await create_marks(engine)
    worker = fleet_jobs.span if kind == "async" else fleet_jobs.span_in_thread

    async def run(count: int, seconds: float) -> dict[str, int]:
        ids = await app.enqueue_many(
            worker.new(dsn=dsn, prefix=prefix, seconds=seconds) for _ in range(count)
        )
        await wait_states(engine, ids, "completed", timeout=30)
        return await max_overlap(engine, ids)

    async with fleet(app, dsn, prefix, tmp_path, ["node-a", "node-b"], "default:2"):
        assert await run(8, 0.5) == {"node-a": 2, "node-b": 2}

        await app.scale_queue("default", 6)
        await wait_queues(app, lambda qs: {q.limit for q in qs.values()} == {6}, "limit 6 on both nodes")
        assert await run(24, 0.8) == {"node-a": 6, "node-b": 6}

        await app.scale_queue("default", 1, node="node-a")
        await wait_queues(
            app,
            lambda qs: qs[("node-a", "default")].limit == 1 and qs[("node-b", "default")].limit == 6,
            "limit 1 on node-a only",
        )
        overlap = await run(14, 0.5)
        assert overlap.get("node-a") == 1 and overlap.get("node-b", 0) <= 6, overlap


# -- 3. cancelling a running job on another node ---------------------------------------------------
@pytest.mark.parametrize("kind", ["async", "thread", "process"])
async def test_cancel_stops_a_running_job_on_its_node(
    kind: str, dsn: str, prefix: str, engine: PostgresEngine, app: Conveyor, tmp_path: Path
) -> None:
    await create_marks(engine)
    loop = asyncio.get_running_loop()
    holds = {
        "async": fleet_jobs.hold_async.new(dsn=dsn, prefix=prefix),
        "thread": fleet_jobs.hold_thread.new(dsn=dsn, prefix=prefix),
        "process": fleet_jobs.hold_process.new(dsn=dsn, prefix=prefix),
    }
    follower_job = fleet_jobs.noop_in_process.new() if kind == "process" else fleet_jobs.noop.new()
    async with fleet(app, dsn, prefix, tmp_path, ["node-a"], "default:1") as nodes:
        held = await app.enqueue(holds[kind])

        async def started() -> list[tuple[str, int]]:
            return [m for m in await marks(engine, held) if m[0] == "started"]

        pid = (await poll(started, timeout=20, what=f"the {kind} job to start"))[0][1]
        follower = await app.enqueue(follower_job)

        async def only_the_held_one_runs() -> bool:
            return (await states(engine, [held, follower])) == {held: "executing", follower: "available"}

        await stays(only_the_held_one_runs, 0.3, "the held job alone runs (limit 1)")

        cancelled_at = loop.time()
        assert await app.cancel_job(held)

        async def stopped() -> bool:
            if kind == "process":
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return True
                return False
            return any(m == "stopped" for m, _ in await marks(engine, held))

        await poll(stopped, timeout=10, what=f"the {kind} job to stop\n{nodes['node-a'].output()}")
        stop_latency = loop.time() - cancelled_at

        async def follower_claimed() -> bool:
            return (await states(engine, [follower]))[follower] != "available"

        await poll(follower_claimed, timeout=10, what="the follower to be fetched")
        slot_latency = loop.time() - cancelled_at
        # Generous: with a pool of one process the follower waits for the killed one's replacement to
        # spawn, which a loaded machine can take long over (only the stop latency is asserted).
        await wait_states(engine, [follower], "completed", timeout=60)
        follower_done = loop.time() - cancelled_at
        report(
            f"cancel {kind}: job stopped after {stop_latency * 1000:.0f}ms, slot reused after "
            f"{slot_latency * 1000:.0f}ms, next job completed after {follower_done * 1000:.0f}ms"
        )

        row = await app.get_job(held)
        assert row is not None and row.state.value == "cancelled" and row.cancelled_at is not None
        assert stop_latency < PROMPT, f"the {kind} job took {stop_latency:.3f}s to stop"
        assert slot_latency < PROMPT, f"the slot was freed {slot_latency:.3f}s after the cancel"
        assert "finished" not in {m for m, _ in await marks(engine, held)}
        if kind == "process":
            assert await app.get_result(follower) != pid  # a fresh worker process ran it
        else:
            assert [m for m, _ in await marks(engine, held)] == ["started", "stopped"]
            assert {p for _, p in await marks(engine, held)} == {pid}


# -- 4. stop and start a queue on one node --------------------------------------------------------
async def test_queue_stopped_on_one_node_keeps_running_on_the_other(
    dsn: str, prefix: str, engine: PostgresEngine, app: Conveyor, tmp_path: Path
) -> None:
    async with fleet(app, dsn, prefix, tmp_path, ["node-a", "node-b"], "default:3,other:1"):
        await app.stop_queue("default", node="node-a")
        gone = await wait_queues(
            app, lambda qs: ("node-a", "default") not in qs, "node-a's default producer to go"
        )
        assert set(gone) == {("node-a", "other"), ("node-b", "default"), ("node-b", "other")}
        # The row stays gone: no heartbeat brings it back.
        await stays(
            lambda: _absent(app, ("node-a", "default")), 1.0, "node-a's stopped producer row came back"
        )

        ids = await app.enqueue_many(fleet_jobs.sleep_for.new(seconds=0.05) for _ in range(9))
        await wait_states(engine, ids, "completed")
        assert set((await runners(engine, ids)).values()) == {"node-b"}

        await app.start_queue("default", 2, node="node-a")
        back = await wait_queues(app, lambda qs: ("node-a", "default") in qs, "node-a's default to come back")
        assert back[("node-a", "default")].limit == 2 and not back[("node-a", "default")].paused
        await app.pause_queue("default", node="node-b")
        await wait_queues(app, lambda qs: qs[("node-b", "default")].paused, "node-b to report paused")
        ids = await app.enqueue_many(fleet_jobs.sleep_for.new(seconds=0.05) for _ in range(4))
        await wait_states(engine, ids, "completed")
        assert set((await runners(engine, ids)).values()) == {"node-a"}


async def _absent(app: Conveyor, key: tuple[str, str]) -> bool:
    return key not in await queue_table(app)


# -- 5. the queue listing, and persisted state across a restart ------------------------------------
async def test_queues_lists_every_queue_and_a_persisted_pause_survives_a_restart(
    dsn: str, prefix: str, engine: PostgresEngine, app: Conveyor, tmp_path: Path
) -> None:
    async with fleet(app, dsn, prefix, tmp_path, ["node-a", "node-b"], "default:3,mail:2") as nodes:
        busy = await app.enqueue_many(
            fleet_jobs.sleep_for.new(seconds=2).with_options(queue="mail") for _ in range(3)
        )
        listed = await wait_queues(
            app,
            lambda qs: sum(q.running for q in qs.values()) == 3,
            "three running mail jobs in the heartbeats",
        )
        assert {k: (q.limit, q.paused) for k, q in listed.items()} == {
            ("node-a", "default"): (3, False),
            ("node-a", "mail"): (2, False),
            ("node-b", "default"): (3, False),
            ("node-b", "mail"): (2, False),
        }
        assert sum(q.running for k, q in listed.items() if k[1] == "mail") == 3
        assert all(q.running == 0 for k, q in listed.items() if k[1] == "default")

        result = invoke(dsn, prefix, "queues", "--json")
        rows = orjson.loads(result.output)
        assert {(r["node"], r["queue"]) for r in rows} == set(listed)
        assert all({"limit", "running", "paused"} <= set(r) for r in rows)
        await wait_states(engine, busy, "completed")

        # The persisted state has no node column, so a persisted change cannot target one node.
        with pytest.raises(ValidationError):
            await app.pause_queue("default", node="node-a", persist=True)
        assert await query(engine, "SELECT * FROM {states}") == []
        await app.pause_queue("default", persist=True)
        await app.scale_queue("mail", 4, persist=True)
        await wait_queues(
            app,
            lambda qs: qs[("node-a", "default")].paused and qs[("node-b", "default")].paused,
            "default paused on both nodes",
        )

        # A restarted node comes up with the persisted pause and limit, from its first heartbeat on.
        await restart(app, nodes["node-a"])
        first = await queue_table(app)
        assert first[("node-a", "default")].paused, first
        assert first[("node-a", "mail")].limit == 4 and not first[("node-a", "mail")].paused, first
        waiting = await app.enqueue_many(fleet_jobs.noop.new() for _ in range(3))
        await stays(lambda: all_available(engine, waiting), 1.0, "a persistently paused queue ran a job")

        # A persisted resume clears it: the jobs run, and the next restart comes up running.
        await app.resume_queue("default", persist=True)
        await wait_states(engine, waiting, "completed")
        await restart(app, nodes["node-a"])
        assert not (await queue_table(app))[("node-a", "default")].paused
        await app.pause_queue("default", node="node-b")  # not persisted: only to see node-a run
        await wait_queues(app, lambda qs: qs[("node-b", "default")].paused, "node-b to report paused")
        ids = await app.enqueue_many(fleet_jobs.noop.new() for _ in range(3))
        await wait_states(engine, ids, "completed")
        assert set((await runners(engine, ids)).values()) == {"node-a"}


async def restart(app: Conveyor, node: NodeProcess) -> None:
    assert await node.terminate() == 0, node.output()
    await wait_queues(app, lambda qs: all(n != node.name for n, _ in qs), f"{node.name}'s rows to go")
    await node.spawn()
    await node.ready(app)


# -- 6. the command line --------------------------------------------------------------------------
def invoke(dsn: str, prefix: str, *args: str) -> Result:
    result = CliRunner().invoke(cli, [args[0], "--dsn", dsn, "--prefix", prefix, *args[1:]])
    assert result.exit_code == 0, (result.output, result.exception)
    return result


async def test_cli_steers_queues_and_acts_on_jobs(
    dsn: str, prefix: str, engine: PostgresEngine, app: Conveyor, tmp_path: Path
) -> None:
    async with fleet(app, dsn, prefix, tmp_path, ["node-a"], "default:2"):
        assert "pause default sent to every node" in invoke(dsn, prefix, "pause", "default").output
        await wait_queues(app, lambda qs: qs[("node-a", "default")].paused, "the CLI pause")
        waiting = await app.enqueue_many(fleet_jobs.noop.new() for _ in range(2))

        listed = orjson.loads(invoke(dsn, prefix, "jobs", "--state", "available", "--json").output)
        assert sorted(j["id"] for j in listed) == sorted(waiting)
        assert {j["state"] for j in listed} == {"available"}
        table_output = invoke(dsn, prefix, "jobs", "--state", "available").output
        assert all(str(job_id) in table_output for job_id in waiting), table_output
        assert "node-a" in invoke(dsn, prefix, "queues").output

        invoke(dsn, prefix, "scale", "default", "4", "--node", "node-a")
        await wait_queues(app, lambda qs: qs[("node-a", "default")].limit == 4, "the CLI scale")
        assert (
            "resume default sent to node node-a"
            in invoke(dsn, prefix, "resume", "default", "--node", "node-a").output
        )
        await wait_states(engine, waiting, "completed")
        # A node no live producer row names: reported, not "sent".
        unknown = CliRunner().invoke(
            cli, ["pause", "--dsn", dsn, "--prefix", prefix, "default", "--node", "node-z"]
        )
        assert unknown.exit_code == 1 and "sent" not in unknown.output.replace("nothing was sent", "")
        assert "no live node named 'node-z' runs a queue (live nodes: node-a)" in unknown.output

        invoke(dsn, prefix, "stop", "default", "--node", "node-a")
        await wait_queues(app, lambda qs: ("node-a", "default") not in qs, "the CLI stop")

    a, b, c = await app.enqueue_many(fleet_jobs.noop.new() for _ in range(3))
    output = invoke(dsn, prefix, "cancel", str(a), str(b)).output
    assert f"cancelled: {a}, {b}" in output
    assert await states(engine, [a, b, c]) == {a: "cancelled", b: "cancelled", c: "available"}
    assert orjson.loads(invoke(dsn, prefix, "cancel", "--json", str(a)).output) == {
        "cancel": [],
        "skipped": [a],
    }
    assert orjson.loads(invoke(dsn, prefix, "retry", "--json", str(a)).output) == {
        "retry": [a],
        "skipped": [],
    }
    assert (await states(engine, [a]))[a] == "available"
    deleted, skipped = invoke(dsn, prefix, "delete", str(a), str(b), str(c), "999999999").output.splitlines()
    assert deleted.startswith("deleted: ") and sorted(deleted[9:].split(", ")) == sorted(map(str, [a, b, c]))
    assert skipped.endswith(": 999999999")
    assert await states(engine, [a, b, c]) == {}


# -- 7. Oban's signal format ----------------------------------------------------------------------
async def test_signals_are_obans_and_a_raw_oban_signal_steers_a_node(
    dsn: str, prefix: str, engine: PostgresEngine, app: Conveyor, tmp_path: Path
) -> None:
    async with listening(dsn, signal_channel(prefix)) as listener:
        await app.pause_queue("default")
        assert orjson.loads(await listener.first() or "null") == {
            "action": "pause",
            "queue": "default",
            "ident": "any",
        }
        with pytest.raises(NodeNotFoundError):  # no live node is called x: nothing is sent
            await app.scale_queue("default", 7, node="x")

    async def notify(payload: str) -> None:
        await query(engine, "SELECT pg_notify(%s, %s)", (signal_channel(prefix), payload))

    async with fleet(app, dsn, prefix, tmp_path, ["node-a"], "default:2"):
        async with listening(dsn, signal_channel(prefix)) as listener:
            await app.scale_queue("default", 2, node="node-a")
            assert orjson.loads(await listener.first() or "null") == {
                "action": "scale",
                "queue": "default",
                "limit": 2,
                "ident": "conveyor.node-a",
            }
        await notify('{"action":"pause","queue":"default"}')  # exactly what an Oban node sends
        await wait_queues(app, lambda qs: qs[("node-a", "default")].paused, "the raw pause")
        ids = await app.enqueue_many(fleet_jobs.noop.new() for _ in range(2))
        await stays(lambda: all_available(engine, ids), 1.0, "a raw-paused queue ran a job")

        await notify('{"action":"scale","queue":"default","limit":5}')
        await notify('{"action":"resume","queue":"*"}')
        listed = await wait_queues(
            app, lambda qs: not qs[("node-a", "default")].paused, "the raw resume of every queue"
        )
        await wait_states(engine, ids, "completed")
        assert listed[("node-a", "default")].limit == 5
