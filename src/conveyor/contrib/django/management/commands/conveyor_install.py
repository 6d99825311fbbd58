"""``manage.py conveyor_install``: create or upgrade Conveyor's schema without Django's migrations
(``--print-sql`` prints it instead, for a DBA or another migration tool)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connections

from conveyor.contrib.django import get_app
from conveyor.contrib.django.config import database_alias, django_options
from conveyor.contrib.django.schema import schema_sql
from conveyor.errors import ConveyorError


class Command(BaseCommand):
    help = "Create or upgrade Conveyor's tables in the database settings.CONVEYOR names."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--print-sql", action="store_true", help="Print the SQL; change nothing.")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["print_sql"]:
            vendor = connections[database_alias(django_options())].vendor
            try:
                self.stdout.write("\n".join(schema_sql(vendor)))
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            return
        try:
            version = get_app().install_sync()
        except (ConveyorError, OSError) as exc:
            raise CommandError(f"cannot install the schema: {exc}") from None
        self.stdout.write(f"conveyor schema at version {version}")
