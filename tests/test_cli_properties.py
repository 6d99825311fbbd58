"""Property: whatever arguments reach the job and queue commands, each ends with exit 0 (it did
something), 1 (one ``Error:`` line) or 2 (a usage error), never a traceback, and never writes to a
database it was not asked to change (issue 10: CLI arguments in the property suite)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conveyor import Conveyor, JobRequest
from conveyor.cli import main as cli

COMMANDS = ("jobs", "cancel", "retry", "delete", "pause", "resume", "scale", "queues", "stop", "prune")
#: Tokens a user (or a script gone wrong) may type: ids, names, options, junk.
tokens = st.one_of(
    st.sampled_from(
        [
            "1",
            "2",
            "0",
            "-1",
            "99999999999999999999",
            "1.5",
            "nan",
            "x",
            "",
            " ",
            "*",
            "mail",
            "a" * 300,
            "--json",
            "--state",
            "executing",
            "bogus",
            "--queue",
            "--limit",
            "-5",
            "--worker",
            "--before-id",
            "--max-age",
            "--max-rows",
            "--dry-run",
            "7d",
            "--node",
            "--all",
            "\x00",
            "é",
            "--",
            "-",
        ]
    ),
    st.text(max_size=12),
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
)


@pytest.fixture(scope="module")
def database(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("cli-props") / "conveyor.db"
    app = Conveyor(f"sqlite:///{path}")
    app.install_sync()
    app.enqueue_many_sync([JobRequest("tests.nowhere.Job", args={"n": n}) for n in range(5)])
    app.close_sync()
    return path


def rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as conn:
        return conn.execute("SELECT id, state, attempt FROM oban_jobs ORDER BY id").fetchall()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(COMMANDS), arguments=st.lists(tokens, max_size=5))
def test_any_arguments_end_in_a_clear_outcome(database: Path, command: str, arguments: list[str]) -> None:
    before = rows(database)
    result = CliRunner().invoke(cli, [command, "--dsn", f"sqlite:///{database}", *arguments])
    assert result.exit_code in (0, 1, 2), (result.exit_code, result.output)
    # A clean exit or click's own SystemExit: no exception escaped the command.
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    assert "Traceback" not in result.output
    if result.exit_code == 1:
        assert [line for line in result.output.splitlines() if line.startswith("Error:")], result.output
    if command in ("jobs", "queues", "prune") or result.exit_code != 0:  # prune: no job is final
        assert rows(database) == before  # reading, or refusing, changes nothing
