"""What the server was doing while a call of the fleet stalled (``migrate-live``).

A long enqueue or claim says that it waited, not for what. ``ActivitySampler`` reads every backend
of the server (``pg_stat_activity``: client sessions, parallel workers, checkpointer, WAL writer)
and the machine's CPU (``/proc/stat``) every ``every`` seconds, each sample stamped on the same
clock as the fleet's calls (``time.perf_counter``). ``stalls`` then takes each call longer than a
threshold and sums the samples taken during it: what the fleet's statements waited for, what the
migration ran and waited for, how many parallel workers were at work, whether a checkpoint was
writing, and how busy the CPU was. ``server_counters`` reads the WAL and checkpoint counters, so
a phase can report its WAL volume and the checkpoints it caused.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

#: Application names the benchmark's connections carry (``with_name``), by which their backends
#: are told apart from one another and from other clients of the server.
FLEET, MIGRATOR = "bench-fleet", "bench-migrator"

ACTIVITY = """
SELECT a.pid, coalesce(l.application_name, a.application_name), a.backend_type,
       coalesce(a.wait_event_type || ':' || a.wait_event, 'CPU'), left(a.query, 200)
FROM pg_stat_activity AS a LEFT JOIN pg_stat_activity AS l ON l.pid = a.leader_pid
WHERE a.pid <> pg_backend_pid() AND (a.state = 'active' OR a.backend_type <> 'client backend')
"""
COUNTERS = """
SELECT w.wal_bytes, w.wal_fpi, w.wal_records, w.wal_buffers_full, w.wal_write, w.wal_sync,
       b.checkpoints_timed + b.checkpoints_req, b.buffers_checkpoint, b.buffers_backend
