"""Crash and shutdown: ``kill -9`` loses no acknowledged action; SIGTERM runs ``on_sleep``.

Also covers ``perdure actors``, which reads the store with no server running.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from .helpers import call, gateway, init, open_socket, request, state_of
from .process import REPO_ROOT, STOP_TIMEOUT, ServerProcess


def _actors_cli(data: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "perdure", "actors", "--data", str(data), *extra],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=STOP_TIMEOUT,
        check=False,
    )


async def test_kill_9_keeps_every_acknowledged_action(fresh_server: ServerProcess) -> None:
    fresh_server.start()
    async with httpx.AsyncClient(timeout=10) as client:
        for _ in range(20):
            response = await call(client, fresh_server, "counter", "increment", [1], "crash")
            assert response.status_code == 200
        concurrent = await asyncio.gather(
            *(call(client, fresh_server, "counter", "increment", [2], "crash") for _ in range(16))
        )
        assert all(r.status_code == 200 for r in concurrent)
        async with await open_socket(fresh_server, "counter", "crash") as ws:
            await init(ws)
            for action_id in range(10):
                answer = await request(ws, action_id, "increment", [3])
                assert answer["tag"] == "ActionResponse"
            fresh_server.kill()  # SIGKILL right after the last acknowledgement
    fresh_server.start()
    async with httpx.AsyncClient(timeout=10) as client:
        state = await state_of(client, fresh_server, "crash")
    assert state == {"count": 20 + 16 * 2 + 10 * 3, "slept": 0}


def _increment(server: ServerProcess, key: str, amount: int) -> None:
    url = gateway(server, "counter", "action/increment", key)
    with httpx.Client(timeout=10) as client:
        assert client.post(url, json={"args": [amount]}).status_code == 200


def test_sigterm_sleeps_actors_gracefully(fresh_server: ServerProcess) -> None:
    fresh_server.start()
    for key in ("one", "two"):
        _increment(fresh_server, key, 1)
    assert fresh_server.terminate() == 0
    log = fresh_server.log()
    assert "putting 2 live actor(s) to sleep" in log
    assert "store closed" in log
    result = _actors_cli(fresh_server.data_dir, "--json", "--name", "counter")
    assert result.returncode == 0, result.stderr
    actors: list[dict[str, Any]] = [json.loads(line) for line in result.stdout.splitlines()]
    assert sorted(a["key"][0] for a in actors) == ["one", "two"]
    assert all(a["state"] == {"count": 1, "slept": 1} for a in actors)


def test_actors_cli_table_and_missing_store(fresh_server: ServerProcess) -> None:
    fresh_server.start()
    _increment(fresh_server, "listed", 4)
    # SQLite readers do not block the running server.
    result = _actors_cli(fresh_server.data_dir)
    assert result.returncode == 0, result.stderr
    assert "counter" in result.stdout
    assert "[listed]" in result.stdout
    assert '"count":4' in result.stdout
    assert fresh_server.terminate() == 0
    missing = _actors_cli(fresh_server.data_dir / "nope")
    assert missing.returncode == 2
    assert "no perdure database" in missing.stderr
