"""Settings of an app and its node, from three sources.

Precedence, highest first: arguments given to ``Conveyor(...)`` (or CLI options), then
``CONVEYOR_*`` environment variables, then a config file, then the defaults below. The config file
is ``$CONVEYOR_CONFIG`` if set, else ``conveyor.toml`` in the working directory, else the
``[tool.conveyor]`` table of ``pyproject.toml`` there.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import tomllib
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conveyor import options as opt
from conveyor.cron import CronEntry
from conveyor.definition import ExecutorKind
from conveyor.errors import ValidationError

ENV_PREFIX = "CONVEYOR_"


def default_node_name() -> str:
    """Unique per process: two processes on one host never share a node name."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True, slots=True)
class QueueSettings:
    name: str
    limit: int = 10
    #: Default executor for the queue's jobs (a worker's own choice wins).
    executor: ExecutorKind = ExecutorKind.AUTO

    def __post_init__(self) -> None:
        opt.check_queue(self.name)
        if isinstance(self.limit, bool) or not isinstance(self.limit, int) or self.limit < 1:
            raise ValidationError(f"queues.{self.name}.limit", self.limit, "must be an integer >= 1")
        try:
            object.__setattr__(self, "executor", ExecutorKind(self.executor))
        except ValueError:
            raise ValidationError(
                f"queues.{self.name}.executor",
                self.executor,
                f"must be one of {[k.value for k in ExecutorKind]}",
            ) from None


