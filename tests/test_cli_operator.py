"""The operator's commands as a user runs them, on both engines: ``conveyor job``
(every field, errors with tracebacks, the decoded result), ``conveyor jobs`` with time and worker
filters, ``--wide`` and ``--count``, and ``cancel``/``retry``/``delete`` by filter with a count,
confirmation (``--yes``, declined on a terminal, refused without one) and ``--json`` shapes.

The commands run in this process (``conveyor_inline``: the same command group, arguments,
environment and working directory, without a subprocess's 0.3-0.5 s of CPU importing Python and
Conveyor); the confirmation on a terminal runs the installed script on a pty, and how the script
itself starts, fails and exits is tests/test_cli_errors.py's."""

from __future__ import annotations

import os
import pty
import re
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TypeVar
from zoneinfo import ZoneInfo

import orjson
import pytest

from conveyor import JobFilter, JobRequest, JobState, Workflow
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.fleet import CronTick
from conveyor.recorded import encode_result
from tests.conformance.contract import put
from tests.test_cli_errors import CONVEYOR, Run, assert_one_line_error, conveyor_inline
from tests.test_cli_prune import Target as CliTarget
from tests.test_cli_prune import make_target

T = TypeVar("T")
NOW = datetime.now(UTC).replace(microsecond=0)
TRACEBACK = (
    'Traceback (most recent call last):\n  File "mail.py", line 3, in send\nConnectionError: smtp down'
)


class Target(CliTarget):
    """An installed database, the CLI options that reach it, and ways to run any command and to
    place and read jobs directly."""

    def run(self, *args: str, stdin: str = "", env: dict[str, str] | None = None) -> Run:
        return conveyor_inline(*args, *self.options, cwd=self.cwd, stdin=stdin, env=env)

    def json(self, *args: str) -> Any:
        run = self.run(*args, "--json")
        assert run.code == 0, run.err
        return orjson.loads(run.out)

    def on_terminal(self, *args: str, answer: str) -> tuple[int, str]:
        """Run with a terminal as standard input, answering ``answer`` to the question."""
        leader, follower = pty.openpty()
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")}
        with subprocess.Popen(
            [CONVEYOR, *args, *self.options], cwd=self.cwd, env=env, stdin=follower, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True,
        ) as process:  # fmt: skip
            os.close(follower)
            os.write(leader, answer.encode())
            out, _ = process.communicate(timeout=60)
        os.close(leader)
        return process.returncode, out

    def put(self, state: JobState, *, hours_ago: float = 0, **options: Any) -> int:
        async def make(engine: Engine) -> int:
            return await put(engine, state, now=NOW - timedelta(hours=hours_ago), **options)

        return self.with_engine(make)

    def states(self) -> dict[int, JobState]:
        async def read(engine: Engine) -> dict[int, JobState]:
            return {j.id: j.state for j in await engine.list_jobs(JobFilter())}

        return self.with_engine(read)

    def with_engine(self, action: Callable[[Engine], Awaitable[T]]) -> T:
        return self._with_engine(action)


@pytest.fixture(params=["postgres", "sqlite"])
def target(request: pytest.FixtureRequest, prefix: str, tmp_path: Path) -> Iterator[Target]:
    yield make_target(Target, request.param, prefix, tmp_path)


def schema_of(value: Any) -> Any:
    """The keys and JSON types of a value: what the documented ``--json`` shapes promise."""
    if isinstance(value, dict):
        return {key: schema_of(item) for key, item in value.items()}
    return type(value).__name__


#: ``conveyor job ID --json``: the keys and types documented in docs/guides/cli.md (None: null allowed).
JOB_SCHEMA: dict[str, tuple[type, ...]] = {
    "id": (int,), "state": (str,), "queue": (str,), "worker": (str,), "args": (dict,), "meta": (dict,),
    "tags": (list,), "errors": (list,), "attempt": (int,), "max_attempts": (int,), "priority": (int,),
    "attempted_by": (list,), "inserted_at": (str,), "scheduled_at": (str,), "attempted_at": (str, type(None)),
    "cancelled_at": (str, type(None)), "completed_at": (str, type(None)), "discarded_at": (str, type(None)),
    "unreadable": (str, type(None)), "progress": (dict,), "signals": (list,), "recorded": (bool,),
    "result": (object,), "result_error": (str, type(None)), "workflow": (dict, type(None)),
}  # fmt: skip


