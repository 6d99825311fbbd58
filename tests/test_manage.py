"""Managing stored jobs: get, list (filtered, paged), cancel, retry and delete, async and blocking."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from conveyor import Conveyor, ConveyorError, JobFilter, JobRequest, JobState, job
from tests.helpers import execute, fetch_rows, insert_channel, listening, signal_channel


@job(queue="mail", tags=["email"])
async def send_mail(to: str) -> None:
    pass


@job(queue="reports")
def build_report(month: str) -> None:
    pass


MAIL = "tests.test_manage.send_mail"
REPORT = "tests.test_manage.build_report"


def set_state(dsn: str, prefix: str, job_id: int, state: str, **columns: Any) -> None:
    """Put a job in a state the way a node would, with raw SQL."""
    assignments = ", ".join(f"{name} = %({name})s" for name in columns)
    execute(
        dsn,
        f'UPDATE "{prefix}".oban_jobs SET state = %(state)s'
        + (f", {assignments}" if columns else "")
        + " WHERE id = %(id)s",
        {"state": state, "id": job_id, **columns},
    )


def make_executing(dsn: str, prefix: str, job_id: int) -> None:
    set_state(
        dsn,
        prefix,
        job_id,
        "executing",
        attempt=1,
        attempted_at=datetime.now(UTC).replace(tzinfo=None),
        attempted_by=["node-1", "producer-1"],
    )


def state_of(dsn: str, prefix: str, job_id: int) -> str | None:
    rows = fetch_rows(dsn, prefix, "id = %s", (job_id,))
    return rows[0]["state"] if rows else None


async def seed(app: Conveyor) -> dict[str, int]:
    """Five jobs over two queues, two workers and a few tags."""
    ids = await app.enqueue_many(
        [
            send_mail.new(to="a").with_options(tags=["email", "vip"]),
            send_mail.new(to="b"),
            build_report.new(month="jan").with_options(tags=["vip"]),
            build_report.new(month="feb").with_options(schedule_in=3600),
            send_mail.new(to="c").with_options(queue="bulk-mail", tags=["email", "vip", "eu"]),
        ]
    )
    return dict(zip(["mail_vip", "mail", "report_vip", "report_later", "bulk_vip"], ids, strict=True))


def ids_of(jobs: list[Any]) -> list[int]:
    return [j.id for j in jobs]


# -- get -------------------------------------------------------------------------------------


async def test_get_job_and_missing_job(app: Conveyor) -> None:
    ids = await seed(app)
    found = await app.get_job(ids["report_later"])
    assert found is not None
    assert (found.worker, found.state, found.args) == (REPORT, JobState.SCHEDULED, {"month": "feb"})
    assert await app.get_job(ids["bulk_vip"] + 1000) is None
    assert await app.get_job(-1) is None


# -- list ------------------------------------------------------------------------------------


async def test_list_jobs_filters(app: Conveyor) -> None:
    ids = await seed(app)
    every = sorted(ids.values(), reverse=True)

    assert ids_of(await app.list_jobs()) == every
    assert ids_of(await app.list_jobs(states=["scheduled"])) == [ids["report_later"]]
    assert ids_of(await app.list_jobs(states="available")) == [i for i in every if i != ids["report_later"]]
    assert ids_of(await app.list_jobs(states=[JobState.SCHEDULED, JobState.AVAILABLE])) == every
    assert ids_of(await app.list_jobs(states=["completed"])) == []
    assert ids_of(await app.list_jobs(queues="mail")) == [ids["mail"], ids["mail_vip"]]
    assert ids_of(await app.list_jobs(queues=["mail", "bulk-mail"])) == [
        ids["bulk_vip"],
        ids["mail"],
        ids["mail_vip"],
    ]
    assert ids_of(await app.list_jobs(workers=[REPORT])) == [ids["report_later"], ids["report_vip"]]
    assert ids_of(await app.list_jobs(workers=["Elixir.Nope"])) == []
    # Tags match jobs carrying every one of them.
    assert ids_of(await app.list_jobs(tags=["vip"])) == [ids["bulk_vip"], ids["report_vip"], ids["mail_vip"]]
    assert ids_of(await app.list_jobs(tags=["email", "vip"])) == [ids["bulk_vip"], ids["mail_vip"]]
    assert ids_of(await app.list_jobs(tags=["email", "vip", "eu"])) == [ids["bulk_vip"]]
    assert ids_of(await app.list_jobs(tags=["missing"])) == []
    # Criteria combine with AND.
    assert ids_of(await app.list_jobs(workers=MAIL, tags="vip", queues="mail")) == [ids["mail_vip"]]
    assert ids_of(await app.list_jobs(ids=[ids["mail"], ids["report_vip"], 10**9])) == [
        ids["report_vip"],
        ids["mail"],
    ]
    # A JobFilter works as well as keywords, but not both together.
    assert ids_of(await app.list_jobs(JobFilter(queues=("reports",), states=("available",)))) == [
        ids["report_vip"]
    ]
    with pytest.raises(ConveyorError):
        await app.list_jobs(JobFilter(), queues="mail")


async def test_list_jobs_pages_newest_first(app: Conveyor) -> None:
    ids = await app.enqueue_many(JobRequest("tests.page", args={"n": n}) for n in range(25))
    pages: list[list[int]] = []
    before: int | None = None
    while True:
        page = ids_of(await app.list_jobs(limit=10, before_id=before))
        if not page:
            break
        pages.append(page)
        before = page[-1]
    assert [len(p) for p in pages] == [10, 10, 5]
    assert [i for p in pages for i in p] == sorted(ids, reverse=True)
    # Paging combines with filters.
    assert ids_of(await app.list_jobs(limit=3, before_id=ids[10], workers="tests.page")) == [
        ids[9],
        ids[8],
        ids[7],
    ]


# -- cancel ----------------------------------------------------------------------------------


async def test_cancel_jobs(app: Conveyor, dsn: str, prefix: str) -> None:
    ids = await seed(app)
    set_state(dsn, prefix, ids["mail"], "completed", completed_at=datetime(2030, 1, 1))

    async with listening(dsn, signal_channel(prefix)) as signals:
        cancelled = await app.cancel_jobs(queues=["mail", "reports"])
        # The completed job is final: it stays completed. Nothing was executing: no signal.
        assert cancelled == sorted([ids["mail_vip"], ids["report_vip"], ids["report_later"]])
        assert await signals.collect(0.2) == []

    for job_id in cancelled:
        found = await app.get_job(job_id)
        assert found is not None
        assert found.state is JobState.CANCELLED
        assert found.cancelled_at is not None
        assert abs(found.cancelled_at - datetime.now(UTC)) < timedelta(seconds=30)
    assert state_of(dsn, prefix, ids["mail"]) == "completed"
    assert state_of(dsn, prefix, ids["bulk_vip"]) == "available"
    # Cancelling again changes nothing.
    assert await app.cancel_jobs(queues=["mail", "reports"]) == []


async def test_cancel_job(app: Conveyor) -> None:
    ids = await seed(app)
    assert await app.cancel_job(ids["report_later"]) is True
    found = await app.get_job(ids["report_later"])
    assert found is not None and found.state is JobState.CANCELLED
    assert await app.cancel_job(ids["report_later"]) is False
    assert await app.cancel_job(10**9) is False


async def test_cancel_executing_job_signals_its_node(app: Conveyor, dsn: str, prefix: str) -> None:
    ids = await seed(app)
    make_executing(dsn, prefix, ids["mail"])
    async with listening(dsn, signal_channel(prefix)) as signals:
        assert await app.cancel_job(ids["mail"]) is True
        payload = await signals.first()
        assert await signals.collect(0.2) == []
    assert payload is not None
    assert json.loads(payload) == {"action": "pkill", "job_id": ids["mail"]}
    found = await app.get_job(ids["mail"])
    assert found is not None
    assert found.state is JobState.CANCELLED
    assert found.cancelled_at is not None
    assert found.attempt == 1


# -- retry -----------------------------------------------------------------------------------


async def test_retry_discarded_job_with_no_attempts_left(app: Conveyor, dsn: str, prefix: str) -> None:
    job_id = await app.enqueue(send_mail.new(to="x").with_options(max_attempts=3))
    set_state(
        dsn,
        prefix,
        job_id,
        "discarded",
        attempt=3,
        discarded_at=datetime(2030, 1, 1),
        scheduled_at=datetime(2030, 1, 1),
    )
    async with listening(dsn, insert_channel(prefix)) as inserts:
        assert await app.retry_job(job_id) is True
        assert await inserts.first() == '{"queue": "mail"}'
    found = await app.get_job(job_id)
    assert found is not None
    assert found.state is JobState.AVAILABLE
    assert found.attempt == 3
    assert found.max_attempts == 4
    assert found.discarded_at is None
    assert abs(found.scheduled_at - datetime.now(UTC)) < timedelta(seconds=30)


# -- delete ----------------------------------------------------------------------------------


async def test_delete_jobs_spares_executing(app: Conveyor, dsn: str, prefix: str) -> None:
    ids = await seed(app)
    make_executing(dsn, prefix, ids["mail_vip"])
    deleted = await app.delete_jobs(queues=["mail", "reports"])
    assert deleted == sorted([ids["mail"], ids["report_vip"], ids["report_later"]])
    assert sorted(r["id"] for r in fetch_rows(dsn, prefix)) == sorted([ids["mail_vip"], ids["bulk_vip"]])
    assert await app.delete_job(ids["mail_vip"]) is False
    assert state_of(dsn, prefix, ids["mail_vip"]) == "executing"
    assert await app.delete_job(ids["bulk_vip"]) is True
    assert await app.get_job(ids["bulk_vip"]) is None
    assert await app.delete_job(ids["bulk_vip"]) is False


# -- the blocking twins ----------------------------------------------------------------------


def test_sync_management(dsn: str, prefix: str) -> None:
    app = Conveyor(dsn, prefix=prefix)
    try:
        app.install_sync()
        a, b, c, d = app.enqueue_many_sync(
            [
                send_mail.new(to="a"),
                send_mail.new(to="b"),
                build_report.new(month="mar"),
                build_report.new(month="apr").with_options(tags=["x"]),
            ]
        )
        found = app.get_job_sync(a)
        assert found is not None and found.args == {"to": "a"}
        assert app.get_job_sync(10**9) is None
        assert ids_of(app.list_jobs_sync(queues="reports")) == [d, c]
        assert ids_of(app.list_jobs_sync(JobFilter(tags=("x",)))) == [d]
        assert ids_of(app.list_jobs_sync(limit=2, before_id=d)) == [c, b]

        assert app.cancel_jobs_sync(workers=REPORT) == [c, d]
        assert app.cancel_job_sync(a) is True
        assert app.cancel_job_sync(a) is False
        assert {j.state for j in app.list_jobs_sync(ids=[a, c, d])} == {JobState.CANCELLED}

        assert app.retry_jobs_sync(ids=[c, d]) == [c, d]
        assert app.retry_job_sync(a) is True
        assert app.retry_job_sync(a) is False
        assert {j.state for j in app.list_jobs_sync()} == {JobState.AVAILABLE}

        make_executing(dsn, prefix, b)
        assert app.delete_jobs_sync(queues="mail") == [a]
        assert app.delete_job_sync(b) is False
        assert app.delete_job_sync(c) is True
        assert ids_of(app.list_jobs_sync()) == [d, b]
    finally:
        app.close_sync()
