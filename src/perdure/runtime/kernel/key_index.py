"""The idempotency keys a live actor knows of, so that a fresh key costs no store read
(docs/idempotency.md, "What a key costs").

The index is loaded by one range read (the actor's newest keys within its retention
window) at the first keyed request of an instance, then kept by the instance itself: it
adds every key it stages. Nothing else can add a key to the store meanwhile. An actor's
keys are written only by commits of its live instance, and every commit of an instance
is fenced by its generation: the instance claimed the actor (or took its lease, in a
cluster) before it loaded the index, the claim waits for the writes a previous owner
still had on their way, and a commit of an older instance arriving later is refused. A
newer instance cannot exist while this one's commits still succeed, and this one only
answers a keyed request after its commit. So a key the index does not hold, with the
index complete, has no record that counts.

What a lookup says (:meth:`KeyIndex.may_hold`): ``False``, no record of the key counts
(run the request); ``True``, there may be one (read it from the store, as without the
index). Memory is bounded: at most ``limit`` keys, the oldest leave first, and
``floor`` remembers the newest time that left, so every key created at or after the
floor is held. A key not held is surely absent while the floor is at or before the
retention bound; when the actor has more keys in its window than the index holds, a
key not held is read from the store, as before.
"""

from __future__ import annotations

from itertools import islice

__all__ = ["INDEX_LIMIT", "KeyIndex"]

# The keys one live actor holds at most: about 140 bytes each with the clients'
# 40-character keys (57 for the dict's slot and the time, the rest the key string it
# keeps alive), so 1.4 MB for a full index.
INDEX_LIMIT = 10_000


class KeyIndex:
    """The idempotency keys of one live actor, each with its ``created_at`` (epoch ms),
    oldest first (see the module docstring)."""

    __slots__ = ("_floor", "_keys", "_limit")

    def __init__(self, newest: list[tuple[str, int]], since: int, limit: int) -> None:
        """``newest``: the store's ``load_idempotency_keys(actor, since, limit + 1)``,
        newest first; one more than ``limit`` means there were more than fit."""
        self._limit = limit
        # Every key created at or after the floor is held. Keys created before ``since``
        # no longer count: the bound only moves forward.
        self._floor = since
        if len(newest) > limit:
            self._floor = max(since, newest[limit][1] + 1)
            newest = newest[:limit]
        self._keys: dict[str, int] = {key: at for key, at in reversed(newest)}

    def __len__(self) -> int:
        return len(self._keys)

    def complete(self, bound: int) -> bool:
        """Whether every key created at or after ``bound`` is held."""
        return self._floor <= bound

    def may_hold(self, key: str, bound: int) -> bool:
        """Whether a record of ``key`` created at or after ``bound`` (the retention
        bound) may be in the store: ``False`` is sure, ``True`` is to be read."""
        at = self._keys.get(key)
        if at is not None:
            return at >= bound  # the record held is the stored one: same created_at
        return self._floor > bound

    def add(self, key: str, at: int) -> None:
        """Key ``key`` is being written, created at ``at``."""
        keys = self._keys
        keys.pop(key, None)  # a key used again (after its window) moves to the end
        keys[key] = at
        if len(keys) > self._limit:
            # A quarter leaves at once: one copy of the dict per limit // 4 keys, not a
            # scan past the dead slots of popped ones for every key.
            self._shed(len(keys) - self._limit * 3 // 4)

    def discard(self, key: str) -> None:
        """Key ``key`` was staged and withdrawn: it has no record (or only one past the
        window, which ``may_hold`` answers ``False`` for as well)."""
        self._keys.pop(key, None)

    def expire(self, bound: int) -> None:
        """Forget the keys created before ``bound`` at the front (the retention bound
        of a prune): they no longer count."""
        count = 0
        for at in self._keys.values():
            if at >= bound:
                break
            count += 1
        if count:
            self._shed(count)

    def _shed(self, count: int) -> None:
        """Forget the ``count`` oldest keys (the first ones), raising the floor."""
        items = iter(self._keys.items())
        floor = self._floor
        for _, at in islice(items, count):
            if at >= floor:
                floor = at + 1
        self._floor = floor
        self._keys = dict(items)
