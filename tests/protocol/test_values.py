"""User values: RivetKit's JSON tags, and CBOR as cbor-x (the official client) writes it."""

from __future__ import annotations

import json
from typing import Any

import cbor2
import pytest

from perdure.errors import InvalidRequest
from perdure.protocol.values import (
    MAX_SAFE_INTEGER,
    decode_cbor_value,
    encode_cbor_value,
    from_json_value,
    to_json_value,
)


def json_round_trip(value: Any) -> Any:
    return from_json_value(json.loads(json.dumps(to_json_value(value))))


# -- JSON tags --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "wire"),
    [
        (MAX_SAFE_INTEGER, MAX_SAFE_INTEGER),
        (-MAX_SAFE_INTEGER, -MAX_SAFE_INTEGER),
        (MAX_SAFE_INTEGER + 1, ["$BigInt", "9007199254740992"]),
        (-(2**53), ["$BigInt", "-9007199254740992"]),
        (10**30, ["$BigInt", "1" + "0" * 30]),
        (b"\x00\xff", ["$Uint8Array", "AP8="]),
        (b"", ["$Uint8Array", ""]),
        (frozenset({1}), ["$Set", [1]]),
        (["$x", 1], ["$$x", 1]),
        (["$$x", 1], ["$$$x", 1]),
        (["$", 1], ["$$", 1]),
        (["$x", 1, 2], ["$x", 1, 2]),  # only two-element arrays can be tags
        (["x", "$y"], ["x", "$y"]),
        ([["$x", 1]], [["$$x", 1]]),
        ({"k": ["$BigInt", "1"]}, {"k": ["$$BigInt", "1"]}),
        ((1, 2), (1, 2)),
    ],
)
def test_json_tagging(value: Any, wire: Any) -> None:
    assert to_json_value(value) == wire
    assert json_round_trip(value) == (list(value) if isinstance(value, tuple) else value)


def test_json_tagging_copies_only_what_changes() -> None:
    plain = {"a": [1, 2, {"b": "c"}], "d": 1.5}
    assert to_json_value(plain) is plain
    mixed = {"keep": [1, 2], "change": b"x"}
    tagged = to_json_value(mixed)
    assert tagged["keep"] is mixed["keep"]
    assert mixed["change"] == b"x"  # the caller's value is never modified


def test_json_set_round_trip() -> None:
    value = {1, "a", 2**60}
    assert to_json_value(value)[0] == "$Set"
    assert json_round_trip(value) == value


@pytest.mark.parametrize(
    ("wire", "value"),
    [
        (["$BigInt", "123"], 123),
        (["$BigInt", "-123456789012345678901234567890"], -123456789012345678901234567890),
        (["$BigInt", 5], 5),  # JavaScript's BigInt(5) accepts a number too
        (["$Uint8Array", "AQID"], b"\x01\x02\x03"),
        (["$ArrayBuffer", "AQID"], b"\x01\x02\x03"),
        (["$Undefined", 0], None),
        (["$Set", [1, 2, ["$BigInt", "3"]]], {1, 2, 3}),
        (["$$Set", [1]], ["$Set", [1]]),
        (["$$$x", ["$BigInt", "1"]], ["$$x", 1]),  # the payload of an escape is revived
        ({"a": [{"b": ["$Uint8Array", ""]}]}, {"a": [{"b": b""}]}),
    ],
)
def test_json_reviving(wire: Any, value: Any) -> None:
    assert from_json_value(wire) == value


@pytest.mark.parametrize(
    ("wire", "complaint"),
    [
        (["$Foo", 1], "unknown tag '$Foo'"),
        (["$BigInt", "12a"], "`$BigInt` needs a decimal integer string"),
        (["$BigInt", " 12"], "`$BigInt` needs a decimal integer string"),
        (["$BigInt", "1" * 5000], "`$BigInt` needs a decimal integer string"),
        (["$BigInt", 1.5], "`$BigInt` needs a decimal integer string"),
        (["$Uint8Array", "@@@"], "`$Uint8Array` needs a base64 string"),
        (["$ArrayBuffer", 12], "`$ArrayBuffer` needs a base64 string"),
        (["$Set", {"a": 1}], "`$Set` needs an array"),
        (["$Set", [[1]]], "hashable"),
        ([[[["$Nope", 0]]]], "unknown tag"),
    ],
)
def test_json_bad_tags(wire: Any, complaint: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        from_json_value(wire, "action args")
    assert complaint in info.value.message
    assert "action args" in info.value.message
    assert info.value.code == "invalid_request"


def test_json_depth_limit() -> None:
    deep: Any = 1
    for _ in range(500):
        deep = [deep]
    with pytest.raises(InvalidRequest, match="nested deeper"):
        from_json_value(deep)


# -- CBOR -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "head"),
    [
        (2**32 - 1, "1affffffff"),  # cbor-x reads 32-bit CBOR ints as numbers
        (-(2**31), "3a7fffffff"),
        (2**32, "fb41f0000000000000"),  # cbor-x would read 0x1b as a BigInt: float64 instead
        (MAX_SAFE_INTEGER, "fb433fffffffffffff"),
        (-(2**31) - 1, "fbc1e0000000200000"),  # cbor-x misreads 0x3a beyond -2**31
        (-MAX_SAFE_INTEGER, "fbc33fffffffffffff"),
        (2**53, "1b0020000000000000"),  # beyond safe: a BigInt on purpose
        (-(2**53), "3b001fffffffffffff"),
        (2**64, "c249010000000000000000"),  # bignum tag
    ],
)
def test_cbor_integer_forms(value: int, head: str) -> None:
    encoded = encode_cbor_value(value)
    assert encoded.hex() == head
    back = decode_cbor_value(encoded)
    assert back == value
    assert type(back) is int


