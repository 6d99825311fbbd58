"""The CPU a pytest selection costs: the test processes and the database servers, whatever the load.

On a machine of few cores the suite's wall time is bounded below by its CPU divided by the cores, and
CPU time, unlike wall time, does not grow when other processes share the machine. This runs
``pytest ARGS`` and reports:

- ``tests``: user + system CPU of pytest, its xdist workers and everything they started (commands,
  nodes, pool workers, private PostgreSQL clusters, chromium), daemonized or not: the run is put in
  a cpuacct cgroup of its own when this user may make one, else only the waited-for children
  (``RUSAGE_CHILDREN``) are counted and the report says so;
- ``postgres``: the PostgreSQL server behind ``CONVEYOR_TEST_DSN`` (postmaster, its live processes
  and what its exited backends used), before and after;
- ``mariadb``: the MariaDB server behind ``CONVEYOR_MARIADB_URL`` (one process, all its threads);
- ``wall``, and ``others_cores``: the cores everything else on the machine kept busy meanwhile
  (other sessions' tests), which the wall time depends on and the CPU figures do not.

The servers are shared: other sessions' work on them counts too. ``--private postgres|mariadb|both``
starts servers of this run's own (temporary directories, free ports, the machine's servers'
settings) and points the tests at them, so their figures are this run's alone. ``--profile FILE``
also loads ``suite_cpu_plugin`` (CPU per test phase, see there); with ``--servers N`` (N = the
xdist workers) each worker gets a PostgreSQL of its own, so the server's CPU of every test phase
is known even when the workers run side by side. ``--pg-stats FILE`` (private servers only) loads
pg_stat_statements in them and writes what the run asked of them to FILE (``suite_pg_stats``), and
the profile's lines then hold each phase's new sessions too.

    python benchmarks/suite_cpu.py [--private both] [--servers 3 --profile FILE] [--json FILE] -- PYTEST_ARGS
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import suite_pg_stats
from cpu_account import TICKS, ServerCpu, _stat_fields

ROOT = Path(__file__).resolve().parent.parent
PYTEST = [sys.executable, "-m", "pytest"]
CGROUPS = Path("/sys/fs/cgroup/cpuacct")
DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
DEFAULT_MARIADB = "mariadb://root@127.0.0.1:3306/test"


def _process_seconds(pid: int) -> float | None:
    fields = _stat_fields(pid)
    return None if fields is None else (int(fields[11]) + int(fields[12])) / TICKS


def _mariadb_pid(url: str) -> int | None:
    """The server process behind ``url`` when it runs here (its pid file is readable), else None."""
    sys.path.insert(0, str(ROOT / "src"))
    import pymysql

    from conveyor.engine.mysql.address import parse

    a = parse(url)
    try:
        conn = pymysql.connect(host=a.host, port=a.port, user=a.user, password=a.password, connect_timeout=2)
    except pymysql.Error:
        return None
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT @@pid_file")
            (pid_file,) = cursor.fetchone()
    finally:
        conn.close()
    with contextlib.suppress(OSError, ValueError):
        return int(Path(pid_file).read_text().split()[0])
    return None


class Group:
    """A cpuacct cgroup the pytest run is started in (its descendants stay in it, reparented or not)."""

    def __init__(self) -> None:
        self.path = CGROUPS / f"suite_cpu.{os.getpid()}"
        self.path.mkdir()

    def join(self) -> None:  # in the child, before exec
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def seconds(self) -> tuple[float, float]:
        user = int((self.path / "cpuacct.usage_user").read_text()) / 1e9
        system = int((self.path / "cpuacct.usage_sys").read_text()) / 1e9
        return user, system

    def remove(self) -> list[int]:
        """Move what is left (a leaked process) to the root group, remove this one; the leftovers."""
        left = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        for pid in left:
            with contextlib.suppress(OSError):
                (CGROUPS / "cgroup.procs").write_text(str(pid))
        with contextlib.suppress(OSError):
            self.path.rmdir()
        return left


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _wait(check: Any, what: str) -> None:
    for _ in range(300):
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(0.1)
    raise SystemExit(f"{what} did not come up")


@contextlib.contextmanager
def private_postgres(count: int, settings: dict[str, str] | None = None) -> Iterator[dict[str, str]]:
    """PostgreSQL servers of this run's own (the machine's server's settings): one, or with
    ``count`` > 1 one per xdist worker (``SUITE_CPU_DSNS``, which ``suite_cpu_plugin`` hands out),
    so that each worker's tests, one at a time, are alone on theirs. The environment for them."""
    sys.path.insert(0, str(ROOT))
    from tests.faults.cluster import PgCluster, find_bin_dir

    bin_dir = find_bin_dir()
    if bin_dir is None:
        raise SystemExit("--private postgres needs PostgreSQL's initdb")
    clusters: list[PgCluster] = []
    try:
        for _ in range(count):
            pg = PgCluster(bin_dir)
            clusters.append(pg)
            # The machine's server's settings where the fault clusters' differ.
            pg.create(
                {"fsync": "on", "max_connections": "100", "shared_buffers": "128MB", "autovacuum": "off"}
                | (settings or {})
            )
            pg.start()
            with psycopg.connect(pg.dsn, autocommit=True) as conn:
                conn.execute("CREATE DATABASE test")
        dsns = [pg.dsn.rsplit("/", 1)[0] + "/test" for pg in clusters]
        yield {"CONVEYOR_TEST_DSN": dsns[0], "SUITE_CPU_DSNS": " ".join(dsns)}
    finally:
        for pg in clusters:
            pg.remove()


