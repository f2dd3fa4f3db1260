"""The storage encoding of user values (state, inputs, queue bodies, step outputs).

Values are stored as CBOR. What round-trips exactly: ``None``, ``bool``, ``int`` of any
size, ``float``, ``str``, ``bytes``, ``list``, ``dict`` (any CBOR-encodable keys), ``set``
and ``frozenset``, ``Decimal``, timezone-aware ``datetime`` and ``date``. Tuples come back
as lists (CBOR has one array type). Pydantic models and dataclass instances are stored in
their plain JSON form (:func:`perdure.schemas.dump_model`) and come back as that plain
form; whoever declared a schema turns them back into models. Anything else, or a naive
``datetime``, is refused at the moment of saving with
:class:`~perdure.errors.StateNotSerializable` naming the path of the offending value.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

import cbor2

from perdure.errors import StateNotSerializable
from perdure.schemas import dump_model, is_model_value

__all__ = ["decode_value", "encode_value", "find_unencodable"]

_SCALARS = (type(None), bool, int, float, str, bytes, bytearray, Decimal, _dt.date)


def encode_value(value: Any, *, what: str = "value", owner: str | None = None) -> bytes:
    """Encode ``value`` for storage; raise ``StateNotSerializable`` naming the bad path."""
    try:
        return bytes(cbor2.dumps(value, default=_encode_model))
    except (cbor2.CBOREncodeError, TypeError, ValueError, RecursionError) as exc:
        path, reason = find_unencodable(value, what)
        where = f" of actor {owner}" if owner else ""
        raise StateNotSerializable(
            f"Cannot store {path}{where}: {reason}.",
            metadata={"path": path, "actor": owner},
        ) from exc


def _encode_model(encoder: cbor2.CBOREncoder, value: Any) -> None:
    """cbor2's hook for a type it does not know: a model value goes as its plain form."""
    if not is_model_value(value):
        raise TypeError(f"values of type {type(value).__name__} cannot be stored")
    encoder.encode(dump_model(value))


def decode_value(data: bytes) -> Any:
    """Decode a value written by :func:`encode_value`."""
    return cbor2.loads(data)


def find_unencodable(value: Any, root: str = "value") -> tuple[str, str]:
    """Walk ``value`` and return ``(path, reason)`` for the first part CBOR cannot store."""
    found = _walk(value, root, set())
    return found if found is not None else (root, "the value cannot be encoded as CBOR")


def _walk(value: Any, path: str, seen: set[int]) -> tuple[str, str] | None:
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            return path, "a naive datetime (give it a timezone)"
        return None
    if isinstance(value, _SCALARS):
        return None
    if is_model_value(value):
        try:
            return _walk(dump_model(value), path, seen)
        except Exception as exc:
            return path, f"{type(value).__name__} cannot be converted ({exc})"
    if id(value) in seen:
        return path, "a reference cycle"
    if isinstance(value, Mapping):
        seen.add(id(value))
        for key, item in value.items():
            key_problem = _walk(key, f"{path} key {key!r}", seen)
            if key_problem is not None:
                return key_problem
            problem = _walk(item, f"{path}[{key!r}]", seen)
            if problem is not None:
                return problem
        seen.discard(id(value))
        return None
    if isinstance(value, (list, tuple, set, frozenset)):
        seen.add(id(value))
        for index, item in enumerate(value):
            problem = _walk(item, f"{path}[{index}]", seen)
            if problem is not None:
                return problem
        seen.discard(id(value))
        return None
    return path, f"values of type {type(value).__name__} cannot be stored"
