"""A job function's arguments: bound to its signature when a request is built, and converted by
annotation between Python values and the JSON stored in ``args``.

``send.new("ada@example.com", when=datetime(...))`` binds like a call: a missing or unknown argument
fails there, with the function's name, instead of failing every attempt in a worker. Parameters
annotated with ``datetime``, ``date``, ``time``, ``UUID``, ``Decimal``, an ``Enum``, a dataclass or
a pydantic model (also inside ``list[...]``, ``dict[str, ...]`` and ``X | None``) are stored as JSON
(ISO 8601 text, the UUID's text, the decimal's text, the enum's value, an object of fields) and
handed back to the job as the annotated type. Every other parameter stays plain JSON, as given.

Annotations are read when first needed, so they may name types defined after the function.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import sys
import types
import typing
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import date, datetime, time
from decimal import Decimal, InvalidOperation
from typing import Any

from conveyor.errors import ConveyorError, ValidationError

_KEYWORD = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


class ArgumentError(ValidationError):
    """Arguments that do not fit a job function (missing, unknown, or not of the annotated type)."""


@dataclasses.dataclass(frozen=True, slots=True)
class Codec:
    """How values of one annotated type become JSON (``encode``) and come back (``decode``).
    Both raise ``ValueError``/``TypeError`` for a value that cannot be converted."""

    label: str
    encode: Callable[[Any], Any]
    decode: Callable[[Any], Any]


class Arguments:
    """The signature of one job function, and the codecs of its typed parameters."""

    def __init__(self, fn: Callable[..., Any], name: str) -> None:
        self.fn = fn
        self.name = name
        self.signature = inspect.signature(fn)
        params = list(self.signature.parameters.values())
        for param in params:
            if param.kind is inspect.Parameter.POSITIONAL_ONLY:
                raise ValidationError(
                    "job", name, f"parameter {param.name!r} is positional-only; job args are stored by name"
                )
        self.names = frozenset(p.name for p in params if p.kind in _KEYWORD)
        self.required = frozenset(p.name for p in params if p.kind in _KEYWORD and p.default is p.empty)
        self.var_keyword = next((p.name for p in params if p.kind is inspect.Parameter.VAR_KEYWORD), None)
        self.var_positional = next(
            (p.name for p in params if p.kind is inspect.Parameter.VAR_POSITIONAL), None
        )
        self._codecs: dict[str, Codec] | None = None

    @property
    def codecs(self) -> dict[str, Codec]:
        """Codecs of the parameters whose annotation needs one (read on first use)."""
        if self._codecs is None:
            try:
                hints = typing.get_type_hints(self.fn)
            except Exception as exc:  # a name the annotations use is not defined
                raise ConveyorError(f"the annotations of job {self.name} cannot be read: {exc}") from exc
            found = {}
            for param in self.signature.parameters.values():
                codec = codec_for(hints[param.name]) if param.name in hints else None
                if codec is not None and param.kind in _KEYWORD:
                    found[param.name] = codec
            self._codecs = found
        return self._codecs

    def bind(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        """The stored args of a call ``fn(*args, **kwargs)``: bound by name, typed values encoded."""
        if args:
            try:
                bound = self.signature.bind(*args, **kwargs)
            except TypeError as exc:
                raise ArgumentError("args", args, f"do not fit {self.name}: {exc}") from None
            values = dict(bound.arguments)
            if self.var_positional is not None and values.pop(self.var_positional, ()):
                raise ArgumentError(
                    "args",
                    args,
                    f"do not fit {self.name}: values for *{self.var_positional} have no names to store",
                )
            if self.var_keyword is not None:
                values.update(values.pop(self.var_keyword, {}))
        else:
            self.check_names(kwargs, "args")
            values = kwargs
        codecs = self._codecs if self._codecs is not None else self.codecs
        if codecs:
            values = dict(values)
            for name, codec in codecs.items():
                if name in values and values[name] is not None:
                    values[name] = _convert(codec.encode, codec, name, values[name])
        return values

    def check_names(self, values: Mapping[str, Any], field: str) -> None:
        keys = values.keys()
        # The common case allocates nothing: two subset tests on the keys view.
        if keys >= self.required and (self.var_keyword is not None or keys <= self.names):
            return
        missing = self.required - values.keys()
        unknown = () if self.var_keyword is not None else values.keys() - self.names
        if missing or unknown:
            problems = []
            if missing:
                problems.append(f"missing {', '.join(sorted(missing))}")
            if unknown:
                problems.append(f"unknown {', '.join(sorted(unknown))}")
            raise ArgumentError(field, dict(values), f"do not fit {self.name}: {'; '.join(problems)}")

    def decode(self, stored: Mapping[str, Any]) -> dict[str, Any]:
        """The keyword arguments of a run from stored args (``ArgumentError`` when they do not fit:
        a row another client wrote, or a job enqueued before the function changed)."""
        self.check_names(stored, "stored args")
        codecs = self._codecs if self._codecs is not None else self.codecs
        if not codecs:  # most jobs: the stored args as they are, no copy on the execute path
            return dict(stored) if not isinstance(stored, dict) else stored
        values = dict(stored)
        for name, codec in codecs.items():
            if name in values and values[name] is not None:
                values[name] = _convert(codec.decode, codec, name, values[name])
        return values


def _convert(step: Callable[[Any], Any], codec: Codec, name: str, value: Any) -> Any:
    try:
        return step(value)
    except (ValueError, TypeError, ArithmeticError, KeyError) as exc:
        detail = f" ({exc})" if str(exc) else ""
        raise ArgumentError(f"args.{name}", value, f"must be {codec.label}{detail}") from None


# -- codecs by annotation ------------------------------------------------------------------------
def codec_for(annotation: Any) -> Codec | None:
    """The codec of an annotation, or None when its values are stored as given (plain JSON)."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return codec_for(typing.get_args(annotation)[0])
    if origin is typing.Union or origin is types.UnionType:
        members = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(members) == 1:
            return _optional(codec_for(members[0]))
        return None  # a union of several types: nothing says which to decode to
    if origin in (list, tuple, set, frozenset, Sequence):
        item_args = typing.get_args(annotation)
        if origin is tuple and (len(item_args) != 2 or item_args[1] is not Ellipsis):
            return None
        return _sequence(codec_for(item_args[0]) if item_args else None, origin)
    if origin in (dict, Mapping):
        key_value = typing.get_args(annotation)
        return _mapping(codec_for(key_value[1])) if len(key_value) == 2 else None
    if not isinstance(annotation, type):
        return None
    return _scalar(annotation)


