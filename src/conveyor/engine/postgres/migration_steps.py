"""The PostgreSQL migrations as the steps that apply them to a live table.

A migration file is plain SQL that runs in one transaction (``install_sql``, migration tools). On a
``oban_jobs`` that already exists, and may hold millions of rows that a fleet keeps writing, the
runner applies the same files in steps instead, statement by statement in file order:

* an index on ``oban_jobs`` is built with ``CREATE INDEX CONCURRENTLY``, alone, outside any
  transaction: a plain build holds SHARE on the table for as long as it reads it, which stops every
  insert, claim and ack; a concurrent one takes SHARE UPDATE EXCLUSIVE, which none of them conflicts
  with, and a ``DROP INDEX`` becomes ``DROP INDEX CONCURRENTLY`` for the same reason;
* ``CREATE STATISTICS`` and ``ALTER TABLE ... SET (...)`` (storage parameters) also take only SHARE
  UPDATE EXCLUSIVE: each runs alone, without the short lock timeout below, which would only make it
  lose to an autovacuum of the table forever (autovacuum gives way after ``deadlock_timeout``);
* the other statements run in transactions (consecutive ones together) with a short
  ``lock_timeout``, retried (``migration_runner``), since whatever they lock they hold until commit.

The record of a migration is its last statement, so a migration is recorded only once all of its
steps ran; an interrupted one runs again, and every statement is idempotent.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from conveyor.engine._migrations import MIGRATIONS, Migration
from conveyor.engine._sqlfiles import SqlFiles, quote_identifier, quote_literal


class StepKind(enum.Enum):
    TRANSACTION = "in one transaction, with a short lock_timeout, retried"
    BUILD_INDEX = "outside a transaction: built concurrently"
    DROP_INDEX = "outside a transaction: dropped concurrently"
    ALONE = "outside a transaction: takes SHARE UPDATE EXCLUSIVE only, which writes never wait for"


@dataclass(frozen=True, slots=True)
class Step:
    #: The migration the step belongs to (0: the table that records migrations).
    version: int
    kind: StepKind
    sql: str
    #: BUILD_INDEX: the index's name, and the names of indexes that stand in for it (another tool's
    #: index on the same columns, see ``stand_ins``): when one of them exists, nothing is built.
    index: str = ""
    stand_ins: tuple[str, ...] = ()


_DOLLAR_QUOTE = re.compile(r"\$(?:[A-Za-z_][A-Za-z_0-9]*)?\$")
_LEADING_COMMENTS = re.compile(r"\A(?:\s+|--[^\n]*(?:\n|\Z)|/\*.*?\*/)*", re.DOTALL)
_CREATE_INDEX = re.compile(
    r"CREATE\s+(?P<unique>UNIQUE\s+)?INDEX\s+(?:IF\s+NOT\s+EXISTS\s+)?(?P<name>\w+)\s+ON\s+(?:ONLY\s+)?"
    r"(?P<table>\S+?)\s*\(",
    re.IGNORECASE,
)
_DROP_INDEX = re.compile(r"DROP\s+INDEX\s+(?:IF\s+EXISTS\s+)?(?P<name>[^\s,;]+)\s*;?\s*\Z", re.IGNORECASE)
_ALONE = re.compile(
    r"CREATE\s+STATISTICS\b|ALTER\s+TABLE\s+(?:IF\s+EXISTS\s+)?(?:ONLY\s+)?[^\s;]+\s+SET\s*\(", re.IGNORECASE
)


def split_statements(script: str) -> list[str]:
    """``script`` cut after each top-level ``;``: quotes, dollar-quoted bodies (``DO $$ ... $$``) and
    comments are skipped over. Joined again, the pieces give ``script`` back."""
    pieces: list[str] = []
    start = index = 0
    end = len(script)
    while index < end:
        char = script[index]
        if script.startswith("--", index):
            newline = script.find("\n", index)
            index = end if newline < 0 else newline + 1
        elif script.startswith("/*", index):
            close = script.find("*/", index + 2)
            index = end if close < 0 else close + 2
        elif char in "'\"":
            index = _after_quoted(script, index, char)
        elif char == "$" and (tag := _DOLLAR_QUOTE.match(script, index)):
            close = script.find(tag.group(0), tag.end())
            index = end if close < 0 else close + len(tag.group(0))
        elif char == ";":
            pieces.append(script[start : index + 1])
            start = index = index + 1
        else:
            index += 1
    if script[start:]:
        pieces.append(script[start:])
    return pieces


def _after_quoted(script: str, index: int, quote: str) -> int:
    """The position after the quoted string or name that opens at ``index`` (a doubled quote is
    part of it)."""
    position = index + 1
    while True:
        close = script.find(quote, position)
        if close < 0:
            return len(script)
        if script.startswith(quote * 2, close):
            position = close + 2
            continue
        return close + 1


def code_of(statement: str) -> str:
    """The statement without the comments and blank lines before it ('' for comments alone)."""
    return _LEADING_COMMENTS.sub("", statement, count=1).strip()


def stand_ins(objects: Sequence[tuple[int, str, str]]) -> dict[str, tuple[str, ...]]:
    """Index name -> the other names that satisfy it, from a schema's object list (``a|b``)."""
    found: dict[str, tuple[str, ...]] = {}
    for _, kind, names in objects:
        first, *others = names.split("|")
        if kind == "index" and others:
            found[first] = tuple(others)
    return found


