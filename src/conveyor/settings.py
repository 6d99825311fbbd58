"""Settings of an app and its node, from three sources.

Precedence, highest first: arguments given to ``Conveyor(...)`` (or CLI options), then
``CONVEYOR_*`` environment variables, then a config file, then the defaults below. The config file
is ``$CONVEYOR_CONFIG`` if set, else ``conveyor.toml`` in the working directory, else the
``[tool.conveyor]`` table of ``pyproject.toml`` there. ``queues`` from the file or the environment
apply only where a node is asked for (``conveyor start``, ``Conveyor.from_config``); see
``load_settings``.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import tomllib
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from conveyor.cron import CronEntry, parse_crontab
from conveyor.encryption import decode_key, key_id
from conveyor.errors import ValidationError
from conveyor.queue_settings import QueueSettings, parse_queues
from conveyor.retention import PruneRule, Retention, parse_prune_rules
from conveyor.setting_checks import LOG_FORMATS as LOG_FORMATS
from conveyor.setting_checks import LOG_LEVELS as LOG_LEVELS
from conveyor.setting_checks import MAX_DURATION, UNSET_FROM_TEXT, check_setting

ENV_PREFIX = "CONVEYOR_"
#: The instance name Conveyor nodes share leadership and signals under unless told otherwise.
DEFAULT_NAME = "conveyor"
#: oban-py's default instance name (``Oban(name=...)``), which a mixed fleet uses.
OBAN_PY_NAME = "Oban"
#: Heartbeats another runtime's producer may miss before it counts as dead: four, the age at which
#: oban-py itself forgets a producer row (its refresher's ``max_age``, 60 s, is four 15 s intervals).
FOREIGN_MISSED_BEATS = 4


def default_node_name() -> str:
    """Unique per process: two processes on one host never share a node name."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"


