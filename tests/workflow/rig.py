"""A workflow test rig: a runtime on a real SQLite file that can be restarted."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from perdure import ActorRuntime, Registry
from perdure.runtime.local import LocalHandle
from perdure.store import SQLiteStore


class Rig:
    """Starts, stops and restarts a runtime on one database file."""

    def __init__(self, path: Path, registry: Registry) -> None:
        self.path = path
        self.registry = registry
        self.runtime: ActorRuntime | None = None

    async def start(self, registry: Registry | None = None) -> ActorRuntime:
        if registry is not None:
            self.registry = registry
        self.runtime = ActorRuntime(self.registry, SQLiteStore(self.path))
        await self.runtime.start()
        return self.runtime

    async def stop(self) -> None:
        if self.runtime is not None:
            await self.runtime.stop()
            self.runtime = None

    async def restart(self, registry: Registry | None = None) -> ActorRuntime:
        await self.stop()
        return await self.start(registry)

    def handle(self, name: str, key: str = "k") -> LocalHandle:
        assert self.runtime is not None
        return self.runtime.client().actor(name).get_or_create(key)

    async def wake(self, name: str, key: str = "k") -> str:
        """Create or wake the actor (so its workflow runs) and return its id."""
        assert self.runtime is not None
        actor_id = await self.handle(name, key).resolve()
        await self.runtime.instance(actor_id)
        return actor_id

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        """Read the database directly (a separate connection, as another process would)."""
        with sqlite3.connect(self.path) as connection:
            return list(connection.execute(sql, params))


async def eventually(
    check: Callable[[], Awaitable[bool]], *, timeout: float = 10.0, interval: float = 0.02
) -> None:
    """Wait until ``check()`` is true, or fail after ``timeout`` seconds."""
    async with asyncio.timeout(timeout):
        while not await check():
            await asyncio.sleep(interval)
