"""Where settings come from: arguments beat CONVEYOR_* environment variables, which beat the config
file, which beats the defaults. The file's queues make a node only where one is asked for
(``Conveyor.from_config``, ``conveyor start``); a plain ``Conveyor()``, as a web app builds, only
enqueues. Needs no database: building a Conveyor does not connect."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from _support import DATABASE_URL

from conveyor import Conveyor, ValidationError

CONFIG = """
[conveyor]
poll_interval = 5.0
shutdown_grace = 30.0
node = "from-the-file"

[conveyor.queues]
default = 10
mail = 5
thumbnails = { limit = 2, executor = "process" }
"""


def main() -> None:
    for name in [n for n in os.environ if n.startswith("CONVEYOR_") and n != "CONVEYOR_DATABASE_URL"]:
        del os.environ[name]  # start from a clean environment, so the output below is predictable
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "conveyor.toml")
        path.write_text(CONFIG)
        os.environ["CONVEYOR_POLL_INTERVAL"] = "2"  # normally set by your deployment
        os.environ["CONVEYOR_NOTIFICATIONS"] = "off"
        # A worker process: the node the file describes (conveyor start builds the same).
        app = Conveyor.from_config(DATABASE_URL, config_file=str(path), shutdown_grace=3, prefix="jobs")
        settings = app.settings
        queues = ", ".join(f"{q.name}:{q.limit}:{q.executor.value}" for q in settings.queues)
        print(f"queues         = {queues}  (file)")
        print(f"node           = {settings.node}  (file)")
        print(f"poll_interval  = {settings.poll_interval}  (environment beats the file's 5.0)")
        print(f"notifications  = {settings.notifications}  (environment)")
        print(f"shutdown_grace = {settings.shutdown_grace}  (argument beats the file's 30.0)")
        print(f"prefix         = {settings.prefix}  (argument)")
        print(f"stage_interval = {settings.stage_interval}  (default)")
        print(f"threads        = {settings.thread_count}  (default: the sum of queue limits, 4 to 100)")
        web = Conveyor(DATABASE_URL, config_file=str(path), prefix="jobs")
        print(f"web app queues = {web.settings.queues or 'none'}  (plain Conveyor(): runs no node)")

    for bad in ({"poll_interval": 0}, {"queues": "mail:many"}, {"pol_interval": 1.0}):
        try:
            Conveyor(DATABASE_URL, **bad)
        except ValidationError as exc:
            print(f"refused {exc.field}={exc.value!r}: {exc.problem.split(';')[0]}")


if __name__ == "__main__":
    main()
