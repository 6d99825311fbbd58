"""The server's execution time per kind of statement over a window, from pg_stat_statements.

``cpu_account.py`` says how much CPU the server spent per job; this says on which statements, and
how long each took to execute on the server (``total_exec_time``: from the executor's start to its
end, without the round trip, the parse or the commit's wait for the disk). It needs the extension
loaded by the server (``shared_preload_libraries = 'pg_stat_statements'``) and created in the
benchmark's database; without either, ``StatementTimes.read`` returns None and the figures that
need it are left out.

Each fresh schema of a run has its own tables, so its statements have query ids of their own: a
reading before and one after a window, subtracted, give exactly the window's statements, whoever
else runs meanwhile in other schemas aside (their ids are different too).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import psycopg

#: Statement kinds, told apart by what only their text holds (the floor's pgbench script runs the
#: engine's own fetch and ack, so both sides fall in the same kinds).
KINDS = (
    ("fetch", "SKIP LOCKED"),
    ("ack", "jsonb_to_recordset"),
)
#: (query text, calls, total execution time in ms) per query id.
Reading = dict[int, tuple[str, int, float]]


def kind_of(query: str) -> str:
    for kind, marker in KINDS:
        if marker in query:
            return kind
    return "other"


async def read(dsn: str) -> Reading | None:
    """Every statement pg_stat_statements holds for ``dsn``'s database, or None without it."""
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        try:
            cur = await conn.execute(
                "SELECT s.queryid, s.query, s.calls, s.total_exec_time FROM pg_stat_statements AS s"
                " JOIN pg_database AS d ON d.oid = s.dbid WHERE d.datname = current_database()"
            )
        except (psycopg.errors.UndefinedTable, psycopg.errors.ObjectNotInPrerequisiteState):
            return None  # not created in this database, or not loaded by the server
        return {queryid: (query, calls, total) for queryid, query, calls, total in await cur.fetchall()}


@dataclass(slots=True)
class KindTotals:
    calls: int = 0
    exec_ms: float = 0.0


@dataclass(slots=True)
class StatementTimes:
    """The statements of the windows of one variant, summed by kind over its rounds."""

    jobs: int = 0
    kinds: dict[str, KindTotals] = field(default_factory=dict)

    def add(self, before: Reading, after: Reading, jobs: int) -> None:
        self.jobs += jobs
        for queryid, (query, calls, total) in after.items():
            _, calls_before, total_before = before.get(queryid, (query, 0, 0.0))
            if calls > calls_before:
                totals = self.kinds.setdefault(kind_of(query), KindTotals())
                totals.calls += calls - calls_before
                totals.exec_ms += total - total_before

    def figures(self) -> dict[str, dict[str, float]]:
        """Per kind: calls per 100 jobs, mean execution time (ms), server execution time per job (us)."""
        return {
            kind: {
                "calls_per_100_jobs": round(totals.calls * 100 / self.jobs, 2),
                "mean_exec_ms": round(totals.exec_ms / totals.calls, 3),
                "exec_us_per_job": round(totals.exec_ms * 1000 / self.jobs, 2),
            }
            for kind, totals in sorted(self.kinds.items())
            if totals.calls
        }
