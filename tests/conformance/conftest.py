"""The engine conformance suite: every engine proves the same behaviour through the Engine API.

A new engine joins by adding a factory to ENGINES; no test below may use engine-specific SQL.
A factory gets the test's tmp_path and a list it may note created databases in (to be cleaned up);
called again with the same list it returns another engine on the same database (several nodes).
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiosqlite
import psycopg
import pytest

from conveyor import Conveyor
from conveyor.engine.base import Engine
from conveyor.engine.postgres import PostgresEngine
from conveyor.engine.sqlite import SqliteEngine
from tests.conformance import mariadb
from tests.conftest import DSN

#: PostgreSQL schemas a finished test left installed and empty, for the next test to take: emptying
#: five small tables costs a fraction of dropping a schema and running the migrations again.
_spare_schemas: list[str] = []
_RECYCLED_TABLES = (
    "oban_jobs",
    "oban_producers",
    "oban_leaders",
    "conveyor_cron_ticks",
    "conveyor_queue_states",
    "conveyor_queue_starts",
    "conveyor_queue_limits",
    "oban_crons",
    "oban_queues",
)


def _postgres(tmp_path: Path, schemas: list[str]) -> Engine:
    if not schemas:
        schemas.append(_spare_schemas.pop() if _spare_schemas else f"conveyor_conf_{uuid.uuid4().hex[:10]}")
    return PostgresEngine(DSN, prefix=schemas[0], max_connections=4)


def release_schema(schema: str) -> None:
    """Empty a test's schema for the next one, or drop it when it is not intact (uninstalled); a
    MariaDB test's private database (tagged ``mariadb:``) is dropped."""
    if mariadb.release(schema):
        return
    with psycopg.connect(DSN, autocommit=True) as conn:
        try:
            with conn.transaction():
                for table in _RECYCLED_TABLES:
                    conn.execute(f'DELETE FROM "{schema}"."{table}"'.encode())
        except psycopg.Error:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'.encode())
        else:
            _spare_schemas.append(schema)


@pytest.fixture(scope="session", autouse=True)
def _drop_spare_schemas() -> Iterator[None]:
    yield
    with psycopg.connect(DSN, autocommit=True) as conn:
        while _spare_schemas:
            conn.execute(f'DROP SCHEMA IF EXISTS "{_spare_schemas.pop()}" CASCADE'.encode())


def _sqlite(tmp_path: Path, schemas: list[str]) -> Engine:
    return SqliteEngine(tmp_path / "conformance.db")


def _mariadb(tmp_path: Path, schemas: list[str]) -> Engine:
    return mariadb.factory(schemas)


ENGINES: dict[str, Callable[[Path, list[str]], Engine]] = {
    "postgres": _postgres,
    "sqlite": _sqlite,
    "mariadb": _mariadb,
}

#: Why a case waits on MariaDB, by the role it needs.
_DASHBOARD = "the dashboard reads queue_counts, job_stats and cron entries, not implemented yet"
_LIMITS = "fetch_jobs under partitioned fleet limits is not implemented yet"
_LATE_SIGNAL = (
    "the polled listener hands the node its own scale signal up to 50 ms late, after the persisted "
    "state the test reads next (measured: applied 10 ms after it); needs a same-process fan-out"
)
_LOOP = "the engine's pool belongs to one event loop (the optional Abandoning role is not implemented yet)"
_RELAY = "the Relay role is not implemented yet"
_STATS = "queue_counts and job_stats (Stats) are not implemented yet"
_WORKFLOWS = "the Workflows role is not implemented yet"

