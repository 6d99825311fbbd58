"""``conveyor prune`` as a user runs it, on both engines: the configured rules,
the options that replace them, ``--dry-run``, confirmation, ``--json``, the progress display, and one
clear error line for each mistake. The command runs in this process (``conveyor_inline``), except
with ``--app``, which imports the user's module: that runs the installed script, a process of its own."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TypeVar

import orjson
import pytest

from conveyor import JobFilter, JobState
from conveyor.engine.base import Engine
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.sqlite import SqliteEngine
from tests.conformance.contract import put
from tests.conftest import DSN
from tests.test_cli_errors import Run, assert_one_line_error, conveyor, conveyor_inline

T = TypeVar("T")
RULES = """
prune_max_age = 86400

[[prune_rules]]
states = ["discarded"]
max_age = "30d"
"""


@dataclass
class Target:
    """An installed database, the CLI options that reach it, and a way to act on it directly."""

    make_engine: Callable[[], Engine]
    options: list[str]
    cwd: Path

    def run(self, *args: str, stdin: str = "", env: dict[str, str] | None = None) -> Run:
        return conveyor_inline("prune", *args, *self.options, cwd=self.cwd, stdin=stdin, env=env)

    def ended(self, jobs: list[tuple[JobState, float, dict[str, str]]]) -> list[int]:
        """Jobs in these states that ended so many days ago (live states: made now)."""

        async def make(engine: Engine) -> list[int]:
            now = datetime.now(UTC)
            return [await put(engine, s, now=now - timedelta(days=d), **o) for s, d, o in jobs]

        return self._with_engine(make)

    def remaining(self) -> set[int]:
        async def ids(engine: Engine) -> set[int]:
            return {j.id for j in await engine.list_jobs(JobFilter())}

        return self._with_engine(ids)

    def _with_engine(self, action: Callable[[Engine], Awaitable[T]]) -> T:
        async def main() -> T:
            engine = self.make_engine()
            await engine.open()
            try:
                await engine.install()
                return await action(engine)
            finally:
                await engine.close()

        return asyncio.run(main())


TargetT = TypeVar("TargetT", bound=Target)


def make_target(kind: type[TargetT], engine: str, prefix: str, tmp_path: Path) -> TargetT:
    """A ``kind`` of target on ``engine`` (postgres: in schema ``prefix``; sqlite: a file in ``tmp_path``)."""
    if engine == "postgres":
        return kind(lambda: PostgresEngine(DSN, prefix=prefix), ["--dsn", DSN, "--prefix", prefix], tmp_path)
    path = tmp_path / "cli.db"
    return kind(lambda: SqliteEngine(path), ["--dsn", f"sqlite:///{path}"], tmp_path)


@pytest.fixture(params=["postgres", "sqlite"])
def target(request: pytest.FixtureRequest, prefix: str, tmp_path: Path) -> Iterator[Target]:
    yield make_target(Target, request.param, prefix, tmp_path)


def test_dry_run_then_prune_by_the_configured_rules(target: Target) -> None:
    (target.cwd / "conveyor.toml").write_text(RULES, "utf-8")
    ids = target.ended(
        [
            (JobState.COMPLETED, 2, {}),  # past the default day: goes
            (JobState.COMPLETED, 0.1, {}),
            (JobState.DISCARDED, 2, {}),  # the rule keeps discarded jobs 30 days
            (JobState.DISCARDED, 40, {}),  # goes
            (JobState.AVAILABLE, 90, {}),  # live: never
        ]
    )
    dry = target.run("--dry-run")
    assert dry.code == 0 and dry.out.strip() == "would delete 2 finished jobs (completed 1, discarded 1)", dry
    as_json = target.run("--dry-run", "--json")
    assert orjson.loads(as_json.out) == {
        "dry_run": True,
        "count": 2,
        "completed": 1,
        "cancelled": 0,
        "discarded": 1,
    }
    assert target.remaining() == set(ids)
    done = target.run("--yes", "--json")
    assert done.code == 0 and orjson.loads(done.out)["count"] == 2, done
    assert target.remaining() == {ids[1], ids[2], ids[4]}
    again = target.run()
    assert again.code == 0 and again.out.strip() == "nothing to prune"


def test_options_replace_the_rules_and_select_what_goes(target: Target) -> None:
    (target.cwd / "conveyor.toml").write_text(RULES, "utf-8")
    ids = target.ended(
        [
            (JobState.DISCARDED, 10, {}),
            (JobState.DISCARDED, 3, {}),
            (JobState.COMPLETED, 10, {}),
            (JobState.COMPLETED, 10, {"queue": "mail"}),
            (JobState.CANCELLED, 1, {"queue": "mail"}),
            (JobState.CANCELLED, 0.5, {"queue": "mail"}),
            (JobState.COMPLETED, 0.1, {"worker": "app.jobs.Report"}),
        ]
    )
    by_age = target.run("--max-age", "7d", "--state", "discarded", "--yes")
    assert by_age.out.strip() == "deleted 1 finished jobs (discarded 1)", by_age
    by_rows = target.run("--queue", "mail", "--max-rows", "1", "--yes", "--json")
    assert orjson.loads(by_rows.out) | {"dry_run": None} == {
        "dry_run": None,
        "count": 2,
        "completed": 1,
        "cancelled": 1,
        "discarded": 0,
    }
    by_worker = target.run("--worker", "app.jobs.Report", "--max-age", "0", "--yes", "--json")
    assert orjson.loads(by_worker.out)["completed"] == 1
    assert target.remaining() == {ids[1], ids[2], ids[5]}


def test_it_asks_before_deleting(target: Target) -> None:
    ids = target.ended([(JobState.COMPLETED, 3, {}), (JobState.CANCELLED, 3, {})])
    refused = target.run("--max-age", "1d", stdin="n\n")
    assert refused.code == 1 and "Delete 2 finished jobs (completed 1, cancelled 1)? [y/N]" in refused.out
    assert target.remaining() == set(ids)
    agreed = target.run("--max-age", "1d", stdin="y\n")
    assert agreed.code == 0 and agreed.out.strip().endswith(
        "deleted 2 finished jobs (completed 1, cancelled 1)"
    )
    assert target.remaining() == set()


def test_large_deletions_show_progress_in_a_terminal(target: Target) -> None:
    target.ended([(JobState.COMPLETED, 3, {}) for _ in range(7)])
    terminal = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "CONVEYOR_PRUNE_LIMIT": "2"}
    shown = target.run("--max-age", "1d", "--yes", env=terminal)
    assert shown.code == 0 and shown.out.strip() == "deleted 7 finished jobs (completed 7)", shown
    assert "pruning" in shown.err and "\x1b[" in shown.err  # drawn (and then cleared) on stderr
    target.ended([(JobState.COMPLETED, 3, {}) for _ in range(7)])
    piped = target.run("--max-age", "1d", "--yes", env={"CONVEYOR_PRUNE_LIMIT": "2"})
    assert piped.err == "" and piped.out.strip() == "deleted 7 finished jobs (completed 7)"


def test_mistakes_get_one_clear_line(target: Target) -> None:
    ids = target.ended([(JobState.COMPLETED, 3, {})])
    usage = [
        (["--max-age", "7x"], "invalid --max-age '7x'"),
        (["--max-age", "-1d"], "invalid --max-age"),
        (["--max-rows", "-1"], "--max-rows"),
        (["--state", "available", "--max-age", "1d"], "'available' is not one of"),
        (["--queue", "mail"], "give --max-age, --max-rows or both"),
        (["--queue", "bad queue", "--max-age", "1d"], "invalid --queue 'bad queue'"),
        (["--max-age", "1d", "--json"], "--json never asks: add --yes"),
        (["--config", "missing.toml"], "does not exist"),
    ]
    for args, fragment in usage:
        assert_one_line_error(target.run(*args), fragment, code=2)
    (target.cwd / "conveyor.toml").write_text('[[prune_rules]]\nstates = ["executing"]\n', "utf-8")
    assert_one_line_error(target.run("--dry-run"), "prune_rules[0].states", "not a final state", code=2)
    assert target.remaining() == set(ids)


RULES_IN_PYTHON = """
from datetime import timedelta