@dataclass(frozen=True, slots=True)
class Settings:
    """Every setting of an app and its node, validated: built by ``Conveyor(...)`` from its arguments, the
    ``CONVEYOR_*`` environment variables and the config file (see the module's docstring for the
    precedence), and read back as ``app.settings``. Each field is described in
    docs/guides/configuration.md, with its environment variable and its default."""

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
    #: Seconds a cancelled job whose run goes on (a thread cannot be interrupted) keeps its ordered
    #: lock and global-limit slot; then the node lets go of it with a warning, the run still going.
    cancel_grace: float = 300.0
    ack_batch_size: int = 1000
    ack_delay: float = 0.002
    #: Seconds the acker may stretch its wait to while results come fast (fuller batches, fewer
    #: statements); a lone result is never held longer than ``ack_delay``.
    ack_max_delay: float = 0.01
    #: Seconds between two writes of one job's progress (``conveyor.progress``): reports in between
    #: are merged, and the latest fields are written when the interval has passed. 0: every report.
    progress_interval: float = 0.5
    #: Threads for blocking jobs (default: the sum of queue limits, 4 to 100).
    threads: int | None = None
    #: Processes for CPU-bound jobs (default: the number of cores); started on first use.
    processes: int | None = None
    pool_size: int = 10
    #: PostgreSQL: False lets the node's claims and acks commit without waiting for the disk (pickup
    #: 0.5 ms sooner, more jobs/s), at the price of overlapping runs after a crash of the server; see
    #: ``hot_session`` in ``engine/postgres/sessions.py``. Inserts and every other statement always keep
    #: the database's own setting.
    synchronous_commit: bool = True
    #: PostgreSQL: what sits between Conveyor and the server (guides/poolers.md). "transaction": a
    #: pooler that hands out server sessions per transaction (PgBouncer's pool_mode=transaction,
    #: RDS Proxy, Supavisor): no prepared statements, no session settings, LISTEN on ``listen_url``
    #: or polling. "session" or "none": everything as on a direct connection. "auto": find out
    #: when the engine opens (a pooler found is treated as a transaction pooler, with a warning).
    pooler: str = "auto"
    #: PostgreSQL: a URL that reaches the server directly, for LISTEN (notifications) and for
    #: migrations (``install``) when ``database_url`` goes through a transaction pooler. None: LISTEN
    #: on ``database_url``, and behind a transaction pooler migrations are refused.
    listen_url: str | None = None
    #: Modules to import at start so their jobs resolve (``conveyor start --import``). Their
    #: ``@job(cron=...)`` jobs join the crontab.
    imports: tuple[str, ...] = ()
    #: The instance name: nodes sharing it share leadership and appear together.
    name: str = DEFAULT_NAME
    #: Take part in leader election (leader-only duties: rescue, pruning, cron).
    leadership: bool = True
    #: Seconds a leadership lease lasts; the leader renews at half of it.
    leader_ttl: float = 30.0
    #: Seconds between a node's producer heartbeats.
    heartbeat_interval: float = 2.0
    #: A producer silent this long is dead and its executing jobs are rescued.
    producer_timeout: float = 15.0
    #: How often another runtime's nodes on the database refresh their producer rows: oban-py's
    #: ``refresher`` interval (15 s by default; Elixir Oban's producers beat about as often).
    foreign_heartbeat_interval: float = 15.0
    #: Such a producer silent this long is dead (None: ``FOREIGN_MISSED_BEATS`` of its intervals, 60 s
    #: by default). Raise it above the longest blocking oban-py job: one stalls that node's loop, and
    #: with it the heartbeats.
    foreign_producer_timeout: float | None = None
    #: Share the database with oban-py nodes as one fleet (see guides/migrating-from-oban-py.md):
    #: the instance name defaults to oban-py's ``Oban`` (leadership, signals, producer rows), and a
    #: Conveyor node takes the lease from an oban-py leader, so rescue follows heartbeats, never age.
    mixed_fleet: bool = False
    #: Seconds a job that does not fit this node's code (its worker cannot be imported here, or its
    #: args do not fit the function) is snoozed and offered to every node again, its reason recorded
    #: in ``errors`` each time, before it is discarded: the span of a rolling deploy, where old and
    #: new code run side by side. Counted from its first misfit; 0 discards such a job at once.
    unfit_job_patience: float = 900.0
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
    #: Retention rules by queue, worker and state (``conveyor.retention.PruneRule``): the jobs a
    #: rule matches follow it instead of ``prune_max_age``/``prune_keep_per_queue``.
    prune_rules: tuple[PruneRule, ...] = ()
    #: Keep at most this many final jobs in the whole table, whatever their age (None: no cap).
    prune_max_rows: int | None = None
    #: Seconds the record of a workflow whose steps were pruned (how it ended, read by
    #: ``workflow_status``) is kept after the workflow ended (None: until deleted by hand).
    prune_workflow_records: float | None = 604_800.0
    #: App-level cron entries (besides ``@job(cron=...)``).
    crontab: tuple[CronEntry, ...] = ()
    #: The logging level ``conveyor start`` sets up (the library itself never configures logging).
    log_level: str = "INFO"
    #: How ``conveyor start`` writes log lines: "text", or "json" (one JSON object per line).
    log_format: str = "text"
    #: Keys for ``@job(encrypted=True)`` (``conveyor.encryption``): base64 texts of 32 random bytes,
    #: newest first. The first encrypts; every one decrypts, so an old key stays listed until no job
    #: encrypted with it is left. Never shown: ``repr`` and errors hide them.
    encryption_keys: tuple[str, ...] = ()
    #: Priority aging (``conveyor.aging``): an available job waiting longer than this many seconds
    #: gains one step of priority (0 is the highest), then one more each ``priority_aging_interval``
    #: it still waits. None: off.
    priority_aging_after: float | None = None
    #: Seconds between the leader's aging passes (each bumps at most ``priority_aging_limit`` jobs).
    priority_aging_interval: float = 60.0
    priority_aging_limit: int = 10_000

    def __post_init__(self) -> None:
        for name in FIELD_NAMES:
            check_setting(name, getattr(self, name))
        # Spelled as given ("debug", "JSON"), kept in one spelling.
        object.__setattr__(self, "log_level", self.log_level.upper())
        object.__setattr__(self, "log_format", self.log_format.lower())
        object.__setattr__(self, "pooler", self.pooler.lower())
        if self.producer_timeout <= self.heartbeat_interval:
            raise ValidationError(
                "producer_timeout", self.producer_timeout, "must be longer than heartbeat_interval"
            )
        if self.foreign_producer_timeout is not None and (
            self.foreign_producer_timeout <= self.foreign_heartbeat_interval
        ):
            raise ValidationError(
                "foreign_producer_timeout",
                self.foreign_producer_timeout,
                "must be longer than foreign_heartbeat_interval",
            )
        if self.mixed_fleet and self.name == DEFAULT_NAME:
            object.__setattr__(self, "name", OBAN_PY_NAME)
        names = [q.name for q in self.queues]
        if len(names) != len(set(names)):
            raise ValidationError("queues", names, "a queue is listed twice")

    @property
    def foreign_timeout(self) -> float:
        """Seconds after which another runtime's silent producer is dead (see the two settings)."""
        if self.foreign_producer_timeout is not None:
            return self.foreign_producer_timeout
        return min(MAX_DURATION, FOREIGN_MISSED_BEATS * self.foreign_heartbeat_interval)

    @property
    def retention(self) -> Retention:
        """The policy the pruner applies: the rules, the defaults, the table's cap."""
        return Retention(
            max_age=self.prune_max_age,
            keep_per_queue=self.prune_keep_per_queue,
            rules=self.prune_rules,
            max_rows=self.prune_max_rows,
            workflow_records=self.prune_workflow_records,
        )

    @property
    def thread_count(self) -> int:
        """Threads of the node's thread pool: ``threads``, else the queues' limits summed, from 4 to 100."""
        return self.threads or max(4, min(100, sum(q.limit for q in self.queues)))

    def __repr__(self) -> str:
        # A settings value printed or logged must not show a password (every *_url is masked) nor
        # an encryption key (shown by id).
        shown = (
            f"{name}={_shown(name, value)}"
            for name, value in ((name, getattr(self, name)) for name in FIELD_NAMES)
        )
        return f"Settings({', '.join(shown)})"


