"""Recorded job results, stored where Oban keeps them.

oban-py and Elixir Oban keep a job's recorded output in ``meta``: ``"recorded": true`` and
``"return"``: the value in Erlang's external term format, base64 without padding. We write and read
that format for JSON-like values (None, bool, int, float, str, bytes, list, tuple, dict), so results
are readable across Conveyor and Oban.
"""

from __future__ import annotations

import base64
import struct
from typing import Any

from conveyor.errors import ConveyorError, ValidationError

VERSION = 131
NEW_FLOAT = 70
SMALL_INTEGER = 97
INTEGER = 98
ATOM = 100
SMALL_TUPLE = 104
LARGE_TUPLE = 105
NIL = 106
STRING = 107
LIST = 108
BINARY = 109
SMALL_BIG = 110
LARGE_BIG = 111
MAP = 116
ATOM_UTF8 = 118
SMALL_ATOM_UTF8 = 119
#: Latin-1 small atoms: what erlpack (oban-py) writes for None, True and False.
SMALL_ATOM = 115

ATOMS_IN = {"nil": None, "true": True, "false": False}


def _atom(name: str) -> bytes:
    data = name.encode()
    return bytes((SMALL_ATOM_UTF8, len(data))) + data


def _encode(value: Any, out: bytearray) -> None:
    if value is None:
        out += _atom("nil")
    elif value is True or value is False:
        out += _atom("true" if value else "false")
    elif isinstance(value, int):
        if 0 <= value <= 255:
            out += bytes((SMALL_INTEGER, value))
        elif -(2**31) <= value < 2**31:
            out += struct.pack(">Bi", INTEGER, value)
        else:
            magnitude = abs(value)
            digits = magnitude.to_bytes((magnitude.bit_length() + 7) // 8, "little")
            if len(digits) < 256:
                out += struct.pack(">BBB", SMALL_BIG, len(digits), value < 0)
            else:
                out += struct.pack(">BIB", LARGE_BIG, len(digits), value < 0)
            out += digits
    elif isinstance(value, float):
        out += struct.pack(">Bd", NEW_FLOAT, value)
    elif isinstance(value, str | bytes | bytearray):
        data = value.encode() if isinstance(value, str) else bytes(value)
        out += struct.pack(">BI", BINARY, len(data)) + data
    elif isinstance(value, list | tuple):
        if not value:
            out.append(NIL)
            return
        out += struct.pack(">BI", LIST, len(value))
        for item in value:
            _encode(item, out)
        out.append(NIL)
    elif isinstance(value, dict):
        out += struct.pack(">BI", MAP, len(value))
        for key, item in value.items():
            _encode(key, out)
            _encode(item, out)
    else:
        raise ValidationError(
            "recorded result", value, "must be None, bool, int, float, str, bytes, list, tuple or dict"
        )


def encode_term(value: Any) -> bytes:
    out = bytearray((VERSION,))
    _encode(value, out)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, size: int) -> bytes:
        chunk = self.data[self.pos : self.pos + size]
        if len(chunk) != size:
            raise ValueError("truncated term")
        self.pos += size
        return chunk

    def unpack(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        return struct.unpack(fmt, self.take(size))[0]

    def term(self) -> Any:
        tag = self.take(1)[0]
        if tag == SMALL_INTEGER:
            return self.take(1)[0]
        if tag == INTEGER:
            return self.unpack(">i")
        if tag == NEW_FLOAT:
            return self.unpack(">d")
        if tag in (SMALL_BIG, LARGE_BIG):
            size = self.take(1)[0] if tag == SMALL_BIG else self.unpack(">I")
            negative = self.take(1)[0]
            magnitude = int.from_bytes(self.take(size), "little")
            return -magnitude if negative else magnitude
        if tag in (ATOM, ATOM_UTF8, SMALL_ATOM_UTF8, SMALL_ATOM):
            size = self.take(1)[0] if tag in (SMALL_ATOM_UTF8, SMALL_ATOM) else self.unpack(">H")
            name = self.take(size).decode("latin-1" if tag in (ATOM, SMALL_ATOM) else "utf-8")
            return ATOMS_IN.get(name, name)
        if tag == BINARY:
            raw = self.take(self.unpack(">I"))
            try:
                return raw.decode()
            except UnicodeDecodeError:
                return raw
        if tag == NIL:
            return []
        if tag == STRING:
            return list(self.take(self.unpack(">H")))
        if tag == LIST:
            items = [self.term() for _ in range(self.unpack(">I"))]
            tail = self.term()
            return items if tail == [] else [*items, tail]
        if tag in (SMALL_TUPLE, LARGE_TUPLE):
            arity = self.take(1)[0] if tag == SMALL_TUPLE else self.unpack(">I")
            return [self.term() for _ in range(arity)]
        if tag == MAP:
            arity = self.unpack(">I")
            result = {}
            for _ in range(arity):
                key = self.term()
                result[key if not isinstance(key, list) else tuple(key)] = self.term()
            return result
        raise ValueError(f"unsupported term tag {tag}")


def decode_term(data: bytes) -> Any:
    if not data or data[0] != VERSION:
        raise ValueError("not an external term format value")
    reader = _Reader(data)
    reader.pos = 1
    return reader.term()


def encode_result(value: Any) -> dict[str, Any]:
    """The ``meta`` keys that record ``value`` as a job's result."""
    text = base64.b64encode(encode_term(value)).decode().rstrip("=")
    return {"recorded": True, "return": text}


class UnreadableResultError(ConveyorError, ValueError):
    """A job's ``meta`` says it recorded a result, but what it holds cannot be decoded."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"the job's recorded result cannot be read: {reason}")


def decode_result(meta: dict[str, Any]) -> Any:
    """The recorded value in a job's ``meta``; LookupError when the job recorded nothing, and
    ``UnreadableResultError`` when the row (written by anyone) holds something undecodable."""
    if not isinstance(meta, dict) or not meta.get("recorded") or "return" not in meta:
        raise LookupError("the job recorded no result")
    text = meta["return"]
    if not isinstance(text, str):
        raise UnreadableResultError(f"'return' is not base64 text: {text!r}")
    try:
        return decode_term(base64.b64decode(text + "=" * (-len(text) % 4), validate=True))
    except (ValueError, TypeError, RecursionError) as exc:  # binascii.Error is a ValueError
        raise UnreadableResultError(str(exc) or type(exc).__name__) from None