def assert_job_schema(shown: dict[str, Any]) -> None:
    assert set(shown) == set(JOB_SCHEMA)
    for key, types in JOB_SCHEMA.items():
        assert isinstance(shown[key], types), (key, shown[key])


# -- conveyor job ID ---------------------------------------------------------------------------------


def _fail_with_traceback(target: Target, job_id: int) -> None:
    async def fail(engine: Engine) -> None:
        error = {"attempt": 1, "at": NOW.isoformat(), "error": TRACEBACK}
        await engine.ack_jobs([Ack(job_id, 1, JobState.RETRYABLE, schedule_in=3600, error=error)], now=NOW)

    target.with_engine(fail)


def test_job_shows_every_field_its_traceback_and_its_decoded_result(target: Target) -> None:
    failing = target.put(JobState.EXECUTING, args={"to": "ada@example.com"}, meta={"progress": {"sent": 3}})
    _fail_with_traceback(target, failing)
    result = {"recorded": True} | encode_result({"sent": 12, "ids": [1, 2]})
    recorded = target.put(JobState.AVAILABLE, meta={**result, "workflow_id": "wf-1", "name": "send"})

    run = target.run("job", str(failing))
    assert run.code == 0, run.err
    for fragment in ("retryable", "ada@example.com", '"sent": 3', "attempt 1", "ConnectionError: smtp down"):
        assert fragment in run.out, fragment
    assert 'File "mail.py", line 3, in send' in run.out

    shown = target.json("job", str(failing))
    assert_job_schema(shown)
    assert shown["state"] == "retryable" and shown["progress"] == {"sent": 3}
    assert shown["errors"][0]["error"] == TRACEBACK and shown["recorded"] is False

    run = target.run("job", str(recorded))
    assert '"sent": 12' in run.out and "wf-1 step send" in run.out
    assert result["return"] not in run.out  # decoded, never the base64
    shown = target.json("job", str(recorded))
    assert_job_schema(shown)
    assert shown["recorded"] is True and shown["result"] == {"sent": 12, "ids": [1, 2]}
    assert shown["workflow"] == {"id": "wf-1", "step": "send", "name": None}


def test_a_result_that_cannot_be_decoded_is_named_not_dumped(target: Target) -> None:
    job_id = target.put(JobState.AVAILABLE, meta={"recorded": True, "return": "g2gCYQFhAg-broken"})
    run = target.run("job", str(job_id))
    assert run.code == 0, run.err
    assert "result: not shown, the job's recorded result cannot be read" in run.out
    shown = target.json("job", str(job_id))
    assert shown["recorded"] is True and shown["result"] is None
    assert shown["result_error"].startswith("the job's recorded result cannot be read")


def test_job_refuses_an_unknown_id_in_one_line(target: Target) -> None:
    target.put(JobState.AVAILABLE)
    assert_one_line_error(target.run("job", "999999"), "999999")


# -- conveyor jobs -----------------------------------------------------------------------------------


def test_jobs_filters_by_time_ago_iso_times_and_worker_suffix(target: Target) -> None:
    old = target.put(JobState.AVAILABLE, hours_ago=30, worker="app.mail.SendEmail")
    recent = target.put(JobState.AVAILABLE, hours_ago=1, worker="app.mail.SendEmail")
    other = target.put(JobState.AVAILABLE, hours_ago=1, worker="app.mail.ResendEmail")

    def ids(*args: str) -> list[int]:
        return [j["id"] for j in target.json("jobs", *args)]

    assert ids("--scheduled-after", "2h") == [other, recent]
    assert ids("--scheduled-before", "1d") == [old]
    assert ids("--worker-suffix", "SendEmail") == [recent, old]
    iso = (NOW - timedelta(hours=2)).isoformat().replace("+00:00", "Z")
    assert ids("--scheduled-after", iso, "--worker-suffix", "mail.SendEmail") == [recent]
    assert ids("--attempted-after", "7d") == []  # never attempted: no match

    run = target.run("jobs", "--count", "--worker-suffix", "SendEmail")
    assert (run.code, run.out.strip()) == (0, "2")
    assert target.json("jobs", "--count", "--scheduled-after", "2h") == {"count": 2, "estimated": False}
    assert target.json("jobs", "--count", "--exact", "--scheduled-after", "2h") == {
        "count": 2,
        "estimated": False,
    }


