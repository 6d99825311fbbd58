"""Inline testing mode in Django's transactions: a job enqueued inside ``transaction.atomic()``
runs when the block commits (``transaction.on_commit``), never after a rollback, as it would be
seen by a node only then. The transactions a ``TestCase`` wraps each test in are not the
application's: outside the application's own blocks the job runs at once.
"""

from __future__ import annotations

from collections.abc import Callable

from django.db import connections, transaction


def on_commit_of(alias: str) -> Callable[[Callable[[], None]], None]:
    """The app's ``defer_inline`` for Django's database ``alias``."""

    def defer(run: Callable[[], None]) -> None:
        connection = connections[alias]
        # TestCase marks its own atomic blocks: only the application's defer the job.
        if any(not getattr(block, "_from_testcase", False) for block in connection.atomic_blocks):
            transaction.on_commit(run, using=alias)
        else:
            run()

    return defer
