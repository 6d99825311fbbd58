"""``dashboard``: server time of the dashboard's jobs page on a table of 1M jobs (``--jobs``).

The table is filled in SQL (most jobs completed, the rest spread over the other states, four
queues, ten workers, a tag on one in ten), vacuumed and analyzed. Each page is requested in-process
through the ASGI app (routing, the query, the template: everything but the network), alternating
with the bare ``list_jobs`` call it makes as the reference. Figures: median and range of each, and
their ratio (the rendering's share). The issue's target: 200 ms or less for every page.
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from typing import Any

import httpx
import psycopg
from common import Figures, Settings, fresh_app

from conveyor import Conveyor
from conveyor.engine._sqlfiles import quote_identifier
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.sqlite import SqliteEngine
from conveyor.filters import JobFilter
from conveyor.web.dashboard import dashboard_app
from conveyor.web.dashboard.pages import SCAN_WINDOW

ROWS = 1_000_000
ROUNDS = 15
TARGET_MS = 200.0

#: Row ``g`` of the history: its state, queue, worker and tags follow from ``g`` alone.
POSTGRES_FILL = """
INSERT INTO {table} (state, queue, worker, args, tags, attempt, max_attempts, attempted_by,
                     inserted_at, scheduled_at, attempted_at, completed_at)
SELECT s.state::{prefix}.oban_job_state,
       (ARRAY['default','default','default','mail','mail','billing','reports'])[1 + g %% 7],
       'app.workers.w' || (g %% 10),
       jsonb_build_object('n', g, 'email', 'user' || g || '@example.com'),
       CASE WHEN g %% 10 = 0 THEN ARRAY['vip'] ELSE ARRAY[]::text[] END,
       1, 20, ARRAY['bench-node', 'bench-producer'], t, t, t,
       CASE WHEN s.state = 'completed' THEN t END
FROM generate_series(1, %(rows)s) AS g,
     LATERAL (SELECT timezone('UTC', now())
                     - make_interval(secs => 86000.0 * (%(rows)s - g) / %(rows)s)) AS c(t),
     LATERAL (SELECT CASE WHEN g %% 100 < 90 THEN 'completed' WHEN g %% 100 < 92 THEN 'discarded'
                          WHEN g %% 100 < 93 THEN 'cancelled' WHEN g %% 100 < 96 THEN 'available'
                          WHEN g %% 100 < 99 THEN 'scheduled' ELSE 'retryable' END) AS s(state)
"""
SQLITE_FILL = """
WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < :rows)
INSERT INTO oban_jobs (state, queue, worker, args, tags, attempt, max_attempts, attempted_by,
                       inserted_at, scheduled_at, attempted_at, completed_at)
SELECT state,
       CASE n % 7 WHEN 3 THEN 'mail' WHEN 4 THEN 'mail' WHEN 5 THEN 'billing' WHEN 6 THEN 'reports'
                  ELSE 'default' END,
       'app.workers.w' || (n % 10),
       json_object('n', n, 'email', 'user' || n || '@example.com'),
       CASE WHEN n % 10 = 0 THEN '["vip"]' ELSE '[]' END,
       1, 20, '["bench-node","bench-producer"]', t, t, t,
       CASE WHEN state = 'completed' THEN t END