def test_jobs_count_estimates_beyond_ten_thousand_matches_unless_exact(
    target: Target, request: pytest.FixtureRequest
) -> None:
    async def fill(engine: Engine) -> None:
        await engine.insert([JobRequest("app.mail.SendEmail") for _ in range(10_050)], now=NOW)

    target.with_engine(fill)
    run = target.run("jobs", "--count", "--worker-suffix", "SendEmail")
    assert run.code == 0
    if request.node.callspec.params["target"] == "postgres":  # the planner's estimate, marked
        assert run.out.startswith("~") and int(run.out.strip()[1:]) > 10_000
        assert "--exact counts every match" in run.err
        assert target.json("jobs", "--count")["estimated"] is True
    else:  # SQLite counts exactly
        assert (run.out.strip(), run.err) == ("10050", "")
    assert target.run("jobs", "--count", "--exact").out.strip() == "10050"
    assert target.json("jobs", "--count", "--exact") == {"count": 10_050, "estimated": False}


def test_jobs_wide_shows_the_attempt_columns(target: Target) -> None:
    job_id = target.put(JobState.EXECUTING, hours_ago=3)
    _fail_with_traceback(target, job_id)
    run = target.run("jobs", "--wide", "--state", "retryable")
    assert run.code == 0, run.err
    header = next(line for line in run.out.splitlines() if "attempted_at" in line)
    for column in ("priority", "errors", "attempted_by", "completed_at"):
        assert column in header
    row = next(line for line in run.out.splitlines() if line.startswith(f"│ {job_id} "))
    assert "retryable" in row and (NOW - timedelta(hours=3)).strftime("%Y-%m-%d %H:%M") in row


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["--scheduled-after", "yesterday"], "invalid --scheduled-after 'yesterday'"),
        (["--completed-before", "2024-05-01T12:00:00"], "needs a UTC offset"),
        (["--scheduled-after", "1h", "--scheduled-before", "2h"], "must be earlier than scheduled_before"),
        (["--worker-suffix", ".Send"], "invalid --worker-suffix '.Send'"),
        (["--count", "--limit", "5"], "--count counts every match: leave out --limit"),
        (["--exact"], "--exact applies to --count only"),
    ],
)
def test_bad_filters_are_one_line_usage_errors(target: Target, args: list[str], fragment: str) -> None:
    assert_one_line_error(target.run("jobs", *args), fragment, code=2)


# -- cancel, retry, delete by filter -----------------------------------------------------------------


def test_cancel_by_filter_with_yes_counts_and_acts_in_batches(target: Target) -> None:
    mail = [target.put(JobState.AVAILABLE, queue="mail") for _ in range(5)]
    done = target.put(JobState.COMPLETED, queue="mail")
    other = target.put(JobState.AVAILABLE, queue="default")
    run = target.run("cancel", "--queue", "mail", "--yes", "--batch", "2")
    assert run.code == 0, run.err
    assert "6 jobs match" in run.out and "cancelled 5 of 6 matching jobs" in run.out
    states = target.states()
    assert all(states[i] is JobState.CANCELLED for i in mail)
    assert states[done] is JobState.COMPLETED and states[other] is JobState.AVAILABLE


def test_retry_and_delete_by_filter_print_json(target: Target) -> None:
    old = target.put(JobState.DISCARDED, hours_ago=5)
    new = target.put(JobState.DISCARDED)
    shown = target.json("retry", "--state", "discarded", "--attempted-before", "2h", "--yes")
    assert shown == {"action": "retry", "matched": 1, "count": 1}
    assert target.states()[old] is JobState.AVAILABLE
    shown = target.json("delete", "--state", "discarded", "--yes")
    assert schema_of(shown) == {"action": "str", "matched": "int", "count": "int"}
    assert (shown["matched"], shown["count"]) == (1, 1)
    assert new not in target.states()


