"""perdure.store.encoding: exact round trips, and clear refusals naming the bad path."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import pytest

from perdure.errors import StateNotSerializable
from perdure.store.encoding import decode_value, encode_value, find_unencodable

_IST = dt.timezone(dt.timedelta(hours=5, minutes=30))


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        False,
        0,
        -1,
        2**53 + 1,
        2**64,
        2**64 + 1,
        -(2**64) - 1,
        10**40,
        1.5,
        -0.25,
        "",
        "héllo 東京 \u0000",
        b"",
        b"\x00\xff",
        [],
        {},
        [1, "two", [3.0, [None]]],
        {"a": {"b": {"c": [1, 2, {"d": b"x"}]}}},
        {1: "int key", "s": "str key"},
        {1, 2, 3},
        Decimal("3.14159265358979323846264338327950288"),
        dt.date(2024, 2, 29),
        dt.datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=dt.UTC),
        dt.datetime(1969, 12, 31, 23, 59, 59, tzinfo=_IST),
    ],
    ids=repr,
)
def test_round_trip(value: Any) -> None:
    decoded = decode_value(encode_value(value))
    assert decoded == value
    assert type(decoded) is type(value)


def test_aware_datetime_keeps_its_offset() -> None:
    when = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=_IST)
    decoded = decode_value(encode_value({"when": when}))["when"]
    assert decoded == when
    assert decoded.utcoffset() == dt.timedelta(hours=5, minutes=30)


def test_encoding_is_bytes() -> None:
    assert type(encode_value({"a": 1})) is bytes


def test_tuples_come_back_as_lists() -> None:
    assert decode_value(encode_value((1, (2, 3)))) == [1, [2, 3]]


def test_bytearray_comes_back_as_bytes() -> None:
    assert decode_value(encode_value(bytearray(b"ab"))) == b"ab"


class _Opaque:
    pass


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"users": [1, 2, _Opaque()]}, "state['users'][2]"),
        ([{"a": 1}, {"b": {"c": _Opaque()}}], "state[1]['b']['c']"),
        (_Opaque(), "state"),
        ({"fn": print}, "state['fn']"),
        ({_Opaque(): 1}, "state key"),
    ],
)
def test_unencodable_values_name_their_path(value: Any, path: str) -> None:
    with pytest.raises(StateNotSerializable) as caught:
        encode_value(value, what="state", owner="actor-1")
    assert caught.value.metadata["path"].startswith(path)
    assert caught.value.metadata["actor"] == "actor-1"
    assert path in caught.value.message
    assert "actor-1" in caught.value.message
    assert caught.value.identifier == "state.not_serializable"


def test_naive_datetime_is_refused() -> None:
    with pytest.raises(StateNotSerializable, match="naive datetime") as caught:
        encode_value({"when": [dt.datetime(2024, 1, 1)]}, what="state")
    assert caught.value.metadata["path"] == "state['when'][0]"


def test_a_reference_cycle_is_refused() -> None:
    cycle: list[Any] = [1]
    cycle.append(cycle)
    with pytest.raises(StateNotSerializable) as caught:
        encode_value({"loop": cycle}, what="state")
    assert caught.value.metadata["path"] == "state['loop'][1]"


def test_find_unencodable_without_a_culprit() -> None:
    assert find_unencodable({"fine": [1, 2]}, "value") == (
        "value",
        "the value cannot be encoded as CBOR",
    )


def test_shared_but_acyclic_references_are_fine() -> None:
    shared = [1, 2]
    assert find_unencodable({"a": shared, "b": shared}, "value")[0] == "value"
    assert decode_value(encode_value({"a": shared, "b": shared})) == {"a": [1, 2], "b": [1, 2]}


def test_frozenset_comes_back_equal_as_a_set() -> None:
    decoded = decode_value(encode_value({"tags": frozenset({"a", "b"})}))
    assert decoded == {"tags": {"a", "b"}}
    assert isinstance(decoded["tags"], set | frozenset)