def classify(statement: str, prefix: str, alternatives: Mapping[str, tuple[str, ...]], version: int) -> Step:
    """The step that runs ``statement`` (a statement of a migration rendered for ``prefix``) on a
    table that already exists."""
    code = code_of(statement)
    index = _CREATE_INDEX.match(code)
    if index and index.group("table") == f"{quote_identifier(prefix)}.oban_jobs":
        concurrent = _CREATE_INDEX_WORDS.sub(r"\g<0> CONCURRENTLY", code, count=1)
        name = index.group("name")
        return Step(version, StepKind.BUILD_INDEX, concurrent, name, alternatives.get(name, ()))
    dropped = _DROP_INDEX.match(code)
    if dropped:
        return Step(
            version, StepKind.DROP_INDEX, f"DROP INDEX CONCURRENTLY IF EXISTS {dropped.group('name')};"
        )
    if _ALONE.match(code):
        return Step(version, StepKind.ALONE, code)
    return Step(version, StepKind.TRANSACTION, statement)


_CREATE_INDEX_WORDS = re.compile(r"\ACREATE\s+(?:UNIQUE\s+)?INDEX", re.IGNORECASE)


def phased_steps(
    files: SqlFiles, prefix: str, start: int, alternatives: Mapping[str, tuple[str, ...]]
) -> tuple[Step, ...]:
    """The steps of the migrations after ``start``, preceded by the table that records them;
    consecutive transactional statements of one migration share a step, and the first one creates
    that table too (so a migration that refuses the table it finds leaves nothing behind)."""
    steps: list[Step] = [Step(0, StepKind.TRANSACTION, files["migrations_table"])]
    for migration in MIGRATIONS:
        if migration.version <= start:
            continue
        for statement in split_statements(migration.sql(files)):
            if not code_of(statement):
                continue
            step = classify(statement, prefix, alternatives, migration.version)
            last = steps[-1]
            if (
                step.kind is StepKind.TRANSACTION
                and last.kind is step.kind
                and last.version in (0, step.version)
            ):
                steps[-1] = Step(step.version, step.kind, last.sql + step.sql)
            else:
                steps.append(step)
    return tuple(steps)


def guard_stand_ins(script: str, prefix: str, alternatives: Mapping[str, tuple[str, ...]]) -> str:
    """``script`` with each index that has stand-ins created only when none of them exists: the
    form a single transaction (``install_sql``) needs, where the runner checks before building."""
    pieces = split_statements(script)
    for position, statement in enumerate(pieces):
        index = _CREATE_INDEX.match(code_of(statement))
        if not index or index.group("name") not in alternatives:
            continue
        absent = " AND ".join(
            f"to_regclass({quote_literal(f'{quote_identifier(prefix)}.{quote_identifier(other)}')}) IS NULL"
            for other in alternatives[index.group("name")]
        )
        body = code_of(statement)
        at = statement.index(body)
        guarded = f"DO $$\nBEGIN\n    IF {absent} THEN\n        {body}\n    END IF;\nEND\n$$;"
        pieces[position] = statement[:at] + guarded + statement[at + len(body) :]
    return "".join(pieces)


@dataclass(frozen=True, slots=True)
class MigrationPlan:
    """What ``migrate`` would do to one schema, read from the database (``schema.plan``)."""

    prefix: str
    #: The migration recorded last (None: never installed).
    installed: int | None
    #: The migrations after this one run (lower than ``installed`` when objects are missing).
    start: int
    #: Objects of the recorded migrations that do not exist (a repair, not an upgrade).
    missing: tuple[str, ...]
    #: False: ``oban_jobs`` exists, and the migrations run in ``steps`` (see the module docstring).
    #: True: there is no table to keep writable, and everything runs in one transaction.
    fresh: bool
    steps: tuple[Step, ...]
    #: Indexes of the schema: name -> valid (False: left INVALID by an interrupted build).
    indexes: Mapping[str, bool]

    @property
    def migrations(self) -> tuple[Migration, ...]:
        return tuple(m for m in MIGRATIONS if m.version > self.start)

    def headline(self, verb: str) -> str:
        """``version 3 → 9: applying 6 migrations (4 unique_jobs, ...)`` with ``verb`` (applying,
        would apply); for a repair, what is recreated."""
        target = MIGRATIONS[-1].version
        if not self.migrations:
            return f"already at version {target}: nothing to apply"
        count = len(self.migrations)
        names = ", ".join(f"{m.version} {m.name}" for m in self.migrations)
        what = f"{verb} {count} migration{'s' if count != 1 else ''} ({names})"
        if self.missing:
            return f"version {self.installed} lacks {', '.join(self.missing)}: {what} to recreate them"
        return f"version {self.installed if self.installed is not None else 'absent'} → {target}: {what}"

    def render(self) -> str:
        """The steps as SQL, each under a comment that says how it runs (``migrate --dry-run``)."""
        if not self.steps:
            return ""
        if self.fresh:
            lines = ["-- oban_jobs does not exist yet: everything runs in one transaction"]
        else:
            lines = [
                "-- oban_jobs exists: its indexes are built concurrently, one at a time, outside any "
                "transaction; the other statements run as shown, in order"
            ]
        for number, step in enumerate(self.steps, 1):
            lines.append(f"\n-- step {number}, migration {step.version}: {step.kind.value}")
            if step.kind is StepKind.BUILD_INDEX:
                present = [n for n in (step.index, *step.stand_ins) if self.indexes.get(n)]
                if present:
                    lines.append(f"-- (skipped: {present[0]} exists)")
                elif step.index in self.indexes:
                    lines.append(
                        "-- an INVALID index of this name, left by an interrupted build, goes first:"
                    )
                    lines.append(
                        f"DROP INDEX CONCURRENTLY IF EXISTS {quote_identifier(self.prefix)}.{step.index};"
                    )
            lines.append(code_of(step.sql) if step.kind is StepKind.TRANSACTION else step.sql)
        return "\n".join(lines)
