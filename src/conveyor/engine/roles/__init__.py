"""The engine seam's roles: one Protocol per duty, as each engine splits its code by duty
(``engine/<name>/jobs.py``, ``hot_path.py``, ``cluster.py`` ...). ``engine.base.Engine`` is all
the required roles together; ``Abandoning`` and ``BlockingInserts`` are optional (``isinstance`` tells
whether an engine has one). The table in ``docs/architecture.md`` ("The engine seam") lists them, and
``tests/test_engine_roles.py`` keeps it true."""

from conveyor.engine.roles.cluster import (
    Cluster,
    Cron,
    Leadership,
    Producers,
    Pruning,
    QueueStates,
    StoredCrons,
    StoredQueues,
)
from conveyor.engine.roles.hot_path import HotPath
from conveyor.engine.roles.inserting import BlockingInsert, BlockingInserts, Inserting
from conveyor.engine.roles.jobs import Jobs
from conveyor.engine.roles.lifecycle import Abandoning, Failures, Lifecycle
from conveyor.engine.roles.notifications import Listener, NotificationHandler, Notifications
from conveyor.engine.roles.polling import Polling
from conveyor.engine.roles.relay import Relay
from conveyor.engine.roles.schema import Schema, SchemaReport
from conveyor.engine.roles.stats import Stats
from conveyor.engine.roles.workflows import Workflows

__all__ = [
    "Abandoning",
    "BlockingInsert",
    "BlockingInserts",
    "Cluster",
    "Cron",
    "Failures",
    "HotPath",
    "Inserting",
    "Jobs",
    "Leadership",
    "Lifecycle",
    "Listener",
    "NotificationHandler",
    "Notifications",
    "Polling",
    "Producers",
    "Pruning",
    "QueueStates",
    "Relay",
    "Schema",
    "SchemaReport",
    "Stats",
    "StoredCrons",
    "StoredQueues",
    "Workflows",
]
