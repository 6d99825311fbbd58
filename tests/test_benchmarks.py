"""The benchmark script runs and reports, so it cannot rot between benchmark runs.

Each run is a process of its own, forked from a server that imported Conveyor and its drivers once
(``tests.forked``); the check of what a run imports starts a new interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from tests import forked
from tests.conformance import mariadb

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("insert-bulk", "insert-single")
UNIQUE_SCENARIOS = ("insert-unique", "insert-unique-bulk")


def run_script(*arguments: str) -> subprocess.CompletedProcess[str]:
    """``python benchmarks/run.py ARGUMENTS``, forked."""
    command = ["benchmarks/run.py", *arguments]
    return forked.run_python(command, cwd=ROOT, env=dict(os.environ), timeout=300)


def run_benchmarks(dsn: str, *arguments: str) -> list[dict[str, Any]]:
    """``benchmarks/run.py ARGUMENTS --json --dsn DSN``: the JSON object of each line it printed."""
    done = run_script(*arguments, "--json", "--dsn", dsn)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def run_in_benchmarks(code: str, *arguments: str) -> subprocess.CompletedProcess[str]:
    """``python -c CODE ARGUMENTS`` in the benchmarks' folder (their modules import each other), forked."""
    return forked.run_python(
        ["-c", code, *arguments], cwd=ROOT / "benchmarks", env=dict(os.environ), timeout=60
    )


def test_benchmarks_print_one_json_object_per_scenario(dsn: str) -> None:
    done = run_script(*SCENARIOS, "--jobs", "500", "--json", "--dsn", dsn)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == len(SCENARIOS), done.stdout
    for scenario, line in zip(SCENARIOS, lines, strict=True):
        figures = json.loads(line)
        assert isinstance(figures, dict)
        assert figures["scenario"] == scenario
        assert figures["engine"] == "postgres"
        assert figures["jobs"] == 500
        assert figures["jobs_per_s"] > 0
    single = json.loads(lines[1])
    assert 0 < single["p50_ms"] <= single["p95_ms"] <= single["p99_ms"]


RUNTIME_SCENARIOS = ("drain", "latency", "cpu", "drain-history")


def test_runtime_benchmarks_run_at_tiny_sizes_and_print_json(dsn: str) -> None:
    """Each runtime scenario at a size that takes seconds, not minutes: the figures are meaningless,
    but every scenario runs its node, measures, and reports. (The latency's jobs, and as many before
    them to warm up, are 50 ms apart: eight, not twenty, save more than a second.)"""
    tiny = ["--jobs", "8", "--job-ms", "5", "--history", "2000"]
    done = run_script(*RUNTIME_SCENARIOS, *tiny, "--json", "--dsn", dsn)
    assert done.returncode == 0, done.stderr
    results = [json.loads(line) for line in done.stdout.splitlines()]
    # drain runs at two concurrencies when none is given: one object each.
    assert [(r["scenario"], r.get("concurrency")) for r in results] == [
        ("drain", 20),
        ("drain", 100),
        ("latency", 10),
        ("cpu", 4),
        ("drain-history", 100),
    ]
    for figures in results:
        assert figures["engine"] == "postgres"
        assert figures["jobs"] == 8
        assert figures["leadership"] is False
    drain_20, drain_100, latency, cpu, history = results
    assert drain_20["jobs_per_s"] > 0 and drain_100["jobs_per_s"] > 0
    assert 0 < latency["p50_ms"] <= latency["p95_ms"] <= latency["p99_ms"]
    assert cpu["processes"] == 2 and cpu["speedup"] > 0 and cpu["sequential_s"] > 0
    assert history["history"] == 2000 and history["jobs_per_s"] > 0 and history["ratio"] > 0


def test_unique_insert_benchmarks_report_ratios_against_plain_inserts(dsn: str) -> None:
    done = run_script(*UNIQUE_SCENARIOS, "--jobs", "200", "--rounds", "1", "--json", "--dsn", dsn)
    assert done.returncode == 0, done.stderr
    single, bulk = (json.loads(line) for line in done.stdout.splitlines())
    for figures in (single, bulk):
        assert figures["rounds"] == 1 and figures["ratio"] > 0
        assert figures["unique_range"][0] <= figures["jobs_per_s"] <= figures["unique_range"][1]
    assert bulk["conflicts"] == 100  # half of the 200 were duplicates


