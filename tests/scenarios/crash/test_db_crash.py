"""``c.db`` writes ride in the action's commit: a real ``perdure serve`` killed with
SIGKILL at random moments under concurrent actions never keeps half of one, on SQLite
and on PostgreSQL.

Each action inserts two SQL rows, updates a third, writes three KV records and appends
its number to the state (tests/support/apps/db_crash.py). After the kills every actor
is audited: every action whose answer arrived is in the state; every action in the
state has all its rows and records, and no other action has any (an action in flight at
a kill is wholly there or wholly absent); ``meta.last`` is the state's last action, and
SQLite finds the database intact (``PRAGMA integrity_check``). ``PERDURE_CRASH_SEED``
replays a failed run's kill moments. The suite's run takes a few seconds per store; the
soak (``-m slow``) runs a minute on each.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.apps.db_crash import KEYS, ROWS
from tests.support.server import ServerProcess

REGISTRY = "tests.support.apps.db_crash:registry"
ACTORS = 3
SENDERS = 9  # three per actor: their statements queue behind each other


def _url(server: ServerProcess, action: str, key: str) -> str:
    return (
        f"{server.url}/gateway/ledger/action/{action}"
        f"?rvt-namespace=default&rvt-method=getOrCreate&rvt-key={key}"
    )


async def _run(tmp_path: Path, seconds: float, kills: int, store: list[str]) -> None:
    seed = int(os.environ.get("PERDURE_CRASH_SEED") or random.randrange(1 << 30))
    rng = random.Random(seed)
    server = ServerProcess(
        REGISTRY, tmp_path / "data", extra_args=["--log-level", "warning", *store]
    )
    await asyncio.to_thread(server.start)
    acked: dict[str, set[int]] = {f"a{i}": set() for i in range(ACTORS)}
    tried: dict[str, set[int]] = {key: set() for key in acked}
    up = asyncio.Event()
    up.set()
    stop = time.monotonic() + seconds
    counter = iter(range(1 << 40))

    async def sender(index: int, client: httpx.AsyncClient) -> None:
        key = f"a{index % ACTORS}"
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
            await asyncio.gather(killer(), *(sender(i, client) for i in range(SENDERS)))
            await asyncio.to_thread(server.kill)  # and once more, at the very end
            await asyncio.to_thread(server.restart)
            audits = {}
            for key in acked:
                response = await client.post(_url(server, "audit", key), json={"args": []})
                assert response.status_code == 200, response.text
                audits[key] = response.json()["output"]
    finally:
        server.kill()
    context = f"seed={seed}"
    total = sum(len(a) for a in acked.values())
    print(f"{total} actions acknowledged across {kills + 1} kills ({context})")  # with -s
    assert server.starts == kills + 2
    assert total > 30, f"too few actions ran ({context})"
    for key, audit in audits.items():
        _check(audit, acked[key], tried[key], f"{key} {context}")


def _check(audit: dict[str, Any], acked: set[int], tried: set[int], context: str) -> None:
    ops: list[int] = audit["ops"]
    assert audit["integrity"] == "ok", context
    assert len(ops) == len(set(ops)), f"an action applied twice ({context})"
    assert acked <= set(ops), f"acknowledged actions lost: {sorted(acked - set(ops))} ({context})"
    assert set(ops) <= tried
    rows = {int(n): count for n, count in audit["rows"].items()}
    keys = {int(n): count for n, count in audit["keys"].items()}
    assert {n: c for n, c in rows.items() if c != ROWS} == {}, f"half rows ({context})"
    assert {n: c for n, c in keys.items() if c != KEYS} == {}, f"half records ({context})"
    assert set(rows) == set(ops), (
        f"rows without state: {sorted(set(rows) - set(ops))}, "
        f"state without rows: {sorted(set(ops) - set(rows))} ({context})"
    )
    assert set(keys) == set(ops), f"KV records and state differ ({context})"
    assert audit["last"] == (ops[-1] if ops else None), f"meta.last ({context})"


@pytest.mark.timeout(90)
async def test_kill_9_never_keeps_half_an_action(tmp_path: Path, store_args: list[str]) -> None:
    await _run(tmp_path, seconds=3.0, kills=2, store=store_args)


@pytest.mark.slow
@pytest.mark.timeout(400)
async def test_kill_9_soak(tmp_path: Path, store_args: list[str]) -> None:
    """A minute and 30 kills, on SQLite and on PostgreSQL."""
    await _run(tmp_path, seconds=60.0, kills=30, store=store_args)
