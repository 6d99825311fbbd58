"""The Django app: builds the project's Conveyor app once Django's settings and apps are ready."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.apps import AppConfig
from django.db import DatabaseError, connections, transaction
from django.db.models.signals import post_migrate
from django.utils.module_loading import autodiscover_modules

if TYPE_CHECKING:
    from conveyor.app import Conveyor


class ConveyorConfig(AppConfig):
    name = "conveyor.contrib.django"
    label = "conveyor"
    verbose_name = "Conveyor"
    default_auto_field = "django.db.models.BigAutoField"

    #: The app built from ``settings.CONVEYOR`` (set by ``ready``).
    conveyor: Conveyor

    def ready(self) -> None:
        from conveyor.contrib.django import checks  # noqa: F401  (registers them)
        from conveyor.contrib.django.config import build_app, jobs_modules

        # Each installed app's `jobs` module defines jobs (and @job(cron=...) entries): import them
        # now, and hand their names to the app so a node started from it imports them too.
        autodiscover_modules("jobs")
        self.conveyor = build_app(imports=jobs_modules())
        if self.conveyor_options.get("make_default", True):
            self.conveyor.make_default()
        post_migrate.connect(self._after_flush, sender=self)

    def _after_flush(self, using: str, **kwargs: Any) -> None:
        """``flush`` (TransactionTestCase runs one after each test) empties Django's tables, then
        sends ``post_migrate`` without a migration plan: empty the job table too, so no job outlives
        its test, and close the app's own connections (the test database is dropped at the end)."""
        from conveyor.contrib.django.config import database_alias
        from conveyor.contrib.django.schema import clear_jobs

        if "plan" in kwargs or using != database_alias(self.conveyor_options):
            return  # a migrate, or another database
        try:
            with transaction.atomic(using=using):  # a savepoint, should flush run in a transaction
                clear_jobs(connections[using])
        except DatabaseError:
            pass  # no job table in this database (never migrated, or `migrate conveyor zero`)
        self.conveyor.close_sync()

    @property
    def conveyor_options(self) -> dict[str, object]:
        from conveyor.contrib.django.config import django_options

        return django_options()
