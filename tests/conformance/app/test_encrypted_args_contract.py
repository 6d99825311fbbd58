"""Encrypted args (issue 37): ``@job(encrypted=True)`` stores args encrypted with AES-256-GCM, the
newest of ``encryption_keys`` encrypting and any of them decrypting; the row shows no plaintext; a
node without the job's key declines it like an unfit job (offered again, then discarded, saying
which key it lacks), never crashing. On every engine."""

from __future__ import annotations

import base64
import logging
import os
from collections.abc import Callable
from typing import Any

import pytest

from conveyor import Conveyor, JobState
from conveyor._runtime.clock import FakeClock
from conveyor.encryption import META_KEY, key_id
from conveyor.job import Job
from tests.conformance import encrypted_jobs as ej
from tests.conformance.app.test_fake_time_contract import advance
from tests.helpers import poll

NODE = {"poll_interval": 0.5, "stage_interval": 0.5, "leadership": False}
OLD = base64.b64encode(os.urandom(32)).decode()
NEW = base64.b64encode(os.urandom(32)).decode()
CARD = "4111111111111111"


@pytest.fixture
def make(make_app: Callable[..., Conveyor]) -> Callable[..., Conveyor]:
    """Apps with this module's NODE settings unless a test says otherwise."""
    return lambda **settings: make_app(**(NODE | settings))


async def until(app: Conveyor, job_id: int, test: Callable[[Job], bool]) -> Job:
    job = await poll(lambda: app.get_job(job_id), lambda j: j is not None and test(j), what=f"job {job_id}")
    assert job is not None
    return job


def sealed(job: Job, key: str) -> None:
    """The stored row holds no plaintext, only the ciphertext and the id of ``key``."""
    assert CARD not in repr(job.args) and set(job.args) == {"data", "iv"}
    assert job.meta[META_KEY] == {"cipher": "aes-256-gcm", "key": key_id(base64.b64decode(key))}


