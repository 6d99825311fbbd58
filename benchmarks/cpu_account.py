"""Where a drain's CPU goes: the database server's processes and the node's own, per job.

A ratio against the SQL floor says how far a drain is from it, not why. On a machine where the
server and the node share the same few cores, the drain can go no faster than those cores can do
the work of both: ``cores / (server CPU per job + node CPU per job)`` jobs per second, whatever the
overlap. ``ServerCpu`` reads the server's CPU time from ``/proc`` (utime + stime of the postmaster
and every process it started, plus what its exited children used, ``cutime + cstime``), so it works
only when the server runs on this machine and this user may read its processes; otherwise it says
so and the figures that need it are left out.
"""

from __future__ import annotations

import os
import resource
import time
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

TICKS = os.sysconf("SC_CLK_TCK")


def _stat_fields(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command (which may hold spaces), or None if gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2 :].split()


@dataclass(frozen=True, slots=True)
class ServerCpu:
    """The CPU seconds used so far by a local PostgreSQL server's processes."""

    postmaster: int

    @classmethod
    async def find(cls, dsn: str) -> ServerCpu | None:
        """The server behind ``dsn`` if its processes can be read here (a backend's parent is the
        postmaster), else None."""
        try:
            async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
                cur = await conn.execute("SELECT pg_backend_pid()")
                row = await cur.fetchone()
                # Read while the connection is open: its backend exits with it.
                fields = _stat_fields(row[0]) if row else None
        except psycopg.Error:
            return None
        if fields is None:
            return None
        postmaster = int(fields[1])  # ppid
        return cls(postmaster) if _stat_fields(postmaster) is not None else None

    def seconds(self) -> float:
        """utime + stime of the postmaster and its live children, plus its reaped children's."""
        fields = _stat_fields(self.postmaster)
        if fields is None:
            return 0.0
        # fields[11..14] are utime, stime, cutime, cstime (stat fields 14-17)
        total = sum(int(v) for v in fields[11:15])
        for child in _children_of(self.postmaster):
            child_fields = _stat_fields(child)
            if child_fields is not None:
                total += int(child_fields[11]) + int(child_fields[12])
        return total / TICKS


def _children_of(pid: int) -> list[int]:
    """The processes ``pid`` started that still run: the kernel's list when it keeps one (one
    file, where scanning all of /proc costs milliseconds), else a scan."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        pass
    children = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (fields := _stat_fields(int(entry.name))) and int(fields[1]) == pid:
            children.append(int(entry.name))
    return children


@dataclass(slots=True)
class CpuWindow:
    """CPU used between ``start`` and ``stop``: this process, its exited children (pgbench), the
    server (when readable), and the wall time."""

    server: ServerCpu | None
    wall: float = 0.0
    own: float = 0.0
    children: float = 0.0
    server_seconds: float | None = None
    _marks: tuple[float, float, float, float | None] = field(default=(0.0, 0.0, 0.0, None), repr=False)

    def start(self) -> None:
        self._marks = (time.perf_counter(), time.process_time(), _children_cpu(), self._server_now())

    def stop(self) -> None:
        wall, own, children, server = self._marks
        self.wall = time.perf_counter() - wall
        self.own = time.process_time() - own
        self.children = _children_cpu() - children
        now = self._server_now()
        self.server_seconds = None if server is None or now is None else now - server

    def _server_now(self) -> float | None:
        return self.server.seconds() if self.server is not None else None


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime
