"""The wheel's smoke test, run by scripts/wheel-smoke.sh with the Python of a fresh virtualenv that
holds only the built wheel (with its ``web`` and ``prometheus`` extras) and its dependencies, never
the checkout: the README's quick start on SQLite, ``conveyor --version``, the dashboard's pages and
assets and a web process's ``/metrics`` served from the installed package, and ``conveyor install``
plus the quick start's job on PostgreSQL in a schema of its own (dropped at the end). Prints one line
per check; exits non-zero on the first failure, saying what differed.

Usage: python wheel_smoke.py README.md POSTGRES_URL   (run in an empty working directory)
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import os
import re
import subprocess
import sys
import sysconfig
import uuid
from pathlib import Path
from typing import Any

#: The quick start's database URL, replaced by the one each check uses.
README_URL = "postgresql://postgres@127.0.0.1:5432/test"


def fail(message: str) -> None:
    print(f"FAIL: {message}", flush=True)
    sys.exit(1)


def run(args: list[str], env: dict[str, str] | None = None) -> str:
    done = subprocess.run(args, capture_output=True, text=True, timeout=120, env=env)
    if done.returncode != 0:
        fail(f"{' '.join(args)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def quick_start(readme: Path) -> str:
    """The README's quick start, as a user would copy it: the first python block after its heading."""
    text = readme.read_text("utf-8")
    found = re.search(r"^## Quick start\n.*?```python\n(.*?)```", text, re.S | re.M)
    if found is None:
        fail(f"no python block under '## Quick start' in {readme}")
    assert found is not None
    code = found.group(1)
    if README_URL not in code:
        fail(f"the quick start no longer connects to {README_URL}: update this smoke test")
    return code


def installed_from_the_wheel() -> None:
    """The conveyor imported here is the venv's copy, with its SQL, templates, assets and py.typed."""
    import conveyor

    where = Path(conveyor.__file__).resolve()
    site = Path(sysconfig.get_paths()["purelib"]).resolve()
    if site not in where.parents:
        fail(f"conveyor was imported from {where}, not from the venv's {site}")
    files = {str(f) for f in importlib.metadata.files("conveyor") or ()}
    wanted = {
        "py.typed": "conveyor/py.typed",
        "PostgreSQL SQL": "conveyor/engine/postgres/sql/",
        "SQLite SQL": "conveyor/engine/sqlite/sql/",
        "dashboard templates": "conveyor/web/dashboard/templates/",
        "dashboard assets": "conveyor/web/dashboard/static/",
    }
    for what, path in wanted.items():
        if not any(f.startswith(path) for f in files):
            fail(f"the installed wheel lacks {what} ({path})")
    print(f"ok   installed from the wheel: {where.parent}", flush=True)


def version() -> None:
    expected = importlib.metadata.version("conveyor")
    out = run(["conveyor", "--version"]).strip()
    if out != f"conveyor, version {expected}":
        fail(f"conveyor --version printed {out!r}, expected the package's version {expected}")
    print(f"ok   {out}", flush=True)


def sqlite_quick_start(code: str) -> None:
    Path("quickstart_sqlite.py").write_text(code.replace(README_URL, "sqlite:///quickstart.db"), "utf-8")
    out = run([sys.executable, "quickstart_sqlite.py"])
    if "is completed after 1 attempt(s)" not in out:
        fail(f"the quick start on SQLite did not complete its job:\n{out}")
    print(f"ok   quick start on SQLite: {out.strip().splitlines()[-1]}", flush=True)


async def get(site: Any, path: str) -> tuple[int, bytes]:
    """One GET through an ASGI app, as a server would make it (no HTTP client needed)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(b"host", b"localhost"), (b"authorization", b"Bearer smoke-token")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 80),
    }
    requested = False
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        # Spec 2.4: a response does not listen for the client going away; after the request's one
        # body, say the client left (nothing asks).
        nonlocal requested
        if requested:
            return {"type": "http.disconnect"}
        requested = True
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    await site(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def dashboard_and_metrics() -> None:
    """The SQLite quick start's database, seen by a web process: the dashboard's pages and static
    assets come from the installed package, and /metrics reads the queue gauges from the database."""
    from starlette.applications import Starlette

    from conveyor import Conveyor
    from conveyor.contrib.prometheus import metrics
    from conveyor.web.dashboard import dashboard_app

    app = Conveyor("sqlite:///quickstart.db")

    async def pages() -> None:
        dashboard = dashboard_app(app, token="smoke-token")
        for path in ("/", "/jobs", "/static/dashboard.css"):
            status, body = await get(dashboard, path)
            if status != 200 or not body:
                fail(f"the dashboard's {path} answered {status} ({len(body)} bytes)")
        site = Starlette(routes=[metrics(app).route()])
        status, body = await get(site, "/metrics")
        wanted = b'conveyor_queue_jobs{queue="mail",state="completed"} 1.0'
        if status != 200 or wanted not in body:
            fail(f"/metrics answered {status} without {wanted.decode()}:\n{body.decode()[:2000]}")
        await app.close()

    asyncio.run(pages())
    print("ok   the dashboard's pages and assets, and /metrics of a web process", flush=True)


def postgres_install_and_job(code: str, dsn: str) -> None:
    import psycopg

    prefix = f"conveyor_smoke_{uuid.uuid4().hex[:10]}"
    try:
        out = run(["conveyor", "install", "--dsn", dsn, "--prefix", prefix]).strip()
        if "installed at version" not in out:
            fail(f"conveyor install printed {out!r}")
        print(f"ok   conveyor install: {out}", flush=True)
        # The quick start names its URL; the schema comes from $CONVEYOR_PREFIX (never `public`).
        Path("quickstart_pg.py").write_text(code.replace(README_URL, dsn), "utf-8")
        env = {**os.environ, "CONVEYOR_PREFIX": prefix}
        out = run([sys.executable, "quickstart_pg.py"], env=env)
        if "is completed after 1 attempt(s)" not in out:
            fail(f"the quick start on PostgreSQL did not complete its job:\n{out}")
        print(f"ok   a job on PostgreSQL: {out.strip().splitlines()[-1]}", flush=True)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{prefix}" CASCADE')


def main() -> None:
    readme, dsn = Path(sys.argv[1]), sys.argv[2]
    code = quick_start(readme)
    installed_from_the_wheel()
    version()
    sqlite_quick_start(code)
    dashboard_and_metrics()
    postgres_install_and_job(code, dsn)


if __name__ == "__main__":
    main()
