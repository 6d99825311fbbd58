"""The progress writer on a real SQLite engine that refuses one job's progress: the statement
holding it fails, the other jobs' progress is written all the same, and nothing is retried forever."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from conveyor import JobState
from conveyor._runtime.job_link import JobLink
from conveyor.context import JobContext
from conveyor.engine.sqlite import SqliteEngine
from conveyor.telemetry import Telemetry
from tests.conformance.contract import put


class RefusingEngine(SqliteEngine):
    """Refuses (not transiently) every statement carrying the progress of job ``bad``."""

    bad = -1

    async def record_progress(self, entries: Sequence[tuple[int, int, Mapping[str, Any]]]) -> list[int]:
        if any(job_id == self.bad for job_id, _, _ in entries):
            raise ValueError("refused")
        return await super().record_progress(entries)


async def test_one_refused_entry_holds_back_no_other_job(tmp_path: Path) -> None:
    engine = RefusingEngine(str(tmp_path / "progress.db"))
    await engine.open()
    await engine.install()
    try:
        ids = [await put(engine, JobState.EXECUTING) for _ in range(3)]
        engine.bad = ids[1]
        link = JobLink(engine, Telemetry(), progress_interval=0.0, poll_interval=1.0)
        contexts = [JobContext(job) for job in [await engine.get_job(i) for i in ids] if job is not None]
        for context in contexts:
            link.attach(context)
            context.progress.merge({"done": context.id}, lambda _: None)
            link.writer.mark(context)
        await link.writer.tick()
        stored = {i: (await engine.get_job(i)).progress for i in ids}  # type: ignore[union-attr]
        assert stored == {ids[0]: {"done": ids[0]}, ids[1]: {}, ids[2]: {"done": ids[2]}}
        # The refused one is not marked again: its ack carries it when the job ends.
        assert link.writer._dirty == {}
        assert link.detach(contexts[1]) == {"done": ids[1]}
        assert link.detach(contexts[0]) is None
    finally:
        await engine.close()
