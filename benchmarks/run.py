"""Run Conveyor benchmarks: ``python benchmarks/run.py SCENARIO [SCENARIO...] [options]``.

Each scenario runs on a schema of its own, installed first and dropped afterwards, and prints a
table (or, with ``--json``, exactly one JSON object per line). ``all`` runs every scenario.

To add a scenario write ``async def my_scenario(settings: Settings) -> Figures`` (in a module of
this folder; ``common.py`` has the helpers) and add it to ``SCENARIOS`` below.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import traceback
from collections.abc import Sequence

from common import DEFAULT_DSN, Figures, Scenario, Settings, print_json, print_table
from insert import insert_bulk, insert_single

#: Every scenario, by the name the command line uses. Order is the order ``all`` runs them in.
SCENARIOS: dict[str, Scenario] = {
    "insert-bulk": insert_bulk,
    "insert-single": insert_single,
}
#: Engines the scenarios can run on (``common.fresh_app`` opens them).
ENGINES = ("postgres", "sqlite")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("scenarios", nargs="+", metavar="SCENARIO", help=f"all, {', '.join(SCENARIOS)}")
    parser.add_argument("--engine", choices=ENGINES, default="postgres")
    parser.add_argument("--dsn", default=DEFAULT_DSN, help="PostgreSQL URL (default: %(default)s)")
    parser.add_argument("--jobs", type=int, default=None, help="jobs per scenario (default: its own)")
    parser.add_argument("--concurrency", type=int, default=1, help="concurrent tasks where it applies")
    parser.add_argument("--json", action="store_true", help="one JSON object per scenario per line")
    args = parser.parse_args(argv)
    names: list[str] = []
    for name in args.scenarios:
        chosen = list(SCENARIOS) if name == "all" else [name]
        for one in chosen:
            if one not in SCENARIOS:
                parser.error(f"unknown scenario {one!r}; choose from all, {', '.join(SCENARIOS)}")
            if one not in names:
                names.append(one)
    args.scenarios = names
    if args.jobs is not None and args.jobs < 1:
        parser.error("--jobs must be at least 1")
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    return args


def run_scenario(name: str, settings: Settings) -> Figures:
    figures = asyncio.run(SCENARIOS[name](settings))
    return {"scenario": name, "engine": settings.engine, **figures}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    settings = Settings(engine=args.engine, dsn=args.dsn, jobs=args.jobs, concurrency=args.concurrency)
    failed = 0
    for name in args.scenarios:
        try:
            figures = run_scenario(name, settings)
        except Exception:
            failed += 1
            print(f"scenario {name} failed:", file=sys.stderr)
            traceback.print_exc()
            continue
        if args.json:
            print_json(figures)
        else:
            print_table(figures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
