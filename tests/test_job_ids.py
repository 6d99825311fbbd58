"""``JobIds``, what ``enqueue_many`` returns: an immutable sequence of ``JobId`` values kept in 8 bytes
an id, that behaves as the list of ``JobId`` values it replaced (the engines' side is in
tests/conformance/app/test_job_ids_contract.py)."""

from __future__ import annotations

import copy
import pickle
import sys
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conveyor import ExistingJobId, JobId, JobIds, JobRequest
from conveyor.job_ids import JobIdsBuilder, job_ids, plain_ids

#: Positions 2 and 9 are conflicts (9 sits in the bitmap's second byte).
MIXED = [ExistingJobId(i) if i in (3, 10) else JobId(i) for i in range(1, 11)]


def model(ids: JobIds) -> list[tuple[type, int]]:
    """What a list of ``JobId`` values would hold: each id with its exact type."""
    return [(type(i), int(i)) for i in ids]


def test_indexing_builds_the_id_of_the_right_kind() -> None:
    ids = JobIds(MIXED)
    assert len(ids) == 10 and bool(ids)
    assert type(ids[0]) is JobId and ids[0] == 1 and not ids[0].conflict
    assert type(ids[2]) is ExistingJobId and ids[2] == 3 and ids[2].conflict
    assert type(ids[-1]) is ExistingJobId and ids[-1] == 10
    assert type(ids[-10]) is JobId and ids[-10] == 1
    assert ids[True] == 2  # any index, as a list takes it
    for bad in (10, -11, 2**70):
        with pytest.raises(IndexError):
            ids[bad]
    with pytest.raises(TypeError):
        ids["1"]  # type: ignore[call-overload]


def test_iteration_and_reversal_keep_the_conflicts() -> None:
    ids = JobIds(MIXED)
    assert model(ids) == [(type(i), int(i)) for i in MIXED]
    assert model(JobIds(reversed(ids))) == [(type(i), int(i)) for i in reversed(MIXED)]
    assert list(reversed(ids)) == list(reversed(MIXED))
    plain = JobIds([5, 6, 7])
    assert [type(i) for i in plain] == [JobId] * 3 and list(reversed(plain)) == [7, 6, 5]
    assert [type(i) for i in reversed(plain)] == [JobId] * 3


@pytest.mark.parametrize(
    "cut",
    [slice(None), slice(2, 5), slice(None, None, 3), slice(None, None, -1), slice(-3, None), slice(8, 2, -2)],
)
def test_a_slice_is_a_job_ids_with_its_conflicts(cut: slice) -> None:
    ids = JobIds(MIXED)
    part = ids[cut]
    assert type(part) is JobIds
    assert model(part) == [(type(i), int(i)) for i in MIXED[cut]]
    assert part == MIXED[cut]


def test_empty() -> None:
    empty = JobIds()
    assert len(empty) == 0 and not empty and list(empty) == [] and empty == [] and empty == ()
    assert empty[:] == [] and empty + [] == [] and repr(empty) == "JobIds([])"  # noqa: RUF005
    with pytest.raises(IndexError):
        empty[0]
    with pytest.raises(ValueError, match="is not in JobIds"):
        empty.index(1)


def test_it_equals_a_list_or_a_tuple_of_the_same_ints() -> None:
    ids = JobIds(MIXED)
    assert ids == list(range(1, 11)) and list(range(1, 11)) == ids
    assert ids == tuple(range(1, 11)) and tuple(range(1, 11)) == ids
    assert ids == JobIds(range(1, 11))  # conflicts do not count, as JobId(3) == ExistingJobId(3)
    assert list(ids) == list(range(1, 11))
    assert ids != list(range(1, 10)) and ids != list(range(2, 12)) and ids != [*range(1, 10), "10"]
    assert ids != "1, 2" and ids != {1, 2} and ids != range(1, 11)  # only lists, tuples, JobIds
    assert sorted(ids) == list(ids) and set(ids) == set(range(1, 11))


def test_search_and_count() -> None:
    ids = JobIds([4, 5, 4, ExistingJobId(4)])
    assert 5 in ids and 6 not in ids and "5" not in ids and None not in ids
    assert ids.index(4) == 0 and ids.index(4, 1) == 2 and ids.index(4, -1) == 3
    assert ids.count(4) == 3 and ids.count(6) == 0 and ids.count("4") == 0
    with pytest.raises(ValueError):
        ids.index(5, 2)
    with pytest.raises(ValueError):
        ids.index(4, 0, 0)


def test_concatenation_makes_a_new_job_ids() -> None:
    ids = JobIds(MIXED)
    joined = ids[:3] + ids[8:]
    assert type(joined) is JobIds and model(joined) == [(type(i), int(i)) for i in MIXED[:3] + MIXED[8:]]
    assert model(ids + [ExistingJobId(11), 12]) == [  # noqa: RUF005
        (type(i), int(i)) for i in [*MIXED, ExistingJobId(11), JobId(12)]
    ]
    assert [0] + ids == [0, *range(1, 11)] and type((0,) + ids) is JobIds  # noqa: RUF005
    assert ids == MIXED  # unchanged
    with pytest.raises(TypeError):
        ids + {11}  # type: ignore[operator]
    with pytest.raises(AttributeError):
        ids.append(11)  # type: ignore[attr-defined]  # immutable
    with pytest.raises(TypeError):
        ids[0] = 5  # type: ignore[index]


