"""A schedule test rig: a runtime on a ManualClock and a real SQLite file (or memory).

Time moves only when a test says so (``rig.advance``); the rig then lets the event loop run
until the runtime has reacted. Every wait is bounded.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from perdure import ActorRuntime, Registry
from perdure.runtime.actor.contexts import ActorContext
from perdure.runtime.actor.instance import ActorInstance
from perdure.runtime.kernel.clock import ManualClock
from perdure.runtime.local.client import LocalHandle
from perdure.store import MemoryStore, SQLiteStore, Store
from perdure.store.encoding import decode_value
from tests.support import wait

WAIT = 5.0
# 2024-01-01T00:00:00Z: a round start makes deadlines easy to read in failures.
START_MS = 1_704_067_200_000


class Rig:
    """Starts, stops and restarts a runtime on one database, sharing one ManualClock."""

    def __init__(self, path: Path, registry: Registry, *, memory: bool = False) -> None:
        self.path = path / "perdure.db"
        self.registry = registry
        self.clock = ManualClock(START_MS)
        self.runtime: ActorRuntime | None = None
        self._memory = MemoryStore() if memory else None

    def _store(self) -> Store:
        return self._memory if self._memory is not None else SQLiteStore(self.path)

    async def start(self, registry: Registry | None = None) -> ActorRuntime:
        if registry is not None:
            self.registry = registry
        self.runtime = ActorRuntime(self.registry, self._store(), clock=self.clock)
        await self.runtime.start()
        return self.runtime

    async def stop(self) -> None:
        if self.runtime is not None:
            runtime, self.runtime = self.runtime, None
            async with asyncio.timeout(WAIT):
                await runtime.stop()

    async def restart(self, registry: Registry | None = None) -> ActorRuntime:
        await self.stop()
        return await self.start(registry)

    @property
    def rt(self) -> ActorRuntime:
        assert self.runtime is not None, "the rig's runtime is not started"
        return self.runtime

    def handle(self, name: str = "ticker", key: str = "k") -> LocalHandle:
        return self.rt.client().actor(name).get_or_create(key)

    async def instance(self, name: str = "ticker", key: str = "k") -> ActorInstance:
        """The live instance (created or woken if needed)."""
        return await self.rt.instance(await self.handle(name, key).resolve())

    async def ctx(self, name: str = "ticker", key: str = "k") -> ActorContext:
        """The actor's context ``c``, as hooks see it."""
        return (await self.instance(name, key)).context

    async def advance(self, seconds: float) -> None:
        """Move the clock, then give the runtime a moment to react."""
        self.clock.advance(seconds)
        await settle()

    async def advance_to(self, at_ms: int) -> None:
        self.clock.set(at_ms)
        await settle()

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read the database directly, as another process would."""
        with sqlite3.connect(self.path) as connection:
            return list(connection.execute(sql, params))

    def stored_state(self, actor_id: str) -> Any:
        rows = self.rows("SELECT state FROM actors WHERE actor_id = ?", actor_id)
        return None if not rows or rows[0][0] is None else decode_value(rows[0][0])


async def settle(rounds: int = 30) -> None:
    """Let callbacks, tasks and the SQLite writer thread run (a few ms of real time)."""
    for _ in range(rounds):
        await asyncio.sleep(0.001)


async def eventually(predicate: Callable[[], Any], *, what: str = "condition") -> None:
    """Poll ``predicate`` (sync or async) until true; fail after ``WAIT`` seconds."""
    await wait.eventually(predicate, timeout=WAIT, what=what)
