"""Django system checks of the integration (``manage.py check``, and every command that runs them:
runserver, migrate, test, conveyor_start)."""

from __future__ import annotations

from typing import Any

from django.core import checks


def own_database_url(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """``database_url`` turns off transactional enqueue: say so, unless ``transactional`` is set to
    False, which says it was meant."""
    from conveyor.contrib.django.config import django_options

    options = django_options()
    if not options.get("database_url") or options.get("transactional", True) is False:
        return []
    return [
        checks.Warning(
            "settings.CONVEYOR['database_url'] is set: Conveyor keeps its jobs on connections of its "
            "own, so an enqueue inside transaction.atomic() commits at once, and a rollback leaves "
            "its jobs behind (to run on rows that never were)",
            hint=(
                "Leave 'database_url' out to keep the jobs in the database of settings.CONVEYOR"
                "['database'] (they then commit and roll back with your rows), or add "
                "'transactional': False to say the enqueues are meant to stand alone."
            ),
            id="conveyor.W001",
        )
    ]


checks.register(own_database_url)
