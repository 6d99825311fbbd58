"""``JobFilter.args_contains`` on every engine: containment of a JSON object in the args (jsonb
``@>`` on PostgreSQL, the same rule on SQLite), bound as data, for listing, counting and acting."""

from __future__ import annotations

from typing import Any

import pytest

from conveyor import JobFilter, JobState, ValidationError
from conveyor.engine.base import Engine
from tests.conformance.contract import T0, job, req

ARGS = {
    "ada": {"user": {"id": 7, "name": "ada", "admin": True}, "n": 1, "note": None, "tags": ["a"]},
    "bob": {"user": {"id": 8, "name": "bob", "admin": False}, "n": 1.0, "note": "x"},
    "odd": {"user": "7", "n": "1", "meta": {}},
    "quote": {"it's": 'a "quoted" value', "a b": 2, "ünï": "cödé", "n": 2.5},
}


@pytest.mark.parametrize(
    ("wanted", "expected"),
    [
        ({}, ["ada", "bob", "odd", "quote"]),
        ({"n": 1}, ["ada", "bob"]),  # 1 and 1.0 are one number
        ({"n": 1.0}, ["ada", "bob"]),
        ({"n": "1"}, ["odd"]),  # a string is no number
        ({"user": {"id": 7}}, ["ada"]),  # nested objects: containment
        ({"user": {"id": 7, "name": "bob"}}, []),
        ({"user": {}}, ["ada", "bob"]),  # an object, whatever it holds ("odd" has a string)
        ({"user": {"admin": True}}, ["ada"]),
        ({"user": {"admin": False}}, ["bob"]),
        ({"user": {"admin": 1}}, []),  # a number is no boolean
        ({"note": None}, ["ada"]),
        ({"missing": None}, []),
        ({"meta": {}}, ["odd"]),
        ({"it's": 'a "quoted" value', "a b": 2}, ["quote"]),
        ({"ünï": "cödé"}, ["quote"]),
        ({"n": 2.5}, ["quote"]),
        ({"note": "x", "user": {"name": "bob"}}, ["bob"]),
        ({"user": "'); DROP TABLE oban_jobs; --"}, []),  # data, never SQL
    ],
    ids=lambda v: repr(v)[:40] if isinstance(v, dict) else None,
)
async def test_args_contains_lists_and_counts(
    any_engine: Engine, wanted: dict[str, Any], expected: list[str]
) -> None:
    ids = dict(zip(ARGS, await any_engine.insert([req(args=a) for a in ARGS.values()], now=T0), strict=True))
    criteria = JobFilter(args_contains=wanted)
    found = await any_engine.list_jobs(criteria)
    assert [j.id for j in found] == sorted((ids[name] for name in expected), reverse=True)
    assert await any_engine.count_jobs(criteria) == len(expected)


async def test_bulk_actions_honour_args_contains(any_engine: Engine) -> None:
    ids = await any_engine.insert([req(args={"tenant": t}, schedule_in=60) for t in ("a", "b", "a")], now=T0)
    assert await any_engine.cancel_jobs(JobFilter(args_contains={"tenant": "a"}), now=T0) == [ids[0], ids[2]]
    assert (await job(any_engine, ids[1])).state is JobState.SCHEDULED


@pytest.mark.parametrize(
    "wanted",
    [["a"], "x", {"tags": ["a"]}, {"a.b": 1}, {'a"': 1}, {"": 1}, {"x": {"$": 1}}, {"x": {1, 2}}],
    ids=lambda v: repr(sorted(v) if isinstance(v, set) else v),
)
def test_args_contains_refuses_what_it_cannot_match(wanted: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        JobFilter(args_contains=wanted)
    assert caught.value.field == "args_contains"
