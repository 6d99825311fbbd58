"""Following Django's test database.

The app is built when Django starts, from ``DATABASES`` as they are then: the development database.
Django's test runner (and pytest-django) then create a test database and point the alias at it
(``connection.settings_dict``). Before each connection of its own the app compares: while it has
opened none it moves to the database the alias names now; once it has, it refuses to go on (its
connections are on another database than Django's) rather than read or run the wrong jobs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.db import connections

from conveyor.errors import ConveyorError

if TYPE_CHECKING:
    from conveyor.app import Conveyor


class DatabaseFollower:
    """``before_connect`` of the app built from Django's alias ``alias``."""

    def __init__(self, app: Conveyor, alias: str, url: str) -> None:
        self.app = app
        self.alias = alias
        self.url = url
        self.name = str(connections[alias].settings_dict.get("NAME"))

    def __call__(self) -> None:
        from conveyor.contrib.django.config import entry_url

        entry = connections[self.alias].settings_dict
        url = entry_url(self.alias, entry)
        if url == self.url:
            return
        name = str(entry.get("NAME"))
        try:
            self.app.use_database(url)
        except ConveyorError:
            raise ConveyorError(
                f"Django's database {self.alias!r} is now {name!r} (the test database), but this "
                f"Conveyor app already opened connections to {self.name!r}: refusing to use either. "
                f"Nothing may use Conveyor's own connections (drain_queue, assert_enqueued, "
                f"get_job ...) before Django sets up the test database: not at import time, nor "
                f"in a test runner's setup before setup_databases"
            ) from None
        self.url, self.name = url, name
