"""Node processes for the fault tests, and the reading of the run log their jobs write
(``tests.faults.jobs``): lost jobs, double runs, and when processing resumed."""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from conveyor import Conveyor
from tests import forked
from tests.faults import jobs
from tests.helpers import poll_sync

T = TypeVar("T")

ROOT = Path(__file__).resolve().parents[2]
CONVEYOR = Path(sys.executable).with_name("conveyor")

#: Node timings of the fault tests: quick to react, so a test waits on the fault and not on the node.
#: Rescue timings are short too (a dead node's jobs are back within ~3 s) unless a test says otherwise.
FAST_ENV = {
    "CONVEYOR_POLL_INTERVAL": "0.2",
    "CONVEYOR_STAGE_INTERVAL": "0.2",
    "CONVEYOR_SHUTDOWN_GRACE": "1",
    "CONVEYOR_HEARTBEAT_INTERVAL": "0.5",
    "CONVEYOR_PRODUCER_TIMEOUT": "2",
    "CONVEYOR_RESCUE_INTERVAL": "0.5",
    "CONVEYOR_LEADER_TTL": "3",
}


def wait_for(
    probe: Callable[[], T], done: Callable[[T], bool], *, timeout: float, what: str, every: float = 0.05
) -> T:
    """Call ``probe`` until ``done(value)``; fail after ``timeout`` seconds with the last value."""
    return poll_sync(probe, done, timeout=timeout, what=what, every=every)


# -- the database side ----------------------------------------------------------------------------
def install(dsn: str, prefix: str) -> None:
    app = Conveyor(dsn, prefix=prefix)
    try:
        app.install_sync()
    finally:
        app.close_sync()


def enqueue(dsn: str, prefix: str, log: Path, seconds: Sequence[float], **options: Any) -> list[int]:
    """One ``logged`` job per entry of ``seconds`` (its sleep), in that order."""
    app = Conveyor(dsn, prefix=prefix)
    try:
        requests = (jobs.logged.new(log=str(log), seconds=s).with_options(**options) for s in seconds)
        return list(app.enqueue_many_sync(requests))
    finally:
        app.close_sync()


def states(dsn: str, prefix: str) -> dict[int, str]:
    """Every job's state, read on a fresh connection; {} when the server cannot be reached."""
    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=2) as conn:
            rows = conn.execute(
                sql.SQL("SELECT id, state::text FROM {}").format(sql.Identifier(prefix, "oban_jobs"))
            ).fetchall()
    except psycopg.OperationalError:
        return {}
    return {int(job_id): state for job_id, state in rows}


def wait_completed(dsn: str, prefix: str, ids: Iterable[int], *, timeout: float, what: str = "") -> None:
    wanted = set(ids)

    def missing() -> list[tuple[int, str]]:
        found = states(dsn, prefix)
        return sorted((i, found.get(i, "?")) for i in wanted if found.get(i) != "completed")

    wait_for(missing, lambda m: not m, timeout=timeout, what=f"every job completed {what}", every=0.2)


# -- node processes -------------------------------------------------------------------------------
@dataclass
class NodeProcess:
    process: forked.Started
    log: Path
    killed_at: float | None = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> float:
        """SIGKILL, no chance to clean up; returns the monotonic time of the kill."""
        self.process.send_signal(signal.SIGKILL)
        self.killed_at = time.monotonic()
        self.process.wait(10)
        return self.killed_at

    def output(self, chars: int = 4000) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return f"--- node pid {self.pid} (exit {self.process.poll()}):\n{text[-chars:]}"


