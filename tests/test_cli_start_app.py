"""``conveyor start --app module:attr`` and the log options, as a user runs them on both engines: the
user's own app runs the jobs and its telemetry handler sees them, the job log lines come out as
text or JSON at the configured level, and every mistake gets one clear line."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from conveyor import Conveyor, JobRequest, JobState
from tests import forked
from tests.conftest import DSN
from tests.helpers import poll_sync
from tests.test_cli_errors import CONVEYOR, assert_one_line_error, conveyor_forked

USER_MODULE = '''
"""A user's worker module: a job, an app with a telemetry handler, and a factory."""
import json
import os

from conveyor import Conveyor, job


@job(queue="default", max_attempts=1)
def greet(name: str) -> str:
    if name == "nobody":
        raise LookupError("nobody to greet")
    return f"hello {name}"


app = Conveyor.from_config(queues={"default": 2}, poll_interval=0.2, shutdown_grace=1)


@app.on("job.")
def record(event, data):
    with open(os.environ["EVENTS_FILE"], "a") as out:
        line = {"event": event, "job_id": data["job"].id, "outcome": data.get("outcome")}
        out.write(json.dumps(line) + "\\n")


def make_app():
    return Conveyor(poll_interval=0.2, shutdown_grace=1)  # no queues: --queues gives them


NOT_AN_APP = 42


def broken_factory():
    raise RuntimeError("factory failed")
