"""The fault harness itself: the throwaway cluster survives what the fault tests do to it, and a
fleet without faults gives the clean report every fault test is measured against."""

from __future__ import annotations

from pathlib import Path

import psycopg

from tests.faults.cluster import PgCluster
from tests.faults.nodes import enqueue, fleet, report, wait_completed


def test_the_cluster_is_our_own_and_comes_back_from_every_kind_of_stop(cluster: PgCluster) -> None:
    assert cluster.port != 5432
    with psycopg.connect(cluster.dsn, autocommit=True) as conn:
        assert conn.execute("SHOW fsync").fetchone() == ("off",)
        data_directory = conn.execute("SHOW data_directory").fetchone()
    assert data_directory is not None and Path(data_directory[0]) == cluster.data
    for stop in (cluster.stop, cluster.crash, cluster.kill):
        stop()
        assert not cluster.running
        cluster.start()
        assert cluster.running
    cluster.kill()  # left down: the fixture starts it again for the next test


def test_a_fleet_without_faults_runs_every_job_once(
    cluster: PgCluster, fault_prefix: str, tmp_path: Path, run_log: Path
) -> None:
    # 200 jobs of 50 ms at 5 at a time keep one node busy 2 s: longer than the other takes to start,
    # so both take part (at 10 ms, one node that started first could run them all alone).
    ids = enqueue(cluster.dsn, fault_prefix, run_log, [0.05] * 200)
    with fleet(cluster.dsn, fault_prefix, tmp_path) as nodes:
        nodes.start()
        nodes.start()
        wait_completed(cluster.dsn, fault_prefix, ids, timeout=30, what=nodes.describe())
        assert nodes.alive(), nodes.describe()
    result = report(cluster.dsn, fault_prefix, run_log, ids, nodes.kills)
    assert result.lost == [] and result.concurrent == [] and result.started_twice == [], result.summary()
    assert len(result.runs) == len(ids) and all(r.end is not None for r in result.runs)
    assert len({r.pid for r in result.runs}) == 2  # both nodes took part
