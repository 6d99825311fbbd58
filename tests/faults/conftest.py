"""Fixtures of the fault tests: one throwaway PostgreSQL cluster for the session (never the shared
server), up at the start of every test whatever the last one did to it, and a schema per test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.faults.cluster import PgCluster, find_bin_dir
from tests.faults.nodes import install


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[PgCluster]:
    """A cluster of our own: initdb on a free port, fsync off, trust auth; removed at the end."""
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip("fault tests need PostgreSQL's server binaries (initdb, pg_ctl): none found on PATH")
    cluster = PgCluster(bin_dir)
    try:
        cluster.create()
        cluster.start()
        yield cluster
    finally:
        cluster.remove()


@pytest.fixture
def cluster(pg_cluster: PgCluster) -> Iterator[PgCluster]:
    """The session's cluster, running; restarted after a test that left it down."""
    pg_cluster.ensure_running()
    yield pg_cluster
    pg_cluster.ensure_running()


@pytest.fixture
def fault_prefix(cluster: PgCluster) -> Iterator[str]:
    """A fresh Conveyor schema on the fault cluster, dropped afterwards."""
    name = f"faults_{uuid.uuid4().hex[:10]}"
    install(cluster.dsn, name)
    yield name
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE'.encode())


@pytest.fixture
def run_log(tmp_path: Path) -> Path:
    """The file the jobs append their start and end lines to."""
    return tmp_path / "runs.log"