def test_retry_by_queue_leaves_a_waiting_workflow_step_waiting(target: Target) -> None:
    """b depends on a, which has not run: retrying the queue must not let b go first."""
    workflow = Workflow().add("a", JobRequest(worker="tests.w.Job", queue="flow"))
    workflow.add("b", JobRequest(worker="tests.w.Job", queue="flow"), deps=["a"])

    async def enqueue(engine: Engine) -> list[int]:
        requests, hold = workflow.requests()
        return [int(i) for i in await engine.insert(requests, hold=hold)]

    a, b = target.with_engine(enqueue)
    assert target.json("retry", "--queue", "flow", "--yes") == {"action": "retry", "matched": 2, "count": 0}
    assert target.states()[a] is JobState.AVAILABLE and target.states()[b] is JobState.SUSPENDED


def test_by_ids_keeps_its_shape(target: Target) -> None:
    job_id = target.put(JobState.AVAILABLE)
    assert target.json("cancel", str(job_id), "999") == {"cancel": [job_id], "skipped": [999]}


def test_a_declined_confirmation_changes_nothing(target: Target) -> None:
    job_id = target.put(JobState.AVAILABLE, queue="mail")
    code, out = target.on_terminal("delete", "--queue", "mail", answer="n\n")
    assert code == 1 and "1 jobs match" in out and "Aborted" in out
    assert job_id in target.states()
    code, out = target.on_terminal("delete", "--queue", "mail", answer="y\n")
    assert code == 0 and "deleted 1 of 1 matching jobs" in out, out
    assert job_id not in target.states()


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["delete", "--queue", "mail"], "standard input is not a terminal"),
        (["delete"], "give job ids or filter options, or --all"),
        (["cancel", "--all", "--queue", "mail", "--yes"], "--all acts on every job"),
        (["retry", "--state", "available", "--json"], "--json never asks: add --yes"),
        (["cancel", "--completed-after", "soon", "--yes"], "invalid --completed-after 'soon'"),
    ],
)
def test_bulk_mistakes_are_refused_in_one_line(target: Target, args: list[str], fragment: str) -> None:
    job_id = target.put(JobState.AVAILABLE, queue="mail")
    assert_one_line_error(target.run(*args), fragment, code=2)
    assert target.states()[job_id] is JobState.AVAILABLE


def test_delete_all_needs_all(target: Target) -> None:
    ids = [target.put(JobState.AVAILABLE), target.put(JobState.COMPLETED)]
    shown = target.json("delete", "--all", "--yes")
    assert shown == {"action": "delete", "matched": 2, "count": 2}
    assert not set(ids) & set(target.states())


# -- conveyor stats ----------------------------------------------------------------------------------

STATS_QUEUE_SCHEMA = {
    "queue": "str", "counts": {s.value: "int" for s in JobState}, "estimated_states": "list",
    "oldest_available_age": "float", "completed": "int", "retried": "int", "discarded": "int",
    "cancelled": "int", "throughput_per_minute": "float", "error_rate": "float", "estimated": "bool",
    "nodes": {"nodes": "int", "running": "int", "limit": "int", "paused": "int"},
}  # fmt: skip


def test_stats_per_queue_counts_wait_throughput_and_error_rate(target: Target) -> None:
    target.put(JobState.AVAILABLE, queue="mail", hours_ago=2)
    target.put(JobState.AVAILABLE, queue="mail")
    for _ in range(3):
        target.put(JobState.COMPLETED)
    _fail_with_traceback(target, target.put(JobState.EXECUTING))

    shown = target.json("stats", "--window", "1h")
    assert shown["window"] == 3600.0
    queues = {q["queue"]: q for q in shown["queues"]}
    assert schema_of(queues["mail"]) == STATS_QUEUE_SCHEMA
    assert queues["mail"]["counts"]["available"] == 2 and queues["mail"]["oldest_available_age"] >= 7200
    default = queues["default"]
    assert (default["completed"], default["retried"], default["error_rate"]) == (3, 1, 0.25)
    assert default["counts"]["retryable"] == 1 and default["oldest_available_age"] is None
    assert default["nodes"] == {"nodes": 0, "running": 0, "limit": 0, "paused": 0}
    assert shown["total"]["completed"] == 3 and shown["total"]["throughput_per_minute"] == 3 / 60

    run = target.run("stats")
    assert run.code == 0, run.err
    mail = next(line for line in run.out.splitlines() if line.startswith("│ mail "))
    # About two hours (more on a slow machine: the age is read when the command runs).
    assert re.search(r"│ 2\.\dh ", mail) and "no node" in mail
    assert "25.0%" in next(line for line in run.out.splitlines() if line.startswith("│ default "))
    assert "last 1h: 3 completed, 1 retried, 0 discarded, 0 cancelled" in run.out
    assert "error rate 25.0%" in run.out