@dataclass
class Fleet:
    """The node processes of one test, on one schema of the fault cluster."""

    dsn: str
    prefix: str
    directory: Path
    nodes: list[NodeProcess] = field(default_factory=list)

    def start(self, env: dict[str, str] | None = None, queues: str = "default:5") -> NodeProcess:
        """One ``conveyor start`` process with ``FAST_ENV`` (``env`` overrides it): the installed
        script in a process of its own, forked from a server that imported Conveyor once
        (``tests.forked``) rather than a new interpreter importing it again."""
        environ = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")}
        environ |= FAST_ENV | (env or {})
        log = self.directory / f"node-{len(self.nodes)}-{uuid.uuid4().hex[:6]}.log"
        command = [str(CONVEYOR), "start", "--dsn", self.dsn, "--prefix", self.prefix, "-q", queues]
        command += ["--import", "tests.faults.jobs", "--log-level", "WARNING"]
        process = forked.start_python(command, cwd=ROOT, env=environ, output=log)
        node = NodeProcess(process, log)
        self.nodes.append(node)
        return node

    @property
    def kills(self) -> dict[int, float]:
        return {n.pid: n.killed_at for n in self.nodes if n.killed_at is not None}

    def describe(self) -> str:
        return "\n".join(n.output() for n in self.nodes)

    def alive(self) -> bool:
        return all(n.process.poll() is None for n in self.nodes if n.killed_at is None)

    def stop(self) -> None:
        for node in self.nodes:
            if node.process.poll() is None:
                node.process.send_signal(signal.SIGTERM)
        for node in self.nodes:
            try:
                node.process.wait(15)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait(5)


@contextlib.contextmanager
def fleet(dsn: str, prefix: str, directory: Path) -> Iterator[Fleet]:
    nodes = Fleet(dsn, prefix, directory)
    try:
        yield nodes
    finally:
        nodes.stop()


# -- the run log ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Run:
    """One execution of a job's handler: from its start line to its end line (None: never ended)."""

    job_id: int
    attempt: int
    pid: int
    start: float
    end: float | None


def read_runs(path: Path) -> list[Run]:
    """Pair the start and end lines of each (job, attempt, pid); in order of start."""
    starts: dict[tuple[int, int, int], float] = {}
    ends: dict[tuple[int, int, int], float] = {}
    if path.exists():
        # A read may catch a line while another process is still writing it (``write`` is atomic
        # against other appends, not against a reader): the text after the last newline is left for
        # the next read.
        for line in path.read_text().split("\n")[:-1]:
            event, job_id, attempt, pid, mono, _wall = line.split()
            key = (int(job_id), int(attempt), int(pid))
            (starts if event == "start" else ends)[key] = float(mono)
    runs = [Run(j, a, p, start, ends.get((j, a, p))) for (j, a, p), start in starts.items()]
    return sorted(runs, key=lambda r: r.start)


@dataclass(frozen=True)
class Report:
    """What the run log and the database say about a batch of jobs after a fault."""

    enqueued: int
    lost: list[int]  # enqueued, yet not completed in the database
    concurrent: list[tuple[Run, Run]]  # two runs of one job that overlapped in time
    finished_twice: list[int]  # jobs whose handler ran to its end more than once
    runs: list[Run]

    @property
    def started_twice(self) -> list[int]:
        counts: dict[int, int] = {}
        for run in self.runs:
            counts[run.job_id] = counts.get(run.job_id, 0) + 1
        return sorted(j for j, n in counts.items() if n > 1)

    def first_start_after(self, moment: float) -> float | None:
        """Seconds from ``moment`` to the first job start after it (None: nothing started)."""
        later = [r.start for r in self.runs if r.start > moment]
        return min(later) - moment if later else None

    def summary(self) -> str:
        return (
            f"{self.enqueued} jobs: {len(self.lost)} lost, {len(self.concurrent)} concurrent double runs, "
            f"{len(self.started_twice)} started twice, {len(self.finished_twice)} finished twice"
        )


def report(dsn: str, prefix: str, log: Path, ids: Sequence[int], kills: dict[int, float]) -> Report:
    """Compare the log with the database. A run that never ended ends at its process's kill (or is
    still running: it overlaps everything after its start)."""
    found = states(dsn, prefix)
    runs = read_runs(log)
    by_job: dict[int, list[Run]] = {}
    for run in runs:
        by_job.setdefault(run.job_id, []).append(run)

    def end_of(run: Run) -> float:
        return run.end if run.end is not None else kills.get(run.pid, math.inf)

    concurrent = []
    for job_runs in by_job.values():
        for i, first in enumerate(job_runs):
            for second in job_runs[i + 1 :]:
                if second.start < end_of(first) and first.start < end_of(second):
                    concurrent.append((first, second))
    finished_twice = sorted(j for j, rs in by_job.items() if sum(r.end is not None for r in rs) > 1)
    return Report(
        enqueued=len(ids),
        lost=sorted(i for i in ids if found.get(i) != "completed"),
        concurrent=concurrent,
        finished_twice=finished_twice,
        runs=runs,
    )


def started_count(log: Path) -> int:
    return len(read_runs(log))