#: Test modules every case of which waits.
_PENDING_MODULES: dict[str, str] = {
    "app/test_workflow_runs_contract.py": _WORKFLOWS,
    "engine/test_partitions_contract.py": _LIMITS,
    "engine/test_workflow_guards_contract.py": _WORKFLOWS,
}
#: Single tests (every parameter of each) that wait, by module and reason.
_PENDING_TESTS: dict[str, dict[str, tuple[str, ...]]] = {
    "app/test_blocking_enqueue_contract.py": {
        _LOOP: ("test_enqueue_sync_goes_on_while_the_portal_loop_is_busy",),
    },
    "app/test_dashboard_contract.py": {
        _DASHBOARD: (
            "test_authentication_basic_token_and_hook",
            "test_cron_actions_pause_resume_and_delete_entries",
            "test_cron_page_lists_entries_with_next_run",
            "test_cron_page_lists_stored_entries_over_the_configured_ones",
            "test_job_detail_shows_result_progress_errors_and_workflow",
            "test_overview_counts_queues_and_charts_the_last_hour",
            "test_pages_filters_and_keyset_paging",
            "test_queue_actions_reach_the_node",
            "test_read_only_hides_and_refuses_actions",
            "test_security_headers_on_every_response",
            "test_user_data_is_rendered_inert",
            "test_without_auth_only_loopback_is_served",
        ),
    },
    "app/test_dashboard_details_contract.py": {
        _DASHBOARD: (
            "test_cron_page_lists_what_the_nodes_announce_without_importing_jobs",
            "test_job_page_labels_progress_decodes_results_and_names_the_zone",
            "test_queue_table_names_the_limit_that_binds_and_counts_every_state",
        ),
    },
    "app/test_dynamic_cron_contract.py": {
        _LOOP: ("test_a_name_is_stored_once_and_a_foreign_worker_is_accepted_when_said",),
    },
    "app/test_dynamic_queues_contract.py": {
        _LIMITS: ("test_a_declared_queue_starts_changes_and_stops_on_every_node",),
    },
    "app/test_encrypted_args_contract.py": {
        _WORKFLOWS: ("test_workflow_steps_of_an_encrypted_worker_are_sealed_and_run",),
    },
    "app/test_enqueue_hooks_contract.py": {
        _LOOP: ("test_a_blocking_enqueue_reads_the_callers_context_in_its_thread",),
    },
    "app/test_fake_time_contract.py": {
        _LATE_SIGNAL: ("test_a_persisted_queue_state_reaches_a_node_that_missed_its_signal",),
    },
    "app/test_job_api_contract.py": {
        _LOOP: (
            "test_list_jobs_sync_with_a_connection_reads_in_its_transaction",
            "test_the_current_app_is_the_one_entered_or_made_default",
        ),
    },
    "app/test_relay_runs_contract.py": {
        _RELAY: (
            "test_bad_signals_are_refused_clearly",
            "test_progress_of_concurrent_coroutines_is_merged_and_kept",
            "test_receive_times_out_and_iteration_ends",
            "test_signals_reach_running_jobs_in_order",
            "test_sync_twins_wait_relay_and_signal",
            "test_wait_for_signal_lets_go_of_the_slot_until_each_message",
            "test_wait_for_signal_works_in_threads_and_processes",
            "test_waiting_on_what_is_not_there_or_with_bad_options_fails_clearly",
        ),
    },
    "app/test_testing_contract.py": {
        _WORKFLOWS: (
            "test_drain_runs_a_workflow_in_order",
            "test_steps_grafted_from_blocking_code_keep_the_apps_own_connection",
        ),
    },
    "app/test_workflow_unit_contract.py": {
        _WORKFLOWS: (
            "test_a_batch_whose_callbacks_were_not_called_for_completes",
            "test_a_callers_connection_names_the_steps_too",
            "test_a_completed_batch_is_recorded_completed",
            "test_a_discarded_step_fails_the_workflow_and_a_cancel_cancels_it",
            "test_a_locked_workflows_row_goes_with_its_record",
            "test_a_pruned_workflow_is_still_told_by_its_record",
            "test_eight_processes_racing_make_one_workflow",
            "test_enqueue_many_gives_each_steps_id_by_name",
            "test_one_unfinished_workflow_per_lock",
            "test_status_gives_one_state_a_phase_and_progress",
            "test_sub_workflows_batches_and_grafts_name_their_steps",
            "test_wait_workflow_raises_naming_the_failed_or_cancelled_step",
            "test_wait_workflow_returns_the_completed_status",
            "test_wait_workflow_times_out_and_refuses_what_is_not_there",
        ),
    },
    "engine/test_limits_contract.py": {
        _LIMITS: ("test_dead_after_frees_partitioned_slots_too",),
    },
    "engine/test_relay_contract.py": {
        _RELAY: (
            "test_an_ack_keeps_the_progress_and_merges_a_snooze_meta",
            "test_final_jobs_and_full_inboxes_refuse_signals",
            "test_job_states_reports_existing_jobs_only",
            "test_progress_is_stored_only_for_the_attempt_that_runs",
            "test_signals_are_appended_in_order_and_told_to_a_running_job",
            "test_signals_reach_jobs_not_yet_running_and_wake_only_those_that_wait",
            "test_signals_survive_junk_another_client_stored",
            "test_wake_awaiting_wakes_a_job_whose_message_came_while_it_let_go",
        ),
    },
    "engine/test_stats_contract.py": {
        _STATS: (
            "test_a_naive_now_is_refused_by_queue_counts",
            "test_errors_of_another_shape_are_skipped",
            "test_failure_times_are_read_in_any_zone_and_junk_is_skipped",
            "test_job_stats_counts_each_bucket",
            "test_job_stats_of_a_quiet_window_is_zero",
            "test_job_stats_of_some_queues",
            "test_job_stats_reads_the_engine_clock_without_now",
            "test_queue_counts_gives_every_state_of_every_queue",
            "test_queue_counts_of_an_empty_table_is_empty",
            "test_queue_counts_reads_the_engine_clock_without_now",
            "test_the_app_counts_and_measures",
            "test_the_blocking_twins_count_and_measure",
            "test_the_oldest_available_job_is_found_across_priorities",
        ),
    },
    "engine/test_stopping_contract.py": {
        _LIMITS: ("test_a_cancelled_run_keeps_its_partitioned_global_slot",),
    },
    "engine/test_workflows_contract.py": {
        _WORKFLOWS: (
            "test_a_deleted_dependency_cancels_its_dependents_unless_ignored",
            "test_a_diamond_goes_on_step_by_step",
            "test_a_failed_dependency_cancels_the_steps_after_it",
            "test_a_failed_step_before_a_wide_fan_out_cancels_every_step_after_it",
            "test_a_fan_in_goes_on_once_when_steps_end_at_once_on_many_nodes",
            "test_a_policy_ignores_failed_dependencies",
            "test_a_step_scheduled_ahead_waits_for_its_time",
            "test_a_wide_fan_out_goes_on_whole_and_its_fan_in_once_after_the_last",
            "test_a_workflow_retry_racing_the_sweep_never_cancels_its_steps_again",
            "test_cancelling_a_step_cancels_the_steps_after_it",
            "test_finished_steps_are_not_pruned_while_their_workflow_waits",
            "test_one_ack_of_many_steps_settles_each_dependent_by_its_own_dependencies",
            "test_one_ack_settles_alike_steps_of_different_workflows",
            "test_steps_added_later_depend_on_stored_steps",
            "test_steps_another_client_wrote_badly_never_stall_the_others",
            "test_the_sweep_settles_what_no_ack_settled",
        ),
    },
}

