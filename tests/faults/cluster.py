"""A throwaway PostgreSQL cluster for fault tests: its own data directory and port, never the shared
server, so a test may stop it, crash it or starve it of connections.

The cluster is made with ``initdb`` (found on ``PATH``, in ``$CONVEYOR_PG_BIN`` or under
``/usr/lib/postgresql/<version>/bin``), runs with ``fsync=off`` and trust authentication on
127.0.0.1 and a Unix socket in its own directory, and is removed afterwards. PostgreSQL refuses to
run as root: when the tests run as root, every server command runs as the ``postgres`` system user
(``runuser``), who then owns the directory.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import psycopg

#: The settings every fault cluster starts with (appended to postgresql.conf).
SETTINGS = {
    "listen_addresses": "'127.0.0.1'",
    # Only the machine crashing loses what fsync=off did not flush; the tests crash the server, not
    # the machine. synchronous_commit stays on: a crash must never lose a commit a node was told of.
    "fsync": "off",
    "max_connections": "60",
    "shared_buffers": "32MB",
    "logging_collector": "off",
    "log_min_messages": "warning",
}


def find_bin_dir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, or None when PostgreSQL is not installed."""
    candidates: list[str] = []
    if env := os.environ.get("CONVEYOR_PG_BIN"):
        candidates.append(env)
    if found := shutil.which("initdb"):
        candidates.append(str(Path(found).resolve().parent))  # through symlinks

    def version(path: str) -> float:
        with contextlib.suppress(ValueError):
            return float(Path(path).parent.name)
        return 0.0

    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=version, reverse=True)
    for candidate in candidates:
        directory = Path(candidate)
        if (directory / "initdb").is_file() and (directory / "pg_ctl").is_file():
            return directory
    return None


def free_port() -> int:
    """A TCP port nobody listens on right now (the kernel's pick; 5432 never comes out of it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


class ClusterError(RuntimeError):
    pass


class PgCluster:
    """One PostgreSQL cluster in a temporary directory: ``create``, ``start``, ``stop``, ``crash``,
    ``kill`` and ``remove``. Every method blocks until the server is in the state asked for."""

    def __init__(self, bin_dir: Path, *, port: int | None = None) -> None:
        self.bin_dir = bin_dir
        self.port = port or free_port()
        self.root = Path(tempfile.mkdtemp(prefix="conveyor-faults-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sockets"
        self.logfile = self.root / "server.log"
        # PostgreSQL will not run as root: use the postgres system user then.
        self.user: str | None = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                raise ClusterError("running as root, and no 'postgres' user to run the server") from None
            self.user = "postgres"

    @property
    def dsn(self) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def __repr__(self) -> str:
        return f"PgCluster(port={self.port}, data={str(self.data)!r})"

    # -- commands ------------------------------------------------------------------------------
    def _run(self, args: Sequence[str], *, timeout: float = 60.0, check: bool = True) -> str:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, check=False)
        if check and done.returncode != 0:
            raise ClusterError(
                f"{' '.join(command)} exited with {done.returncode}:\n{done.stdout}\n{done.stderr}\n"
                f"{self.log_tail()}"
            )
        return done.stdout + done.stderr

    def log_tail(self, chars: int = 3000) -> str:
        with contextlib.suppress(OSError):
            return "--- server log:\n" + self.logfile.read_text(errors="replace")[-chars:]
        return ""

    def create(self, settings: dict[str, str] | None = None) -> None:
        """initdb with trust authentication, then write the settings (``SETTINGS`` plus ``settings``)."""
        self.sockets.mkdir()
        if self.user is not None:
            entry = pwd.getpwnam(self.user)
            for path in (self.root, self.sockets):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self._run(
            ["initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"],
            timeout=120,
        )
        lines = [f"{key} = {value}" for key, value in (SETTINGS | (settings or {})).items()]
        lines += [f"port = {self.port}", f"unix_socket_directories = '{self.sockets}'"]
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write("\n# conveyor fault tests\n" + "\n".join(lines) + "\n")

    def start(self, timeout: float = 30.0) -> None:
        """Start the server and wait until it accepts connections (after crash recovery, if any)."""
        self._run(
            ["pg_ctl", "-D", str(self.data), "-l", str(self.logfile), "-w", "-t", str(int(timeout)), "start"],
            timeout=timeout + 10,
        )

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m <mode>``: ``fast`` (clean), or ``immediate`` (a crash: every backend is
        told to quit at once, no checkpoint; the next start recovers)."""
        self._run(["pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop"], timeout=60)

    def crash(self) -> None:
        """Stop like a crash: ``pg_ctl stop -m immediate``."""
        self.stop("immediate")

    def postmaster_pid(self) -> int | None:
        """The running postmaster's pid (first line of postmaster.pid), or None when it is down."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def kill(self, timeout: float = 10.0) -> None:
        """SIGKILL the postmaster and every one of its processes, as a machine losing power would.
        Returns once all of them are gone."""
        pid = self.postmaster_pid()
        if pid is None:
            return
        lockfile = self.data / "postmaster.pid"
        segment: int | None = None
        with contextlib.suppress(OSError, IndexError, ValueError):
            # Line 7: the key and id of the System V segment only the postmaster and its children use.
            segment = int(lockfile.read_text().split("\n")[6].split()[1])
        children = _children(pid)
        for victim in [pid, *children]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(victim, signal.SIGKILL)
        deadline = time.monotonic() + timeout
        for victim in [pid, *children]:
            while _alive(victim):
                if time.monotonic() > deadline:
                    raise ClusterError(f"process {victim} of the killed server is still alive")
                time.sleep(0.01)
        # Dead, but maybe not reaped yet: a zombie postmaster makes the next start refuse to run ("lock
        # file already exists", for the data directory and the socket). Every process is gone, so the
        # lock files and the segment can go too.
        lockfile.unlink(missing_ok=True)
        for stale in self.sockets.glob(f".s.PGSQL.{self.port}*"):
            stale.unlink(missing_ok=True)
        if segment is not None:
            subprocess.run(["ipcrm", "-m", str(segment)], capture_output=True, check=False)

    @property
    def running(self) -> bool:
        if self.postmaster_pid() is None:
            return False
        try:
            with psycopg.connect(self.dsn, connect_timeout=2):
                return True
        except psycopg.OperationalError:
            return False

    def ensure_running(self) -> None:
        """Start the server if a test left it down (or crashed)."""
        if not self.running:
            if self.postmaster_pid() is not None:
                self.kill()
            self.start()

    def remove(self) -> None:
        """Stop the server (immediately, nothing in it matters) and delete the directory."""
        if self.postmaster_pid() is not None:
            try:
                self.stop("immediate")
            except (ClusterError, subprocess.TimeoutExpired):
                self.kill()
        shutil.rmtree(self.root, ignore_errors=True)


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (the postmaster's backends and auxiliary processes)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = (entry / "stat").read_text()
            # "pid (comm) state ppid ...": comm may hold spaces, so split after the last ')'.
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, reaped by init soon, counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
