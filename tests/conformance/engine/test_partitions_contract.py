"""Partitioned limits: a global or rate limit counted per partition (a worker, a tenant...), each
partition with the whole limit to itself, claimed fairly and in priority order within each."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from conveyor import JobFilter, JobState
from conveyor.acks import Ack
from conveyor.engine.base import Engine
from conveyor.errors import ValidationError
from conveyor.limits import FetchLimits, GlobalLimit, Partition, RateLimit
from conveyor.queue_settings import QueueSettings, parse_queues
from tests.conformance.conftest import REWRITE_JSON
from tests.conformance.contract import T0, claim_and_ack_at_random, req, uid

BY_TENANT = Partition(args=("tenant",))


def per_tenant(allowed: int) -> FetchLimits:
    return FetchLimits(global_limit=GlobalLimit(allowed, BY_TENANT))


def tenant_req(tenant: Any, **options: Any) -> Any:
    return req(args={"tenant": tenant, "n": options.pop("n", 1)}, **options)


async def claim(engine: Engine, demand: int, limits: FetchLimits, *, at: Any = T0, n: int = 1) -> list[int]:
    jobs = await engine.fetch_jobs("default", demand, node=f"n{n}", producer=uid(n), now=at, limits=limits)
    return [j.id for j in jobs]


async def tenants_of(engine: Engine, ids: Sequence[int]) -> list[Any]:
    found = {j.id: j for j in await engine.list_jobs(JobFilter(ids=tuple(ids), limit=1000))}
    return [found[i].args.get("tenant") for i in ids]


async def test_each_partition_has_the_whole_global_limit(any_engine: Engine) -> None:
    ids = await any_engine.insert([tenant_req(t) for t in ["a"] * 5 + ["b"] * 5 + ["c"] * 1], now=T0)
    first = await any_engine.fetch_jobs(
        "default", 10, node="n", producer=uid(1), now=T0, limits=per_tenant(2)
    )
    assert [j.id for j in first] == ids[0:2] + ids[5:7] + ids[10:11]
    assert getattr(first, "capped", False)  # jobs wait that the limit held back
    assert await claim(any_engine, 10, per_tenant(2), n=2) == []  # every tenant full
    await any_engine.ack_jobs([Ack(ids[0], 1, JobState.COMPLETED)], now=T0)
    assert await claim(any_engine, 10, per_tenant(2), n=2) == ids[2:3]  # a's slot, no one else's


async def test_a_claim_that_empties_the_queue_is_not_capped(any_engine: Engine) -> None:
    await any_engine.insert([tenant_req("a"), tenant_req("b")], now=T0)
    claimed = await any_engine.fetch_jobs(
        "default", 10, node="n", producer=uid(1), now=T0, limits=per_tenant(2)
    )
    assert len(claimed) == 2 and not getattr(claimed, "capped", True)


async def test_a_saturated_partition_does_not_starve_the_others(any_engine: Engine) -> None:
    """Tenant a's 400 jobs come first in line; b's 3 after them. With one running job per tenant,
    b's first job starts no later than the second claim, and a never runs two at once."""
    ids = await any_engine.insert([tenant_req("a", priority=0) for _ in range(400)], now=T0)
    b_ids = await any_engine.insert([tenant_req("b", priority=1) for _ in range(3)], now=T0)
    started = await claim(any_engine, 5, per_tenant(1))
    started += await claim(any_engine, 5, per_tenant(1), n=2)
    assert sorted(started) == [ids[0], b_ids[0]]
    assert await claim(any_engine, 5, per_tenant(1), n=3) == []


async def test_priorities_order_jobs_within_a_partition(any_engine: Engine) -> None:
    ids = await any_engine.insert(
        [tenant_req("a", priority=3), tenant_req("a", priority=0), tenant_req("b", priority=9)], now=T0
    )
    assert await claim(any_engine, 10, per_tenant(1)) == [ids[1], ids[2]]


async def test_partitions_by_worker_by_meta_and_by_several_keys(any_engine: Engine) -> None:
    ids = await any_engine.insert(
        [
            req(worker="w.A", meta={"region": "eu"}, args={"tenant": "a", "plan": "pro"}),
            req(worker="w.A", meta={"region": "eu"}, args={"tenant": "a", "plan": "free"}),
            req(worker="w.B", meta={"region": "us"}, args={"tenant": "a", "plan": "pro"}),
            req(worker="w.B", meta={"region": "eu"}, args={"tenant": "a", "plan": "pro"}),
        ],
        now=T0,
    )
    by_worker = FetchLimits(global_limit=GlobalLimit(1, Partition(worker=True)))
    assert await claim(any_engine, 10, by_worker) == [ids[0], ids[2]]
    await any_engine.ack_jobs([Ack(i, 1, JobState.COMPLETED) for i in (ids[0], ids[2])], now=T0)
    by_region = FetchLimits(global_limit=GlobalLimit(1, Partition(meta=("region",))))
    assert await claim(any_engine, 10, by_region) == [ids[1]]  # eu; us has nothing left waiting
    await any_engine.ack_jobs([Ack(ids[1], 1, JobState.COMPLETED)], now=T0)
    by_both = FetchLimits(global_limit=GlobalLimit(1, Partition(worker=True, args=("tenant", "plan"))))
    assert await claim(any_engine, 10, by_both) == [ids[3]]


