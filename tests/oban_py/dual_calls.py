"""Run under .venv-oban by tests/test_oban_dual.py: oban-py's call forms on the dual workers, on a
Conveyor app (SQLite at argv[1]); prints what each gave, as JSON."""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from conveyor import Conveyor
from conveyor.testing import drain_queue
from tests.oban_py.dual_workers import Echo, add


def request(make: Any) -> Any:
    try:
        made = make()
    except Exception as exc:
        return {"error": type(exc).__name__, "message": str(exc)}
    return {"args": made.args, "priority": made.priority, "queue": made.queue}


async def main(path: str) -> None:
    out: dict[str, Any] = {
        "add.new(dict)": request(lambda: add.new({"a": 1})),
        "add.new(dict, priority)": request(lambda: add.new({"a": 1, "b": 3}, priority=3)),
        "add.new(1, b=5)": request(lambda: add.new(1, b=5)),
        "add.new(a=4)": request(lambda: add.new(a=4)),
        "Echo.new(dict)": request(lambda: Echo.new({"x": 1})),
        "Echo.new(dict, scheduled_in)": request(lambda: Echo.new({"x": 1}, scheduled_in=60, priority=2)),
        "Echo.new(x=1)": request(lambda: Echo.new(x=1)),
        "Echo.new(5)": request(lambda: Echo.new(5)),
    }
    app = Conveyor(f"sqlite:///{path}")
    await app.install()
    with app.as_current():
        ids = [await add.enqueue({"a": 10, "b": 5}), await Echo.enqueue({"y": 2}, priority=1)]
        ids.append(await asyncio.to_thread(add.enqueue_sync, {"a": 1}))
    await drain_queue("dual", app=app)
    out["results"] = [await app.get_result(i) for i in ids]
    await app.close()
    print(json.dumps(out))


asyncio.run(main(sys.argv[1]))
