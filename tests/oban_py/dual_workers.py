"""Workers under both decorators: Conveyor's ``@worker`` over oban-py's ``@job`` and ``@worker``
(tests/test_oban_dual.py; importable only where oban-py is, .venv-oban)."""

from __future__ import annotations

from typing import Any

import oban

from conveyor import worker


@worker(queue="dual", record=True)
@oban.job(queue="dual")
def add(a: int, b: int = 2) -> int:
    return a + b


@worker(queue="dual", record=True)
@oban.worker(queue="dual")
class Echo:
    async def process(self, job: Any) -> Any:
        return job.args
