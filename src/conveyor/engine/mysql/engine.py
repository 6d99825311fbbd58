"""``MysqlEngine``: the MySQL/MariaDB engine, one database of a server shared by every node.

Semantics follow ``PostgresEngine`` statement for statement where a role is implemented; the
roles not implemented yet raise ``PendingRoleError`` (``pending.py``; ``docs/mysql.md`` lists
them). What differs, and why:

* Driver: asyncmy (measured against aiomysql: ``benchmarks/mysql_drivers.py``), one pool per engine.
* ``prefix``: the database Conveyor's tables live in, when it is not the URL's.
* Claims: ``SELECT ... FOR UPDATE SKIP LOCKED`` then ``UPDATE`` in one transaction (MySQL updates
  cannot read the rows they update through a subquery, nor return them).
* Notifications: no LISTEN/NOTIFY; a table written in the sender's transaction and polled.
"""

from __future__ import annotations

from conveyor.engine.mysql.core import MysqlCore
from conveyor.engine.mysql.pending_cluster import PendingCluster
from conveyor.engine.mysql.pending_roles import PendingRoles


class MysqlEngine(MysqlCore, PendingCluster, PendingRoles):
    """Runs every Conveyor statement on one MySQL or MariaDB database."""