def test_insert_asyncpg_reports_the_ratio_to_psycopg(dsn: str) -> None:
    (figures,) = run_benchmarks(dsn, "insert-asyncpg", "--jobs", "300")
    assert figures["scenario"] == "insert-asyncpg" and figures["rounds"] == 4 and figures["jobs"] == 300
    assert figures["asyncpg_range"][0] <= figures["jobs_per_s"] <= figures["asyncpg_range"][1]
    assert figures["ratio"] > 0


def test_drain_global_reports_the_ratio_to_a_plain_drain(dsn: str) -> None:
    (figures,) = run_benchmarks(dsn, "drain-global", "--jobs", "50", "--rounds", "2")
    assert figures["scenario"] == "drain-global" and figures["rounds"] == 2
    assert figures["capped_range"][0] <= figures["jobs_per_s"] <= figures["capped_range"][1]
    assert figures["ratio"] > 0


def test_fetch_overhead_reports_each_kind_of_claim_against_plain(dsn: str) -> None:
    (figures,) = run_benchmarks(dsn, "fetch-overhead", "--jobs", "20")
    assert figures["scenario"] == "fetch-overhead" and figures["calls"] == 20
    for kind in ("plain", "global", "partitioned"):
        assert 0 < figures[f"{kind}_median_ms"] <= figures[f"{kind}_p95_ms"]
    assert figures["global_ratio"] > 0 and figures["partitioned_ratio"] > 0


def test_workflow_fanout_reports_the_ratio_and_the_enqueue_rate(dsn: str) -> None:
    (figures,) = run_benchmarks(dsn, "workflow-fanout", "--jobs", "30", "--rounds", "2")
    assert figures["scenario"] == "workflow-fanout" and figures["steps"] == 30 and figures["rounds"] == 2
    assert figures["ratio"] > 0 and figures["enqueue_steps_per_s"] > 0


def test_relay_reports_round_trips_against_the_floor(dsn: str) -> None:
    (figures,) = run_benchmarks(dsn, "relay", "--jobs", "20")
    assert figures["scenario"] == "relay" and figures["relays"] == 20
    assert (
        0 < figures["p50_ms"] <= figures["p95_ms"] and 0 < figures["floor_p50_ms"] <= figures["floor_p95_ms"]
    )


def test_stats_reports_each_call_and_what_it_returned(dsn: str) -> None:
    (figures,) = run_benchmarks(dsn, "stats", "--history", "4800", "--jobs", "300")
    assert figures["scenario"] == "stats" and figures["history"] == 4800 and figures["available"] == 300
    assert figures["count_all_completed_returned"] == 4800
    assert figures["count_available_in_queue_returned"] == 100  # a third of the available jobs
    assert figures["estimate_available_in_queue_returned"] == {"count": 100, "estimated": False}
    assert figures["estimate_all_completed_returned"]["count"] > 0
    assert figures["queue_counts_returned"]["jobs"] == 4800 + 300 + 1000 + 15_000
    # Small, so exact; the oldest jobs (18 s apart) leave the day's window as the rounds go by.
    assert 4790 <= figures["job_stats_day_by_hour_returned"]["completed"] <= 4800
    low, high = figures["queue_counts_range_ms"]
    assert 0 < low <= figures["queue_counts_ms"] <= high


def test_large_tables_reports_each_cost_against_the_empty_table(dsn: str) -> None:
    (figures,) = run_benchmarks(dsn, "large-tables", "--history", "3000", "--jobs", "2000")
    assert (figures["history"], figures["available"], figures["pruned_total"]) == (3000, 2000, 3000)
    assert figures["completions_per_s_during_prune"] > 0
    assert figures["fetch_ack_ratio"] > 0 and figures["fetch_ack_big_median_ms"] > 0
    assert figures["stage_big_median_s"] > 0 and figures["stage_empty_median_s"] > 0
    assert figures["prune_rows_per_s"] > 0 and set(figures["targets_met"]) == {
        "fetch_ack_ratio",
        "stage_big",
        "prune_rows_per_s",
        "prune_outpaces_completions",
    }