def _scalar(kind: type) -> Codec | None:
    for temporal in (datetime, date, time):  # datetime first: it is a date too
        if issubclass(kind, temporal):
            label = f"a {temporal.__name__} (or ISO 8601 text)"
            parse = temporal.fromisoformat
            return Codec(label, _text_of(kind, parse), _parse(kind, parse))
    if issubclass(kind, uuid.UUID):
        return Codec("a UUID (or its text)", lambda v: str(_uuid(v)), _uuid)
    if issubclass(kind, Decimal):
        return Codec("a Decimal (or its text)", lambda v: str(_decimal(v)), _decimal)
    if issubclass(kind, enum.Enum):
        return Codec(
            f"a {kind.__name__} (or one of its values)",
            lambda v: _member(kind, v).value,
            lambda v: _member(kind, v),
        )
    if dataclasses.is_dataclass(kind):
        return _dataclass(kind)
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and issubclass(kind, pydantic.BaseModel):
        return Codec(
            f"a {kind.__name__} (or an object of its fields)",
            lambda v: _model(kind, v).model_dump(mode="json"),
            lambda v: _model(kind, v),
        )
    return None


def _model(kind: Any, value: Any) -> Any:
    return value if isinstance(value, kind) else kind.model_validate(value)


def _text_of(kind: type, parse: Callable[[str], Any]) -> Callable[[Any], str]:
    def encode(value: Any) -> str:
        if isinstance(value, str):
            value = parse(value)  # refused here when it is no ISO 8601 text
        if not isinstance(value, kind) or (kind is date and isinstance(value, datetime)):
            raise TypeError(f"got {type(value).__name__}")
        return str(value.isoformat())  # type: ignore[attr-defined]

    return encode


