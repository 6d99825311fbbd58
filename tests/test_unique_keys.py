"""A unique job's stored key and markers never change between releases: a node upgraded mid-period
must find the twins an older node stored. The encodings made once per option (``Unique._encode``)
give the very bytes they did when each call made them."""

from __future__ import annotations

import pickle

import orjson

from conveyor import JobRequest
from conveyor.unique import Unique, stored_meta


def keyed(request: JobRequest) -> tuple[str, dict[str, object]]:
    unique = request.unique
    assert unique is not None
    key = unique.base_key(request)
    return key, orjson.loads(stored_meta(request.meta_json, key, unique))


def test_keys_and_markers_are_pinned() -> None:
    plain = JobRequest(worker="w", args={"a": 1, "b": [1, 2]}, unique=True)
    assert keyed(plain) == (
        "cv1:6cea0d28fcb5d3c54755ef3b32232547",
        {
            "uniq_key": "cv1:6cea0d28fcb5d3c54755ef3b32232547",
            "uniq_states": ["available", "scheduled", "suspended", "executing", "retryable", "completed"],
        },
    )
    chosen = JobRequest(
        worker="w", args={"a": 1}, unique={"period": None, "states": "incomplete", "keys": ["a"]}
    )
    assert keyed(chosen)[0] == "cv1:3a5c2cb6105092824e2c098cb4d13639"
    locked = JobRequest(worker="w", args={"a": 1}, meta={"x": 1}, queueing_lock="L1")
    key, meta = keyed(locked)
    # The caller's meta first, the markers last (they win over keys of the same name).
    assert list(meta) == ["x", "uniq_key", "uniq_states"] and meta["uniq_states"] == [
        "available",
        "scheduled",
    ]
    assert key != keyed(JobRequest(worker="w", args={"a": 1}, queueing_lock="L2"))[0]


def test_an_option_keeps_its_encodings_through_pickling() -> None:
    for unique in (Unique(period=30, fields=["worker", "meta"]), Unique.queueing("L1")):
        copy = pickle.loads(pickle.dumps(unique))
        assert copy == unique
        request = JobRequest(worker="w", args={}, meta={"m": 1}, unique=copy)
        assert copy.base_key(request) == unique.base_key(request)
        assert stored_meta(b"{}", "k", copy) == stored_meta(b"{}", "k", unique)