async def test_missing_keys_and_odd_values_are_partitions_too(any_engine: Engine) -> None:
    """No tenant, a null tenant, numbers and nested values: each a partition of its own (a missing
    key reads as null), and none stops the claim."""
    values: list[Any] = [None, 1, "1", [1, 2], {"x": 1}, 1.5]
    ids = await any_engine.insert([req(args={"n": 1})], now=T0)
    ids += await any_engine.insert([tenant_req(v) for v in values], now=T0)
    ids += await any_engine.insert([tenant_req(v) for v in values], now=T0)
    claimed = await claim(any_engine, 20, per_tenant(1))
    # The job without a tenant and the one with tenant null share the null partition.
    assert claimed == ids[0:1] + ids[2:7]
    tenants = await tenants_of(any_engine, claimed)
    assert tenants == [None, 1, "1", [1, 2], {"x": 1}, 1.5]


async def test_args_and_meta_that_are_not_objects_are_the_null_partition(
    any_engine: Engine, engine_name: str
) -> None:
    """Another client's args or meta that is not a JSON object (a list, a string, a number) has no
    keys: its job counts in the null partition, beside the jobs that lack the key, is claimed in its
    turn (marked unreadable) and never stops the claim of the jobs beside it."""
    rewrite = REWRITE_JSON[engine_name]
    ids = await any_engine.insert(
        [req(args={"n": 1}), tenant_req("x"), tenant_req("x"), tenant_req("a")], now=T0
    )
    await rewrite(any_engine, ids[1], "args", "[1, 2]")
    await rewrite(any_engine, ids[2], "args", '"text"')
    assert await claim(any_engine, 10, per_tenant(1)) == [ids[0], ids[3]]
    for held, turn in ((ids[0], ids[1]), (ids[1], ids[2])):
        await any_engine.ack_jobs([Ack(held, 1, JobState.COMPLETED)], now=T0)
        (job,) = await any_engine.fetch_jobs(
            "default", 10, node="n", producer=uid(1), now=T0, limits=per_tenant(1)
        )
        assert job.id == turn and job.unreadable is not None

    by_region = FetchLimits(rate=RateLimit(1, 60, Partition(meta=("region",))))
    eu = {"region": "eu"}
    ids = await any_engine.insert([req(meta=eu), req(meta=eu), req(), req()], now=T0)
    await rewrite(any_engine, ids[2], "meta", "7")
    assert await claim(any_engine, 10, by_region) == [ids[0], ids[2]]
    assert await claim(any_engine, 10, by_region, at=T0 + timedelta(seconds=30)) == []
    assert await claim(any_engine, 10, by_region, at=T0 + timedelta(seconds=61)) == [ids[1], ids[3]]


async def test_long_values_and_values_apart_by_case_are_partitions_of_their_own(any_engine: Engine) -> None:
    """A value longer than any key column, one differing from it in its last character, and two
    differing only in case: four partitions, each with the whole rate, their starts remembered."""
    long_a, long_b = "a" * 2000, "a" * 1999 + "b"
    ids = await any_engine.insert([tenant_req(t) for t in (long_a, long_b, "T", "t", long_a, "t")], now=T0)
    limits = FetchLimits(rate=RateLimit(1, 60, BY_TENANT))
    assert await claim(any_engine, 10, limits) == ids[0:4]
    assert await claim(any_engine, 10, limits, at=T0 + timedelta(seconds=30)) == []
    assert await claim(any_engine, 10, limits, at=T0 + timedelta(seconds=61)) == ids[4:6]


async def test_each_partition_has_the_whole_rate(any_engine: Engine) -> None:
    ids = await any_engine.insert([tenant_req(t) for t in "aaaabbbb"], now=T0)
    limits = FetchLimits(rate=RateLimit(2, 60, BY_TENANT))
    assert await claim(any_engine, 10, limits) == ids[0:2] + ids[4:6]
    assert await claim(any_engine, 10, limits, at=T0 + timedelta(seconds=30)) == []
    # Every start counts, whatever became of the job.
    await any_engine.ack_jobs([Ack(i, 1, JobState.COMPLETED) for i in ids[0:2]], now=T0)
    assert await claim(any_engine, 10, limits, at=T0 + timedelta(seconds=59)) == []
    assert await claim(any_engine, 10, limits, at=T0 + timedelta(seconds=61)) == ids[2:4] + ids[6:8]


async def test_an_unpartitioned_global_limit_with_a_partitioned_rate(any_engine: Engine) -> None:
    ids = await any_engine.insert([tenant_req(t) for t in "aaabbb"], now=T0)
    limits = FetchLimits(global_limit=3, rate=RateLimit(1, 60, BY_TENANT))
    assert await claim(any_engine, 10, limits) == [ids[0], ids[3]]  # one start per tenant
    limits = FetchLimits(global_limit=GlobalLimit(1, BY_TENANT), rate=RateLimit(3, 60))
    later = T0 + timedelta(seconds=120)
    await any_engine.ack_jobs([Ack(ids[0], 1, JobState.COMPLETED)], now=T0)
    # a has room again, b is running one; the rate (3 a minute, unpartitioned) has room for three.
    assert await claim(any_engine, 10, limits, at=later) == [ids[1]]


