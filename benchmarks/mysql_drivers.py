"""Which async MySQL driver the MySQL/MariaDB engine uses: asyncmy against aiomysql, alternated.

Each round runs, per driver, N single-row INSERT + COMMIT on one connection and then reads a
1,000-row SELECT back R times; the drivers take turns so that drift of the machine hits both.
Prints the median per round of each figure. Needs a server (default: 127.0.0.1:3306, root, no
password, database ``test``); creates and drops a table of its own.

    .venv/bin/python benchmarks/mysql_drivers.py --rounds 5 --inserts 2000 --reads 20
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

TABLE = f"conveyor_driver_bench_{uuid.uuid4().hex[:8]}"


async def _asyncmy(host: str, port: int, db: str) -> Any:
    import asyncmy

    return await asyncmy.connect(
        host=host, port=port, user="root", password="", database=db, autocommit=False
    )


async def _aiomysql(host: str, port: int, db: str) -> Any:
    import aiomysql

    return await aiomysql.connect(host=host, port=port, user="root", password="", db=db, autocommit=False)


async def _round(conn: Any, inserts: int, reads: int) -> tuple[float, float]:
    statement = f"INSERT INTO {TABLE} (queue, args) VALUES (%s, %s)"
    started = time.perf_counter()
    for i in range(inserts):
        async with conn.cursor() as cur:
            await cur.execute(statement, ("default", f'{{"i": {i}}}'))
        await conn.commit()
    insert_seconds = time.perf_counter() - started
    started = time.perf_counter()
    for _ in range(reads):
        async with conn.cursor() as cur:
            await cur.execute(f"SELECT id, queue, args, inserted_at FROM {TABLE} ORDER BY id LIMIT 1000")
            rows = await cur.fetchall()
            assert len(rows) == 1000
        await conn.commit()
    return insert_seconds, (time.perf_counter() - started) / reads


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3306)
    parser.add_argument("--db", default="test")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--inserts", type=int, default=2000)
    parser.add_argument("--reads", type=int, default=20)
    args = parser.parse_args()
    drivers: dict[str, Callable[[str, int, str], Awaitable[Any]]] = {
        "asyncmy": _asyncmy,
        "aiomysql": _aiomysql,
    }
    setup = await _asyncmy(args.host, args.port, args.db)
    async with setup.cursor() as cur:
        await cur.execute(
            f"CREATE TABLE {TABLE} (id BIGINT AUTO_INCREMENT PRIMARY KEY, queue VARCHAR(128), "
            "args JSON, inserted_at DATETIME(6) NOT NULL DEFAULT UTC_TIMESTAMP(6))"
        )
        await cur.execute(
            f"INSERT INTO {TABLE} (queue, args) SELECT 'seed', '{{}}' FROM seq_1_to_1000"
            if "MariaDB" in setup.get_server_info()
            else f"INSERT INTO {TABLE} (queue, args) VALUES ('seed', '{{}}')"
        )
    await setup.commit()
    results: dict[str, list[tuple[float, float]]] = {name: [] for name in drivers}
    try:
        for _ in range(args.rounds):
            for name, connect in drivers.items():
                conn = await connect(args.host, args.port, args.db)
                try:
                    results[name].append(await _round(conn, args.inserts, args.reads))
                finally:
                    conn.close()
    finally:
        async with setup.cursor() as cur:
            await cur.execute(f"DROP TABLE IF EXISTS {TABLE}")
        setup.close()
    print(f"{'driver':10} {'insert+commit µs/row':>22} {'SELECT 1,000 rows ms':>22}")
    for name, rounds in results.items():
        insert = statistics.median(r[0] for r in rounds) / args.inserts * 1e6
        select = statistics.median(r[1] for r in rounds) * 1e3
        print(f"{name:10} {insert:22.1f} {select:22.2f}")


if __name__ == "__main__":
    asyncio.run(main())