def _parse(kind: type, parse: Callable[[str], Any]) -> Callable[[Any], Any]:
    def decode(value: Any) -> Any:
        if isinstance(value, kind):
            return value
        if not isinstance(value, str):
            raise TypeError(f"got {type(value).__name__}")
        return parse(value)

    return decode


def _uuid(value: Any) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if not isinstance(value, str):
        raise TypeError(f"got {type(value).__name__}")
    return uuid.UUID(value)


def _decimal(value: Any) -> Decimal:
    if isinstance(value, Decimal):
        found = value
    elif isinstance(value, str | int) and not isinstance(value, bool):
        try:
            found = Decimal(value)
        except InvalidOperation:
            raise ValueError(f"{value!r} is no number") from None
    else:  # a float would carry its binary error into the decimal
        raise TypeError(f"got {type(value).__name__}")
    if not found.is_finite():
        raise ValueError("not finite")
    return found


def _member(kind: type[enum.Enum], value: Any) -> enum.Enum:
    if isinstance(value, kind):
        return value
    return kind(value)


def _dataclass(kind: type) -> Codec:
    cache: dict[str, Codec | None] = {}

    def fields() -> dict[str, Codec | None]:
        if not cache:
            hints = typing.get_type_hints(kind)
            for item in dataclasses.fields(kind):
                cache[item.name] = codec_for(hints.get(item.name, Any))
        return cache

    def encode(value: Any) -> dict[str, Any]:
        if isinstance(value, Mapping):
            value = decode(value)  # checked by building one
        if not isinstance(value, kind):
            raise TypeError(f"got {type(value).__name__}")
        out = {}
        for name, codec in fields().items():
            item = getattr(value, name)
            out[name] = codec.encode(item) if codec is not None and item is not None else item
        return out

    def decode(value: Any) -> Any:
        if isinstance(value, kind):
            return value
        if not isinstance(value, Mapping):
            raise TypeError(f"got {type(value).__name__}")
        known = fields()
        unknown = value.keys() - known.keys()
        if unknown:
            raise ValueError(f"unknown fields {', '.join(sorted(map(str, unknown)))}")
        given = {
            name: codec.decode(item) if (codec := known[name]) is not None and item is not None else item
            for name, item in value.items()
        }
        return kind(**given)

    return Codec(f"a {kind.__name__} (or an object of its fields)", encode, decode)


def _optional(inner: Codec | None) -> Codec | None:
    if inner is None:
        return None
    return Codec(
        f"{inner.label} or None",
        lambda v: None if v is None else inner.encode(v),
        lambda v: None if v is None else inner.decode(v),
    )


def _sequence(item: Codec | None, origin: Any) -> Codec | None:
    if item is None:
        return None
    build = origin if origin in (tuple, set, frozenset) else list

    def encode(value: Any) -> list[Any]:
        if isinstance(value, str | bytes | Mapping):
            raise TypeError(f"got {type(value).__name__}")
        return [None if v is None else item.encode(v) for v in value]

    def decode(value: Any) -> Any:
        if not isinstance(value, list):
            raise TypeError(f"got {type(value).__name__}")
        return build(None if v is None else item.decode(v) for v in value)

    return Codec(f"a sequence of {item.label}", encode, decode)


def _mapping(value_codec: Codec | None) -> Codec | None:
    if value_codec is None:
        return None

    def encode(value: Any) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise TypeError(f"got {type(value).__name__}")
        return {k: None if v is None else value_codec.encode(v) for k, v in value.items()}

    def decode(value: Any) -> dict[str, Any]:
        if not isinstance(value, Mapping):
            raise TypeError(f"got {type(value).__name__}")
        return {k: None if v is None else value_codec.decode(v) for k, v in value.items()}

    return Codec(f"a mapping of {value_codec.label}", encode, decode)
