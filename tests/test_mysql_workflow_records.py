"""The MySQL/MariaDB engine's workflow records: what its pruner writes as it deletes a workflow's
steps (``record_workflows``), in several passes, read back by ``workflow_record``, with the values
the rows of a prune cannot hold on their own (a step missing its workflow's name). The pruner's own
records are proven on every engine by tests/conformance/app/test_workflow_unit_contract.py."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from conveyor.engine.mysql import MysqlEngine
from conveyor.engine.mysql.workflow_records import record_workflows
from conveyor.job import JobState
from tests.conformance import mariadb

pytestmark = pytest.mark.skipif(mariadb.UNREACHABLE is not None, reason=mariadb.UNREACHABLE or "")

T0 = datetime(2026, 1, 1, 12, 0)


@pytest.fixture
async def engine() -> AsyncIterator[MysqlEngine]:
    async with mariadb.installed() as engine:
        yield engine


async def test_passes_add_up_and_the_worse_outcome_wins_with_its_step(engine: MysqlEngine) -> None:
    second = timedelta(seconds=1)
    first_pass = [
        (1, "completed", "wf", "fetch", "nightly", None, T0, T0 + second),
        (2, "cancelled", "wf", "notify", "nightly", None, T0, T0 + 2 * second),
        (9, "completed", None, None, None, None, T0, T0),  # not a step: no record
    ]
    second_pass = [
        (3, "discarded", "wf", "render", None, None, T0 - second, T0 + 5 * second),
        (4, "cancelled", "wf", "callback", None, "any_failed", T0, T0 + 3 * second),
    ]
    for deleted in (first_pass, second_pass):
        async with engine.transaction() as cursor:
            await record_workflows(cursor, engine.files, deleted)
    record = await engine.workflow_record("wf")
    assert record is not None
    assert (record.name, record.state, record.failed_step) == ("nightly", "failed", "render")
    assert record.counts == {JobState.COMPLETED: 1, JobState.CANCELLED: 2, JobState.DISCARDED: 1}
    assert record.inserted_at == (T0 - second).replace(tzinfo=UTC)
    assert record.finished_at == (T0 + 5 * second).replace(tzinfo=UTC)
    assert await engine.workflow_record("nope") is None