from conveyor import Conveyor, PruneRule

# The database comes from $CONVEYOR_DATABASE_URL (and $CONVEYOR_PREFIX); the retention from here.
app = Conveyor(
    prune_max_age=3600,
    prune_rules=[PruneRule(states=("discarded",), max_age=timedelta(days=30))],
)
"""


def test_app_option_prunes_by_the_rules_the_app_sets_in_python(target: Target) -> None:
    (target.cwd / "user_rules.py").write_text(RULES_IN_PYTHON, "utf-8")
    env = {"CONVEYOR_DATABASE_URL": target.options[1]}
    if "--prefix" in target.options:
        env["CONVEYOR_PREFIX"] = target.options[target.options.index("--prefix") + 1]
    ids = target.ended(
        [
            (JobState.COMPLETED, 0.5, {}),  # past the app's hour (the default day would keep it): goes
            (JobState.COMPLETED, 0.01, {}),
            (JobState.DISCARDED, 2, {}),  # the app's rule keeps discarded jobs 30 days
            (JobState.DISCARDED, 40, {}),  # goes
        ]
    )
    app = ["--app", "user_rules:app"]
    dry = conveyor("prune", *app, "--dry-run", cwd=target.cwd, env=env)
    assert dry.code == 0 and dry.out.strip() == "would delete 2 finished jobs (completed 1, discarded 1)", dry
    done = conveyor("prune", *app, "--yes", cwd=target.cwd, env=env)
    assert done.code == 0 and done.out.strip() == "deleted 2 finished jobs (completed 1, discarded 1)", done
    assert target.remaining() == {ids[1], ids[2]}
    clash = conveyor("prune", *app, *target.options, "--yes", cwd=target.cwd, env=env)
    assert_one_line_error(clash, "--dsn cannot be used with --app", code=2)
    missing = conveyor("prune", "--app", "user_rules:nothing", "--yes", cwd=target.cwd, env=env)
    assert_one_line_error(missing, "module 'user_rules' has no attribute 'nothing'")
