"""The KV space of one live actor (``c.kv``, docs/storage.md): reads that see the
actor's own writes, writes that ride in its commits.

A write is staged twice: into the commit pipeline's pending commit (so it is written
with the next commit, atomically with the state, queue and history changes beside it,
and fenced like them) and into an overlay (:class:`~perdure.store.kv.KvOverlay`), which
answers reads until that commit is durable; then the pipeline tells this space which
writes it carried (:meth:`ActorKv.settle`) and the overlay forgets them, so it holds
only writes in flight and an idle actor keeps nothing. A read takes a snapshot of the
overlay before it asks the store, so a commit that lands meanwhile cannot hide a write
from it. Reads load only what they touch: point reads by key, lists by one key range.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from perdure.store.kv import KvOverlay

if TYPE_CHECKING:
    from perdure.runtime.kernel.core import ActorCore

__all__ = ["ActorKv"]


class ActorKv:
    """A live actor's KV space, as :class:`~perdure.store.kv.RawKv` (see the module
    docstring). Made by the first use of ``c.kv``."""

    __slots__ = ("_core", "_overlay")

    def __init__(self, core: ActorCore) -> None:
        self._core = core
        self._overlay = KvOverlay()
        core.commits.on_kv_settled(self)

    async def get(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """The values of ``keys`` (``None``: no record), staged writes included."""
        if not self._overlay:
            return await self._stored(keys)
        return await self._overlay.snapshot().read(keys, self._stored)

    async def scan(
        self, start: bytes, end: bytes | None, reverse: bool, limit: int | None
    ) -> list[tuple[bytes, bytes]]:
        """The records in ``[start, end)``, staged writes included."""
        if not self._overlay:
            return await self._listed(start, end, reverse, limit)
        return await self._overlay.snapshot().scan(start, end, reverse, limit, self._listed)

    def get_inline(self, keys: Sequence[bytes]) -> list[bytes | None]:
        """:meth:`get` on the calling thread, for a store that ``reads_inline``."""
        core = self._core
        found: list[bytes | None] = []
        missing: list[int] = []
        for index, key in enumerate(keys):
            decided, value = self._overlay.lookup(key)
            found.append(value)
            if not decided:
                missing.append(index)
        if missing:
            stored = core.store.kv_get_inline(core.actor_id, [keys[i] for i in missing])
            for index, value in zip(missing, stored, strict=True):
                found[index] = value
        return found

    async def _stored(self, keys: Sequence[bytes]) -> list[bytes | None]:
        core = self._core
        return await core.store.kv_get(core.actor_id, keys)

    async def _listed(
        self, start: bytes, end: bytes | None, reverse: bool, limit: int | None
    ) -> list[tuple[bytes, bytes]]:
        core = self._core
        return await core.store.kv_list(
            core.actor_id, start=start, end=end, reverse=reverse, limit=limit
        )

    def put(self, key: bytes, value: bytes) -> None:
        """Stage a put."""
        self._overlay.put(key, value)
        self._core.commits.put_kv(key, value)

    def delete(self, key: bytes) -> None:
        """Stage a delete."""
        self._overlay.put(key, None)
        self._core.commits.delete_kv(key)

    def put_page(self, key: bytes, value: bytes) -> None:
        """Stage a page of the actor's database (``c.db``; not one of the user's writes)."""
        self._overlay.put(key, value)
        self._core.commits.put_page(key, value)

    def delete_pages(self, start: bytes, end: bytes) -> None:
        """Stage the delete of the database's pages in ``[start, end)``."""
        self._overlay.delete_range(start, end)
        self._core.commits.delete_pages(start, end)

    def delete_range(self, start: bytes, end: bytes | None) -> None:
        """Stage a range delete."""
        self._overlay.delete_range(start, end)
        self._core.commits.delete_kv_range(start, end)

    def staged_writes(self) -> int:
        """How many KV writes the next commit carries so far."""
        return self._core.commits.kv_writes()

    def mark(self) -> int:
        """The number of the last write staged (the pipeline takes it at submission)."""
        return self._overlay.seq

    def settle(self, mark: int) -> None:
        """The writes up to ``mark`` are durable: reads find them in the store now."""
        self._overlay.settle(mark)