def test_cbor_integral_floats_in_the_band_become_ints() -> None:
    # What cbor-x sends for Date.now(): a float64 with an integral value beyond 2**32.
    epoch_ms = 1796208373698
    assert decode_cbor_value(cbor2.dumps(float(epoch_ms))) == epoch_ms
    assert type(decode_cbor_value(cbor2.dumps(float(epoch_ms)))) is int
    # Outside the band, and fractional values, floats stay floats.
    for stays in (3.0, 0.5, 2.0**53, 1e300, float(epoch_ms) + 0.5, -0.0):
        back = decode_cbor_value(cbor2.dumps(stays))
        assert type(back) is float
        assert back == stays


@pytest.mark.parametrize(
    ("hex_value", "value"),
    [
        ("d84043010203", b"\x01\x02\x03"),  # cbor-x Uint8Array: tag 64
        ("43010203", b"\x01\x02\x03"),  # Node Buffer: plain byte string
        ("f7", None),  # undefined
        ("82f701", [None, 1]),
        ("b90002616101616202", {"a": 1, "b": 2}),  # cbor-x's map16 objects
        ("1b0000000000000005", 5),  # a BigInt 5n from cbor-x
        ("3b0000000000000004", -5),
        ("d90102820102", {1, 2}),  # tag 258 set
        ("c11a5f5e1000", None),  # tag 1 epoch → datetime (checked below)
        ("826724426967496e74623132", 12),  # ["$BigInt", "12"] as the newest client writes
        ("826324247801", ["$x", 1]),  # escaped ["$$x", 1]
        ("826b2455696e743841727261796441514944", b"\x01\x02\x03"),
        ("a1616182f7fb4270000000000000", {"a": [None, 2**40]}),
    ],
)
def test_cbor_decodes_what_cbor_x_writes(hex_value: str, value: Any) -> None:
    decoded = decode_cbor_value(bytes.fromhex(hex_value))
    if hex_value.startswith("c1"):
        assert decoded.timestamp() == 0x5F5E1000
    else:
        assert decoded == value


def test_cbor_escapes_dollar_pairs() -> None:
    encoded = encode_cbor_value(["$BigInt", "12"])
    assert cbor2.loads(encoded) == ["$$BigInt", "12"]
    assert decode_cbor_value(encoded) == ["$BigInt", "12"]
    nested = {"a": [["$x", 1], ("$y", 2)]}
    assert decode_cbor_value(encode_cbor_value(nested)) == {"a": [["$x", 1], ["$y", 2]]}


def test_cbor_empty_data_is_none() -> None:
    assert decode_cbor_value(b"") is None


def test_cbor_encoding_copies_only_what_changes() -> None:
    value = {"a": [1, 2], "b": "c"}
    assert encode_cbor_value(value) == cbor2.dumps(value)


@pytest.mark.parametrize(
    ("hex_value", "complaint"),
    [
        ("ff", "Malformed CBOR"),
        ("0102", "1 trailing byte(s)"),
        ("82", "Malformed CBOR"),
        ("d81d00", "Malformed CBOR"),  # shared reference: could build cycles
        ("d82363612a62", "Malformed CBOR"),  # regular expression
        ("d8246161", "Malformed CBOR"),  # MIME message
        ("c14161", "Malformed CBOR"),  # tag 1 around a byte string
        ("62fffe", "Malformed CBOR"),  # invalid UTF-8
        ("8265244e6f706501", "unknown tag '$Nope'"),
        ("5bffffffffffffffff", "Malformed CBOR"),  # absurd length, no data
    ],
)
def test_cbor_malformed(hex_value: str, complaint: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        decode_cbor_value(bytes.fromhex(hex_value), "action output")
    assert complaint in info.value.message


def test_cbor_depth_limit() -> None:
    with pytest.raises(InvalidRequest):
        decode_cbor_value(b"\x81" * 1000 + b"\x01")