@dataclass(frozen=True, slots=True)
class Settings:
    database_url: str | None = None
    prefix: str = "public"
    #: The name other nodes and the dashboard know this node by.
    node: str = field(default_factory=default_node_name)
    queues: tuple[QueueSettings, ...] = ()
    #: Seconds between fetches when no notification arrives: the correctness fallback.
    poll_interval: float = 1.0
    #: Listen for insert notifications (low latency). Off: polling alone.
    notifications: bool = True
    stage_interval: float = 1.0
    stage_limit: int = 5000
    #: Seconds running jobs get to finish at shutdown before they are given back.
    shutdown_grace: float = 15.0
    ack_batch_size: int = 1000
    ack_delay: float = 0.002
    #: Threads for blocking jobs (default: the sum of queue limits, 4 to 100).
    threads: int | None = None
    #: Processes for CPU-bound jobs (default: the number of cores); started on first use.
    processes: int | None = None
    pool_size: int = 10
    #: Modules to import at start so their jobs resolve (``conveyor start --import``). Their
    #: ``@job(cron=...)`` jobs join the crontab.
    imports: tuple[str, ...] = ()
    #: The instance name: nodes sharing it share leadership and appear together.
    name: str = "conveyor"
    #: Take part in leader election (leader-only duties: rescue, pruning, cron).
    leadership: bool = True
    #: Seconds a leadership lease lasts; the leader renews at half of it.
    leader_ttl: float = 30.0
    #: Seconds between a node's producer heartbeats.
    heartbeat_interval: float = 2.0
    #: A producer silent this long is dead and its executing jobs are rescued.
    producer_timeout: float = 15.0
    rescue_interval: float = 5.0
    #: Executing jobs with no producer row at all are rescued after this long (the backstop).
    rescue_backstop: float = 3600.0
    prune: bool = True
    prune_interval: float = 60.0
    #: Completed, cancelled and discarded jobs older than this are deleted.
    prune_max_age: float = 86400.0
    prune_limit: int = 10_000
    #: Keep at most this many final jobs per queue (None: no cap).
    prune_keep_per_queue: int | None = None
    #: App-level cron entries (besides ``@job(cron=...)``).
    crontab: tuple[CronEntry, ...] = ()

    def __post_init__(self) -> None:
        opt.check_prefix(self.prefix)
        for name in (
            "poll_interval",
            "stage_interval",
            "shutdown_grace",
            "ack_delay",
            "leader_ttl",
            "heartbeat_interval",
            "producer_timeout",
            "rescue_interval",
            "rescue_backstop",
            "prune_interval",
            "prune_max_age",
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValidationError(name, value, "must be a number of seconds >= 0")
        for name in (
            "poll_interval",
            "leader_ttl",
            "heartbeat_interval",
            "rescue_interval",
            "prune_interval",
        ):
            if getattr(self, name) == 0:
                raise ValidationError(name, 0, "must be greater than 0")
        if self.producer_timeout <= self.heartbeat_interval:
            raise ValidationError(
                "producer_timeout", self.producer_timeout, "must be longer than heartbeat_interval"
            )
        for name in ("stage_limit", "ack_batch_size", "pool_size", "prune_limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValidationError(name, value, "must be an integer >= 1")
        for name in ("threads", "processes", "prune_keep_per_queue"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ValidationError(name, value, "must be an integer >= 1")
        names = [q.name for q in self.queues]
        if len(names) != len(set(names)):
            raise ValidationError("queues", names, "a queue is listed twice")

    @property
    def thread_count(self) -> int:
        return self.threads or max(4, min(100, sum(q.limit for q in self.queues)))


FIELDS = {f.name: f for f in dataclasses.fields(Settings)}


def parse_queues(value: Any) -> tuple[QueueSettings, ...]:
    """Queues from ``"default:10,mail:5"``, a list of names or specs, or a mapping of name to limit
    or to ``{"limit": n, "executor": "process"}``."""
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if isinstance(value, Mapping):
        items = []
        for name, spec in value.items():
            if isinstance(spec, Mapping):
                items.append(QueueSettings(name, **dict(spec)))
            else:
                items.append(QueueSettings(name, spec))
        return tuple(items)
    result = []
    for item in value:
        if isinstance(item, QueueSettings):
            result.append(item)
            continue
        if not isinstance(item, str):
            raise ValidationError("queues", item, "must be 'name' or 'name:limit'")
        name, _, limit = item.strip().partition(":")
        try:
            result.append(QueueSettings(name.strip(), int(limit) if limit else 10))
        except ValueError as exc:
            if isinstance(exc, ValidationError):
                raise
            raise ValidationError("queues", item, "the limit after ':' must be an integer") from None
    return tuple(result)


def parse_crontab(value: Any) -> tuple[CronEntry, ...]:
    """Entries as ``CronEntry`` values, ``(expression, job[, args])`` tuples, or mappings with
    expression, worker (a @job/@worker or its name), and optional args, timezone, name, backfill,
    and job options."""
    entries = []
    for item in value:
        if isinstance(item, CronEntry):
            entries.append(item)
        elif isinstance(item, tuple | list) and 2 <= len(item) <= 3:
            entries.append(CronEntry.build(*item))
        elif isinstance(item, Mapping):
            spec = dict(item)
            try:
                expression, target = spec.pop("expression"), spec.pop("worker")
            except KeyError as exc:
                raise ValidationError("crontab", item, f"an entry needs {exc.args[0]!r}") from None
            entries.append(CronEntry.build(expression, target, spec.pop("args", None), **spec))
        else:
            raise ValidationError("crontab", item, "entries are (expression, job, args) or mappings")
    names = [e.name for e in entries]
    if len(names) != len(set(names)):
        raise ValidationError("crontab", names, "two entries have the same name; give them distinct names")
    return tuple(entries)


def _from_text(name: str, text: str) -> Any:
    """An environment variable's text as the field's type."""
    kind = FIELDS[name].type
    if name == "queues":
        return parse_queues(text)
    if name == "imports":
        return tuple(part.strip() for part in text.split(",") if part.strip())
    if name == "crontab":
        raise ValidationError(ENV_PREFIX + "CRONTAB", text, "set the crontab in code or the config file")
    if name == "prune_keep_per_queue":
        return int(text) if text.strip().lower() not in ("none", "") else None
    if "bool" in str(kind):
        lowered = text.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValidationError(ENV_PREFIX + name.upper(), text, "must be true or false")
    if "float" in str(kind):
        try:
            return float(text)
        except ValueError:
            raise ValidationError(ENV_PREFIX + name.upper(), text, "must be a number") from None
    if "int" in str(kind):
        try:
            return int(text)
        except ValueError:
            raise ValidationError(ENV_PREFIX + name.upper(), text, "must be an integer") from None
    return text


def _normalise(source: str, values: Mapping[str, Any]) -> dict[str, Any]:
    result = {}
    for name, value in values.items():
        if name not in FIELDS:
            raise ValidationError(
                name, value, f"unknown setting (from {source}); expected one of {', '.join(FIELDS)}"
            )
        if name == "queues":
            value = parse_queues(value)
        elif name == "crontab":
            value = parse_crontab(value)
        elif name == "imports" and isinstance(value, list | str):
            value = tuple(value) if isinstance(value, list) else (value,)
        result[name] = value
    return result


def from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    values = {}
    for name in FIELDS:
        text = environ.get(ENV_PREFIX + name.upper())
        if text is not None and text != "":
            values[name] = _from_text(name, text)
    return values


def from_file(path: Path | None, environ: Mapping[str, str], cwd: Path) -> dict[str, Any]:
    if path is None and environ.get(ENV_PREFIX + "CONFIG"):
        path = Path(environ[ENV_PREFIX + "CONFIG"])
    if path is not None:
        if not path.exists():
            raise ValidationError("config_file", str(path), "does not exist")
        return _normalise(str(path), _read_toml(path).get("conveyor", _read_toml(path)))
    local = cwd / "conveyor.toml"
    if local.exists():
        data = _read_toml(local)
        return _normalise(str(local), data.get("conveyor", data))
    pyproject = cwd / "pyproject.toml"
    if pyproject.exists():
        table = _read_toml(pyproject).get("tool", {}).get("conveyor", {})
        return _normalise(f"{pyproject} [tool.conveyor]", table)
    return {}


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError("config_file", str(path), f"is not valid TOML: {exc}") from None


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Settings:
    """Merge file, environment and explicit settings (in rising precedence) into ``Settings``."""
    environ = os.environ if environ is None else environ
    merged = from_file(Path(config_file) if config_file else None, environ, cwd or Path.cwd())
    merged.update(from_environment(environ))
    merged.update(_normalise("arguments", {k: v for k, v in (overrides or {}).items() if v is not None}))
    return Settings(**merged)
