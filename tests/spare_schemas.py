"""Installed PostgreSQL schemas handed from a finished test to the next test of the same process.

Installing Conveyor's schema (thirteen migrations) and dropping it again costs the server about 50 ms
of CPU, and DDL's fsyncs, per test. A schema whose test changed no definition in it is as good as a
new one once its rows are gone: ``release`` deletes them and keeps the schema for ``take``.

"Changed no definition" is checked, not assumed: right after the engine installed a schema,
``installed`` notes its catalog's fingerprint (every catalog row of the schema's tables, columns,
defaults, indexes, constraints, functions, types, enum labels, triggers and comments, with the
transaction that last wrote it, plus the recorded migrations); any DDL since (an uninstall, a dropped
index, an altered column, Elixir's column types, a migration recorded or removed) writes or removes
one of those rows, and the schema is dropped as before. So is one a test never installed through the
``engine`` fixture. The ids of ``oban_jobs`` go on from where the last test left them, as in a
database that has seen other jobs.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg

#: The catalog rows of one schema's objects, each with the transaction that last wrote it (xmin):
#: equal fingerprints mean no definition changed in between.
FINGERPRINT = """
WITH rels AS (SELECT oid FROM pg_class WHERE relnamespace = %(ns)s::regnamespace)
SELECT md5(string_agg(row, ',' ORDER BY row)) FROM (
    SELECT 'c' || oid || ':' || xmin FROM pg_class WHERE oid IN (SELECT oid FROM rels)
    UNION ALL
    SELECT 'a' || attrelid || '.' || attnum || ':' || xmin FROM pg_attribute
    WHERE attrelid IN (SELECT oid FROM rels) AND attnum > 0
    UNION ALL
    SELECT 'd' || oid || ':' || xmin FROM pg_attrdef WHERE adrelid IN (SELECT oid FROM rels)
    UNION ALL
    SELECT 'i' || indexrelid || ':' || xmin FROM pg_index WHERE indrelid IN (SELECT oid FROM rels)
    UNION ALL
    SELECT 'k' || oid || ':' || xmin FROM pg_constraint WHERE connamespace = %(ns)s::regnamespace
    UNION ALL
    SELECT 'p' || oid || ':' || xmin FROM pg_proc WHERE pronamespace = %(ns)s::regnamespace
    UNION ALL
    SELECT 't' || oid || ':' || xmin FROM pg_type WHERE typnamespace = %(ns)s::regnamespace
    UNION ALL
    SELECT 'e' || oid || ':' || xmin FROM pg_enum
    WHERE enumtypid IN (SELECT oid FROM pg_type WHERE typnamespace = %(ns)s::regnamespace)
    UNION ALL
    SELECT 'g' || oid || ':' || xmin FROM pg_trigger WHERE tgrelid IN (SELECT oid FROM rels)
    UNION ALL
    SELECT 'm' || objoid || '.' || objsubid || ':' || xmin FROM pg_description
    WHERE objoid IN (SELECT oid FROM rels)
) AS catalog(row)
"""
TABLES = "SELECT relname FROM pg_class WHERE relnamespace = %(ns)s::regnamespace AND relkind = 'r'"


class SpareSchemas:
    """The spare schemas of one process, and the connection that checks, empties and drops them."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: psycopg.Connection[Any] | None = None
        #: Schema -> its fingerprint as installed: the ones being used, and (``_spares``) the free.
        self._installed: dict[str, str] = {}
        self._spares: list[str] = []

    def _connection(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed:
            self._conn = psycopg.connect(self.dsn, autocommit=True)
        return self._conn

    @staticmethod
    def new_name() -> str:
        return f"conveyor_test_{uuid.uuid4().hex[:10]}"

    def take(self) -> str:
        """A spare installed, empty schema, else a new name (nothing created)."""
        return self._spares.pop() if self._spares else self.new_name()

    def _fingerprint(self, schema: str) -> str | None:
        conn = self._connection()
        try:
            (catalog,) = conn.execute(FINGERPRINT, {"ns": schema}).fetchone() or (None,)
            table = f'"{schema}".conveyor_migrations'
            (versions,) = conn.execute(
                f"SELECT string_agg(version::text, ',' ORDER BY version) FROM {table}".encode()
            ).fetchone() or (None,)
        except psycopg.errors.InvalidSchemaName:
            return None
        except psycopg.errors.UndefinedTable:
            return None
        return f"{catalog}/{versions}"

    def installed(self, schema: str) -> None:
        """Note ``schema`` as the engine just installed it (its fingerprint), unless it is a spare
        whose fingerprint is known already."""
        if schema not in self._installed and (fingerprint := self._fingerprint(schema)) is not None:
            self._installed[schema] = fingerprint

    def release(self, schema: str) -> None:
        """Empty ``schema`` and keep it when its definitions are as installed; else drop it."""
        conn = self._connection()
        pristine = self._installed.pop(schema, None)
        if pristine is not None and self._fingerprint(schema) == pristine:
            tables = [
                row[0] for row in conn.execute(TABLES, {"ns": schema}) if row[0] != "conveyor_migrations"
            ]
            with conn.transaction():
                for table in tables:
                    conn.execute(f'DELETE FROM "{schema}"."{table}"'.encode())
            self._installed[schema] = pristine
            self._spares.append(schema)
            return
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())

    def drop_all(self) -> None:
        """Drop the spares (at the end of the process's tests)."""
        if not self._spares:
            return
        conn = self._connection()
        while self._spares:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self._spares.pop()}" CASCADE'.encode())
        conn.close()
