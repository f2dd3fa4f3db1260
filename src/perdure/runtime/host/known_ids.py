"""The ids of actors found or created by key, awake or not (the runtime's key memory).

A getOrCreate or get of a known key needs no store read. An id never changes for a key,
so an entry goes stale only when its actor is destroyed: a request that then finds no
actor looks the key up afresh (``ActorRef``'s refind), which replaces the entry.
"""

from __future__ import annotations

from perdure.keys import Key

__all__ = ["KnownIds"]

KNOWN_IDS = 65536  # ids by key kept (about 200 bytes each), the oldest forgotten first


class KnownIds:
    """At most ``limit`` ids by ``(name, key)``; past it the oldest entry goes first."""

    __slots__ = ("_ids", "_limit")

    def __init__(self, limit: int = KNOWN_IDS) -> None:
        self._ids: dict[tuple[str, Key], str] = {}
        self._limit = limit

    def __contains__(self, name_key: tuple[str, Key]) -> bool:
        return name_key in self._ids

    def get(self, name: str, key: Key) -> str | None:
        return self._ids.get((name, key))

    def remember(self, name: str, key: Key, actor_id: str) -> None:
        ids = self._ids
        if len(ids) >= self._limit and (name, key) not in ids:
            del ids[next(iter(ids))]  # the oldest entry
        ids[(name, key)] = actor_id

    def drop(self, name: str, key: Key) -> None:
        """Forget the key's id whatever it is (a fresh lookup replaces it)."""
        self._ids.pop((name, key), None)

    def forget(self, name: str, key: Key, actor_id: str) -> None:
        """The actor ``actor_id`` is gone: its key no longer names it."""
        if self._ids.get((name, key)) == actor_id:
            del self._ids[(name, key)]
