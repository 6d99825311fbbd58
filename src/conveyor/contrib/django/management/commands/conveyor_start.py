"""``manage.py conveyor_start``: run a node with the project's settings until SIGTERM or SIGINT.

The node imports every installed app's ``jobs`` module; blocking jobs may use the ORM (each runs
with its thread's Django connections checked before and after, as a request would)."""

from __future__ import annotations

import asyncio
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.core.management.base import BaseCommand, CommandError, CommandParser

from conveyor.cli.common import require_schema
from conveyor.cli.logs import configure_logging
from conveyor.cli.start import exit_if_threads_remain, run_node
from conveyor.contrib.django.config import build_app, jobs_modules
from conveyor.errors import ConveyorError
from conveyor.settings import LOG_FORMATS, LOG_LEVELS


class Command(BaseCommand):
    help = "Run a Conveyor node: fetch and execute jobs of the configured queues until stopped."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--queues", "-q", help="Queues and limits, e.g. default:10,mail:5 (overrides settings)."
        )
        parser.add_argument("--node", help="Node name (default: host-pid-random).")
        parser.add_argument("--log-level", choices=LOG_LEVELS, default="INFO", type=str.upper)
        parser.add_argument(
            "--log-format", choices=LOG_FORMATS, default="text", type=str.lower, help="text or json lines."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        configure_logging(options["log_level"], options["log_format"])
        try:
            app = build_app(
                "the command's options or settings.CONVEYOR",
                queues=options["queues"],
                node=options["node"],
                imports=jobs_modules(),
            )
            if not app.settings.queues:
                raise CommandError(
                    "no queues to run: set settings.CONVEYOR['queues'] or pass --queues default:10"
                )
        except (ConveyorError, ImproperlyConfigured) as exc:
            raise CommandError(str(exc)) from None
        try:
            require_schema(app.settings.database_url, app.settings.prefix)
        except ConveyorError as exc:
            raise CommandError(
                f"Conveyor's schema is not ready: run `manage.py migrate` (or `manage.py "
                f"conveyor_install`) first. The check said: {exc}"
            ) from None
        app.make_default()  # jobs that enqueue more find this app
        exit_if_threads_remain(asyncio.run(run_node(app)))