def test_not_hashable_like_a_list() -> None:
    with pytest.raises(TypeError, match="unhashable"):
        hash(JobIds([1]))


def test_repr_shows_the_conflicts_and_shortens_long_ones() -> None:
    assert repr(JobIds([1, ExistingJobId(2)])) == "JobIds([1, ExistingJobId(2)])"
    assert eval(repr(JobIds(MIXED))) == MIXED
    long = repr(JobIds(range(1_000)))
    assert long.startswith("JobIds([0, 1, 2,") and ", ..., " in long and long.endswith("999], len=1000)")
    assert len(long) < 200


def test_pickles_and_copies_with_its_conflicts() -> None:
    ids = JobIds(MIXED)
    for protocol in range(2, pickle.HIGHEST_PROTOCOL + 1):
        again = pickle.loads(pickle.dumps(ids, protocol))
        assert type(again) is JobIds and model(again) == model(ids)
    assert model(copy.copy(ids)) == model(ids) and model(copy.deepcopy(ids)) == model(ids)
    # A million ids pickle in about 8 MB, not as a million objects.
    assert len(pickle.dumps(JobIds(range(1_000_000)))) < 8_100_000


def test_it_takes_8_bytes_an_id() -> None:
    million = JobIds(range(1_000_000))
    assert 8_000_000 <= sys.getsizeof(million) < 8_700_000
    # A conflict costs a bit a position, allocated only when there is one.
    assert sys.getsizeof(million + [ExistingJobId(1)]) < 8_700_000 + 130_000  # noqa: RUF005


def test_ids_beyond_64_bits_are_refused_not_truncated() -> None:
    assert JobIds([2**63 - 1, -(2**63)]) == [2**63 - 1, -(2**63)]
    for bad in (2**63, -(2**63) - 1):
        with pytest.raises(OverflowError):
            JobIds([bad])
    with pytest.raises(TypeError):
        JobIds(["1"])  # type: ignore[list-item]


def test_the_ints_go_to_drivers_json_and_job_args() -> None:
    ids = JobIds(MIXED)
    plain = ids.tolist()
    assert plain == list(range(1, 11)) and {type(i) for i in plain} == {int}
    assert orjson.dumps(plain) == b"[1,2,3,4,5,6,7,8,9,10]"
    request = JobRequest("w", {"children": ids, "nested": [ids[:2]]})
    assert orjson.loads(request.args_json) == {"children": plain, "nested": [[1, 2]]}


def test_job_ids_keeps_a_job_ids_and_converts_the_rest() -> None:
    ids = JobIds(MIXED)
    assert job_ids(ids) is ids
    converted = job_ids([1, ExistingJobId(2), JobId(3)])
    assert type(converted) is JobIds and [i.conflict for i in converted] == [False, True, False]


def test_the_builder_gathers_chunks() -> None:
    builder = JobIdsBuilder()
    builder.extend_new([1, 2, 3])
    builder.extend([4, ExistingJobId(2)])
    builder.append(6, conflict=True)
    builder.extend(JobIds([7, ExistingJobId(8)]))
    assert len(builder) == 8 and builder[4] == 2 and builder[-1] == 8
    built = builder.build()
    assert built == [1, 2, 3, 4, 2, 6, 7, 8]
    assert [i.conflict for i in built] == [False] * 4 + [True, True, False, True]


def entries() -> st.SearchStrategy[list[tuple[int, bool]]]:
    return st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.booleans()), max_size=40)


def as_ids(items: list[tuple[int, bool]]) -> list[JobId]:
    return [ExistingJobId(i) if conflict else JobId(i) for i, conflict in items]


@given(
    entries(),
    st.integers(-50, 50) | st.none(),
    st.integers(-50, 50) | st.none(),
    st.sampled_from([None, 1, 2, 3, -1, -3]),
)
def test_it_behaves_as_the_list_it_replaces(
    items: list[tuple[int, bool]], start: int | None, stop: int | None, step: int | None
) -> None:
    expected = as_ids(items)
    ids = JobIds(expected)
    assert len(ids) == len(expected) and ids == expected and model(ids) == model_of(expected)
    cut = slice(start, stop, step)
    assert model(ids[cut]) == model_of(expected[cut])
    assert model(JobIds(reversed(ids))) == model_of(expected[::-1])
    for position in (start, stop):
        if position is not None and -len(expected) <= position < len(expected):
            assert (type(ids[position]), ids[position]) == (type(expected[position]), expected[position])
    if expected:
        value = expected[len(expected) // 2]
        assert ids.index(value) == expected.index(value) and ids.count(value) == expected.count(value)
    assert model(pickle.loads(pickle.dumps(ids))) == model_of(expected)


def model_of(values: list[Any]) -> list[tuple[type, int]]:
    return [(type(i), int(i)) for i in values]


def test_plain_ids_gives_drivers_plain_ints_whatever_the_mix() -> None:
    mixed = [JobId(5), ExistingJobId(6), 999_999_999_999]
    assert plain_ids(mixed) == [5, 6, 999_999_999_999]
    assert all(type(i) is int for i in plain_ids(mixed))
    assert all(type(i) is int for i in plain_ids(JobIds(mixed)))