def test_stats_write_cost_reports_the_ratio_with_and_without_the_index(dsn: str) -> None:
    (figures,) = run_benchmarks(dsn, "stats-write-cost", "--jobs", "200")
    assert figures["scenario"] == "stats-write-cost" and figures["jobs"] == 200 and figures["rounds"] == 5
    assert figures["with_index_jobs_per_s"] > 0 and figures["without_index_jobs_per_s"] > 0
    assert figures["ratio"] > 0


def test_telemetry_reports_each_variant_against_a_plain_drain(dsn: str) -> None:
    (figures,) = run_benchmarks(dsn, "telemetry", "--jobs", "30", "--rounds", "1")
    assert figures["scenario"] == "telemetry" and figures["jobs"] == 30 and figures["rounds"] == 1
    for variant in ("plain", "handler", "log_text", "log_json"):
        low, high = figures[f"{variant}_range"]
        assert 0 < low <= figures[f"{variant}_jobs_per_s"] <= high
        assert figures[f"{variant}_us_per_job"] > 0
    for variant in ("handler", "log_text", "log_json"):
        assert figures[f"{variant}_ratio"] > 0 and figures[f"{variant}_paired_ratio"] > 0
        assert len(figures[f"{variant}_round_ratios"]) == 1
        # Attaching a handler or writing a line costs something per job, measurably.
        assert figures[f"{variant}_us_per_job"] > figures["plain_us_per_job"]


def test_drain_floor_reports_each_drain_against_the_sql_floor(dsn: str) -> None:
    (figures,) = run_benchmarks(dsn, "drain-floor", "--jobs", "200", "--rounds", "1")
    assert figures["jobs"] == 200 and figures["batch"] == 100 and figures["clients"] == 2
    assert figures["rounds"] == 1
    for variant in ("floor", "c100", "c20"):
        assert figures[f"{variant}_jobs_per_s"] > 0
        low, high = figures[f"{variant}_range"]
        assert low <= figures[f"{variant}_jobs_per_s"] <= high
    assert figures["c100_ratio"] > 0 and figures["c20_ratio"] > 0
    # Where the CPU went. The server runs on this machine here, so its processes can be read; /proc
    # counts in clock ticks (10 ms), which a run of 200 jobs may not fill.
    assert figures["floor_server_cpu_us_per_job"] >= 0 and figures["floor_cores_busy"] >= 0
    for level in (100, 20):
        variant = f"c{level}"
        assert figures[f"{variant}_node_cpu_us_per_job"] > 0
        assert figures[f"{variant}_server_cpu_us_per_job"] >= 0
        assert figures[f"{variant}_fetch_ms"] > 0 and 0 < figures[f"{variant}_jobs_per_fetch"] <= level
        assert figures[f"{variant}_latency_ceiling_ratio"] > 0
        assert figures.get(f"{variant}_cpu_ceiling_ratio", 1) > 0


