"""Run Conveyor benchmarks: ``python benchmarks/run.py SCENARIO [SCENARIO...] [options]``.

Each scenario runs on a schema of its own, installed first and dropped afterwards, and prints a
table (or, with ``--json``, exactly one JSON object per line). ``all`` runs every scenario.

To add a scenario write ``async def my_scenario(settings: Settings) -> Figures`` (in a module of
this folder; ``common.py`` has the helpers) and add it (``"module:function"``) to ``SCENARIOS``
below. A scenario that runs several variants (``drain`` at two concurrencies) returns a list: one
table or JSON line each.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import sys
import traceback
from collections.abc import Sequence

from common import (
    DEFAULT_DSN,
    DEFAULT_MARIADB_URL,
    Figures,
    Scenario,
    Settings,
    print_json,
    print_rows,
    print_table,
)

#: Every scenario, by the name the command line uses, as MODULE:FUNCTION of this folder: a run
#: imports only the modules of the scenarios it runs (all of them, the dashboard's web stack and the
#: CLI among them, cost 0.3 s of CPU before the first job). Order is the order ``all`` runs them in.
SCENARIOS: dict[str, str] = {
    "insert-bulk": "insert:insert_bulk",
    "insert-copy": "insert_copy:insert_copy",
    "insert-single": "insert:insert_single",
    "insert-unique": "insert:insert_unique",
    "insert-unique-bulk": "insert:insert_unique_bulk",
    "insert-asyncpg": "insert:insert_asyncpg",
    "enqueue-one": "enqueue_one:enqueue_one",
    "drain": "drain:drain",
    "drain-floor": "floor:drain_floor",
    "commit-modes": "commit_modes:commit_modes",
    "node-cost": "node_cost:node_cost",
    "latency": "latency:latency",
    "engines": "engines:engines",
    "idle": "idle:idle",
    "cpu": "cpu:cpu",
    "cpu-cold": "cpu_cold:cpu_cold",
    "cpu-user": "cpu_user:cpu_user",
    "drain-history": "drain:drain_history",
    "large-tables": "tables:large_tables",
    "migrate-live": "migrate_live:migrate_live",
    "drain-global": "drain:drain_global",
    "drain-nodes": "nodes:drain_nodes",
    "rate-limit": "fleet_limits:rate_limit",
    "rate-limit-tenants": "fleet_limits:rate_limit_tenants",
    "fetch-overhead": "fleet_limits:fetch_overhead",
    "workflow-fanout": "workflow_fanout:workflow_fanout",
    "relay": "relay:relay",
    "priority-aging": "priority_aging:priority_aging",
    "wait-many": "relay:wait_many",
    "stats": "stats:stats",
    "stats-write-cost": "stats:stats_write_cost",
    "telemetry": "telemetry_cost:telemetry",
    "dashboard": "dashboard:dashboard",
    "memory": "memory:memory",
    "soak": "memory:soak",
}
#: Scenarios ``all`` leaves out: they run for as long as they are told (``make bench-guards``).
NOT_IN_ALL = ("soak",)
#: Scenarios that measure the current tree against a base commit with ``--base`` (``paired.py``).
PAIRED = ("enqueue-one", "node-cost")
#: Engines the scenarios can run on (``common.fresh_app`` opens them).
ENGINES = ("postgres", "sqlite", "mariadb")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenarios", nargs="+", metavar="SCENARIO", help=f"all, {', '.join(SCENARIOS)}")
    parser.add_argument("--engine", choices=ENGINES, default="postgres")
    parser.add_argument("--dsn", default=DEFAULT_DSN, help="PostgreSQL URL (default: %(default)s)")
    parser.add_argument(
        "--mariadb-url",
        default=DEFAULT_MARIADB_URL,
        help="MariaDB/MySQL URL of --engine mariadb and engines (default: %(default)s)",
    )
    parser.add_argument("--jobs", type=int, default=None, help="jobs per scenario (default: its own)")
    parser.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="concurrent tasks, or a node's queue limit (default: the scenario's own)",
    )
    parser.add_argument("--job-ms", type=float, default=None, help="cpu: milliseconds of work per job")
    parser.add_argument(
        "--history",
        type=int,
        default=None,
        help="drain-history, stats, large-tables, migrate-live: completed jobs beforehand",
    )
    parser.add_argument("--minutes", type=float, default=None, help="soak: minutes to run (default 30)")
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="rounds of the scenarios that alternate variants (drain-nodes, insert-copy, drain-floor, "
        "cpu-cold, cpu-user, commit-modes, telemetry, enqueue-one, drain-global, workflow-fanout, "
        "engines, insert-unique, insert-unique-bulk), and of node-cost",
    )
    parser.add_argument(
        "--base",
        default=None,
        metavar="COMMIT",
        help=f"{', '.join(PAIRED)}: paired rounds against COMMIT's sources (paired.py)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per scenario per line")
    args = parser.parse_args(argv)
    names: list[str] = []
    for name in args.scenarios:
        chosen = [s for s in SCENARIOS if s not in NOT_IN_ALL] if name == "all" else [name]
        for one in chosen:
            if one not in SCENARIOS:
                parser.error(f"unknown scenario {one!r}; choose from all, {', '.join(SCENARIOS)}")
            if one not in names:
                names.append(one)
    args.scenarios = names
    if args.jobs is not None and args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.concurrency is not None and args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    if args.job_ms is not None and args.job_ms <= 0:
        parser.error("--job-ms must be positive")
    if args.history is not None and args.history < 0:
        parser.error("--history must be at least 0")
    if args.minutes is not None and args.minutes <= 0:
        parser.error("--minutes must be positive")
    if args.rounds is not None and args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if args.base is not None and any(name not in PAIRED for name in names):
        parser.error(f"--base applies to {', '.join(PAIRED)} only")
    return args


def scenario(name: str) -> Scenario:
    module, _, function = SCENARIOS[name].partition(":")
    found: Scenario = getattr(importlib.import_module(module), function)
    return found


def run_scenario(name: str, settings: Settings) -> list[Figures]:
    result = asyncio.run(scenario(name)(settings))
    variants = result if isinstance(result, list) else [result]
    return [{"scenario": name, "engine": settings.engine, **figures} for figures in variants]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = Settings(
        engine=args.engine,
        dsn=args.dsn,
        mariadb_url=args.mariadb_url,
        jobs=args.jobs,
        concurrency=args.concurrency,
        job_ms=args.job_ms,
        history=args.history,
        minutes=args.minutes,
        rounds=args.rounds,
        base=args.base,
    )
    failed = 0
    for name in args.scenarios:
        try:
            variants = run_scenario(name, settings)
        except Exception:
            failed += 1
            print(f"scenario {name} failed:", file=sys.stderr)
            traceback.print_exc()
            continue
        if not args.json and len(variants) > 1 and all("row" in figures for figures in variants):
            print_rows(variants)  # one table, a line per row (``engines``)
        for figures in variants:
            if args.json:
                print_json(figures)
            elif "row" not in figures or len(variants) == 1:
                print_table(figures)
            # A guard's limit (the memory scenarios): the figures are shown, then the failure.
            if figures.get("exceeded"):
                failed += 1
                print(f"scenario {name}: LIMIT EXCEEDED: {figures['exceeded']}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
