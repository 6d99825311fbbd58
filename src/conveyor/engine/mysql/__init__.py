"""The MySQL/MariaDB engine (``mysql://`` and ``mariadb://`` URLs; the ``mysql`` extra)."""

from conveyor.engine.mysql.engine import MysqlEngine

__all__ = ["MysqlEngine"]
