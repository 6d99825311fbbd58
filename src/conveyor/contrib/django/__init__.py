"""Conveyor in a Django project: add ``"conveyor.contrib.django"`` to ``INSTALLED_APPS``.

* Settings come from ``settings.CONVEYOR`` (a dict of Conveyor's settings, plus ``database``: the
  alias of the Django database that holds the jobs, ``"default"`` by default). The database URL is
  derived from that alias's ``DATABASES`` entry (PostgreSQL or SQLite), unless ``database_url`` is
  given.
* ``migrate`` creates the schema (``conveyor_install`` does the same without migrations).
* ``send.enqueue_sync(...)`` (and ``get_app().enqueue_sync``) insert through Django's own connection:
  inside ``transaction.atomic()`` the jobs commit or roll back with the block.
* ``manage.py conveyor_start`` runs a node; each installed app's ``jobs`` module is imported, so its
  jobs and their cron entries are known.
* Tests: the app follows Django's test database (``follow``), inline jobs run on commit
  (``inline``), and ``flush`` empties the job table (``apps``).
* ``path("jobs/", include("conveyor.contrib.django.urls"))`` serves the dashboard to staff
  (``dashboard``); ``asgi.route_dashboard`` routes it beside Django under ASGI.

See docs/guides/django.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from conveyor.app import Conveyor


def get_app() -> Conveyor:
    """The project's Conveyor app, built from ``settings.CONVEYOR`` when Django started."""
    from django.apps import apps
    from django.core.exceptions import ImproperlyConfigured

    from conveyor.contrib.django.apps import ConveyorConfig

    if not apps.is_installed("conveyor.contrib.django"):
        raise ImproperlyConfigured('add "conveyor.contrib.django" to INSTALLED_APPS to use get_app()')
    config = apps.get_app_config(ConveyorConfig.label)
    assert isinstance(config, ConveyorConfig)
    return config.conveyor


__all__ = ["get_app"]
