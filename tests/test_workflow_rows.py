"""The rows of ``conveyor_workflows`` the MySQL/MariaDB and SQLite pruners write (the shared
``engine/_workflow_rows.py``): one per workflow, the worse outcome winning with the first step (in id
order) that had it, whether the engine's times are datetimes (MySQL) or ISO text (SQLite). What the
pruners record is proven on every engine by tests/conformance/app/test_workflow_unit_contract.py."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import orjson
import pytest

from conveyor.engine._workflow_rows import workflow_rows

T0 = datetime(2026, 1, 1, 12, 0)
S = timedelta(seconds=1)


@pytest.mark.parametrize("time", [lambda t: t, lambda t: t.isoformat(" ")], ids=["datetime", "text"])
def test_one_row_per_workflow_the_worse_outcome_with_its_first_step(time: Callable[[datetime], Any]) -> None:
    deleted = [
        (4, "cancelled", "wf", "callback", None, "any_failed", time(T0), time(T0 + 3 * S)),  # run_if: fine
        (3, "discarded", "wf", "render", None, None, time(T0 - S), time(T0 + 5 * S)),
        (2, "cancelled", "wf", "notify", "nightly", None, time(T0), None),
        (5, "discarded", "wf", "later", None, None, time(T0), time(T0 + S)),  # worse, but not first
        (1, "completed", "other", "only", None, None, time(T0), None),
        (9, "completed", None, None, None, None, time(T0), time(T0)),  # not a step: no row
    ]
    rows = {row["id"]: row for row in workflow_rows(deleted)}
    assert set(rows) == {"wf", "other"}
    wf = rows["wf"]
    assert (wf["name"], wf["state"], wf["failed_step"]) == ("nightly", "failed", "render")
    assert orjson.loads(wf["counts"]) == {"completed": 0, "cancelled": 2, "discarded": 2}
    assert (wf["inserted_at"], wf["finished_at"]) == (time(T0 - S), time(T0 + 5 * S))
    other = rows["other"]
    assert (other["state"], other["failed_step"], other["finished_at"]) == ("completed", None, None)
    assert workflow_rows([]) == []
