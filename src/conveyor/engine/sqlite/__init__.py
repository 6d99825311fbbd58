"""The SQLite engine: the standard ``sqlite3`` module on dedicated threads, WAL mode."""

from conveyor.engine.sqlite.engine import SqliteEngine

__all__ = ["SqliteEngine"]