@pytest.mark.parametrize("window", ["soon", "10s", "30d"])
def test_stats_refuses_a_bad_window_in_one_line(target: Target, window: str) -> None:
    target.put(JobState.AVAILABLE)
    assert_one_line_error(target.run("stats", "--window", window), f"invalid --window {window!r}", code=2)


# -- conveyor cron -----------------------------------------------------------------------------------

CRON_MODULE = """
from conveyor import job


@job(queue="reports", cron="0 6 * * 1", timezone="Europe/Paris")
def weekly() -> None:
    pass
"""
CRONTAB = '[[conveyor.crontab]]\nexpression = "*/15 * * * *"\nworker = "x.Cleanup"\nname = "cleanup"\n'
CRON_SCHEMA = {
    "name": "str", "expression": "str", "timezone": "str", "worker": "str", "queue": "str", "args": {},
    "next_runs": "list", "last_tick": "str", "stored": "bool", "paused": "bool",
}  # fmt: skip


def test_cron_lists_entries_next_runs_and_the_last_tick(target: Target) -> None:
    (target.cwd / "cronjobs.py").write_text(CRON_MODULE, "utf-8")
    (target.cwd / "conveyor.toml").write_text(CRONTAB, "utf-8")
    tick = datetime(2030, 1, 1, 12, 15)

    async def record_tick(engine: Engine) -> None:
        await engine.insert_cron_jobs([CronTick("cleanup", tick, JobRequest("x.Cleanup"))], now=NOW)

    target.with_engine(record_tick)
    before = datetime.now(UTC)
    shown = {e["name"]: e for e in target.json("cron", "--import", "cronjobs", "--next", "2")}
    after = datetime.now(UTC)  # the command read its clock in between: a quarter hour may have begun
    assert set(shown) == {"cleanup", next(n for n in shown if n.startswith("cronjobs.weekly@"))}
    cleanup = shown["cleanup"]
    assert schema_of(cleanup) == CRON_SCHEMA
    assert cleanup["last_tick"].startswith("2030-01-01T12:15:00")
    runs = [datetime.fromisoformat(r) for r in cleanup["next_runs"]]
    assert len(runs) == 2 and runs[1] - runs[0] == timedelta(minutes=15)
    assert before < runs[0] <= after + timedelta(minutes=15) and runs[0].minute % 15 == 0
    weekly = next(e for n, e in shown.items() if n != "cleanup")
    assert (weekly["timezone"], weekly["queue"], weekly["last_tick"]) == ("Europe/Paris", "reports", None)
    for run in weekly["next_runs"]:  # Monday 06:00 in Paris
        local = datetime.fromisoformat(run).astimezone(ZoneInfo("Europe/Paris"))
        assert (local.isoweekday(), local.hour, local.minute) == (1, 6, 0)

    out = target.run("cron", "--import", "cronjobs").out
    row = next(line for line in out.splitlines() if line.startswith("│ cleanup "))
    assert "*/15 * * * *" in row and "2030-01-01 12:15:00" in row
    assert "never" in next(line for line in out.splitlines() if "Europe/Paris" in line)


def test_cron_mistakes_are_one_line(target: Target) -> None:
    run = target.run("cron", "--import", "no_such_module_xyz")
    assert_one_line_error(run, "no_such_module_xyz")
    assert_one_line_error(target.run("cron", "--next", "0"), "--next", code=2)


