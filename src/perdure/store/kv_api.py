"""``c.kv`` and ``step.kv``: the API of an actor's KV space (docs/storage.md).

:class:`Kv` turns the user's keys (``str`` or ``bytes``) and values (anything perdure
stores: see :mod:`perdure.store.encoding`) into stored keys and encoded values, checks
the bounds (:mod:`perdure.store.kv`) and hands them to a :class:`~perdure.store.kv.RawKv`:
the live actor's (:mod:`perdure.runtime.kernel.kv`) or a running step's
(:mod:`perdure.workflows.step_parts`).

The operations are rivetkit's ``c.kv`` in Python names: ``get``, ``get_batch``,
``put``, ``put_batch``, ``delete``, ``delete_batch``, ``delete_range``, ``list``
(by prefix) and ``list_range`` (``[start, end)``), both with ``reverse`` and ``limit``.
A missing key reads as ``None``. Writes are staged at once and durable with the actor's
next commit (an action's, after it returns; a step's, with the step): they return an
object that may be awaited, so rivetkit's ``await c.kv.put(...)`` ports as is, but need
not be.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping, Sequence
from typing import Any

from perdure.errors import KvError
from perdure.store.encoding import decode_value, encode_value
from perdure.store.kv import (
    MAX_BATCH_KEYS,
    MAX_VALUE_SIZE,
    MAX_WRITES,
    KvKey,
    RawKv,
    decode_key,
    encode_key,
    prefix_end,
)

__all__ = ["Kv", "Staged"]

# `Kv.list` shadows the builtin inside the class body.
_Pairs = list[tuple[Any, Any]]


class Staged:
    """What a write returns: it is staged already; awaiting it waits for nothing (so
    ``await c.kv.put(...)`` reads as in rivetkit). Durable with the next commit."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return
        yield  # a generator that finishes at once

    def __repr__(self) -> str:
        return "<staged KV write>"


_STAGED = Staged()


class Kv:
    """An actor's KV space (see the module docstring)."""

    __slots__ = ("_raw",)

    def __init__(self, raw: RawKv) -> None:
        self._raw = raw

    # ------------------------------------------------------------------- reads

    async def get(self, key: KvKey) -> Any:
        """The value of ``key``, or ``None`` if it has none."""
        data = (await self._raw.get([encode_key(key)]))[0]
        return None if data is None else decode_value(data)

    async def get_batch(self, keys: Sequence[KvKey]) -> list[Any]:
        """The values of ``keys`` in the order asked (``None`` for a missing one), in one
        read of the store."""
        keys = list(keys)
        if len(keys) > MAX_BATCH_KEYS:
            raise KvError(
                f"A batch read asks for at most {MAX_BATCH_KEYS} keys; this one {len(keys)}.",
                code="too_many_keys",
                metadata={"count": len(keys), "max": MAX_BATCH_KEYS},
            )
        found = await self._raw.get([encode_key(key) for key in keys])
        return [None if data is None else decode_value(data) for data in found]

    async def list(
        self, prefix: KvKey = "", *, reverse: bool = False, limit: int | None = None
    ) -> _Pairs:
        """The ``(key, value)`` pairs whose key starts with ``prefix``, in ascending key
        order (descending with ``reverse``: then a ``limit`` keeps the greatest keys);
        at most ``limit``. The prefix's type picks the keys: a ``str`` prefix lists
        string keys (``""``: all of them), a ``bytes`` prefix bytes keys."""
        start = encode_key(prefix)
        return await self._scan(start, prefix_end(start), reverse, limit)

    async def list_range(
        self,
        start: KvKey,
        end: KvKey,
        *,
        reverse: bool = False,
        limit: int | None = None,
    ) -> _Pairs:
        """The ``(key, value)`` pairs with ``start <= key < end``, ordered as
        :meth:`list`; ``start`` and ``end`` are of one type (``kv.invalid_range``)."""
        low, high = _range(start, end)
        return await self._scan(low, high, reverse, limit)

    async def _scan(
        self, start: bytes, end: bytes | None, reverse: bool, limit: int | None
    ) -> _Pairs:
        if limit is not None and limit <= 0:
            return []
        rows = await self._raw.scan(start, end, reverse, limit)
        return [(decode_key(key), decode_value(value)) for key, value in rows]

    # ------------------------------------------------------------------ writes

    def put(self, key: KvKey, value: Any) -> Staged:
        """Set ``key`` to ``value`` (with the next commit)."""
        stored = encode_key(key)
        data = _encode(value)
        self._room(1)
        self._raw.put(stored, data)
        return _STAGED

    def put_batch(self, entries: Mapping[KvKey, Any] | Iterable[tuple[KvKey, Any]]) -> Staged:
        """Set several keys at once: all of them or, if one is refused, none."""
        pairs = entries.items() if isinstance(entries, Mapping) else entries
        encoded = [(encode_key(key), _encode(value)) for key, value in pairs]
        self._room(len(encoded))
        for key, data in encoded:
            self._raw.put(key, data)
        return _STAGED

    def delete(self, key: KvKey) -> Staged:
        """Remove ``key`` (not an error if it has no value)."""
        stored = encode_key(key)
        self._room(1)
        self._raw.delete(stored)
        return _STAGED

    def delete_batch(self, keys: Iterable[KvKey]) -> Staged:
        """Remove several keys at once."""
        stored = [encode_key(key) for key in keys]
        self._room(len(stored))
        for key in stored:
            self._raw.delete(key)
        return _STAGED

    def delete_range(self, start: KvKey, end: KvKey) -> Staged:
        """Remove every key with ``start <= key < end`` (one write, however many keys)."""
        low, high = _range(start, end)
        self._room(1)
        self._raw.delete_range(low, high)
        return _STAGED

    def _room(self, count: int) -> None:
        staged = self._raw.staged_writes()
        if staged + count > MAX_WRITES:
            raise KvError(
                f"One commit carries at most {MAX_WRITES} KV writes; {staged} are staged "
                f"and {count} more were asked. Save in between (`await c.save_state("
                "immediate=True)`) or write fewer keys.",
                code="too_many_writes",
                metadata={"staged": staged, "count": count, "max": MAX_WRITES},
            )


def _encode(value: Any) -> bytes:
    data = encode_value(value, what="KV value")
    if len(data) > MAX_VALUE_SIZE:
        raise KvError(
            f"A KV value is at most {MAX_VALUE_SIZE} bytes encoded; this one has {len(data)}.",
            code="value_too_large",
            metadata={"size": len(data), "max": MAX_VALUE_SIZE},
        )
    return data


def _range(start: KvKey, end: KvKey) -> tuple[bytes, bytes]:
    low, high = encode_key(start), encode_key(end)
    if low[:1] != high[:1]:
        raise KvError(
            "A KV range starts and ends with keys of one type (two str or two bytes).",
            code="invalid_range",
            metadata={"start": type(start).__name__, "end": type(end).__name__},
        )
    return low, high