async def test_concurrent_engines_hold_every_partitions_limit(fleet_engines: list[Engine]) -> None:
    """Six producers on three engines claim and ack at random: no tenant ever has more than 2
    executing, and every job runs exactly once. That each tenant can reach 2 is
    test_each_partition_has_the_whole_global_limit's (one claim, no race): here how high a tenant
    gets depends on how the claims and acks interleave (a run saw b peak at 1), so only some
    tenant's reaching 2 is required, to show the claims did overlap."""
    tenants = ["a", "b", "c"]
    ids = await fleet_engines[0].insert([tenant_req(tenants[i % 3], n=i) for i in range(90)], now=T0)
    peaks: Counter[str] = Counter()

    def check(executing: list[Any]) -> None:
        for tenant, count in Counter(j.args["tenant"] for j in executing).items():
            assert count <= 2, (tenant, count)
            peaks[tenant] = max(peaks[tenant], count)

    done = await claim_and_ack_at_random(fleet_engines, per_tenant(2), check, seed=11, most=5)
    assert sorted(done) == ids
    assert set(peaks) == set(tenants) and max(peaks.values()) == 2, peaks


# -- the forms a partition is given in ------------------------------------------------------------------
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("worker", Partition(worker=True)),
        ({"args": ["tenant"]}, Partition(args=("tenant",))),
        ({"worker": True, "meta": ["region"]}, Partition(worker=True, meta=("region",))),
        ({"fields": ["args"], "keys": ["tenant"]}, Partition(args=("tenant",))),
        ({"fields": ["worker", "meta"], "keys": ["a.b"]}, Partition(worker=True, meta=("a.b",))),
        ({"fields": ["worker"]}, Partition(worker=True)),
    ],
)
def test_partitions_are_read_from_each_form(given: Any, expected: Partition) -> None:
    assert Partition.build(given) == expected
    assert Partition.build(expected.to_json()) == expected


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({}, "partition"),
        ({"worker": False}, "partition"),
        ("tenant", "partition"),
        ({"args": "tenant"}, "partition.args"),
        ({"args": [""]}, "partition.args"),
        ({"args": ["a", "a"]}, "partition.args"),
        ({"args": ['te"nant']}, "partition.args"),
        ({"args": ["x\n"]}, "partition.args"),
        ({"args": [3]}, "partition.args"),
        ({"worker": "yes"}, "partition.worker"),
        ({"tenant": ["a"]}, "partition.tenant"),
        ({"keys": ["tenant"]}, "partition.fields"),
        ({"fields": ["args"]}, "partition.keys"),
        ({"fields": ["worker"], "keys": ["tenant"]}, "partition.keys"),
        ({"fields": ["queue"], "keys": ["tenant"]}, "partition.fields"),
        ({"fields": "args", "keys": ["tenant"]}, "partition.fields"),
        ({"args": [f"k{i}" for i in range(9)]}, "partition"),
    ],
)
def test_bad_partitions_are_refused_naming_the_key(given: Any, named: str) -> None:
    with pytest.raises(ValidationError, match=rf"invalid queues\.mail\.rate_limit\.{named}="):
        parse_queues({"mail": {"rate_limit": {"allowed": 5, "partition": given}}})
    with pytest.raises(ValidationError, match=rf"invalid queues\.mail\.global_limit\.{named}="):
        parse_queues({"mail": {"global_limit": {"allowed": 5, "partition": given}}})


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ({"allowed": 0}, "global_limit.allowed"),
        ({"allowed": float("nan")}, "global_limit.allowed"),
        ({"partition": "worker"}, "global_limit.allowed"),
        ({"allowed": 2, "period": 1}, "global_limit.period"),
        ("4", "global_limit"),
        (2**40, "global_limit"),
    ],
)
def test_bad_global_limits_are_refused_naming_the_key(given: Any, named: str) -> None:
    with pytest.raises(ValidationError, match=rf"invalid queues\.mail\.{named}="):
        parse_queues({"mail": {"global_limit": given}})


def test_queue_settings_take_partitioned_limits() -> None:
    (queue,) = parse_queues(
        {
            "mail": {
                "limit": 10,
                "global_limit": {"allowed": 4, "partition": "worker"},
                "rate_limit": {"allowed": 50, "period": 1, "partition": {"args": ["tenant"]}},
            }
        }
    )
    assert queue == QueueSettings(
        "mail",
        10,
        global_limit=GlobalLimit(4, Partition(worker=True)),
        rate_limit=RateLimit(50, 1, Partition(args=("tenant",))),
    )
    assert queue.global_limit is not None and queue.global_limit.describe() == "4 per worker"
    assert queue.rate_limit is not None and queue.rate_limit.describe() == "50/1s per args.tenant"
    assert QueueSettings("plain", global_limit=4).global_limit == GlobalLimit(4)  # type: ignore[arg-type]
