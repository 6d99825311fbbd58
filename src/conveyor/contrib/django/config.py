"""From Django's settings to a Conveyor app.

``settings.CONVEYOR`` holds Conveyor's own settings (``queues``, ``prefix``, ``crontab``...) plus a
few of the integration's:

* ``database``: the alias of the Django database the jobs live in (default ``"default"``). The
  app's URL is derived from it: one database, so one transaction covers the app's rows and its jobs.
* ``database_url``: a URL of its own instead (the jobs then cannot join Django's transactions).
* ``make_default``: make the app the process's default (``send.enqueue(...)`` finds it), True.
* ``transactional``: blocking inserts go through Django's connection (default True).
* ``dashboard``: the dashboard view's settings (``allow``, ``read_only``, ``title``, ``refresh``).

Anything wrong is an ``ImproperlyConfigured`` naming the setting.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import close_old_connections, connections

from conveyor.app import Conveyor
from conveyor.contrib.django.follow import DatabaseFollower
from conveyor.contrib.django.inline import on_commit_of
from conveyor.errors import ConveyorError

#: Keys of ``settings.CONVEYOR`` the integration reads itself; the rest are Conveyor's settings.
OWN_KEYS = frozenset({"dashboard", "database", "database_url", "make_default", "transactional"})
#: The keys of ``settings.CONVEYOR["dashboard"]``: who may in, and dashboard_app's display options.
DASHBOARD_KEYS = frozenset({"allow", "read_only", "title", "refresh"})
POSTGRES_ENGINES = ("django.db.backends.postgresql", "django.contrib.gis.db.backends.postgis")
SQLITE_ENGINES = ("django.db.backends.sqlite3", "django.contrib.gis.db.backends.spatialite")
#: libpq connection options of ``DATABASES[...]["OPTIONS"]`` that the app's URL carries too.
LIBPQ_OPTIONS = frozenset(
    {
        "sslmode",
        "sslrootcert",
        "sslcert",
        "sslkey",
        "sslpassword",
        "application_name",
        "connect_timeout",
        "options",
        "passfile",
        "service",
        "target_session_attrs",
        "gssencmode",
        "channel_binding",
    }
)


def django_options() -> dict[str, Any]:
    """``settings.CONVEYOR``, checked to be a dict (absent: no settings)."""
    options = getattr(settings, "CONVEYOR", None)
    if options is None:
        return {}
    if not isinstance(options, Mapping):
        raise ImproperlyConfigured(f"settings.CONVEYOR must be a dict of settings, not {options!r}")
    return dict(options)


def dashboard_options() -> dict[str, Any]:
    """``settings.CONVEYOR["dashboard"]``, checked (the dashboard view's settings)."""
    options = django_options().get("dashboard", {})
    if not isinstance(options, Mapping):
        raise ImproperlyConfigured(f"settings.CONVEYOR['dashboard'] must be a dict, not {options!r}")
    unknown = sorted(set(options) - DASHBOARD_KEYS)
    if unknown:
        raise ImproperlyConfigured(
            f"settings.CONVEYOR['dashboard'] has unknown keys {unknown}; it takes {sorted(DASHBOARD_KEYS)}"
        )
    return dict(options)


def database_alias(options: Mapping[str, Any]) -> str:
    alias = options.get("database", "default")
    if not isinstance(alias, str) or alias not in settings.DATABASES:
        known = ", ".join(map(repr, settings.DATABASES))
        raise ImproperlyConfigured(
            f"settings.CONVEYOR['database'] = {alias!r} is not a database of settings.DATABASES "
            f"(it has {known})"
        )
    return alias


def database_url(alias: str) -> str:
    """The Conveyor URL of Django's database ``alias`` (PostgreSQL or SQLite), as Django uses it
    now (the test database once Django's test runner has set it up)."""
    return entry_url(alias, connections[alias].settings_dict)


def entry_url(alias: str, entry: Mapping[str, Any]) -> str:
    """The Conveyor URL of the ``DATABASES`` entry ``entry`` of ``alias``."""
    engine = entry.get("ENGINE", "")
    if engine in POSTGRES_ENGINES:
        return _postgres_url(entry)
    if engine in SQLITE_ENGINES:
        return _sqlite_url(alias, entry)
    raise ImproperlyConfigured(
        f"DATABASES[{alias!r}] uses {engine!r}; Conveyor keeps jobs in PostgreSQL or SQLite only "
        f"(set settings.CONVEYOR['database'] to another alias, or 'database_url')"
    )


def _postgres_url(entry: Mapping[str, Any]) -> str:
    user = quote(str(entry.get("USER") or ""), safe="")
    password = quote(str(entry.get("PASSWORD") or ""), safe="")
    host = str(entry.get("HOST") or "")
    port = str(entry.get("PORT") or "")
    query: dict[str, str] = {}
    if host.startswith("/"):  # a Unix socket directory: libpq takes it as a parameter
        query["host"], host = host, ""
    credentials = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    netloc = credentials + quote(host, safe="") + (f":{port}" if port else "")
    options = entry.get("OPTIONS") or {}
    query |= {key: str(value) for key, value in options.items() if key in LIBPQ_OPTIONS}
    name = quote(str(entry.get("NAME") or ""), safe="")
    return f"postgresql://{netloc}/{name}" + (f"?{urlencode(query, quote_via=quote)}" if query else "")


def _sqlite_url(alias: str, entry: Mapping[str, Any]) -> str:
    name = str(entry.get("NAME") or "")
    if not name or name == ":memory:" or name.startswith("file:"):
        hint = ""
        if "memorydb" in name:  # Django's test database on SQLite is in memory unless named
            hint = (
                f"; Django's test database is in memory unless it has a file: set "
                f"DATABASES[{alias!r}]['TEST'] = {{'NAME': 'test-db.sqlite3'}}"
            )
        raise ImproperlyConfigured(
            f"DATABASES[{alias!r}]['NAME'] = {name!r}: Conveyor needs a SQLite file that every "
            f"process opens (an in-memory database is private to one connection){hint}"
        )
    return "sqlite:///" + os.path.abspath(Path(name))


def jobs_modules() -> list[str]:
    """The ``jobs`` modules of the installed apps (those that have one)."""
    found: list[str] = []
    for config in apps.get_app_configs():
        name = f"{config.name}.jobs"
        try:
            if importlib.util.find_spec(name) is not None:
                found.append(name)
        except ModuleNotFoundError:
            continue
    return found


def connection_provider(alias: str) -> Callable[[], Any]:
    """What ``Conveyor(sync_conn=...)`` calls: Django's driver connection for ``alias`` in the
    calling thread (psycopg's or sqlite3's), opened if need be."""

    def django_connection() -> Any:
        connection = connections[alias]
        connection.ensure_connection()
        return connection.connection

    return django_connection


@contextmanager
def django_job_scope() -> Iterator[None]:
    """Around each blocking job: close the thread's Django connections that are broken or past
    ``CONN_MAX_AGE`` before it runs and after, as Django does around each request."""
    close_old_connections()
    try:
        yield
    finally:
        close_old_connections()


def build_app(origin: str = "settings.CONVEYOR", **overrides: Any) -> Conveyor:
    """The app ``settings.CONVEYOR`` describes (``overrides`` win: the node's queues, say). A bad
    value is an ``ImproperlyConfigured`` whose message starts with ``origin``."""
    options = django_options()
    alias = database_alias(options)
    dashboard_options()  # a typo there fails at startup, not on the first visit
    own_url = options.get("database_url")
    url = own_url or database_url(alias)
    transactional = bool(options.get("transactional", True)) and "database_url" not in options
    conveyor_settings = {k: v for k, v in options.items() if k not in OWN_KEYS}
    if "imports" in overrides and "imports" in conveyor_settings:
        overrides["imports"] = [*_as_list(conveyor_settings.pop("imports")), *overrides["imports"]]
    try:
        app = Conveyor(
            url,
            sync_conn=connection_provider(alias) if transactional else None,
            blocking_job_scope=django_job_scope,
            **(conveyor_settings | {k: v for k, v in overrides.items() if v is not None}),
        )
    except (ConveyorError, TypeError) as exc:
        also = ""
        if "unknown setting" in str(exc):  # the integration's keys are no Conveyor settings
            also = f"; settings.CONVEYOR also takes the Django integration's {', '.join(sorted(OWN_KEYS))}"
        raise ImproperlyConfigured(f"{origin}: {exc}{also}") from None
    if transactional:  # inline jobs run when the enqueue they stand for would commit
        app.defer_inline = on_commit_of(alias)
    if not own_url:  # the jobs are in Django's database: go where Django goes (its test database)
        app.before_connect = DatabaseFollower(app, alias, url)
    return app


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value)