def _shown(name: str, value: Any) -> str:
    """A setting as ``repr`` shows it: URLs without their password, encryption keys by id only."""
    from conveyor.engine.postgres.dsn import mask

    if name.endswith("_url") and isinstance(value, str):
        return repr(mask(value))
    if name == "encryption_keys":
        return repr(tuple(f"<key {key_id(decode_key(text, i))}>" for i, text in enumerate(value)))
    return repr(value)


FIELDS = {f.name: f for f in dataclasses.fields(Settings)}
FIELD_NAMES = tuple(FIELDS)


def _from_text(name: str, text: str) -> Any:
    """An environment variable's text as the field's type."""
    kind = FIELDS[name].type
    if name == "queues":
        return parse_queues(text)
    if name in ("imports", "encryption_keys"):
        return tuple(part.strip() for part in text.split(",") if part.strip())
    if name == "crontab":
        raise ValidationError(ENV_PREFIX + "CRONTAB", text, "set the crontab in code or the config file")
    if name in UNSET_FROM_TEXT and text.strip().lower() in ("none", ""):
        return None
    if name == "prune_rules":
        variable = ENV_PREFIX + "PRUNE_RULES"
        try:
            return parse_prune_rules(orjson.loads(text), variable)
        except orjson.JSONDecodeError as exc:
            raise ValidationError(variable, text, f"must be a JSON array of rules: {exc}") from None
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
        try:
            if name == "queues":
                value = parse_queues(value)
            elif name == "crontab":
                if isinstance(value, str | bytes | Mapping) or not isinstance(value, Iterable):
                    raise ValidationError(name, value, "must be a list of cron entries")
                value = parse_crontab(value)
            elif name == "prune_rules":
                value = parse_prune_rules(value, name)
            elif name in ("imports", "encryption_keys") and isinstance(value, list | str):
                value = tuple(value) if isinstance(value, list) else (value,)
            check_setting(name, value)
        except ValidationError as exc:
            if source == "arguments":
                raise
            raise ValidationError(exc.field, exc.value, f"{exc.problem} (from {source})") from None
        result[name] = value
    return result


