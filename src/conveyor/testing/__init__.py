"""Testing support: modes, running jobs in the test's process, and assertions on enqueued jobs.

The pytest plugin (``conveyor.testing.plugin``, registered by entry point) adds the opt-in
fixture ``conveyor_app``. See docs/guides/testing.md.
"""

from conveyor.testing.assertions import all_enqueued, assert_enqueued, refute_enqueued
from conveyor.testing.drain import drain_queue
from conveyor.testing.execute import process_job, process_job_sync
from conveyor.testing.modes import MODES, mode

__all__ = [
    "MODES",
    "all_enqueued",
    "assert_enqueued",
    "drain_queue",
    "mode",
    "process_job",
    "process_job_sync",
    "refute_enqueued",
]
