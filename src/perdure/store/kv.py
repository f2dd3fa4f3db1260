"""An actor's KV space (``c.kv``, docs/storage.md): how keys are kept, the limits, and
the read-your-writes layer the runtime and the workflow engine share.

The store keeps each actor's KV records as ``(key, value)`` pairs of bytes, ordered by
key bytewise (memcmp order, the order of SQLite BLOBs and PostgreSQL BYTEA). Writes ride
in the actor's :class:`~perdure.store.base.ActorCommit` (``kv_delete_range``,
``kv_delete``, ``kv_put``), so they are applied atomically with the rest of the commit
and fenced with it; reads are :meth:`~perdure.store.base.Store.kv_get` (point reads, in
a batch) and :meth:`~perdure.store.base.Store.kv_list` (one key range, either way, with
a limit). Values are encoded like state (:mod:`perdure.store.encoding`).

A user's key is a ``str`` or ``bytes``; it is stored with a one-byte type tag in front
(:func:`encode_key`): ``b"b"`` + the bytes, or ``b"s"`` + the string's UTF-8. So ``"a"``
and ``b"a"`` are two keys, every bytes key sorts before every string key, and string
keys sort by their UTF-8 bytes (which is code point order). A prefix or a range is
given in one of the two types and covers keys of that type only.

Why here, in store/: the runtime (``c.kv``) and the workflow engine (``step.kv``) both
build on it and both sit above the store; like :mod:`perdure.store.encoding`, this
module decides nothing about an actor's life, only what its KV records are.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Protocol

from perdure.errors import KvError

__all__ = [
    "BYTES_TAG",
    "DB_PAGE_TAG",
    "INTERNAL_TAG",
    "MAX_BATCH_KEYS",
    "MAX_KEY_SIZE",
    "MAX_VALUE_SIZE",
    "MAX_WRITES",
    "STR_TAG",
    "KvKey",
    "KvLayer",
    "KvOverlay",
    "RawKv",
    "decode_key",
    "encode_key",
    "prefix_end",
]

KvKey = str | bytes
BYTES_TAG = b"b"
STR_TAG = b"s"
# The pages of the actor's SQL database (``c.db``) are KV records too, under a tag of
# their own that no user key has, sorting after every user key: the user's lists and
# ranges never reach them, and they ride in the commits and moves of the KV space.
DB_PAGE_TAG = b"\xfe"
# The engine's own records in an actor's KV space (a queue's rate windows): no user key
# starts with it, and it sorts after every user key, so a listing of the user's keys
# ends before it.
INTERNAL_TAG = b"~"

# The bounds of the KV space (errors kv.*, docs/storage.md). A key is at most 2 KiB (of
# bytes, or of UTF-8: rivet's engine allows 2 KiB too); a value at most 1 MiB once
# encoded; one commit carries at most 10,000 KV writes (puts, deletes and range
# deletes): an action that writes more must save in between (``c.save_state``); one
# batch read asks for at most 10,000 keys.
MAX_KEY_SIZE = 2048
MAX_VALUE_SIZE = 1_048_576
MAX_WRITES = 10_000
MAX_BATCH_KEYS = 10_000


def encode_key(key: KvKey) -> bytes:
    """The stored form of a user's key (tag + bytes); ``kv.key_invalid`` for another
    type, ``kv.key_too_large`` past :data:`MAX_KEY_SIZE`."""
    if isinstance(key, str):
        body, tag = key.encode("utf-8"), STR_TAG
    elif isinstance(key, (bytes, bytearray, memoryview)):
        body, tag = bytes(key), BYTES_TAG
    else:
        raise KvError(
            f"A KV key is a str or bytes, not {type(key).__name__}.",
            code="key_invalid",
            metadata={"type": type(key).__name__},
        )
    if len(body) > MAX_KEY_SIZE:
        raise KvError(
            f"A KV key is at most {MAX_KEY_SIZE} bytes; this one has {len(body)}.",
            code="key_too_large",
            metadata={"size": len(body), "max": MAX_KEY_SIZE},
        )
    return tag + body


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


class RawKv(Protocol):
    """A KV space of stored keys and encoded values: what :class:`~perdure.store.kv_api.Kv`
    (the user's ``c.kv``) reads and writes. Reads see every write staged before them;
    writes are staged, durable with the actor's next commit."""

    async def get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """The values of ``keys``, in order (``None``: no record)."""
        ...

    async def scan(
        self, start: bytes, end: bytes | None, reverse: bool, limit: int | None
    ) -> list[tuple[bytes, bytes]]:
        """The records in ``[start, end)`` in key order (descending with ``reverse``),
        at most ``limit``."""
        ...

    def put(self, key: bytes, value: bytes) -> None:
        """Stage a put."""
        ...

    def delete(self, key: bytes) -> None:
        """Stage a delete."""
        ...

    def delete_range(self, start: bytes, end: bytes | None) -> None:
        """Stage the delete of every record in ``[start, end)``."""
        ...

    def staged_writes(self) -> int:
        """How many writes the next commit carries so far (bounded by MAX_WRITES)."""
        ...


GetBelow = Callable[[list[bytes]], Awaitable[list[bytes | None]]]
ScanBelow = Callable[[bytes, bytes | None, bool, int | None], Awaitable[list[tuple[bytes, bytes]]]]


def _in(key: bytes, start: bytes, end: bytes | None) -> bool:
    return key >= start and (end is None or key < end)


def _overlaps(a: tuple[bytes, bytes | None], start: bytes, end: bytes | None) -> bool:
    a_start, a_end = a
    return (a_end is None or a_end > start) and (end is None or a_start < end)


class KvOverlay:
    """Writes not yet in the layer below, over which reads are answered: the latest write
    of each key (``None``: deleted) and the deleted ranges, each with the number of the
    write that made it (:meth:`settle` forgets those a durable commit carried)."""

    __slots__ = ("entries", "ranges", "seq")

    def __init__(self) -> None:
        self.entries: dict[bytes, tuple[bytes | None, int]] = {}
        # (start, end, seq) of each range deleted; a later put inside it is an entry.
        self.ranges: list[tuple[bytes, bytes | None, int]] = []
        self.seq = 0

    def __bool__(self) -> bool:
        return bool(self.entries or self.ranges)

    def put(self, key: bytes, value: bytes | None) -> None:
        """Note a put (``None``: a delete)."""
        self.seq += 1
        self.entries[key] = (value, self.seq)

    def delete_range(self, start: bytes, end: bytes | None) -> None:
        """Note a range delete: it supersedes the entries inside it."""
        self.seq += 1
        for key in [k for k in self.entries if _in(k, start, end)]:
            del self.entries[key]
        self.ranges.append((start, end, self.seq))

    def settle(self, mark: int) -> None:
        """Forget the writes numbered up to ``mark``: the layer below has them now."""
        self.entries = {k: e for k, e in self.entries.items() if e[1] > mark}
        self.ranges = [r for r in self.ranges if r[2] > mark]

    def snapshot(self) -> KvOverlay:
        """A copy (a read takes one before it awaits the layer below)."""
        copy = KvOverlay()
        copy.entries, copy.ranges, copy.seq = dict(self.entries), list(self.ranges), self.seq
        return copy

    def lookup(self, key: bytes) -> tuple[bool, bytes | None]:
        """``(True, value)`` when the overlay decides the key, else ``(False, None)``."""
        entry = self.entries.get(key)
        if entry is not None:
            return True, entry[0]
        if any(_in(key, start, end) for start, end, _ in self.ranges):
            return True, None
        return False, None

    def below_limit(self, start: bytes, end: bytes | None, limit: int | None) -> int | None:
        """How many records to ask of the layer below for ``limit`` merged ones: each
        entry in the range may hide one of them; a range delete, any number."""
        if limit is None or any(_overlaps((s, e), start, end) for s, e, _ in self.ranges):
            return None
        return limit + sum(1 for key in self.entries if _in(key, start, end))

    def merge(
        self,
        rows: Iterable[tuple[bytes, bytes]],
        start: bytes,
        end: bytes | None,
        reverse: bool,
        limit: int | None,
    ) -> list[tuple[bytes, bytes]]:
        """The records below (``rows``, of ``[start, end)``) with the overlay applied."""
        ranges = [(s, e) for s, e, _ in self.ranges if _overlaps((s, e), start, end)]
        merged = {k: v for k, v in rows if not any(_in(k, s, e) for s, e in ranges)}
        for key, (value, _) in self.entries.items():
            if _in(key, start, end):
                if value is None:
                    merged.pop(key, None)
                else:
                    merged[key] = value
        keys = sorted(merged, reverse=reverse)
        if limit is not None:
            keys = keys[: max(limit, 0)]
        return [(key, merged[key]) for key in keys]

    async def read(self, keys: Sequence[bytes], below: GetBelow) -> list[bytes | None]:
        """The values of ``keys``: the overlay's, else those of the layer below (asked
        once, for the keys the overlay does not decide)."""
        found: list[bytes | None] = [None] * len(keys)
        missing: list[int] = []
        for index, key in enumerate(keys):
            decided, value = self.lookup(key)
            if decided:
                found[index] = value
            else:
                missing.append(index)
        if missing:
            values = await below([keys[i] for i in missing])
            for index, value in zip(missing, values, strict=True):
                found[index] = value
        return found

    async def scan(
        self, start: bytes, end: bytes | None, reverse: bool, limit: int | None, below: ScanBelow
    ) -> list[tuple[bytes, bytes]]:
        """The records in ``[start, end)``: the layer below's with the overlay merged in."""
        rows = await below(start, end, reverse, self.below_limit(start, end, limit))
        return self.merge(rows, start, end, reverse, limit)

    def writes(self) -> int:
        """How many writes the overlay holds (entries and ranges)."""
        return len(self.entries) + len(self.ranges)

    def apply_to(self, target: RawKv) -> None:
        """Stage the overlay's net effect on ``target``: ranges first, then entries (an
        entry inside a range was written after it)."""
        for start, end, _ in self.ranges:
            target.delete_range(start, end)
        for key, (value, _) in self.entries.items():
            if value is None:
                target.delete(key)
            else:
                target.put(key, value)


class KvLayer:
    """Writes held apart over a :class:`RawKv`, read through as one space, until
    :meth:`keep` stages them below or the layer is dropped: a workflow step's KV writes
    (``step.kv``), which go in with the step's commit only if the step succeeds."""

    __slots__ = ("_below", "_writes")

    def __init__(self, below: RawKv) -> None:
        self._below = below
        self._writes = KvOverlay()

    async def get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """The values of ``keys``: the layer's writes first, then the space below."""
        return await self._writes.snapshot().read(keys, self._below.get)

    async def scan(
        self, start: bytes, end: bytes | None, reverse: bool, limit: int | None
    ) -> list[tuple[bytes, bytes]]:
        """The records in ``[start, end)``, the layer's writes merged in."""
        if not self._writes:
            return await self._below.scan(start, end, reverse, limit)
        return await self._writes.snapshot().scan(start, end, reverse, limit, self._below.scan)

    def put(self, key: bytes, value: bytes) -> None:
        """Hold a put."""
        self._writes.put(key, value)

    def delete(self, key: bytes) -> None:
        """Hold a delete."""
        self._writes.put(key, None)

    def delete_range(self, start: bytes, end: bytes | None) -> None:
        """Hold a range delete."""
        self._writes.delete_range(start, end)

    def staged_writes(self) -> int:
        """What the next commit would carry: the writes below and the layer's."""
        return self._below.staged_writes() + self._writes.writes()

    def keep(self) -> None:
        """Stage the layer's writes below (their net effect), and start afresh."""
        self._writes.apply_to(self._below)
        self._writes = KvOverlay()