#: What the MariaDB engine does not do yet, keyed by test module (every case of it) or
#: ``module::test`` (one test), each with the reason: those cases are skipped on mariadb, never
#: failed. Remove an entry when the role it waits for lands (docs/mysql.md keeps the same list);
#: ``CONVEYOR_MARIADB_PENDING=run`` runs them all anyway, to see what a change made pass.
MARIADB_PENDING: dict[str, str] = {
    **_PENDING_MODULES,
    **{
        f"{module}::{name}": reason
        for module, by_reason in _PENDING_TESTS.items()
        for reason, names in by_reason.items()
        for name in names
    },
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Skip the mariadb cases when no server answers, and those MARIADB_PENDING names."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or callspec.params.get("engine_name") != "mariadb":
            continue
        if mariadb.UNREACHABLE is not None:
            item.add_marker(pytest.mark.skip(reason=mariadb.UNREACHABLE))
            continue
        module = item.nodeid.split("tests/conformance/", 1)[-1].split("::", 1)[0]
        name = getattr(item, "originalname", item.name)
        reason = MARIADB_PENDING.get(f"{module}::{name}") or MARIADB_PENDING.get(module)
        if reason is not None and os.environ.get("CONVEYOR_MARIADB_PENDING") != "run":
            item.add_marker(pytest.mark.skip(reason=f"MariaDB engine pending: {reason}"))


async def _postgres_caller(engine: Engine) -> Any:
    return await psycopg.AsyncConnection.connect(DSN)


async def _sqlite_caller(engine: Engine) -> Any:
    assert isinstance(engine, SqliteEngine)
    return await aiosqlite.connect(engine.path)


def _postgres_address(engine: Engine) -> tuple[str, str]:
    assert isinstance(engine, PostgresEngine)
    return engine.dsn, engine.prefix


def _sqlite_address(engine: Engine) -> tuple[str, str]:
    assert isinstance(engine, SqliteEngine)
    return engine.url, "public"


#: For each engine, the (URL, prefix) that ``engine_from_url`` turns into another engine on the same
#: database: how a test reaches it from other processes.
ADDRESSES: dict[str, Callable[[Engine], tuple[str, str]]] = {
    "postgres": _postgres_address,
    "sqlite": _sqlite_address,
    "mariadb": mariadb.address,
}


async def _postgres_unstamp(engine: Engine, job_id: int, scheduled_at: datetime) -> None:
    assert isinstance(engine, PostgresEngine)
    async with await psycopg.AsyncConnection.connect(DSN, autocommit=True) as conn:
        table = f'"{engine.prefix}".oban_jobs'
        statement = f"UPDATE {table} SET attempted_at = NULL, scheduled_at = %s WHERE id = %s"
        await conn.execute(statement.encode(), (scheduled_at.astimezone(UTC).replace(tzinfo=None), job_id))


async def _sqlite_unstamp(engine: Engine, job_id: int, scheduled_at: datetime) -> None:
    assert isinstance(engine, SqliteEngine)
    naive = scheduled_at.astimezone(UTC).replace(tzinfo=None).isoformat(" ", timespec="microseconds")
    async with aiosqlite.connect(engine.path) as conn:
        await conn.execute(
            "UPDATE oban_jobs SET attempted_at = NULL, scheduled_at = ? WHERE id = ?", (naive, job_id)
        )
        await conn.commit()


#: For each engine, what another client may write that the Engine API never does: an executing row
#: without ``attempted_at`` (and ``scheduled_at`` set as given), written on a connection of its own.
UNSTAMP_ATTEMPT: dict[str, Callable[[Engine, int, datetime], Awaitable[None]]] = {
    "postgres": _postgres_unstamp,
    "sqlite": _sqlite_unstamp,
    "mariadb": mariadb.unstamp,
}


#: For each engine, an application's own async connection to the engine's database (what ``conn=``
#: takes), opened with the driver's defaults: transactions begin implicitly, ``commit()`` ends them.
CALLER_CONNECTIONS: dict[str, Callable[[Engine], Awaitable[Any]]] = {
    "postgres": _postgres_caller,
    "sqlite": _sqlite_caller,
    "mariadb": mariadb.caller,
}


@contextmanager
def _postgres_blocking_caller(engine: Engine) -> Iterator[Any]:
    assert isinstance(engine, PostgresEngine)
    with psycopg.connect(engine.dsn) as conn:  # commits on the way out
        yield conn


@contextmanager
def _sqlite_blocking_caller(engine: Engine) -> Iterator[Any]:
    assert isinstance(engine, SqliteEngine)
    conn = sqlite3.connect(engine.path)
    try:
        yield conn
        conn.commit()
    finally:
        conn.close()


#: For each engine, an application's own blocking connection to the engine's database (what
#: ``conn=`` of the ``_sync`` calls takes), committed on the way out.
BLOCKING_CALLER_CONNECTIONS: dict[str, Callable[[Engine], AbstractContextManager[Any]]] = {
    "postgres": _postgres_blocking_caller,
    "sqlite": _sqlite_blocking_caller,
    "mariadb": mariadb.blocking_caller,
}


@pytest.fixture(params=sorted(ENGINES))
def engine_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
async def unopened_engine(engine_name: str, tmp_path: Path) -> AsyncIterator[Engine]:
    """An engine of each kind that was built but never opened; closed and cleaned up afterwards."""
    schemas: list[str] = []
    engine = ENGINES[engine_name](tmp_path, schemas)
    try:
        yield engine
    finally:
        await engine.close()
        for schema in schemas:
            release_schema(schema)


@pytest.fixture
async def any_engine(unopened_engine: Engine) -> Engine:
    """An installed, open engine of each kind (cleaned up by ``unopened_engine``)."""
    await unopened_engine.open()
    await unopened_engine.install()
    return unopened_engine


@asynccontextmanager
async def started_node(
    engine_name: str, tmp_path: Path, *, telemetry: dict[str, Any] | None = None, **options: Any
) -> AsyncIterator[Conveyor]:
    """A started node on a fresh installation of the engine (fast polling, no leadership, queue
    "default" of limit 5, unless ``options`` say otherwise); stopped and cleaned up afterwards.
    ``telemetry``: handlers by event prefix, attached before the node starts (to see its first
    events)."""
    settings: dict[str, Any] = {
        "queues": {"default": 5},
        "poll_interval": 0.1,
        "stage_interval": 0.1,
        "leadership": False,
    }
    schemas: list[str] = []
    engine = ENGINES[engine_name](tmp_path, schemas)
    await engine.open()
    app = Conveyor(engine=engine, **(settings | options))
    for prefix, handler in (telemetry or {}).items():
        app.on(prefix, handler)
    try:
        await app.install()
        await app.start()
        yield app
    finally:
        await app.stop(grace=1)
        await engine.close()
        for schema in schemas:
            release_schema(schema)


#: The apps ``make_app`` made for the running test: ``advance`` (fake-time contract) waits for
#: those on its clock after each step.
MADE_APPS: list[Conveyor] = []


@pytest.fixture
async def make_app(engine_name: str, tmp_path: Path) -> AsyncIterator[Callable[..., Conveyor]]:
    """A factory of apps (``make_app(**settings)``) on one fresh database of each engine; every app
    it made is stopped (closing its engine) and the database released after the test."""
    schemas: list[str] = []
    apps: list[Conveyor] = []

    def factory(**settings: Any) -> Conveyor:
        app = Conveyor(engine=ENGINES[engine_name](tmp_path, schemas), **settings)
        apps.append(app)
        MADE_APPS.append(app)
        return app

    yield factory
    MADE_APPS.clear()
    for app in apps:
        await app.stop(grace=1)
    for schema in schemas:
        release_schema(schema)


@pytest.fixture
async def node_app(engine_name: str, tmp_path: Path) -> AsyncIterator[Conveyor]:
    """A started node (queue "default", limit 5, fast polling, no leadership) on each engine."""
    async with started_node(engine_name, tmp_path) as app:
        yield app


@pytest.fixture
async def caller_conn(engine_name: str, any_engine: Engine) -> AsyncIterator[Any]:
    """An application's own connection to ``any_engine``'s database, closed (rolled back) after."""
    conn = await CALLER_CONNECTIONS[engine_name](any_engine)
    try:
        yield conn
    finally:
        await conn.close()


@asynccontextmanager
async def engines_on_one_database(
    engine_name: str, tmp_path: Path, count: int
) -> AsyncIterator[list[Engine]]:
    """``count`` open engines of one kind on one installed database, each with pools of its own."""
    schemas: list[str] = []
    engines = [ENGINES[engine_name](tmp_path, schemas) for _ in range(count)]
    try:
        for engine in engines:
            await engine.open()
        await engines[0].install()
        yield engines
    finally:
        for engine in engines:
            await engine.close()
        for schema in schemas:
            release_schema(schema)


@pytest.fixture
async def fleet_engines(engine_name: str, tmp_path: Path) -> AsyncIterator[list[Engine]]:
    """Three open engines of one kind on one installed database, as three nodes would have."""
    async with engines_on_one_database(engine_name, tmp_path, 3) as engines:
        yield engines
