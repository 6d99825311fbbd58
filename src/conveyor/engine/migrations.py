"""Numbered schema migrations, shared by every engine: each engine lists its own files, and a
version number means the same features on every engine."""

from __future__ import annotations

from dataclasses import dataclass

from conveyor.engine.sqlfiles import SqlFiles, quote_literal


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str

    def sql(self, files: SqlFiles) -> str:
        """The migration's file (``vNNN_name.sql``) followed by the statement that records it."""
        record = files["record_migration"].format(version=self.version, name=quote_literal(self.name))
        return files[f"v{self.version:03d}_{self.name}"] + "\n" + record


#: The migrations every engine implements, in order.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "oban_jobs"),
    Migration(2, "cron_ticks"),
    Migration(3, "queue_states"),
)
LATEST_VERSION = MIGRATIONS[-1].version
