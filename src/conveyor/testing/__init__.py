"""Testing support: modes, running jobs in the test's process, and assertions on enqueued jobs.

The pytest plugin (``conveyor.testing.plugin``, registered by entry point) adds the opt-in
fixture ``conveyor_app``. See docs/guides/testing.md.
"""

from conveyor.testing.assertions import all_enqueued, assert_enqueued, refute_enqueued
from conveyor.testing.blocking import (
    all_enqueued_sync,
    assert_enqueued_sync,
    drain_queue_sync,
    refute_enqueued_sync,
)
from conveyor.testing.drain import drain_queue
from conveyor.testing.execute import process_job, process_job_sync
from conveyor.testing.modes import MODES, mode

__all__ = [
    "MODES",
    "all_enqueued",
    "all_enqueued_sync",
    "assert_enqueued",
    "assert_enqueued_sync",
    "drain_queue",
    "drain_queue_sync",
    "mode",
    "process_job",
    "process_job_sync",
    "refute_enqueued",
    "refute_enqueued_sync",
]
