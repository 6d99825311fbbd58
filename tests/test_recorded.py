"""Recorded results in Erlang's external term format, base64 without padding, as Oban stores them."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from conveyor import ValidationError
from conveyor.recorded import decode_result, decode_term, encode_result, encode_term

VALUES: list[Any] = [
    None,
    True,
    False,
    0,
    1,
    255,
    256,
    -1,
    2**31 - 1,
    -(2**31),
    2**31,
    -(2**31) - 1,
    2**63,
    -(2**64) - 12345,
    2**100,
    -(2**100),
    2**2100,  # more than 255 bytes of digits: LARGE_BIG
    -(2**2100) + 1,
    0.0,
    1.5,
    -2.25,
    0.1,
    1e-300,
    -1.7976931348623157e308,
    "",
    "plain",
    "héllo wörld ✓ 日本語 🚀 \x00 nul",
    [],
    [1, 2, 3],
    [None, True, False, "x", 1.25, [[], [[]]]],
    {},
    {"a": 1, "b": [1, 2, {"c": None}], "nested": {"deeper": {"deepest": "✓"}}},
    {1: "int key", "s": "str key", 2**80: "big key"},
    [{"list": [{"of": "dicts"}]}] * 3,
]


@pytest.mark.parametrize("value", VALUES, ids=lambda v: repr(v)[:40])
def test_terms_round_trip(value: Any) -> None:
    decoded = decode_term(encode_term(value))
    assert decoded == value
    assert type(decoded) is type(value)


@pytest.mark.parametrize("value", VALUES, ids=lambda v: repr(v)[:40])
def test_results_round_trip_through_meta(value: Any) -> None:
    meta = encode_result(value)
    assert meta["recorded"] is True
    assert not meta["return"].endswith("=")  # Oban's base64 has no padding
    assert decode_result(meta) == value


def test_known_encodings_match_erlang() -> None:
    """Bytes that Erlang's term_to_binary produces for the same values."""
    assert encode_term(None) == b"\x83w\x03nil"
    assert encode_term(True) == b"\x83w\x04true"
    assert encode_term(1) == b"\x83a\x01"
    assert encode_term(-1) == b"\x83b\xff\xff\xff\xff"
    assert encode_term(2**32) == b"\x83n\x05\x00\x00\x00\x00\x00\x01"
    assert encode_term("ab") == b"\x83m\x00\x00\x00\x02ab"
    assert encode_term([]) == b"\x83j"
    assert encode_term([1]) == b"\x83l\x00\x00\x00\x01a\x01j"
    assert encode_term({"k": 1}) == b"\x83t\x00\x00\x00\x01m\x00\x00\x00\x01ka\x01"
    assert encode_term(1.5) == b"\x83F?\xf8\x00\x00\x00\x00\x00\x00"


def test_terms_written_by_erlang_decode() -> None:
    """Forms Conveyor never writes but Elixir does: atoms, tuples, charlists, improper lists."""
    assert decode_term(b"\x83d\x00\x02ok") == "ok"  # ATOM_EXT
    assert decode_term(b"\x83v\x00\x05false") is False  # ATOM_UTF8_EXT
    assert decode_term(b"\x83h\x02w\x02oka\x07") == ["ok", 7]  # {:ok, 7}
    assert decode_term(b"\x83k\x00\x03abc") == [97, 98, 99]  # 'abc'
    assert decode_term(b"\x83l\x00\x00\x00\x01a\x01a\x02") == [1, 2]  # [1 | 2]
    # A map keyed by a tuple keeps a hashable key.
    assert decode_term(b"\x83t\x00\x00\x00\x01h\x02a\x01a\x02a\x03") == {(1, 2): 3}


def test_tuples_come_back_as_lists_and_bytes_as_text_when_valid_utf8() -> None:
    assert decode_term(encode_term((1, "two"))) == [1, "two"]
    assert decode_term(encode_term(b"abc")) == "abc"
    assert decode_term(encode_term(b"\xff\xfe")) == b"\xff\xfe"


def test_decode_result_of_a_job_that_recorded_nothing() -> None:
    with pytest.raises(LookupError):
        decode_result({})
    with pytest.raises(LookupError):
        decode_result({"recorded": False, "return": "gwE"})
    with pytest.raises(LookupError):
        decode_result({"recorded": True})


def test_unpadded_base64_of_every_length_decodes() -> None:
    for size in range(0, 8):
        value = "x" * size
        text = base64.b64encode(encode_term(value)).decode().rstrip("=")
        assert decode_result({"recorded": True, "return": text}) == value


@pytest.mark.parametrize("value", [{1, 2}, object(), [1, {"bad": {3}}], {"f": lambda: None}])
def test_unrecordable_values_are_refused(value: Any) -> None:
    with pytest.raises(ValidationError, match="recorded result"):
        encode_term(value)


@pytest.mark.parametrize("data", [b"", b"\x82a\x01", b"\x83", b"\x83m\x00\x00\x00\x05ab", b"\x83z"])
def test_malformed_terms_are_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        decode_term(data)
