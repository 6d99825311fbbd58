"""A rolling deploy across real node processes (issue 31.11): new code enqueues a job with an
argument the old code does not take. The old node declines it (snoozed, the reason recorded, no
attempt spent) instead of discarding it, and the new node runs it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from conveyor import Conveyor, JobRequest, JobState
from conveyor.job import Job
from tests.conftest import DSN
from tests.helpers import poll
from tests.node_processes import NodeProcess, describe, node_processes

#: Two versions of one job module; version 2 added ``fail``.
VERSIONS = {
    "v1": """
        from conveyor import job

        @job(queue="default", record=True)
        def render(doc: str) -> str:
            return "v1:" + doc
    """,
    "v2": """
        from conveyor import job

        @job(queue="default", record=True)
        def render(doc: str, fail: bool = False) -> str:
            return "v2:" + doc
    """,
}


def version(tmp_path: Path, name: str) -> dict[str, str]:
    """The environment of a node running that version of ``rolling_render``."""
    directory = tmp_path / name
    directory.mkdir()
    (directory / "rolling_render.py").write_text(textwrap.dedent(VERSIONS[name]))
    return {"PYTHONPATH": str(directory)}


async def until(app: Conveyor, job_id: int, nodes: list[NodeProcess], test: object) -> Job:
    try:
        job = await poll(
            lambda: app.get_job(job_id),
            lambda job: job is not None and test(job),  # type: ignore[operator]
            timeout=30,
            what=f"job {job_id}",
            every=0.05,
        )
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{describe(nodes)}") from None
    assert job is not None
    return job


@pytest.mark.slow
async def test_the_old_node_declines_a_job_of_the_new_code_and_the_new_node_runs_it(
    prefix: str, tmp_path: Path
) -> None:
    app = Conveyor(DSN, prefix=prefix)
    await app.install()
    options = ("--prefix", prefix, "-q", "default:2", "--import", "rolling_render")
    try:
        async with node_processes(DSN, tmp_path, 1, version(tmp_path, "v1"), *options) as old:
            job_id = await app.enqueue(JobRequest("rolling_render.render", args={"doc": "a", "fail": True}))
            declined = await until(app, job_id, old, lambda j: j.errors and j.state is not JobState.EXECUTING)
            assert declined.state in (JobState.SCHEDULED, JobState.AVAILABLE), declined
            assert "unknown fail" in declined.errors[0]["error"] and declined.attempt == 0
            old[0].process.terminate()  # the deploy goes on: the old node stops, a new one starts
            async with node_processes(DSN, tmp_path, 1, version(tmp_path, "v2"), *options) as new:
                done = await until(app, job_id, old + new, lambda j: j.state is JobState.COMPLETED)
                assert new[0].owns(done.attempted_by[0]), done.attempted_by
        assert await app.get_result(job_id) == "v2:a"
        # Every attempt the old node made is recorded, and none was spent.
        assert done.attempt == 1 and all("unknown fail" in e["error"] for e in done.errors)
    finally:
        await app.close()