FROM (
    SELECT n,
           strftime('%Y-%m-%d %H:%M:%f000', 'now', printf('-%d seconds', 86000 * (:rows - n) / :rows)) AS t,
           CASE WHEN n % 100 < 90 THEN 'completed' WHEN n % 100 < 92 THEN 'discarded'
                WHEN n % 100 < 93 THEN 'cancelled' WHEN n % 100 < 96 THEN 'available'
                WHEN n % 100 < 99 THEN 'scheduled' ELSE 'retryable' END AS state
    FROM g
)
"""

#: The pages measured: (name, query string). The deep page's ``before`` is set once the ids are known.
PAGES: list[tuple[str, dict[str, Any]]] = [
    ("first page", {}),
    ("state discarded", {"state": "discarded"}),
    ("queue mail, state available", {"queue": "mail", "state": "available"}),
    ("worker + tag", {"worker": "app.workers.w0", "tag": "vip"}),
    ("deep keyset page", {"before": None}),
    ("state cancelled, deep", {"state": "cancelled", "before": None}),
    # The worst case: a filter nothing matches (it looks through a window of 100,000 ids).
    ("worker with no jobs", {"worker": "app.workers.gone"}),
]


async def fill(app: Conveyor, rows: int) -> None:
    engine = await app.engine()
    if isinstance(engine, PostgresEngine):
        table = f"{quote_identifier(engine.prefix)}.oban_jobs"
        statement = POSTGRES_FILL.format(table=table, prefix=quote_identifier(engine.prefix))
        async with await psycopg.AsyncConnection.connect(engine.dsn, autocommit=True) as conn:
            await conn.execute(statement.encode(), {"rows": rows})
            await conn.execute(f"VACUUM (ANALYZE) {table}".encode())
        return
    assert isinstance(engine, SqliteEngine)
    with sqlite3.connect(engine.path) as conn:
        conn.execute(SQLITE_FILL, {"rows": rows})
        conn.commit()
        conn.execute("ANALYZE")


async def dashboard(settings: Settings) -> list[Figures]:
    rows = settings.job_count(ROWS)
    async with fresh_app(settings) as app:
        loaded = time.perf_counter()
        await fill(app, rows)
        fill_seconds = time.perf_counter() - loaded
        deep = max(200, rows // 100)  # among the oldest jobs: a keyset page far down the table
        pages = [(name, {k: (deep if v is None else v) for k, v in query.items()}) for name, query in PAGES]
        transport = httpx.ASGITransport(app=dashboard_app(app, refresh=0))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            timings: dict[str, list[float]] = {name: [] for name, _ in pages}
            reference: dict[str, list[float]] = {name: [] for name, _ in pages}
            newest = (await app.list_jobs(JobFilter(limit=1)))[0].id
            for _name, query in pages:  # warm up: caches, prepared plans
                await client.get("/jobs", params=query)
            for _ in range(ROUNDS):
                for name, query in pages:
                    started = time.perf_counter()
                    response = await client.get("/jobs", params=query)
                    timings[name].append(time.perf_counter() - started)
                    assert response.status_code == 200, name
                    started = time.perf_counter()
                    await app.list_jobs(_criteria(query, newest))
                    reference[name].append(time.perf_counter() - started)
    results = []
    for name, _ in pages:
        page_ms = [t * 1000 for t in timings[name]]
        bare_ms = [t * 1000 for t in reference[name]]
        median = statistics.median(page_ms)
        results.append(
            {
                "page": name,
                "rows": rows,
                "rounds": ROUNDS,
                "page_ms": round(median, 2),
                "page_range_ms": [round(min(page_ms), 2), round(max(page_ms), 2)],
                "list_jobs_ms": round(statistics.median(bare_ms), 2),
                "list_jobs_range_ms": [round(min(bare_ms), 2), round(max(bare_ms), 2)],
                "ratio": round(median / statistics.median(bare_ms), 2),
                "within_target": median <= TARGET_MS,
                "fill_s": round(fill_seconds, 1),
            }
        )
    return results


def _criteria(query: dict[str, Any], newest: int) -> JobFilter:
    """The filter the page lists with: a filtered page looks through a window of ids."""
    filtered = any(query.get(name) for name in ("state", "queue", "worker", "tag"))
    floor = (query.get("before") or newest + 1) - SCAN_WINDOW - 1
    return JobFilter(
        states=tuple(filter(None, [query.get("state")])),
        queues=tuple(filter(None, [query.get("queue")])),
        worker_suffix=query.get("worker"),  # one worker: matched by the end of its name, as the page does
        tags=tuple(filter(None, [query.get("tag")])),
        before_id=query.get("before"),
        after_id=floor if filtered and floor > 0 else None,
        limit=50,
    )
