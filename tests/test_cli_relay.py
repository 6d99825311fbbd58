"""``conveyor job``, ``conveyor signal`` and ``conveyor wait`` as a user runs them, on both engines:
what they print, and one clear error line for each mistake."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from conveyor import Conveyor
from tests.conformance import relay_jobs as jobs
from tests.conftest import DSN
from tests.test_cli_errors import assert_one_line_error, conveyor_inline


@pytest.fixture(params=["postgres", "sqlite"])
def target(
    request: pytest.FixtureRequest, prefix: str, tmp_path: Path
) -> Iterator[tuple[Conveyor, list[str]]]:
    """An installed database with the app that fills it and the CLI options that reach it."""
    if request.param == "postgres":
        app, options = Conveyor(DSN, prefix=prefix), ["--dsn", DSN, "--prefix", prefix]
    else:
        url = f"sqlite:///{tmp_path / 'cli.db'}"
        app, options = Conveyor(url), ["--dsn", url]
    app.install_sync()
    try:
        yield app, options
    finally:
        app.close_sync()


def test_job_signal_and_wait(target: tuple[Conveyor, list[str]], tmp_path: Path) -> None:
    app, options = target
    job_id = app.enqueue_sync(jobs.echoes_messages.new(count=1))
    sent = conveyor_inline("signal", str(job_id), '{"approve": true}', *options, cwd=tmp_path)
    assert sent.code == 0 and sent.out.strip() == f"signalled job {job_id} (now available)", sent
    shown = conveyor_inline("job", str(job_id), "--json", *options, cwd=tmp_path)
    detail = orjson.loads(shown.out)
    assert detail["state"] == "available" and detail["signals"] == [{"approve": True}]
    assert detail["progress"] == {} and detail["result"] is None
    table = conveyor_inline("job", str(job_id), *options, cwd=tmp_path)
    assert "echoes_messages" in table.out and "signals" in table.out
    waited = conveyor_inline("wait", str(job_id), "--timeout", "0.2", *options, cwd=tmp_path)
    assert_one_line_error(waited, f"job {job_id} did not finish within 0.2s (it was available)")


def test_mistakes_get_one_clear_line(target: tuple[Conveyor, list[str]], tmp_path: Path) -> None:
    app, options = target
    done_id = app.enqueue_sync(jobs.doubled.new(value=1))
    app.cancel_job_sync(done_id)
    assert_one_line_error(conveyor_inline("job", "987654", *options, cwd=tmp_path), "no job with id 987654")
    assert_one_line_error(
        conveyor_inline("signal", "987654", "{}", *options, cwd=tmp_path), "no job with id 987654"
    )
    assert_one_line_error(
        conveyor_inline("signal", str(done_id), "{}", *options, cwd=tmp_path),
        "a finished job receives no signals",
    )
    assert_one_line_error(
        conveyor_inline("signal", str(done_id), "nope", *options, cwd=tmp_path), "MESSAGE is not JSON", code=2
    )
    assert_one_line_error(
        conveyor_inline("signal", str(done_id), "[1]", *options, cwd=tmp_path), "must be a mapping"
    )
    assert_one_line_error(
        conveyor_inline("wait", str(done_id), *options, cwd=tmp_path), f"job {done_id}", "cancelled"
    )
    assert_one_line_error(conveyor_inline("wait", "0", *options, cwd=tmp_path), "JOB_ID", code=2)
