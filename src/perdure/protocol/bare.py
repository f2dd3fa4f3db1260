"""BARE primitives (https://baremessages.org) and the vbare version prefix.

Only what the client protocol uses: ``uint`` (LEB128 varint, at most 64 bits), ``u8``,
``u16``/``u64`` (little-endian), ``bool``, ``str`` and ``data`` (uint length + bytes),
``optional<T>`` (a 0/1 byte, then T) and union tags (a uint). vbare frames a message with
its schema version as a little-endian ``u16`` in front.

:class:`BareReader` never lets a malformed input escape as anything but
:class:`~perdure.errors.InvalidRequest`, with the byte offset where reading failed.
"""

from __future__ import annotations

from typing import NoReturn

from perdure.errors import InternalError, InvalidRequest

__all__ = ["BareReader", "BareWriter"]

_U64_MAX = 2**64 - 1
_MAX_VARINT_BYTES = 10  # ceil(64 / 7)


class BareWriter:
    """Append-only BARE encoder; :meth:`getvalue` returns the bytes written."""

    __slots__ = ("_buf",)

    def __init__(self) -> None:
        self._buf = bytearray()

    def getvalue(self) -> bytes:
        """The encoded message."""
        return bytes(self._buf)

    def version(self, version: int) -> None:
        """The vbare prefix: the schema version as a little-endian u16."""
        self._buf += version.to_bytes(2, "little")

    def uint(self, value: int) -> None:
        """An unsigned varint (LEB128), 0 <= value < 2**64."""
        if not 0 <= value <= _U64_MAX:
            raise InternalError(f"Cannot encode {value} as a BARE uint (0 … 2**64 - 1).")
        buf = self._buf
        while value >= 0x80:
            buf.append((value & 0x7F) | 0x80)
            value >>= 7
        buf.append(value)

    def u64(self, value: int) -> None:
        """A fixed-width little-endian u64."""
        if not 0 <= value <= _U64_MAX:
            raise InternalError(f"Cannot encode {value} as a BARE u64 (0 … 2**64 - 1).")
        self._buf += value.to_bytes(8, "little")

    def boolean(self, value: bool) -> None:
        """A bool as one byte, 0 or 1."""
        self._buf.append(1 if value else 0)

    def optional(self, present: bool) -> None:
        """The presence byte of an ``optional<T>``; write T after it when present."""
        self._buf.append(1 if present else 0)

    def data(self, value: bytes) -> None:
        """Variable-length ``data``: uint length, then the bytes."""
        self.uint(len(value))
        self._buf += value

    def string(self, value: str) -> None:
        """A ``str``: uint length, then UTF-8."""
        try:
            encoded = value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InternalError(f"Cannot encode a string as UTF-8: {exc}.") from None
        self.uint(len(encoded))
        self._buf += encoded


class BareReader:
    """Sequential BARE decoder over ``data``; ``what`` names the message in errors."""

    __slots__ = ("_data", "_pos", "_what")

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._pos = 0
        self._what = what

    def fail(self, reason: str) -> NoReturn:
        """Raise InvalidRequest for ``reason`` at the current offset."""
        raise InvalidRequest(f"Malformed BARE {self._what}: {reason} (at byte {self._pos}).")

    def _take(self, count: int, reading: str) -> bytes:
        start = self._pos
        end = start + count
        if end > len(self._data):
            self.fail(
                f"unexpected end of data reading {reading} "
                f"(needs {count} byte(s), {len(self._data) - start} left)"
            )
        self._pos = end
        return self._data[start:end]

    def version(self) -> int:
        """The vbare version prefix."""
        return int.from_bytes(self._take(2, "the protocol version"), "little")

    def uint(self, reading: str = "a uint") -> int:
        """An unsigned varint of at most 64 bits."""
        data = self._data
        result = 0
        shift = 0
        for count in range(_MAX_VARINT_BYTES):
            if self._pos >= len(data):
                self.fail(f"unexpected end of data reading {reading}")
            byte = data[self._pos]
            self._pos += 1
            result |= (byte & 0x7F) << shift
            if byte < 0x80:
                if result > _U64_MAX or (count > 0 and byte == 0):
                    self.fail(f"{reading} is not a valid 64-bit varint")
                return result
            shift += 7
        self.fail(f"{reading} is longer than {_MAX_VARINT_BYTES} bytes")

    def u8(self, reading: str = "a u8") -> int:
        """One unsigned byte."""
        return self._take(1, reading)[0]

    def u64(self, reading: str = "a u64") -> int:
        """A fixed-width little-endian u64."""
        return int.from_bytes(self._take(8, reading), "little")

    def boolean(self, reading: str = "a bool") -> bool:
        """A bool byte; anything but 0 or 1 is malformed."""
        byte = self.u8(reading)
        if byte > 1:
            self._pos -= 1
            self.fail(f"{reading} must be 0 or 1, got {byte}")
        return byte == 1

    def optional(self, reading: str) -> bool:
        """The presence byte of an ``optional<T>``: True if T follows."""
        byte = self.u8(reading)
        if byte > 1:
            self._pos -= 1
            self.fail(f"presence byte of {reading} must be 0 or 1, got {byte}")
        return byte == 1

    def data(self, reading: str = "data") -> bytes:
        """Variable-length ``data``."""
        length = self.uint(f"the length of {reading}")
        return self._take(length, reading)

    def string(self, reading: str = "a string") -> str:
        """A UTF-8 ``str``."""
        raw = self.data(reading)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self._pos -= len(raw) - exc.start
            self.fail(f"{reading} is not valid UTF-8")

    def remaining(self) -> int:
        """How many bytes of the input are left to read."""
        return len(self._data) - self._pos

    def end(self) -> None:
        """Check that the whole input was consumed."""
        left = len(self._data) - self._pos
        if left:
            self.fail(f"{left} trailing byte(s) after the message")
