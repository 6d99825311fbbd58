"""What a pytest run asked of a private PostgreSQL (``suite_cpu.py --private postgres --pg-stats FILE``).

The private clusters then load ``pg_stat_statements`` and count function calls; after the run this
writes to FILE, summed over the clusters: the database's sessions, commits and rows
(``pg_stat_database``), the statements by total execution time and by calls, and the DDL by kind.
Each test's schema has a name of its own, so statements are grouped with the schema names replaced
by ``S``. Never set on the shared server: these settings need a restart and cost every statement.
"""

from __future__ import annotations

import re
from collections import defaultdict
from typing import Any

import psycopg

#: What the private clusters start with (on top of the machine's server's settings).
SETTINGS = {
    "shared_preload_libraries": "'pg_stat_statements'",
    "pg_stat_statements.max": "20000",
    "pg_stat_statements.track": "top",
    "track_functions": "all",
}
_SCHEMA = re.compile(r'"?\b(conveyor|oban|cv|pref|t)_[a-z0-9_]*[0-9a-f]{8,}"?')
_DDL = re.compile(
    r"^\s*(CREATE|DROP|ALTER|TRUNCATE|COMMENT)\s+(OR REPLACE\s+)?(UNIQUE\s+|UNLOGGED\s+)?(\w+)", re.I
)
_DATABASE = (
    "SELECT sessions, xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted, tup_returned,"
    " tup_fetched FROM pg_stat_database WHERE datname = 'test'"
)


def prepare(dsn: str) -> None:
    """Make the extension in the run's database (before the tests run)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        conn.execute("SELECT pg_stat_statements_reset()")


def _normalize(query: str) -> str:
    text = "\n".join(line for line in query.splitlines() if not line.lstrip().startswith("--"))
    return " ".join(_SCHEMA.sub("S", text).split())[:160]


def report(dsns: list[str], top: int = 40) -> str:
    """The figures of every cluster in ``dsns``, summed, as text."""
    database: dict[str, int] = defaultdict(int)
    statements: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    functions: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for dsn in dsns:
        with psycopg.connect(dsn, autocommit=True) as conn:
            cursor = conn.execute(_DATABASE)
            names = [column.name for column in cursor.description or ()]
            for name, value in zip(names, cursor.fetchone() or (), strict=False):
                database[name] += int(value or 0)
            rows: list[Any] = conn.execute(
                "SELECT query, calls, total_exec_time, rows FROM pg_stat_statements"
            ).fetchall()
            for query, calls, total, count in rows:
                entry = statements[_normalize(query)]
                entry[0] += calls
                entry[1] += total
                entry[2] += count
            for name, calls, total in conn.execute(
                "SELECT schemaname || '.' || funcname, calls, total_time FROM pg_stat_user_functions"
            ):
                entry = functions[_SCHEMA.sub("S", name)]
                entry[0] += calls
                entry[1] += total
    ddl: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for query, (calls, total, _rows) in statements.items():
        if match := _DDL.match(query):
            kind = f"{match[1].upper()} {match[4].upper()}"
            ddl[kind][0] += calls
            ddl[kind][1] += total
    lines = ["database: " + ", ".join(f"{k} {v}" for k, v in database.items())]
    lines.append(
        f"statements: {sum(e[0] for e in statements.values()):.0f} calls, "
        f"{sum(e[1] for e in statements.values()) / 1000:.1f} s executing"
    )
    lines.append("\nDDL (calls, exec s):")
    lines += [f"{c:9.0f} {t / 1000:8.2f}  {k}" for k, (c, t) in sorted(ddl.items(), key=lambda kv: -kv[1][1])]
    for title, index in (("total time", 1), ("calls", 0)):
        lines.append(f"\ntop by {title} (calls, exec s, rows):")
        ranked = sorted(statements.items(), key=lambda kv: -kv[1][index])[:top]
        lines += [f"{c:9.0f} {t / 1000:8.2f} {r:9.0f}  {q}" for q, (c, t, r) in ranked]
    lines.append("\nfunctions (calls, s):")
    ranked_functions = sorted(functions.items(), key=lambda kv: -kv[1][1])[:top]
    lines += [f"{c:9.0f} {t / 1000:8.2f}  {name}" for name, (c, t) in ranked_functions]
    return "\n".join(lines) + "\n"