'''

BROKEN_MODULES = {
    "raises_on_import.py": 'raise RuntimeError("bad config")\n',
    "exits_on_import.py": "raise SystemExit('no way')\n",
    "needs_dependency.py": "import not_installed_dependency_xyz\n",
}


@dataclass
class Target:
    """An installed database, the test's app on it, and the environment that points a node at it."""

    app: Conveyor
    env: dict[str, str]
    directory: Path

    def enqueue(self, name: str) -> int:
        return self.app.enqueue_sync(JobRequest("user_jobs.greet", args={"name": name}, max_attempts=1))

    def state(self, job_id: int) -> JobState | None:
        found = self.app.get_job_sync(job_id)
        return found.state if found else None


@pytest.fixture(params=["postgres", "sqlite"])
def target(request: pytest.FixtureRequest, prefix: str, tmp_path: Path) -> Iterator[Target]:
    (tmp_path / "user_jobs.py").write_text(USER_MODULE)
    for name, text in BROKEN_MODULES.items():
        (tmp_path / name).write_text(text)
    env = {"EVENTS_FILE": str(tmp_path / "events.jsonl")}
    if request.param == "postgres":
        app = Conveyor(DSN, prefix=prefix)
        env |= {"CONVEYOR_DATABASE_URL": DSN, "CONVEYOR_PREFIX": prefix}
    else:
        url = f"sqlite:///{tmp_path / 'jobs.db'}"
        app = Conveyor(url)
        env |= {"CONVEYOR_DATABASE_URL": url}
    app.install_sync()
    try:
        yield Target(app, env, tmp_path)
    finally:
        app.close_sync()


def wait_until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    poll_sync(check, timeout=timeout, what=what, every=0.1)


def run_node(target: Target, *options: str, env: dict[str, str] | None = None) -> forked.Started:
    """``conveyor start OPTIONS`` in the target's folder, forked (``tests.forked``), its output in
    node.log (emptied first)."""
    environ = (
        {k: v for k, v in os.environ.items() if not k.startswith("CONVEYOR_")} | target.env | (env or {})
    )
    log = target.directory / "node.log"
    log.write_bytes(b"")
    return forked.start_python([CONVEYOR, "start", *options], cwd=target.directory, env=environ, output=log)


def stop_node(process: forked.Started, target: Target) -> str:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(30)
    finally:
        if process.poll() is None:
            process.kill()
    output = (target.directory / "node.log").read_text()
    assert process.returncode == 0, output
    return output


def events_of(target: Target) -> list[dict[str, Any]]:
    path = Path(target.env["EVENTS_FILE"])
    return [orjson.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_the_users_app_runs_the_jobs_its_handler_sees_them_and_logs_are_json(target: Target) -> None:
    done, failed = target.enqueue("world"), target.enqueue("nobody")
    node = run_node(target, "--app", "user_jobs:app", "--log-format", "json", "--node", "app-node")
    try:
        wait_until(lambda: len([e for e in events_of(target) if e["event"] != "job.start"]) == 2, "both runs")
    finally:
        output = stop_node(node, target)
    assert target.state(done) is JobState.COMPLETED and target.state(failed) is JobState.DISCARDED
    seen = sorted((e["job_id"], e["event"], e["outcome"]) for e in events_of(target))
    assert seen == sorted(
        [
            (done, "job.start", None),
            (done, "job.stop", "completed"),
            (failed, "job.start", None),
            (failed, "job.exception", "discarded"),
        ]
    )
    lines = [orjson.loads(line) for line in output.splitlines() if line.startswith("{")]
    assert lines, output
    assert all({"ts", "level", "logger", "message"} <= set(line) for line in lines)
    jobs = {line["job_id"]: line for line in lines if line["logger"] == "conveyor.job"}
    assert set(jobs) == {done, failed}, output
    ok = jobs[done]
    assert ok["level"] == "INFO" and ok["state"] == "completed" and ok["worker"] == "user_jobs.greet"
    assert ok["queue"] == "default" and ok["attempt"] == 1 and ok["error_type"] is None
    assert ok["duration_ms"] >= 0 and ok["queue_time_ms"] >= 0
    bad = jobs[failed]
    assert bad["level"] == "ERROR" and bad["state"] == "discarded" and bad["error_type"] == "LookupError"
    assert "discarded (no attempts left)" in bad["message"] and "nobody to greet" in bad["message"]
    started = [line for line in lines if line["logger"] == "conveyor.node" and "started" in line["message"]]
    assert started and "app-node" in started[0]["message"]


def test_a_factory_with_the_commands_queues_and_the_level_from_the_environment(target: Target) -> None:
    done, failed = target.enqueue("world"), target.enqueue("nobody")
    node = run_node(
        target, "--app", "user_jobs:make_app", "-q", "default:1", env={"CONVEYOR_LOG_LEVEL": "warning"}
    )
    try:
        wait_until(lambda: target.state(done) is JobState.COMPLETED, "the job to complete")
        wait_until(lambda: target.state(failed) is JobState.DISCARDED, "the job to be discarded")
    finally:
        output = stop_node(node, target)
    assert "running queues default:1" in output
    assert f"ERROR conveyor.job: job {failed} (user_jobs.greet) discarded (no attempts left)" in output
    assert "LookupError: nobody to greet" in output
    assert "completed in" not in output and "INFO" not in output  # the level came from the environment
    assert events_of(target) == []  # make_app attaches no handler


# Every mistake below is refused before the database is reached: one engine shows it.
@pytest.mark.parametrize("target", ["sqlite"], indirect=True)
def test_mistakes_with_app_get_one_clear_line(target: Target) -> None:
    def start(*options: str, env: dict[str, str] | None = None) -> Any:
        return conveyor_forked("start", *options, cwd=target.directory, env=target.env | (env or {}))

    assert_one_line_error(
        start("--app", "missing_module:app"), "--app missing_module:app", "no module named 'missing_module'"
    )
    assert_one_line_error(
        start("--app", "user_jobs:nothing"), "module 'user_jobs' has no attribute 'nothing'"
    )
    assert_one_line_error(start("--app", "user_jobs:NOT_AN_APP"), "'NOT_AN_APP' is a int, not a Conveyor")
    assert_one_line_error(
        start("--app", "user_jobs:broken_factory"),
        "calling broken_factory() raised RuntimeError: factory failed",
    )
    assert_one_line_error(
        start("--app", "raises_on_import:app"), "importing 'raises_on_import' raised RuntimeError: bad config"
    )
    assert_one_line_error(
        start("--app", "exits_on_import:app"), "importing 'exits_on_import' raised SystemExit: no way"
    )
    assert_one_line_error(
        start("--app", "needs_dependency:app"),
        "importing 'needs_dependency' raised ModuleNotFoundError:",
        "No module named 'not_installed_dependency_xyz'",
    )
    assert_one_line_error(start("--app", "user_jobs"), "--app takes MODULE:ATTRIBUTE", code=2)
    assert_one_line_error(
        start("--app", "user_jobs:app", "--dsn", target.env["CONVEYOR_DATABASE_URL"]),
        "--dsn cannot be used with --app",
        code=2,
    )
    assert_one_line_error(
        start("--app", "user_jobs:app", "--config", "c.toml"), "--config cannot be used with --app", code=2
    )
    assert_one_line_error(
        start("--app", "user_jobs:app", "--prefix", "p"), "--prefix cannot be used with --app", code=2
    )
    assert_one_line_error(start("--app", "user_jobs:make_app"), "no queues to run", code=2)
    assert_one_line_error(start("--app", "user_jobs:app", "--node", ""), "node", code=2)
    assert_one_line_error(start("-q", "default", "--log-format", "xml"), "--log-format", code=2)
    assert_one_line_error(
        start("-q", "default", env={"CONVEYOR_LOG_FORMAT": "yaml"}), "CONVEYOR_LOG_FORMAT", code=2
    )