@contextlib.contextmanager
def private_mariadb() -> Iterator[dict[str, str]]:
    """A MariaDB of this run's own (the machine's server's settings); the environment for it."""
    import pymysql

    root = Path(tempfile.mkdtemp(prefix="suite_cpu_mariadb_"))
    shutil.chown(root, "mysql", "mysql")
    port = _free_port()
    common = ["--no-defaults", f"--datadir={root / 'data'}", "--user=mysql"]
    subprocess.run(
        ["mariadb-install-db", *common, "--skip-test-db", "--auth-root-authentication-method=normal"],
        check=True,
        capture_output=True,
    )
    server = subprocess.Popen(
        [
            "mariadbd",
            *common,
            f"--port={port}",
            "--bind-address=127.0.0.1",
            f"--socket={root / 'sock'}",
            f"--pid-file={root / 'pid'}",
            f"--log-error={root / 'err'}",
            "--skip-name-resolve",
            "--character-set-server=utf8mb4",
            "--collation-server=utf8mb4_general_ci",
        ]
    )
    try:
        _wait(lambda: pymysql.connect(host="127.0.0.1", port=port, user="root").close() or True, "MariaDB")
        conn = pymysql.connect(host="127.0.0.1", port=port, user="root")
        with conn.cursor() as cursor:
            cursor.execute("CREATE DATABASE test")
        conn.close()
        yield {"CONVEYOR_MARIADB_URL": f"mariadb://root@127.0.0.1:{port}/test"}
    finally:
        server.terminate()
        server.wait(60)
        shutil.rmtree(root, ignore_errors=True)


