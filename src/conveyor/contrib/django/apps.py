"""The Django app: builds the project's Conveyor app once Django's settings and apps are ready."""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.apps import AppConfig
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
        from conveyor.contrib.django.config import build_app, jobs_modules

        # Each installed app's `jobs` module defines jobs (and @job(cron=...) entries): import them
        # now, and hand their names to the app so a node started from it imports them too.
        autodiscover_modules("jobs")
        self.conveyor = build_app(imports=jobs_modules())
        if self.conveyor_options.get("make_default", True):
            self.conveyor.make_default()

    @property
    def conveyor_options(self) -> dict[str, object]:
        from conveyor.contrib.django.config import django_options

        return django_options()
