"""The PostgreSQL engine: psycopg 3 (async) with a psycopg_pool connection pool."""

from conveyor.engine.postgres.engine import PostgresEngine

__all__ = ["PostgresEngine"]
