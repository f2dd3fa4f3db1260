"""BARE primitives: the byte layouts of https://baremessages.org, both directions."""

from __future__ import annotations

import pytest

from perdure.errors import InternalError, InvalidRequest
from perdure.protocol.bare import BareReader, BareWriter


@pytest.mark.parametrize(
    ("value", "hex_bytes"),
    [
        (0, "00"),
        (1, "01"),
        (127, "7f"),
        (128, "8001"),
        (300, "ac02"),
        (16383, "ff7f"),
        (16384, "808001"),
        (2**32, "8080808010"),
        (2**63, "80808080808080808001"),
        (2**64 - 1, "ffffffffffffffffff01"),
    ],
)
def test_uint_varint(value: int, hex_bytes: str) -> None:
    writer = BareWriter()
    writer.uint(value)
    assert writer.getvalue().hex() == hex_bytes
    reader = BareReader(bytes.fromhex(hex_bytes), "test")
    assert reader.uint() == value
    reader.end()


@pytest.mark.parametrize("value", [-1, 2**64])
def test_uint_range(value: int) -> None:
    with pytest.raises(InternalError):
        BareWriter().uint(value)
    with pytest.raises(InternalError):
        BareWriter().u64(value)


def test_fixed_width_and_composites() -> None:
    writer = BareWriter()
    writer.version(4)
    writer.u64(2000)
    writer.boolean(True)
    writer.boolean(False)
    writer.optional(False)
    writer.optional(True)
    writer.string("jobs")
    writer.data(b"\x00\xff")
    writer.string("é")
    data = writer.getvalue()
    assert (
        data.hex()
        == "0400"
        + "d007000000000000"
        + "01"
        + "00"
        + "00"
        + "01"
        + "046a6f6273"
        + "0200ff"
        + "02c3a9"
    )

    reader = BareReader(data, "test")
    assert reader.version() == 4
    assert reader.u64() == 2000
    assert reader.boolean() is True
    assert reader.boolean() is False
    assert reader.optional("x") is False
    assert reader.optional("y") is True
    assert reader.string() == "jobs"
    assert reader.data() == b"\x00\xff"
    assert reader.string() == "é"
    reader.end()


@pytest.mark.parametrize(
    ("hex_bytes", "read", "complaint"),
    [
        ("", "uint", "unexpected end of data reading a uint (at byte 0)"),
        ("80", "uint", "unexpected end of data reading a uint (at byte 1)"),
        ("8000", "uint", "not a valid 64-bit varint"),
        ("ffffffffffffffffff02", "uint", "not a valid 64-bit varint"),
        ("ffffffffffffffffffff01", "uint", "longer than 10 bytes"),
        ("02", "boolean", "a bool must be 0 or 1, got 2 (at byte 0)"),
        ("0361", "string", "unexpected end of data reading a string"),
        ("0261", "data", "needs 2 byte(s), 1 left"),
        ("02c328", "string", "a string is not valid UTF-8 (at byte 1)"),
        ("0000", "u64", "unexpected end of data reading a u64"),
    ],
)
def test_reader_errors(hex_bytes: str, read: str, complaint: str) -> None:
    reader = BareReader(bytes.fromhex(hex_bytes), "test message")
    with pytest.raises(InvalidRequest) as info:
        getattr(reader, read)()
    assert info.value.message.startswith("Malformed BARE test message: ")
    assert complaint in info.value.message


def test_trailing_bytes() -> None:
    reader = BareReader(b"\x01\x02", "test")
    assert reader.uint() == 1
    with pytest.raises(InvalidRequest, match=r"1 trailing byte\(s\) after the message"):
        reader.end()


def test_unencodable_string() -> None:
    with pytest.raises(InternalError, match="UTF-8"):
        BareWriter().string("\ud800")