FROM pg_stat_wal AS w, pg_stat_bgwriter AS b
"""
COUNTER_NAMES = (
    "wal_bytes",
    "wal_fpi",
    "wal_records",
    "wal_buffers_full",
    "wal_write",
    "wal_sync",
    "checkpoints",
    "buffers_checkpoint",
    "buffers_backend",
)
#: Background processes whose waits say they are idle: not worth a line in a stall's summary.
IDLE_WAITS = frozenset(
    {
        "Activity:CheckpointerMain",
        "Activity:WalWriterMain",
        "Activity:BgWriterHibernate",
        "Activity:BgWriterMain",
        "Activity:AutoVacuumMain",
        "Activity:LogicalLauncherMain",
        "Activity:ArchiverMain",
        "Timeout:CheckpointWriteDelay",
    }
)
_STEP = re.compile(
    r"(CREATE (?:UNIQUE )?INDEX CONCURRENTLY (?:IF NOT EXISTS )?\w+|DROP INDEX CONCURRENTLY|"
    r"CREATE STATISTICS|DO \$\$|CREATE TABLE|UPDATE \S+|SELECT pg_try_advisory_lock|"
    r"CREATE INDEX \w+|VACUUM|ANALYZE)",
    re.IGNORECASE,
)


def label(query: str) -> str:
    """A short name for a statement of the migration: what it builds or runs."""
    found = _STEP.search(query)
    return found.group(0) if found else query.strip().split("\n")[0][:40]


async def server_counters(conn: psycopg.AsyncConnection[Any]) -> dict[str, int]:
    cur = await conn.execute(COUNTERS)
    row = await cur.fetchone()
    assert row is not None
    return {name: int(value) for name, value in zip(COUNTER_NAMES, row, strict=True)}


def cpu_ticks() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine so far."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]  # idle + iowait
    return sum(fields) - idle, sum(fields)


@dataclass(frozen=True, slots=True)
class Sample:
    at: float
    #: The machine's CPU busy share since the previous sample (0..1).
    cpu: float
    #: (pid, application name (a parallel worker's leader's), backend type, wait or 'CPU',
    #: statement) of each backend at work.
    backends: tuple[tuple[int, str, str, str, str], ...]


def with_name(dsn: str, name: str) -> str:
    """``dsn`` (a URL) with ``application_name`` set to ``name``."""
    return f"{dsn}{'&' if '?' in dsn else '?'}application_name={name}"


@dataclass
class ActivitySampler:
    dsn: str
    every: float = 0.02
    samples: list[Sample] = field(default_factory=list)
    going: bool = True

    async def run(self) -> None:
        async with await psycopg.AsyncConnection.connect(self.dsn, autocommit=True) as conn:
            busy, total = cpu_ticks()
            while self.going:
                at = time.perf_counter()
                cur = await conn.execute(ACTIVITY)
                rows = await cur.fetchall()
                now_busy, now_total = cpu_ticks()
                share = (now_busy - busy) / (now_total - total) if now_total > total else 0.0
                busy, total = now_busy, now_total
                backends = tuple((int(r[0]), str(r[1]), str(r[2]), str(r[3]), str(r[4])) for r in rows)
                self.samples.append(Sample(at, share, backends))
                await asyncio.sleep(self.every)

    def summary(self, start: float, end: float) -> dict[str, Any]:
        """What the samples taken between ``start`` and ``end`` show: per sample on average, the
        backends of the fleet, of the migration (parallel workers apart) and of other clients at
        work, by what each waited for ('CPU': running, or ready to), and the background
        processes that were busy."""
        inside = [s for s in self.samples if start <= s.at <= end]
        fleet: Counter[str] = Counter()
        migration: Counter[str] = Counter()
        background: Counter[str] = Counter()
        workers = others = 0
        for sample in inside:
            for _, name, kind, wait, query in sample.backends:
                if name == FLEET:
                    fleet[wait] += 1
                elif name == MIGRATOR and kind == "parallel worker":
                    workers += 1
                elif name == MIGRATOR:
                    migration[f"{label(query)} {wait}"] += 1
                elif kind == "client backend":
                    others += 1
                elif wait not in IDLE_WAITS:
                    background[f"{kind} {wait}"] += 1
        count = len(inside) or 1
        return {
            "samples": len(inside),
            "cpu_busy": round(sum(s.cpu for s in inside) / count, 2),
            "fleet": dict(fleet.most_common(4)),
            "migration": dict(migration.most_common(3)),
            "parallel_workers": round(workers / count, 1),
            "other_clients": round(others / count, 1),
            "background": dict(background.most_common(3)),
        }

    def stalls(
        self, calls: list[tuple[float, float]], threshold: float, most: int = 8
    ) -> list[dict[str, Any]]:
        """The ``most`` longest calls (start, seconds) over ``threshold``, each with ``summary``."""
        long = sorted((c for c in calls if c[1] > threshold), key=lambda c: -c[1])[:most]
        first = self.samples[0].at if self.samples else 0.0
        return [
            {
                "at_s": round(start - first, 2),
                "ms": round(took * 1000, 1),
                **self.summary(start, start + took),
            }
            for start, took in long
        ]

    def fleet_waits(self) -> Counter[str]:
        """The fleet's waits over every sample ('CPU' left out)."""
        waits: Counter[str] = Counter()
        for sample in self.samples:
            waits.update(w for _, name, _, w, _ in sample.backends if name == FLEET and w != "CPU")
        return waits

    def lock_wait_samples(self) -> int:
        """The samples in which a statement of the fleet waited for a table's lock."""
        return sum(
            any(name == FLEET and w == "Lock:relation" for _, name, _, w, _ in s.backends)
            for s in self.samples
        )

    def steps(self) -> list[tuple[float, float, str]]:
        """The statements the migration ran, as (first seen, last seen, label) in the order seen."""
        seen: dict[str, list[float]] = {}
        for sample in self.samples:
            for _, name, kind, _, query in sample.backends:
                if name == MIGRATOR and kind == "client backend":
                    span = seen.setdefault(label(query), [sample.at, sample.at])
                    span[1] = sample.at
        first = self.samples[0].at if self.samples else 0.0
        return [(round(a - first, 2), round(b - first, 2), name) for name, (a, b) in seen.items()]
