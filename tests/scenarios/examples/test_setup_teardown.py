"""The seed's setup & teardown example: wake/sleep pairing and once-per-second ticks."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from examples import setup_teardown
from examples.app import registry

from perdure import ActorRuntime
from perdure.store import SQLiteStore


async def ticks_now(handle: object) -> int:
    state = await handle.getState()  # type: ignore[attr-defined]
    return int(state["ticks"])


async def test_ticks_advance_once_per_second_across_sleep_cycles(tmp_path: Path) -> None:
    setup_teardown.lifecycle.clear()
    path = tmp_path / "data.db"
    async with ActorRuntime(registry, SQLiteStore(path)) as runtime:
        handle = runtime.client().setupRunTeardownActor.get_or_create("main")
        assert await handle.getState() == {"initialized": True, "ticks": 0}
        started = time.monotonic()
        for cycle in range(2):
            await asyncio.sleep(2.2)
            await handle.goToSleep()
            actor_id = await handle.resolve()
            async with asyncio.timeout(10):
                while runtime.is_live(actor_id):
                    await asyncio.sleep(0.02)
            assert setup_teardown.lifecycle[-1] == "close", cycle
        ticks = await ticks_now(handle)  # wakes it again
        elapsed = time.monotonic() - started
    # One tick per elapsed second at most (a tick is never repeated), and no second
    # lost while the actor was awake.
    assert 3 <= ticks <= int(elapsed) + 1
    # Every wake opened the resource and every sleep closed it, in pairs: two forced
    # sleeps, then the final wake closed by the runtime's shutdown.
    assert setup_teardown.lifecycle == ["open", "close"] * 3


async def test_ticks_survive_a_restart_without_duplicates(tmp_path: Path) -> None:
    path = tmp_path / "data.db"
    async with ActorRuntime(registry, SQLiteStore(path)) as runtime:
        handle = runtime.client().setupRunTeardownActor.get_or_create("main")
        await asyncio.sleep(1.5)
        before = await ticks_now(handle)
    async with ActorRuntime(registry, SQLiteStore(path)) as runtime:
        handle = runtime.client().setupRunTeardownActor.get_or_create("main")
        after_restart = await ticks_now(handle)
        assert after_restart == before  # nothing re-ran or was lost on the way down
        await asyncio.sleep(2.3)
        later = await ticks_now(handle)
    assert 1 <= later - before <= 3