@pytest.mark.parametrize("fn", [ej.charge, ej.charge_in_thread])
async def test_args_are_stored_encrypted_and_the_job_sees_them_plain(
    make: Callable[..., Conveyor], fn: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    app = make(queues={"default": 2}, encryption_keys=[NEW])
    await app.install()
    tag = f"plain-{fn.__name__}"
    job_id = await app.enqueue(fn.new(card=CARD, tag=tag))
    sealed(await app.get_job(job_id), NEW)  # type: ignore[arg-type]
    await app.start()
    done = await until(app, job_id, lambda j: j.state is JobState.COMPLETED)
    assert ej.SEEN[tag] == {"card": CARD}
    sealed(done, NEW)  # still encrypted at rest once completed
    assert CARD not in caplog.text  # nor in the node's log lines


async def test_rotation_new_key_encrypts_old_key_still_decrypts(make: Callable[..., Conveyor]) -> None:
    before = make(encryption_keys=[OLD])  # an enqueuer before the rotation
    await before.install()
    old_job = await before.enqueue(ej.charge.new(card=CARD, tag="rot-old"))
    sealed(await before.get_job(old_job), OLD)
    node = make(queues={"default": 2}, encryption_keys=[NEW, OLD])  # after it: newest first
    new_job = await node.enqueue(ej.charge.new(card=CARD, tag="rot-new"))
    sealed(await node.get_job(new_job), NEW)
    await node.start()
    for job_id in (old_job, new_job):
        await until(node, job_id, lambda j: j.state is JobState.COMPLETED)
    assert ej.SEEN["rot-old"] == ej.SEEN["rot-new"] == {"card": CARD}


async def test_a_node_without_the_key_declines_then_discards_never_crashes(
    make: Callable[..., Conveyor],
) -> None:
    clock = FakeClock()
    enqueuer = make(encryption_keys=[NEW])
    await enqueuer.install()
    job_id = await enqueuer.enqueue(ej.charge.new(card=CARD, tag="keyless"))
    keyless = make(queues={"default": 2}, clock=clock, unfit_job_patience=30, encryption_keys=[OLD])
    await keyless.start()
    declined = await until(keyless, job_id, lambda j: j.state is JobState.SCHEDULED and bool(j.errors))
    error = declined.errors[0]["error"]
    assert f"encrypted with key {key_id(base64.b64decode(NEW))}" in error and "encryption_keys" in error
    assert declined.attempt == 0 and CARD not in error
    await advance(clock, 40, step=1)
    ended = await until(keyless, job_id, lambda j: j.state is JobState.DISCARDED)
    assert "no node ran it within unfit_job_patience" in ended.errors[-1]["error"]
    assert "keyless" not in ej.SEEN
    ping = await keyless.enqueue(ej.ping.new(tag="after-keyless"))  # the node carries on
    await until(keyless, ping, lambda j: j.state is JobState.COMPLETED)


async def test_a_node_holding_the_key_runs_what_another_declined(make: Callable[..., Conveyor]) -> None:
    """The declined job is offered to the fleet again: a node with the key (one that got the new
    key first, in a rollout) runs it within the patience."""
    enqueuer = make(encryption_keys=[NEW])
    await enqueuer.install()
    job_id = await enqueuer.enqueue(ej.charge.new(card=CARD, tag="handover"))
    keyless = make(queues={"default": 2})
    await keyless.start()
    await until(keyless, job_id, lambda j: j.state is JobState.SCHEDULED and bool(j.errors))
    await keyless.stop(grace=1)
    keyed = make(queues={"default": 2}, encryption_keys=[NEW])
    await keyed.start()
    done = await until(keyed, job_id, lambda j: j.state is JobState.COMPLETED)
    assert ej.SEEN["handover"] == {"card": CARD} and done.attempt == 1


async def test_enqueue_without_a_key_is_refused_naming_the_setting(make: Callable[..., Conveyor]) -> None:
    app = make()
    await app.install()
    with pytest.raises(Exception, match="encryption_keys"):
        await app.enqueue(ej.charge.new(card=CARD, tag="nokey"))


async def test_the_dashboard_shows_encrypted_args_redacted(make: Callable[..., Conveyor]) -> None:
    from conveyor.encryption import REDACTED
    from conveyor.web.dashboard import dashboard_app
    from tests.dashboard.client import browser_like

    app = make(encryption_keys=[NEW])
    await app.install()
    job_id = await app.enqueue(ej.charge.new(card=CARD, tag="dash"))
    stored = await app.get_job(job_id)
    assert stored is not None
    async with browser_like(dashboard_app(app)) as client:
        listing = (await client.get("/jobs")).text
        detail = (await client.get(f"/jobs/{job_id}")).text
    for page in (listing, detail):
        assert REDACTED in page and CARD not in page and stored.args["data"] not in page


async def test_cron_jobs_of_an_encrypted_worker_are_stored_encrypted(make: Callable[..., Conveyor]) -> None:
    from datetime import UTC, datetime, timedelta

    from conveyor import JobFilter

    start = datetime.now(UTC).replace(second=30, microsecond=0) + timedelta(minutes=5)
    clock = FakeClock(start)
    crontab = [("* * * * *", ej.charge, {"card": CARD, "tag": "cron"})]
    app = make(clock=clock, crontab=crontab, encryption_keys=[NEW], queues={"other": 1}, leadership=True)
    await app.install()
    await app.start()
    charges = JobFilter(workers=("tests.conformance.encrypted_jobs.charge",))
    found = await poll(lambda: app.list_jobs(charges), lambda jobs: len(jobs) >= 1, what="the cron job")
    sealed(found[0], NEW)


async def test_a_stored_encrypted_job_runs_under_drain_and_process_job(make: Callable[..., Conveyor]) -> None:
    from conveyor.testing import drain_queue, process_job

    app = make(encryption_keys=[NEW], testing="manual")
    await app.install()
    job_id = await app.enqueue(ej.charge.new(card=CARD, tag="process"))
    stored = await app.get_job(job_id)
    assert stored is not None
    assert await process_job(stored, app=app) == CARD[-4:]
    assert (await drain_queue(app=app))["completed"] == 1


async def test_inline_mode_runs_an_encrypted_job_on_its_plain_args(make: Callable[..., Conveyor]) -> None:
    app = make(testing="inline")  # nothing is stored inline: no key needed
    await app.enqueue(ej.charge.new(card=CARD, tag="inline"))
    assert ej.SEEN["inline"] == {"card": CARD}


async def test_workflow_steps_of_an_encrypted_worker_are_sealed_and_run(
    make: Callable[..., Conveyor],
) -> None:
    from conveyor import Workflow

    app = make(queues={"default": 2}, encryption_keys=[NEW])
    await app.install()
    workflow = Workflow(name="pay")
    workflow.add("first", ej.charge.new(card=CARD, tag="wf-1"))
    workflow.add("second", ej.charge.new(card=CARD, tag="wf-2"), deps=["first"])
    ids = await app.enqueue_many(workflow)
    for job_id in ids:
        sealed(await app.get_job(job_id), NEW)  # type: ignore[arg-type]
    await app.start()
    for job_id in ids:
        await until(app, job_id, lambda j: j.state is JobState.COMPLETED)
    assert ej.SEEN["wf-1"] == ej.SEEN["wf-2"] == {"card": CARD}
