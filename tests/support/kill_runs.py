"""Numbered actions sent to a real ``perdure serve`` while it is killed with SIGKILL at
random moments, then an audit of every actor (tests/scenarios/crash: ``c.kv`` and
``c.db`` writes never half kept).

The app names its actor ``ledger``, with an action ``apply(n)`` and an action ``audit()``.
Senders share actors, so their commits share group commits; an action in flight at a
kill has an unknown outcome (in ``tried``, not in ``acked``). ``PERDURE_CRASH_SEED``
replays a failed run's kill moments.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.support.server import ServerProcess

__all__ = ["KilledRun", "apply_under_kills"]


@dataclass
class KilledRun:
    """What a run under kills left: its seed, the actions sent (``tried``) and answered
    (``acked``) per actor key, each actor's audit after a last kill, and the starts."""

    context: str
    acked: dict[str, set[int]]
    tried: dict[str, set[int]]
    audits: dict[str, Any]
    starts: int


def _url(server: ServerProcess, action: str, key: str) -> str:
    return (
        f"{server.url}/gateway/ledger/action/{action}"
        f"?rvt-namespace=default&rvt-method=getOrCreate&rvt-key={key}"
    )


async def apply_under_kills(
    registry: str,
    data_dir: Path,
    *,
    seconds: float,
    kills: int,
    actors: int,
    senders: int,
    store_args: list[str] | None = None,
) -> KilledRun:
    """Send ``apply`` actions for ``seconds`` from ``senders`` tasks over ``actors``
    actors while the server is killed ``kills`` times, kill it once more, audit each."""
    seed = int(os.environ.get("PERDURE_CRASH_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    extra = ["--log-level", "warning", *(store_args or [])]
    server = ServerProcess(registry, data_dir, extra_args=extra)
    await asyncio.to_thread(server.start)
    acked: dict[str, set[int]] = {f"a{i}": set() for i in range(actors)}
    tried: dict[str, set[int]] = {key: set() for key in acked}
    up = asyncio.Event()
    up.set()
    stop = time.monotonic() + seconds
    counter = iter(range(1 << 40))

    async def sender(index: int, client: httpx.AsyncClient) -> None:
        key = f"a{index % actors}"
        while time.monotonic() < stop:
            await up.wait()
            n = next(counter)
            tried[key].add(n)
            try:
                response = await client.post(_url(server, "apply", key), json={"args": [n]})
            except httpx.TransportError:
                await asyncio.sleep(0.01)
                continue  # in flight at a kill: its outcome is unknown
            if response.status_code == 200:
                acked[key].add(n)

    async def killer() -> None:
        for _ in range(kills):
            await asyncio.sleep(rng.uniform(0.2, seconds / kills * 0.7))
            up.clear()
            await asyncio.to_thread(server.kill)
            await asyncio.to_thread(server.restart)
            up.set()

    try:
        async with httpx.AsyncClient(timeout=10) as client:
            await asyncio.gather(killer(), *(sender(i, client) for i in range(senders)))
            await asyncio.to_thread(server.kill)  # and once more, at the very end
            await asyncio.to_thread(server.restart)
            audits = {}
            for key in acked:
                response = await client.post(_url(server, "audit", key), json={"args": []})
                assert response.status_code == 200, response.text
                audits[key] = response.json()["output"]
    finally:
        server.kill()
    return KilledRun(f"seed={seed}", acked, tried, audits, server.starts)