def with_overrides(settings: Settings, overrides: Mapping[str, Any]) -> Settings:
    """``settings`` with the given values (None: not given) in place of its own, each checked as an
    argument to ``Conveyor(...)`` would be (``conveyor start --app`` applies its options so)."""
    given = _normalise("arguments", {k: v for k, v in overrides.items() if v is not None})
    return dataclasses.replace(settings, **given)


def from_environment(environ: Mapping[str, str]) -> dict[str, Any]:
    values = {}
    for name in FIELDS:
        text = environ.get(ENV_PREFIX + name.upper())
        if text is not None and text != "":
            value = _from_text(name, text)
            try:
                check_setting(name, value)
            except ValidationError as exc:
                raise ValidationError(ENV_PREFIX + name.upper(), text, exc.problem) from None
            values[name] = value
    return values


def from_file(path: Path | None, environ: Mapping[str, str], cwd: Path) -> dict[str, Any]:
    if path is None and environ.get(ENV_PREFIX + "CONFIG"):
        path = Path(environ[ENV_PREFIX + "CONFIG"])
    if path is not None:
        if not path.exists():
            raise ValidationError("config_file", str(path), "does not exist")
        data = _read_toml(path)
        return _normalise(str(path), _table(path, data.get("conveyor", data), "[conveyor]"))
    local = cwd / "conveyor.toml"
    if local.exists():
        data = _read_toml(local)
        return _normalise(str(local), _table(local, data.get("conveyor", data), "[conveyor]"))
    pyproject = cwd / "pyproject.toml"
    if pyproject.exists():
        tool = _table(pyproject, _read_toml(pyproject).get("tool", {}), "[tool]")
        table = _table(pyproject, tool.get("conveyor", {}), "[tool.conveyor]")
        return _normalise(f"{pyproject} [tool.conveyor]", table)
    return {}


def _table(path: Path, value: Any, name: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise ValidationError("config_file", str(path), f"{name} must be a table, not {value!r}")
    return value


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValidationError("config_file", str(path), f"is not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        raise ValidationError("config_file", str(path), f"is not UTF-8 text: {exc.reason}") from None
    except OSError as exc:
        raise ValidationError("config_file", str(path), f"cannot be read: {exc.strerror or exc}") from None


def load_settings(
    overrides: Mapping[str, Any] | None = None,
    *,
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
    cwd: Path | None = None,
    configured_queues: bool = False,
) -> Settings:
    """Merge file, environment and explicit settings (in rising precedence) into ``Settings``.

    ``queues`` is the one setting that decides a process's role (a node runs when there are
    queues), so it is taken from the config file or ``CONVEYOR_QUEUES`` only when
    ``configured_queues`` is true (``conveyor start``, ``Conveyor.from_config``). Otherwise only an
    explicit ``queues`` in ``overrides`` counts: a web process that builds ``Conveyor()`` in a
    directory holding the workers' ``conveyor.toml`` does not become a node. The configured queues
    are still validated either way.
    """
    environ = os.environ if environ is None else environ
    merged = from_file(Path(config_file) if config_file else None, environ, cwd or Path.cwd())
    merged.update(from_environment(environ))
    if not configured_queues:
        merged.pop("queues", None)
    merged.update(_normalise("arguments", {k: v for k, v in (overrides or {}).items() if v is not None}))
    return Settings(**merged)
