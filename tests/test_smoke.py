from __future__ import annotations

from conveyor import Conveyor, JobState, job


@job(queue="mail", tags=["welcome"])
async def send_welcome(to: str) -> None:
    """A job used by the smoke test."""


async def test_enqueue_then_get(app: Conveyor) -> None:
    job_id = await app.enqueue(send_welcome.new(to="ada@example.com"))
    found = await app.get_job(job_id)
    assert found is not None
    assert found.state is JobState.AVAILABLE
    assert found.queue == "mail"
    assert found.worker == "tests.test_smoke.send_welcome"
    assert found.args == {"to": "ada@example.com"}
    assert found.tags == ("welcome",)
