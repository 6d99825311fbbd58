"""``conveyor workflow ID`` as a user runs it, on both engines: a workflow's state, progress,
phase and steps, waiting for it, and one clear error line for each mistake."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from conveyor import Conveyor, JobRequest, Workflow
from conveyor.testing import drain_queue_sync
from tests.conformance import jobs
from tests.conftest import DSN
from tests.test_cli_errors import assert_one_line_error, conveyor_inline


@pytest.fixture(params=["postgres", "sqlite"])
def target(
    request: pytest.FixtureRequest, prefix: str, tmp_path: Path
) -> Iterator[tuple[Conveyor, list[str]]]:
    """An installed database with the app that fills it and the CLI options that reach it."""
    if request.param == "postgres":
        app, options = Conveyor(DSN, prefix=prefix, testing="manual"), ["--dsn", DSN, "--prefix", prefix]
    else:
        url = f"sqlite:///{tmp_path / 'cli.db'}"
        app, options = Conveyor(url, testing="manual"), ["--dsn", url]
    app.install_sync()
    try:
        yield app, options
    finally:
        app.close_sync()


def test_a_workflow_shown_and_waited_for(target: tuple[Conveyor, list[str]], tmp_path: Path) -> None:
    app, options = target
    done = (
        Workflow(name="docs")
        .add("a", jobs.flow_step.new(label="a"))
        .add("b", jobs.flow_step.new(label="b"), deps=["a"])
    )
    app.enqueue_many_sync(done)
    shown = conveyor_inline("workflow", done.id, *options, cwd=tmp_path)
    assert shown.code == 0 and f"workflow {done.id}: running, 0% done; now: a" in shown.out, shown
    drain_queue_sync("flow", app=app)
    waited = conveyor_inline(
        "workflow", done.id, "--wait", "--timeout", "10", "--json", *options, cwd=tmp_path
    )
    assert waited.code == 0, waited
    found = orjson.loads(waited.out)
    assert found["state"] == "completed" and found["progress"] == 1.0 and list(found["steps"]) == ["a", "b"]

    held = Workflow().add("later", JobRequest("app.later", queue="elsewhere"))
    app.enqueue_many_sync(held)
    app.cancel_workflow_sync(held.id)
    failed = conveyor_inline("workflow", held.id, "--wait", *options, cwd=tmp_path)
    assert_one_line_error(failed, "cancelled at step 'later'")


def test_mistakes_get_one_clear_line(target: tuple[Conveyor, list[str]], tmp_path: Path) -> None:
    _, options = target
    assert_one_line_error(
        conveyor_inline("workflow", "nope", *options, cwd=tmp_path), "no workflow with id 'nope'"
    )
    assert_one_line_error(
        conveyor_inline("workflow", "x", "--timeout", "1", *options, cwd=tmp_path),
        "--timeout applies to --wait",
        code=2,
    )
