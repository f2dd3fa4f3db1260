"""Readiness: can this process serve calls right now, i.e. does its store answer?

``/health`` says the process is alive; ``/ready`` asks this. The answer is one cheap
query (:meth:`~perdure.store.base.Store.ping`) with a short timeout, kept for ``ttl``
seconds and shared by concurrent askers, so a storm of probes costs the store at most
one query per second.
"""

from __future__ import annotations

import asyncio
import time

from perdure.errors import PerdureError, StoreUnavailable
from perdure.store.base import Store

__all__ = ["Readiness"]


class Readiness:
    """Whether ``store`` answers (see the module docstring)."""

    def __init__(self, store: Store, *, timeout: float = 2.0, ttl: float = 1.0) -> None:
        self._store = store
        self.timeout = timeout
        self.ttl = ttl
        self._checked_at = -float("inf")
        self._last: PerdureError | None = None
        self._checking: asyncio.Future[PerdureError | None] | None = None

    async def check(self) -> PerdureError | None:
        """``None`` when the store answered (lately), else why not (``store.unavailable``)."""
        if time.monotonic() - self._checked_at < self.ttl:
            return self._last
        if self._checking is None:
            self._checking = asyncio.ensure_future(self._ping())
        checking = self._checking
        # Shielded: one prober giving up must not cancel the check the others wait for.
        return await asyncio.shield(checking)

    async def _ping(self) -> PerdureError | None:
        try:
            async with asyncio.timeout(self.timeout):
                await self._store.ping(self.timeout)
        except StoreUnavailable as exc:
            self._last = exc
        except Exception as exc:  # a timeout, a store that is not open
            error = StoreUnavailable(timeout=self.timeout)
            error.__cause__ = exc
            self._last = error
        else:
            self._last = None
        finally:
            self._checked_at = time.monotonic()
            self._checking = None
        return self._last
