"""What a command reads of a SQLite database before it acts (``Engine.inspect_schema``,
``Engine.migration_plan``): on a connection of its own, without the engine's threads, and never
creating a file that the command would leave behind empty."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from conveyor.engine.roles.schema import SchemaReport
from conveyor.engine.sqlite import schema
from conveyor.engine.sqlite.database import MEMORY
from conveyor.errors import ConveyorError

#: Seconds to wait for a lock held by another process: a command's look is short.
INSPECT_TIMEOUT = 3.0


def inspect(path: str, url: str, *, create: bool) -> SchemaReport:
    """The schema's state in the database file ``path`` (``url`` is how commands name it)."""
    where, options = f"the Conveyor schema in {path}", f" --dsn {url}"
    if path == MEMORY:
        return SchemaReport(None, (), where, options)
    file = Path(path).resolve()
    if not file.exists():
        if not create:
            raise ConveyorError(
                f"there is no SQLite database at {file}: run `conveyor install --dsn {url}` to create "
                "one, or pass the --dsn (or $CONVEYOR_DATABASE_URL) of the one your nodes use"
            )
        if not file.parent.is_dir():
            raise ConveyorError(
                f"cannot create the SQLite database {file}: the directory {file.parent} does not exist"
            )
        return SchemaReport(None, (), where, options)
    if file.is_dir():
        raise ConveyorError(f"cannot open the SQLite database {file}: it is a directory")
    try:
        # mode=rw: never create the file (it exists; this keeps a race from leaving an empty one).
        conn = sqlite3.connect(f"{file.as_uri()}?mode=rw", uri=True, timeout=INSPECT_TIMEOUT)
        try:
            version = schema.installed_version(conn)
            missing = schema.missing_objects(conn) if version is not None else []
        finally:
            conn.close()
    except sqlite3.Error as exc:
        raise ConveyorError(f"cannot read the SQLite database {file}: {exc}") from None
    return SchemaReport(version, tuple(name for _, name in missing), where, options)


def plan(report: SchemaReport, prefix: str) -> str:
    """SQLite applies its migrations in one write transaction: the plan is their script. A repair
    (objects missing) runs from the first migration, every statement being ``IF NOT EXISTS``."""
    start = 0 if report.missing else report.version or 0
    latest = schema.LATEST_VERSION
    if start >= latest:
        return f"{report.where} is already at version {latest}: nothing to apply"
    count = latest - start
    headline = (
        f"{report.where}: version {report.version if report.version is not None else 'absent'} → "
        f"{latest}: would apply {count} migration{'s' if count != 1 else ''} in one transaction"
    )
    return f"{headline}\n{schema.install_sql(prefix, from_version=start)}"
