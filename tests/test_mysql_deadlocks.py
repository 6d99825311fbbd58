"""Transactions MariaDB rolls back as a deadlock's victim run again (``connect.rerun_victims``), a
bounded number of times, never in a caller's transaction; and the heartbeats of nodes beating for
the first time at once, which deadlock on their inserts, all get recorded."""

from __future__ import annotations

import asyncio
import uuid

import pymysql
import pytest

from conveyor.engine.mysql.connect import DEADLOCK, LOCK_WAIT_TIMEOUT, VICTIM_TRIES, rerun_victims
from conveyor.fleet import ProducerBeat
from tests.conformance import mariadb


class Victim:
    """A transaction the server fails with ``code`` the first ``failures`` times it runs."""

    def __init__(self, code: int, failures: int) -> None:
        self.code, self.failures, self.runs = code, failures, 0

    async def __call__(self) -> str:
        self.runs += 1
        if self.runs <= self.failures:
            raise pymysql.err.OperationalError(self.code, "Deadlock found when trying to get lock")
        return "done"


async def test_a_victim_runs_again_until_it_commits() -> None:
    victim = Victim(DEADLOCK, VICTIM_TRIES - 1)
    assert await rerun_victims(victim) == "done"
    assert victim.runs == VICTIM_TRIES


async def test_a_victim_every_time_gives_up_with_the_servers_error() -> None:
    victim = Victim(DEADLOCK, VICTIM_TRIES)
    with pytest.raises(pymysql.err.OperationalError) as raised:
        await rerun_victims(victim)
    assert raised.value.args[0] == DEADLOCK and victim.runs == VICTIM_TRIES


@pytest.mark.parametrize(
    ("code", "codes", "once"),
    [
        (DEADLOCK, (DEADLOCK,), True),  # a caller's transaction: the caller's to run again
        (LOCK_WAIT_TIMEOUT, (DEADLOCK,), False),  # not one of the codes it was given
        (1146, (DEADLOCK, LOCK_WAIT_TIMEOUT), False),  # no such table: running again cannot help
    ],
)
async def test_other_errors_and_a_callers_transaction_raise_at_once(
    code: int, codes: tuple[int, ...], once: bool
) -> None:
    victim = Victim(code, 1)
    with pytest.raises(pymysql.err.OperationalError):
        await rerun_victims(victim, codes=codes, once=once)
    assert victim.runs == 1


@pytest.mark.skipif(mariadb.UNREACHABLE is not None, reason=str(mariadb.UNREACHABLE))
async def test_first_heartbeats_of_nodes_at_once_are_all_recorded() -> None:
    """Each beat reads its rows with a lock (``producers_meta``): rows not there yet lock the gap
    they are inserted into, so first beats at once deadlock (seen in CI as a heartbeat failing,
    and 24 times in 180 beats of 6 nodes in rounds like these before they ran again)."""
    nodes, rounds = 4, 10
    async with mariadb.installed() as engine:
        for _ in range(rounds):
            beats = {
                f"n{i}": [ProducerBeat(str(uuid.uuid4()), f"q{k}", {}) for k in range(3)]
                for i in range(nodes)
            }
            await asyncio.gather(*(engine.record_producers("Oban", node, b) for node, b in beats.items()))
        producers = await engine.list_producers()
        assert len(producers) == nodes * rounds * 3