def test_cron_entries_are_added_changed_paused_and_deleted_from_the_command_line(target: Target) -> None:
    (target.cwd / "cronjobs.py").write_text(CRON_MODULE, "utf-8")
    target.states()  # installs the schema
    added = target.json(
        "cron", "add", "nightly", "0 2 * * *", "cronjobs.weekly", "--args", "{}", "--queue", "night"
    )
    assert added == {
        "name": "nightly",
        "expression": "0 2 * * *",
        "worker": "cronjobs.weekly",
        "opts": {"args": {}, "timezone": "UTC", "queue": "night"},
        "paused": False,
    }
    out = target.run("cron", "add", "elixir", "@hourly", "MyApp.Report", "--foreign", "--tag", "t").out
    assert out.strip() == "added cron entry elixir: @hourly MyApp.Report (active)"
    assert target.json("cron", "pause", "elixir")["paused"] is True
    updated = target.json(
        "cron", "update", "nightly", "--expression", "30 3 * * *", "--timezone", "Europe/Paris"
    )
    assert (updated["expression"], updated["opts"]["timezone"], updated["opts"]["queue"]) == (
        "30 3 * * *",
        "Europe/Paris",
        "night",
    )

    shown = {e["name"]: e for e in target.json("cron", "--import", "cronjobs")}
    assert (shown["nightly"]["stored"], shown["nightly"]["paused"], shown["nightly"]["queue"]) == (
        True,
        False,
        "night",
    )
    assert shown["elixir"]["paused"] is True
    assert any(name.startswith("cronjobs.weekly@") for name in shown)  # the code's own entry too
    table = target.run("cron", "--import", "cronjobs").out
    assert "elixir (paused)" in table and "nightly (stored)" in table

    assert target.run("cron", "delete", "elixir").out.strip() == "deleted cron entry elixir"
    assert set(e["name"] for e in target.json("cron")) == {"nightly"}


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["add", "x", "61 * * * *", "cronjobs.weekly"], ["61 is out of range 0-59"]),
        (["add", "x", "* * * * *", "cronjobs.weekly", "--timezone", "Mars/Base"], ["timezone", "Mars/Base"]),
        (["add", "x", "* * * * *", "no_such.worker"], ["worker", "--foreign"]),
        (["add", "x", "* * * * *", "cronjobs.weekly", "--args", "[1]"], ["--args", "JSON object"]),
        (["pause", "missing"], ["no cron entry has that name"]),
        (["delete", "missing"], ["no stored cron entry"]),
    ],
)
def test_cron_edit_mistakes_are_one_line(target: Target, args: list[str], fragments: list[str]) -> None:
    (target.cwd / "cronjobs.py").write_text(CRON_MODULE, "utf-8")
    target.states()  # installs the schema
    assert_one_line_error(target.run("cron", *args), *fragments, code=2)


# -- conveyor declare / undeclare / declared ---------------------------------------------------------


def test_queues_are_declared_listed_and_undeclared_from_the_command_line(target: Target) -> None:
    target.states()  # installs the schema
    run = target.run(
        "declare", "reports", "3", "--global-limit", "4", "--partition", "args.tenant", "--node", "n1"
    )
    assert run.code == 0 and run.out.strip() == "declared queue reports (limit 3) on n1", run.err
    shown = target.json("declare", "bulk", "2", "--rate-limit", "50/1", "--paused")
    assert shown == {
        "name": "bulk",
        "opts": {"local_limit": 2, "paused": True, "rate_limit": {"allowed": 50, "period": 1.0}},
        "only": {},
    }
    listed = {q["name"]: q for q in target.json("declared")}
    assert listed["reports"]["opts"]["global_limit"] == {"allowed": 4, "partition": {"args": ["tenant"]}}
    assert listed["reports"]["only"] == {"nodes": ["n1"]}
    assert "every node" in target.run("declared").out
    assert target.run("undeclare", "bulk").out.strip() == "undeclared queue bulk"
    assert [q["name"] for q in target.json("declared")] == ["reports"]


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["declare", "q", "0"], "queues.q.limit"),
        (["declare", "bad queue", "1"], "queue"),
        (["declare", "q", "1", "--rate-limit", "many"], "--rate-limit"),
        (["undeclare", "missing"], "no declared queue"),
    ],
)
def test_declare_mistakes_are_one_line(target: Target, args: list[str], fragment: str) -> None:
    target.states()
    assert_one_line_error(target.run(*args), fragment, code=2)