def test_every_scenario_names_an_async_function_and_a_run_imports_only_its_own() -> None:
    code = (
        "import inspect, sys, run\n"
        "assert 'dashboard' not in sys.modules and 'telemetry_cost' not in sys.modules\n"
        "bad = [n for n in run.SCENARIOS if not inspect.iscoroutinefunction(run.scenario(n))]\n"
        "assert not bad, bad"
    )
    # What a run imports: a new interpreter's.
    command = [sys.executable, "-c", code]
    done = subprocess.run(command, cwd=ROOT / "benchmarks", capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_the_paired_sides_import_no_engine_a_base_commit_may_lack() -> None:
    """``--base`` runs this tree's side scripts on an older commit's ``conveyor``: importing one must
    not need the MySQL engine (younger than the bases the README pairs against; ``node-cost --base
    16b554c`` failed at import when ``common.py`` imported it)."""
    code = (
        "import sys\n"
        "sys.modules['conveyor.engine.mysql'] = None  # as on a commit without it\n"
        "import enqueue_sides, node_cost\n"
    )
    done = run_in_benchmarks(code)  # a None entry fails the import even where it was preloaded
    assert done.returncode == 0, done.stderr


def test_the_floor_script_is_the_engine_fetch_and_ack_of_this_checkout() -> None:
    """drain_floor.pgbench is rendered from the engine's statements: a change to them must be
    rendered again (python benchmarks/floor.py --write), or the floor measures other SQL."""
    done = run_in_benchmarks("import floor; floor.check_script()")
    assert done.returncode == 0, done.stderr


STATEMENT_TIMES_CHECK = """
import asyncio, sys
import statement_times as st

fetch = "WITH claimed AS (SELECT id FROM t FOR UPDATE SKIP LOCKED) SELECT 1"
ack = "WITH acks AS (SELECT * FROM jsonb_to_recordset($1)) UPDATE t SET state = 'completed'"
before = {1: (fetch, 10, 5.0), 2: (ack, 4, 8.0), 3: ("SELECT 1", 7, 1.0)}
after = {1: (fetch, 12, 6.0), 2: (ack, 5, 10.5), 3: ("SELECT 1", 7, 1.0), 4: ("SELECT 2", 2, 0.5)}
times = st.StatementTimes()
times.add(before, after, 200)
assert times.figures() == {
    "ack": {"calls_per_100_jobs": 0.5, "mean_exec_ms": 2.5, "exec_us_per_job": 12.5},
    "fetch": {"calls_per_100_jobs": 1.0, "mean_exec_ms": 0.5, "exec_us_per_job": 5.0},
    "other": {"calls_per_100_jobs": 1.0, "mean_exec_ms": 0.25, "exec_us_per_job": 2.5},
}, times.figures()
reading = asyncio.run(st.read(sys.argv[1]))
assert reading is None or isinstance(reading, dict), reading
print("loaded" if reading is not None else "absent")
"""


def test_statement_times_sum_each_kind_over_the_window_and_tell_when_absent(dsn: str) -> None:
    """drain-floor's server time per kind of statement: the difference of two readings of
    pg_stat_statements, by kind; a server without the extension gives None, not an error."""
    done = run_in_benchmarks(STATEMENT_TIMES_CHECK, dsn)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() in ("loaded", "absent")


# insert-copy, the memory guards and soak run in three processes (three tests), which the suite's
# workers run side by side.
def test_insert_copy_runs_and_reports(dsn: str) -> None:
    """``insert-copy`` measures both sides."""
    (copy,) = run_benchmarks(dsn, "insert-copy", "--jobs", "1000", "--rounds", "1")
    assert copy["scenario"] == "insert-copy" and copy["jobs"] == 1000 and copy["rounds"] == 1
    assert copy["jobs_per_s"] > 0 and copy["copy_jobs_per_s"] > 0 and copy["ratio"] > 0


def test_the_memory_guards_run_and_report(dsn: str) -> None:
    """The guards measure, check their limits (exit 0: none exceeded at these sizes) and report
    each check."""
    node, enqueue = run_benchmarks(dsn, "memory", "--jobs", "1000", "--rounds", "1")
    assert node["check"] == "node-c1000" and node["most_executing_rows"] >= 900
    assert 0 < node["peak_rss_mb"] <= node["limit_mb"]
    assert enqueue["check"] == "enqueue-1m" and enqueue["jobs"] == 1000
    assert enqueue["growth_mb"] <= enqueue["limit_mb"] and 0 < enqueue["ids_mb"] < 0.1


def test_the_soak_guard_runs_and_reports(dsn: str) -> None:
    # 1.2 s runs the guard, samples the node and reports; its RSS windows mean something over minutes.
    (soak,) = run_benchmarks(dsn, "soak", "--jobs", "1000", "--minutes", "0.02", "--rounds", "1")
    assert soak["scenario"] == "soak" and soak["jobs_enqueued"] > 0 and "exceeded" not in soak


def test_cpu_cold_reports_the_speedup_from_node_start(dsn: str) -> None:
    (figures,) = run_benchmarks(dsn, "cpu-cold", "--jobs", "4", "--job-ms", "5", "--rounds", "1")
    assert figures["scenario"] == "cpu-cold" and figures["jobs"] == 4 and figures["rounds"] == 1
    assert figures["concurrency"] == 10 and figures["pool_size"] >= 1
    for variant in ("serial", "node", "multiprocessing"):
        low, high = figures[f"{variant}_range"]
        assert 0 < low <= figures[f"{variant}_s"] <= high
    assert figures["speedup"] > 0 and len(figures["round_speedups"]) == 1
    assert figures["multiprocessing_speedup"] > 0 and figures["node_vs_multiprocessing"] > 0


def test_cpu_user_compares_a_node_from_start_with_a_cold_plain_pool(dsn: str) -> None:
    (figures,) = run_benchmarks(dsn, "cpu-user", "--jobs", "4", "--job-ms", "5", "--rounds", "1")
    assert figures["scenario"] == "cpu-user" and figures["jobs"] == 4 and figures["rounds"] == 1
    assert figures["concurrency"] == 10 and figures["pool_size"] >= 1
    for variant in ("serial", "node", "pool"):
        low, high = figures[f"{variant}_range"]
        assert 0 < low <= figures[f"{variant}_s"] <= high
    assert figures["node_vs_pool"] > 0 and len(figures["round_node_vs_pool"]) == 1
    assert figures["node_speedup"] > 0 and figures["pool_speedup"] > 0
    assert "exceeded" not in figures  # a one-round smoke run measures nothing


def test_drain_nodes_runs_every_job_once_with_one_node_and_with_four(dsn: str) -> None:
    (figures,) = run_benchmarks(dsn, "drain-nodes", "--jobs", "400", "--concurrency", "8", "--rounds", "1")
    assert figures["scenario"] == "drain-nodes" and figures["jobs"] == 400 and figures["nodes"] == 4
    assert figures["rounds"] == 1
    assert figures["one_node_range"][0] <= figures["one_node_jobs_per_s"] <= figures["one_node_range"][1]
    assert figures["nodes_range"][0] <= figures["nodes_jobs_per_s"] <= figures["nodes_range"][1]
    assert figures["ratio"] > 0
    assert figures["double_runs"] == 0 and figures["missing"] == 0 and figures["not_completed_once"] == 0
    # Where the CPU went, per job: the node processes' (counted in ticks, so possibly 0 on a run this
    # small) and the local server's.
    for variant in ("one_node", "nodes"):
        assert figures[f"{variant}_cpu_us_per_job"] >= 0 and figures[f"{variant}_server_cpu_us_per_job"] >= 0


def test_node_cost_reports_the_cpu_a_node_spends_per_job_without_the_database(dsn: str) -> None:
    low, high = run_benchmarks(dsn, "node-cost", "--jobs", "500")
    assert (low["concurrency"], high["concurrency"]) == (100, 20)
    for figures in (low, high):
        assert figures["jobs"] == 500 and figures["rounds"] == 5
        first, last = figures["cpu_us_range"]
        # Every job is decoded, run and acked: that costs microseconds, not nothing and not seconds.
        assert 0 < first <= figures["cpu_us_per_job"] <= last < 10_000


def test_node_cost_paired_with_a_base_commit_reports_current_against_base(dsn: str) -> None:
    """``--base HEAD``: a stand-in drain and a real one on each tree's process in turn; ``vs_base`` is
    current over base. One round: each of its real drains installs a schema of its own."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    tree = Path(tempfile.gettempdir()) / f"conveyor-base-{head.stdout.strip()[:12]}"
    made = not tree.exists()
    try:
        lines = run_benchmarks(dsn, "node-cost", "--jobs", "300", "--rounds", "1", "--base", "HEAD")
    finally:
        if made:  # the worktree this test made, not one a run keeps for the next
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
    assert [(f["variant"], f["concurrency"]) for f in lines] == [
        (variant, level) for variant in ("stand-in", "drain") for level in (100, 20)
    ]
    for figures in lines:
        assert figures["base"] == "HEAD" and figures["rounds"] == 1 and "exceeded" not in figures
        for name in ("cpu_us", "base_cpu_us"):
            first, last = figures[f"{name}_range"]
            assert 0 < first <= figures[f"{name}_per_job"] <= last < 10_000
        low, high = figures["vs_base_range"]
        assert 0 < low <= figures["vs_base"] <= high


def test_commit_modes_reports_both_modes_of_the_hot_path(dsn: str) -> None:
    # Four jobs: each mode's latency times them and as many before, 50 ms apart.
    (figures,) = run_benchmarks(dsn, "commit-modes", "--jobs", "4", "--rounds", "1")
    assert figures["scenario"] == "commit-modes" and figures["jobs"] == 4 and figures["rounds"] == 1
    for name in ("c20", "c100", "p50_ms", "p95_ms"):
        for mode in ("on", "off"):
            low, high = figures[f"{name}_{mode}_range"]
            assert 0 < low <= figures[f"{name}_{mode}"] <= high
    assert figures["c20_off_over_on"] > 0 and figures["c100_off_over_on"] > 0
    # Where the server waits for its disk at commit, the wait is measurable; never negative by much.
    assert figures["commit_wait_ms"] > -1 and "p50_saved_ms" in figures


def test_enqueue_one_reports_each_mode_and_variant_against_the_bare_driver(dsn: str) -> None:
    """One round of 10 jobs per side on each engine: a line per mode and variant, each ratio the
    app's speed over the driver's, and unique and lock against plain."""
    for engine in ("postgres", "sqlite"):
        lines = run_benchmarks(dsn, "enqueue-one", "--jobs", "10", "--engine", engine)
        assert [(f["mode"], f["variant"]) for f in lines] == [
            (mode, variant) for mode in ("async", "sync") for variant in ("plain", "unique", "lock")
        ]
        for figures in lines:
            assert figures["engine"] == engine and figures["rounds"] == 1 and figures["jobs"] == 10
            expected = figures["jobs_per_s"] / figures["driver_jobs_per_s"]
            assert abs(figures["ratio"] - expected) < 0.01 * expected  # of unrounded speeds
            assert "exceeded" not in figures
            assert ("vs_plain" in figures) == (figures["variant"] != "plain")


def test_enqueue_one_paired_with_a_base_commit_reports_current_against_base(dsn: str) -> None:
    """``--base HEAD``: two processes, the current tree and a worktree of HEAD, each block asked of
    both in turn; a line per mode and variant with ``vs_base`` the current's speed over the base's."""
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    tree = Path(tempfile.gettempdir()) / f"conveyor-base-{head.stdout.strip()[:12]}"
    made = not tree.exists()
    try:
        lines = run_benchmarks(dsn, "enqueue-one", "--jobs", "10", "--engine", "sqlite", "--base", "HEAD")
    finally:
        if made:  # the worktree this test made, not one a run keeps for the next
            subprocess.run(["git", "worktree", "remove", "--force", str(tree)], cwd=ROOT, check=False)
    assert [(f["mode"], f["variant"]) for f in lines] == [
        (mode, variant) for mode in ("async", "sync") for variant in ("plain", "unique", "lock")
    ]
    for figures in lines:
        # vs_base is the median of the rounds' own ratios, not the ratio of the two medians.
        low, high = figures["vs_base_range"]
        assert figures["base"] == "HEAD" and 0 < low <= figures["vs_base"] <= high
        assert figures["ratio"] > 0 and figures["base_ratio"] > 0 and "exceeded" not in figures


needs_mariadb = pytest.mark.skipif(mariadb.UNREACHABLE is not None, reason=str(mariadb.UNREACHABLE))


@needs_mariadb
def test_insert_drain_and_latency_run_on_mariadb(dsn: str) -> None:
    """``--engine mariadb``: each scenario on a database of its own on the server, at tiny sizes."""
    tiny = ["--jobs", "8", "--engine", "mariadb", "--mariadb-url", mariadb.URL]
    results = run_benchmarks(dsn, "insert-bulk", "insert-single", "drain", "latency", *tiny)
    assert [(r["scenario"], r.get("concurrency")) for r in results] == [
        ("insert-bulk", None),
        ("insert-single", 1),
        ("drain", 20),
        ("drain", 100),
        ("latency", 10),
    ]
    for figures in results:
        assert figures["engine"] == "mariadb" and figures["jobs"] == 8
    bulk, single, drain_20, drain_100, latency = results
    assert bulk["jobs_per_s"] > 0 and single["jobs_per_s"] > 0
    assert drain_20["jobs_per_s"] > 0 and drain_100["jobs_per_s"] > 0
    assert 0 < latency["p50_ms"] <= latency["p95_ms"] <= latency["max_ms"]
    assert 0 < latency["floor_p50_ms"] <= latency["floor_max_ms"]


FRESH_MARIADB_CHECK = """
import asyncio, sys
import pymysql
from common import Settings, fresh_app, job_requests
from conveyor.engine.mysql.address import parse

def databases():
    a = parse(sys.argv[1])
    conn = pymysql.connect(host=a.host, port=a.port, user=a.user, password=a.password)
    with conn.cursor() as cursor:
        cursor.execute("SHOW DATABASES")
        found = {row[0] for row in cursor.fetchall()}
    conn.close()
    return found

async def main():
    async with fresh_app(Settings(engine="mariadb", mariadb_url=sys.argv[1])) as app:
        name = (await app.engine()).database
        assert name.startswith("conveyor_bench_") and name in databases(), name
        assert len(await app.enqueue_many(job_requests(3))) == 3
        assert len(await app.list_jobs()) == 3  # an empty schema of its own before
    assert name not in databases(), name

asyncio.run(main())
"""


@needs_mariadb
def test_a_mariadb_run_gets_a_database_of_its_own_dropped_afterwards() -> None:
    done = run_in_benchmarks(FRESH_MARIADB_CHECK, mariadb.URL)
    assert done.returncode == 0, done.stderr


ENGINE_ROWS = ["bulk insert", "single insert", "drain c=20", "drain c=100", "pickup p50"]


@needs_mariadb
def test_engines_reports_every_figure_on_each_engine_and_mariadb_against_its_floor(dsn: str) -> None:
    """One round at tiny sizes: a row per figure, each with the three engines' medians and ranges,
    MariaDB's floor, and MariaDB's speed over the floor's (for the pickup, the floor's p50 over
    MariaDB's)."""
    rows = run_benchmarks(dsn, "engines", "--jobs", "20", "--rounds", "1", "--mariadb-url", mariadb.URL)
    assert [row["row"] for row in rows] == ENGINE_ROWS
    for row in rows:
        assert row["scenario"] == "engines" and row["rounds"] == 1 and row["jobs"] == 20
        for side in ("postgres", "sqlite", "mariadb", "mariadb_floor"):
            low, high = row[f"{side}_range"]
            assert 0 < low <= row[side] <= high  # one round: the range is the figure itself
        if row["unit"] == "ms":
            expected = row["mariadb_floor"] / row["mariadb"]
        else:
            assert row["unit"] == "jobs/s"
            expected = row["mariadb"] / row["mariadb_floor"]
        assert abs(row["vs_floor"] - expected) < 0.01 * expected + 0.001  # of unrounded figures
        assert row["mariadb_deadlocks"] >= 0 and row["floor_deadlocks"] >= 0
        assert "exceeded" not in row  # a one-round run guards nothing


ENGINES_GUARD_CHECK = """
import engines
from common import print_rows

def samples(values):
    return [(value, 0) for value in values]

rounds = engines.ROUNDS
measured = {("c20", side): samples([1000.0] * rounds) for side in engines.SIDES}
# MariaDB at a tenth of its floor in every round but one, which is at the guard.
measured["c20", "mariadb"] = samples([100.0] * (rounds - 1) + [1000.0 * engines.GUARDS["c20"]])
row = engines._row(measured, "c20", "drain c=20", "jobs/s", 50, rounds)
assert "exceeded" not in row and row["vs_floor"] == 0.1, row
measured["c20", "mariadb"] = samples([100.0] * rounds)
row = engines._row(measured, "c20", "drain c=20", "jobs/s", 50, rounds)
assert row["exceeded"].startswith("drain c=20: best round's vs_floor 0.100"), row
# Fewer rounds than a full run: no guard.
short = {key: values[:1] for key, values in measured.items()}
assert "exceeded" not in engines._row(short, "c20", "drain c=20", "jobs/s", 50, 1)
print_rows([{"scenario": "engines", **row}])

# A node's retries of a deadlock's victim are counted from what its acker and producer log.
import asyncio, logging

async def logs_deadlocks():
    acker = logging.getLogger("conveyor._runtime.acker")
    victim = RuntimeError(1213, "Deadlock found when trying to get lock")
    acker.warning("writing %d acks failed (%s); retrying in %.2fs", 20, victim, 0.05)
    try:
        raise victim
    except RuntimeError:
        logging.getLogger("conveyor._runtime.service").exception("%s failed; retrying", "producer")
    acker.warning("writing %d acks failed (%s); retrying in %.2fs", 20, TimeoutError(), 0.05)
    return 1.0

assert asyncio.run(engines._on_engine(logs_deadlocks())) == (1.0, 2)
"""


def test_the_engines_guard_fails_a_full_run_whose_best_round_is_under_its_floor_ratio() -> None:
    """The guard reads the best round's ratio, and the table shows each figure as median [range]."""
    done = run_in_benchmarks(ENGINES_GUARD_CHECK)
    assert done.returncode == 0, done.stderr
    assert "drain c=20" in done.stdout and "1,000.0 [1,000.0-1,000.0]" in done.stdout
