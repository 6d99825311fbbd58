"""Finding a job's code from the worker name stored in its row."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import Any

from conveyor._oban_py import oban_definition
from conveyor.definition import JobDefinition, definition_of
from conveyor.errors import WorkerNotFoundError


class Resolver:
    """Maps worker names to job definitions: first the ones given explicitly, then by import.

    Each app owns its resolver, so nothing is shared between apps or tests. Resolved names are
    cached because the hot path resolves the same few workers over and over.
    """

    def __init__(self, known: Iterable[Any] = ()) -> None:
        self._cache: dict[str, JobDefinition] = {}
        for target in known:
            self.register(target)

    def register(self, target: Any, name: str | None = None) -> JobDefinition:
        """Make a decorated job known under its worker name (or ``name``, e.g. an Elixir name)."""
        definition = definition_for(target)
        if definition is None:
            raise WorkerNotFoundError(
                name or repr(target), "it is not decorated with @job or @worker (Conveyor's or oban-py's)"
            )
        self._cache[name or definition.name] = definition
        return definition

    def definitions(self) -> list[JobDefinition]:
        """Every definition known so far (registered or already resolved)."""
        return list({id(d): d for d in self._cache.values()}.values())

    def resolve(self, name: str) -> JobDefinition:
        found = self._cache.get(name)
        if found is None:
            found = self._cache[name] = import_definition(name)
        return found


def definition_for(target: Any) -> JobDefinition | None:
    """The definition of a Conveyor ``@job``/``@worker``, or of an oban-py worker (run unchanged,
    see ``_oban_py``); None for anything else."""
    return definition_of(target) or oban_definition(target)


def import_definition(name: str) -> JobDefinition:
    """Import ``package.module.QualName`` and return its job definition."""
    parts = name.split(".")
    if len(parts) < 2 or not all(p.isidentifier() for p in parts):
        raise WorkerNotFoundError(name, "it is not a dotted Python name (package.module.QualName)")
    # The module is the longest importable prefix; the rest is the qualified name inside it.
    for split in range(len(parts) - 1, 0, -1):
        module_name = ".".join(parts[:split])
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            # Only "this module (or a parent package) does not exist" means: try a shorter prefix.
            # A missing dependency, even one whose name starts the same way, is a real failure.
            missing = exc.name
            if missing is not None and not (module_name == missing or module_name.startswith(missing + ".")):
                raise WorkerNotFoundError(name, f"importing {module_name} failed: {exc}") from exc
            continue
        except BaseException as exc:  # SystemExit and the like too: a bad module never ends the node
            raise WorkerNotFoundError(name, f"importing {module_name} raised {exc!r}") from exc
        target: Any = module
        for attr in parts[split:]:
            target = getattr(target, attr, None)
            if target is None:
                raise WorkerNotFoundError(name, f"module {module_name} has no {'.'.join(parts[split:])}")
        definition = definition_for(target)
        if definition is None:
            raise WorkerNotFoundError(
                name, "it is not decorated with @job or @worker (Conveyor's or oban-py's)"
            )
        return definition
    raise WorkerNotFoundError(name, f"no module of {name} can be imported")
