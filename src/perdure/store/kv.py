"""How an actor's KV space (``c.kv``, docs/storage.md) is kept by the store.

The store keeps each actor's KV records as ``(key, value)`` pairs of bytes, ordered by
key bytewise (memcmp order, the order of SQLite BLOBs and PostgreSQL BYTEA). It only
persists: the runtime decides what a key and a value are. Writes ride in the actor's
:class:`~perdure.store.base.ActorCommit` (``kv_put``, ``kv_delete``,
``kv_delete_range``), so they are applied atomically with the rest of the commit and
fenced with it; reads are :meth:`~perdure.store.base.Store.kv_get` (point reads, in a
batch) and :meth:`~perdure.store.base.Store.kv_list` (one key range, either way, with a
limit).

A user's key is a ``str`` or ``bytes``; it is stored with a one-byte type tag in front
(:func:`encode_key`): ``b"b"`` + the bytes, or ``b"s"`` + the string's UTF-8. So ``"a"``
and ``b"a"`` are two keys, every bytes key sorts before every string key, and string
keys sort by their UTF-8 bytes (which is code point order). A prefix or a range is
given in one of the two types and covers keys of that type only.
"""

from __future__ import annotations

__all__ = ["BYTES_TAG", "STR_TAG", "KvKey", "decode_key", "encode_key", "prefix_end"]

KvKey = str | bytes
BYTES_TAG = b"b"
STR_TAG = b"s"


def encode_key(key: KvKey) -> bytes:
    """The stored form of a user's key (tag + bytes); ``TypeError`` for another type."""
    if isinstance(key, str):
        return STR_TAG + key.encode("utf-8")
    if isinstance(key, (bytes, bytearray, memoryview)):
        return BYTES_TAG + bytes(key)
    raise TypeError(f"a KV key is a str or bytes, not {type(key).__name__}")


def decode_key(stored: bytes) -> KvKey:
    """The user's key of a stored key (the inverse of :func:`encode_key`)."""
    tag, body = stored[:1], bytes(stored[1:])
    if tag == STR_TAG:
        return body.decode("utf-8")
    if tag == BYTES_TAG:
        return body
    raise ValueError(f"not a stored KV key: {stored!r}")


def prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key that starts with ``prefix`` (the
    exclusive end of its range), or ``None`` when there is none (all ``0xff``)."""
    trimmed = prefix.rstrip(b"\xff")
    if not trimmed:
        return None
    return trimmed[:-1] + bytes([trimmed[-1] + 1])
