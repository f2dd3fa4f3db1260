"""Actor keys: normalisation, limits and the serialised form.

A key is a ``str`` or a sequence of ``str`` (a plain string means a one-part key; ``None``
or an empty sequence means the singleton key ``[]``). Keys are unique per actor name.

The serialised form is the one the original engine uses in its management API and the
``x-rivet-actor-key`` header: parts joined with ``/``; inside a part ``\\`` becomes
``\\\\`` and ``/`` becomes ``\\/``; an empty part is ``\\0``; the empty key is ``/``.
"""

from __future__ import annotations

from collections.abc import Sequence

from perdure.errors import InvalidRequest

__all__ = [
    "MAX_KEY_BYTES",
    "MAX_KEY_PART_BYTES",
    "Key",
    "deserialize_key",
    "normalize_key",
    "serialize_key",
]

Key = tuple[str, ...]

MAX_KEY_PART_BYTES = 128
MAX_KEY_BYTES = 1024


def normalize_key(key: str | Sequence[str] | None) -> Key:
    """Turn what a user passes as a key into a tuple of parts, enforcing the limits."""
    if key is None:
        parts: Key = ()
    elif isinstance(key, str):
        parts = (key,)
    elif isinstance(key, (list, tuple)):
        parts = tuple(key)
    else:
        raise InvalidRequest(
            f"An actor key must be a string or a list of strings, not {type(key).__name__}.",
            code="invalid_key",
        )
    for index, part in enumerate(parts):
        if not isinstance(part, str):
            raise InvalidRequest(
                f"Key part {index} must be a string, not {type(part).__name__}.",
                code="invalid_key",
            )
        if len(part.encode()) > MAX_KEY_PART_BYTES:
            raise InvalidRequest(
                f"Key part {index} is longer than {MAX_KEY_PART_BYTES} bytes.",
                code="invalid_key",
            )
    if len(serialize_key(parts).encode()) > MAX_KEY_BYTES:
        raise InvalidRequest(
            f"The serialised key is longer than {MAX_KEY_BYTES} bytes.", code="invalid_key"
        )
    return parts


def _escape_part(part: str) -> str:
    if part == "":
        return "\\0"
    return part.replace("\\", "\\\\").replace("/", "\\/")


def serialize_key(parts: Sequence[str]) -> str:
    """Serialise a key the way the original engine does (see the module docstring)."""
    if not parts:
        return "/"
    return "/".join(_escape_part(part) for part in parts)


def deserialize_key(text: str) -> Key:
    """Inverse of :func:`serialize_key`; raises ``InvalidRequest`` on a malformed string."""
    if text == "/":
        return ()
    parts: list[str] = []
    current: list[str] = []
    escaped_empty = False
    chars = iter(text)
    for char in chars:
        if char == "\\":
            nxt = next(chars, None)
            if nxt is None:
                raise InvalidRequest("A key ends with a lone backslash.", code="invalid_key")
            if nxt == "0":
                escaped_empty = True
            elif nxt in "\\/":
                current.append(nxt)
            else:
                raise InvalidRequest(f"Unknown escape `\\{nxt}` in a key.", code="invalid_key")
        elif char == "/":
            parts.append("" if escaped_empty else "".join(current))
            current, escaped_empty = [], False
        else:
            current.append(char)
    parts.append("" if escaped_empty else "".join(current))
    return tuple(parts)
