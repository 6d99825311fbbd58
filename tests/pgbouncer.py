"""A PgBouncer of the tests' own, in front of the shared server: its own process, port and config.

``start_pgbouncer(tmp_path, mode)`` runs Debian's ``pgbouncer`` (``scripts/ensure-pgbouncer.sh``
installs it) with ``pool_mode`` ``mode``, trust authentication, and every database of the tests'
server (``CONVEYOR_TEST_DSN``) behind it; ``Bouncer.dsn`` connects through it. The packaged service
is never used. PgBouncer refuses to run as root: then it switches to the ``postgres`` system user
(``-u``) after reading its config, and logs to stderr (a file of ours it could no longer open).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest

from tests.conftest import DSN
from tests.faults.cluster import free_port
from tests.helpers import poll_sync

SERVER = (urlsplit(DSN).hostname or "127.0.0.1", urlsplit(DSN).port or 5432)


def pgbouncer_binary() -> str | None:
    found = shutil.which("pgbouncer")
    if found is None and os.access("/usr/sbin/pgbouncer", os.X_OK):
        found = "/usr/sbin/pgbouncer"
    return found


@dataclass(frozen=True)
class Bouncer:
    port: int
    mode: str
    process: subprocess.Popen[bytes]

    def dsn(self, database: str = "test") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"


@contextmanager
def start_pgbouncer(directory: Path, mode: str, *, pool_size: int = 8) -> Iterator[Bouncer]:
    """A running pgbouncer in ``mode`` ("transaction" or "session"), stopped afterwards. Skips the
    test, saying why, when pgbouncer is not installed or cannot start."""
    binary = pgbouncer_binary()
    if binary is None:
        pytest.skip("pgbouncer is not installed (scripts/ensure-pgbouncer.sh installs Debian's)")
    port = free_port()
    users = directory / "users.txt"
    users.write_text('"postgres" ""\n')
    config = directory / f"pgbouncer-{mode}.ini"
    host, server_port = SERVER
    config.write_text(
        "[databases]\n"
        f"* = host={host} port={server_port}\n"
        "[pgbouncer]\n"
        f"listen_addr = 127.0.0.1\nlisten_port = {port}\nunix_socket_dir =\n"
        f"auth_type = trust\nauth_file = {users}\n"
        f"pool_mode = {mode}\ndefault_pool_size = {pool_size}\nmax_client_conn = 500\n"
        "logfile =\npidfile =\nserver_lifetime = 3600\nserver_idle_timeout = 15\n"
    )
    command = [binary, str(config)]
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("pgbouncer refuses to run as root and there is no postgres user to run it as")
        command[1:1] = ["-u", "postgres"]
    log = (directory / f"pgbouncer-{mode}.log").open("wb")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:

        def answers() -> bool:
            try:
                with psycopg.connect(
                    f"postgresql://postgres@127.0.0.1:{port}/test", connect_timeout=1, autocommit=True
                ) as conn:
                    conn.execute("SELECT 1")
            except psycopg.OperationalError:
                return False
            return True

        try:
            poll_sync(
                lambda: answers() or process.poll() is not None, timeout=10, what="pgbouncer", every=0.05
            )
            started = process.poll() is None
        except AssertionError:
            started = False
        if not started:
            log.flush()
            output = (directory / f"pgbouncer-{mode}.log").read_text(errors="replace")
            pytest.skip(f"pgbouncer did not start: {output[-500:]}")
        yield Bouncer(port, mode, process)
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
