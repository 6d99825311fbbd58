"""The MySQL/MariaDB engine (``mysql://`` and ``mariadb://`` URLs; the ``mysql`` extra)."""

from conveyor.engine.mysql.engine import MysqlEngine
from conveyor.engine.mysql.pending import PendingRoleError

__all__ = ["MysqlEngine", "PendingRoleError"]
