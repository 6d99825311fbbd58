"""Numbered schema migrations, shared by every engine: each engine lists its own files, and a
version number means the same features on every engine."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from conveyor.engine._sqlfiles import SqlFiles, quote_literal


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str

    def sql(self, files: SqlFiles) -> str:
        """The migration's file (``vNNN_name.sql``) followed by the statement that records it."""
        record = files["record_migration"].format(version=self.version, name=quote_literal(self.name))
        body = files.compose(
            f"v{self.version:03d}_{self.name}",
            unique_predicate="unique_predicate",
            failed_jobs="failed_jobs",
            failed_key="failed_key",
        )
        return body + "\n" + record


#: The migrations every engine implements, in order.
MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "oban_jobs"),
    Migration(2, "cron_ticks"),
    Migration(3, "queue_states"),
    Migration(4, "unique_jobs"),
    Migration(5, "ordered_locks"),
    Migration(6, "rate_starts"),
    Migration(7, "fleet_limits"),
    Migration(8, "workflows"),
    Migration(9, "job_stats"),
    Migration(10, "workflow_step_names"),
    Migration(11, "dynamic_cron"),
    Migration(12, "dynamic_queues"),
    Migration(13, "workflow_records"),
)
LATEST_VERSION = MIGRATIONS[-1].version


def missing_from(objects: Sequence[tuple[int, str, str]], present: set[str]) -> list[tuple[int, str]]:
    """Which of ``objects`` (version, kind, name; a name may list alternatives as ``a|b``) are not
    among the names ``present`` in the database, as (version, description). Indexes count only
    while ``oban_jobs`` exists: without the table, the table is what is missing."""
    missing: list[tuple[int, str]] = []
    for version, kind, name in objects:
        if kind == "index" and "oban_jobs" not in present:
            continue
        if not present.intersection(name.split("|")):
            first = name.split("|")[0]
            missing.append((version, first if kind == "table" else f"{kind} {first}"))
    return missing


def schema_problem(where: str, version: int | None, missing: Sequence[str], options: str = "") -> str | None:
    """The sentence that says what is wrong with a schema (``where`` names it) and which command
    fixes it (with ``options`` after the command, e.g. `` --dsn ...``), or None when it is complete
    and current. Shared by the engines' ``check_schema`` and the CLI."""
    if version is None:
        return f"{where} is not installed: run `conveyor install{options}`"
    if version < LATEST_VERSION:
        return (
            f"{where} is at version {version}, this Conveyor needs {LATEST_VERSION}: "
            f"run `conveyor migrate{options}`"
        )
    if missing:
        return (
            f"{where} is at version {version} but lacks {', '.join(missing)} (dropped by another "
            f"tool, e.g. `oban uninstall`?): run `conveyor install{options}` to recreate them"
        )
    return None