def measure(pytest_args: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run pytest with ``pytest_args`` in ``env``; its figures."""
    dsns = env.get("SUITE_CPU_DSNS", env.get("CONVEYOR_TEST_DSN", DEFAULT_DSN)).split()
    pgs = [server for server in map(_pg_server, dsns) if server is not None]
    mariadb_pid = _mariadb_pid(env.get("CONVEYOR_MARIADB_URL", DEFAULT_MARIADB))
    try:
        group: Group | None = Group()
    except OSError:
        group = None
    before_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    pg_before = sum(pg.seconds() for pg in pgs)
    my_before = _process_seconds(mariadb_pid) if mariadb_pid else None
    machine_before = _machine_seconds()
    start = time.perf_counter()
    done = subprocess.run(
        [*PYTEST, *pytest_args], cwd=ROOT, env=env, preexec_fn=group.join if group else None, check=False
    )
    wall = time.perf_counter() - start
    machine = _machine_seconds() - machine_before
    after_children = resource.getrusage(resource.RUSAGE_CHILDREN)
    figures: dict[str, Any] = {"args": " ".join(pytest_args), "exit": done.returncode, "wall": round(wall, 1)}
    if group is not None:
        user, system = group.seconds()
        figures["leaked_pids"] = group.remove()
        figures["counted"] = "cgroup"
    else:
        user = after_children.ru_utime - before_children.ru_utime
        system = after_children.ru_stime - before_children.ru_stime
        figures["counted"] = "waited-for children only"
    figures |= {"tests_user": round(user, 1), "tests_sys": round(system, 1)}
    figures["postgres"] = round(sum(pg.seconds() for pg in pgs) - pg_before, 1) if pgs else None
    my_after = _process_seconds(mariadb_pid) if mariadb_pid else None
    figures["mariadb"] = round(my_after - my_before, 1) if my_after is not None and my_before else None
    figures["total"] = round(user + system + (figures["postgres"] or 0) + (figures["mariadb"] or 0), 1)
    # What everything else on the machine used meanwhile, in cores: the wall time's context.
    figures["others_cores"] = round((machine - figures["total"]) / wall, 2)
    return figures


def _machine_seconds() -> float:
    """CPU seconds every process of the machine used since boot (the first line of /proc/stat)."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[:8])
    return (user + nice + system + irq + softirq + steal) / TICKS


def _pg_server(dsn: str) -> ServerCpu | None:
    import asyncio

    return asyncio.run(ServerCpu.find(dsn))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--private",
        choices=("postgres", "mariadb", "both"),
        help="start servers of this run's own (the whole suite: mariadb only, some tests name 5432)",
    )
    parser.add_argument(
        "--servers", type=int, default=1, help="private PostgreSQL servers: one per xdist worker (-n N)"
    )
    parser.add_argument("--profile", metavar="FILE", help="CPU per test phase, as JSON lines, to FILE")
    parser.add_argument("--json", metavar="FILE", help="append the figures as a JSON line to FILE")
    parser.add_argument(
        "--pg-stats", metavar="FILE", help="with --private postgres: the statements and DDL it ran, to FILE"
    )
    parser.add_argument("pytest_args", nargs=argparse.REMAINDER)
    options = parser.parse_args()
    args = options.pytest_args[1:] if options.pytest_args[:1] == ["--"] else options.pytest_args
    env = dict(os.environ)
    if options.profile:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "benchmarks"), env.get("PYTHONPATH")]))
        env["SUITE_CPU_PROFILE"] = str(Path(options.profile).resolve())
        args = ["-p", "suite_cpu_plugin", *args]
    if options.servers > 1 and not (options.profile and options.private in ("postgres", "both")):
        parser.error("--servers N needs --private postgres|both and --profile (its plugin hands them out)")
    if options.pg_stats and options.private not in ("postgres", "both"):
        parser.error("--pg-stats needs --private postgres|both (never on the shared server)")
    with contextlib.ExitStack() as stack:
        if options.private in ("postgres", "both"):
            extra = suite_pg_stats.SETTINGS if options.pg_stats else None
            env |= stack.enter_context(private_postgres(options.servers, extra))
        if options.private in ("mariadb", "both"):
            env |= stack.enter_context(private_mariadb())
        dsns = env.get("SUITE_CPU_DSNS", "").split()
        for dsn in dsns if options.pg_stats else ():
            suite_pg_stats.prepare(dsn)
            env["SUITE_CPU_PG_STATS"] = "1"
        figures = measure(args, env)
        if options.pg_stats:
            Path(options.pg_stats).write_text(suite_pg_stats.report(dsns))
    text = json.dumps(figures)
    print(text)
    if options.json:
        with open(options.json, "a") as out:
            out.write(text + "\n")


if __name__ == "__main__":
    main()
