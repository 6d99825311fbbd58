"""The schema role: installing, upgrading, removing and checking an engine's tables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from conveyor.engine._migrations import LATEST_VERSION, schema_problem


@dataclass(frozen=True, slots=True)
class SchemaReport:
    """What ``Schema.inspect_schema`` found, read before anything else touches the database."""

    #: The migration recorded last; None when Conveyor never installed there.
    version: int | None
    #: Objects the recorded migrations create that do not exist (dropped by another tool).
    missing: tuple[str, ...]
    #: How messages name the schema ("the Conveyor schema in 'public'"), and the command-line
    #: options that repeat its target (`` --prefix jobs``, `` --dsn sqlite:///...``).
    where: str
    options: str
    #: The version this Conveyor needs (every engine numbers the same migrations).
    latest: int = LATEST_VERSION

    def problem(self) -> str | None:
        """The sentence saying what is wrong and which command fixes it; None when all is well."""
        return schema_problem(self.where, self.version, self.missing, self.options)


class Schema(Protocol):
    """The engine's schema: numbered migrations (``engine/_migrations.py``) on every engine."""

    async def install(self) -> int:
        """Create or upgrade the schema (idempotent); return the schema version now installed."""

    async def uninstall(self) -> None:
        """Drop every object the schema installed; ``schema_version`` is None afterwards."""

    async def schema_version(self) -> int | None:
        """The installed schema version, or None when nothing is installed."""

    async def check_schema(self) -> None:
        """Raise SchemaError, saying what to run, unless the schema is installed and current."""

    async def inspect_schema(self, *, create: bool = False, patient: bool = False) -> SchemaReport:
        """The schema's state, read on a connection of its own, once and quickly: the engine need
        not be open and stays as it was. Fails at once with the database's own reason (``database
        "x" does not exist``) as a ``ConveyorError``, so a command says why before it builds
        anything. ``create``: the caller is about to install, so a database that can still be
        created (a SQLite file in a directory that exists) is reported as not installed instead of
        refused; without it nothing is ever created. ``patient``: keep asking a server that has no
        free connection slot (or is still starting) as long as ``open`` would."""

    async def migration_plan(self) -> str:
        """What ``install`` would do now, as text: a headline, then each step's SQL under a comment
        saying how it runs. Changes nothing; like ``inspect_schema``, on a connection of its own."""
