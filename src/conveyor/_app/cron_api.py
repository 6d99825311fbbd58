"""The documented API of ``Conveyor`` for dynamic cron: cron entries stored in the database, added,
changed, paused, resumed and deleted at runtime (``conveyor.dynamic_cron``). ``Conveyor`` inherits
it. Every change takes effect on the leader's next tick, whichever node made it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from conveyor._app.binding import EngineBinding, blocking_twin
from conveyor.dynamic_cron import DEFAULT_BACKFILL_LIMIT, changed, copied, stored_cron
from conveyor.errors import ValidationError
from conveyor.fleet import StoredCron

if TYPE_CHECKING:
    from conveyor.cron import CronEntry


class CronApi:
    """Stored cron entries (part of ``Conveyor``)."""

    _binding: EngineBinding

    if TYPE_CHECKING:

        def crontab(self) -> list[CronEntry]: ...

    async def stored_crons(self) -> list[StoredCron]:
        """The cron entries stored in the database, by name, paused ones included."""
        return await self._binding.run(lambda e: e.list_crons())

    async def add_cron(
        self,
        /,
        name: str,
        expression: str,
        worker: Any,
        args: Mapping[str, Any] | None = None,
        *,
        timezone: str = "UTC",
        paused: bool = False,
        backfill: bool = False,
        backfill_limit: int = DEFAULT_BACKFILL_LIMIT,
        foreign: bool = False,
        **options: Any,
    ) -> StoredCron:
        """Store a new cron entry ``name``: ``worker`` (a ``@job``/``@worker`` or its name) with
        ``args`` on every tick of ``expression`` in ``timezone``, with job options ``queue``,
        ``priority``, ``max_attempts``, ``tags`` and ``meta``. Every node's leader runs it from the
        next minute. A name this process cannot import is refused unless ``foreign`` (a worker
        another runtime runs); an entry of the same name in code is replaced while this one is
        stored. A stored entry of that name already existing raises ``ValidationError``."""
        cron = stored_cron(
            name,
            expression,
            worker,
            args,
            timezone=timezone,
            paused=paused,
            backfill=backfill,
            backfill_limit=backfill_limit,
            foreign=foreign,
            **options,
        )
        if not await self._binding.run(lambda e: e.add_cron(cron)):
            raise ValidationError("name", name, "a stored cron entry of that name exists: use update_cron")
        return cron

    async def update_cron(
        self,
        /,
        name: str,
        *,
        expression: str | None = None,
        worker: Any = None,
        args: Mapping[str, Any] | None = None,
        timezone: str | None = None,
        backfill: bool | None = None,
        backfill_limit: int | None = None,
        foreign: bool = False,
        **options: Any,
    ) -> StoredCron:
        """Change the given fields of the cron entry ``name`` (None keeps one as it is; ``args``
        and job options replace the old ones). An entry defined only in code is first stored as it
        is, then changed: the stored one replaces it until ``delete_cron``."""
        changes = {
            "expression": expression,
            "worker": worker,
            "args": args,
            "timezone": timezone,
            "backfill": backfill,
            "backfill_limit": backfill_limit,
            **options,
        }
        return await self._change(name, changes, foreign=foreign)

    async def pause_cron(self, name: str) -> StoredCron:
        """Stop inserting the jobs of the cron entry ``name`` (stored, or defined in code: then a
        paused copy is stored) from the next tick; ``resume_cron`` starts it again."""
        return await self._change(name, {"paused": True})

    async def resume_cron(self, name: str) -> StoredCron:
        """Run the paused cron entry ``name`` again from the next tick."""
        return await self._change(name, {"paused": False})

    async def delete_cron(self, name: str) -> None:
        """Delete the stored cron entry ``name``: its jobs stop from the next tick, or, for an entry
        also defined in code, the code's version runs again. Raises ``ValidationError`` when no
        entry of that name is stored."""
        if not await self._binding.run(lambda e: e.delete_cron(name)):
            raise ValidationError("name", name, "no stored cron entry has that name (see stored_crons)")

    async def _change(self, name: str, changes: Mapping[str, Any], *, foreign: bool = False) -> StoredCron:
        stored = {cron.name: cron for cron in await self.stored_crons()}
        current = stored.get(name)
        if current is None:
            in_code = {entry.name: entry for entry in self.crontab()}
            if name not in in_code:
                raise ValidationError(
                    "name", name, "no cron entry has that name, stored or in this app's crontab"
                )
            current = copied(in_code[name])
        cron = changed(current, changes, foreign=foreign)
        write = (lambda e: e.update_cron(cron)) if name in stored else (lambda e: e.add_cron(cron))
        if not await self._binding.run(write):
            raise ValidationError("name", name, "the stored entry was added or deleted meanwhile; retry")
        return cron

    stored_crons_sync = blocking_twin(stored_crons)
    add_cron_sync = blocking_twin(add_cron)
    update_cron_sync = blocking_twin(update_cron)
    pause_cron_sync = blocking_twin(pause_cron)
    resume_cron_sync = blocking_twin(resume_cron)
    delete_cron_sync = blocking_twin(delete_cron)
