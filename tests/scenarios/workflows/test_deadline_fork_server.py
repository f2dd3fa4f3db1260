"""A workflow's deadline and a fork of a run over a real ``perdure serve`` on SQLite:
the deadline survives ``kill -9`` (counted from the run's start, and the alarm wakes the
actor with nobody calling it); a fork by the CLI and by the admin API starts new runs
with new inputs and keeps the old ones, across ``kill -9``."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from typing import Any

import httpx
import pytest

from perdure.client import AsyncClient
from perdure.errors import WorkflowFailed
from tests.scenarios.workflows.operator_app import DEADLINE_S
from tests.support.server import ServerProcess
from tests.support.wait import eventually

REGISTRY = "tests.scenarios.workflows.operator_app:registry"
WAIT = 20.0


def _workflow(server: ServerProcess, actor_id: str) -> dict[str, Any]:
    """The workflow as the admin API shows it (read from the store: wakes nothing)."""
    answer = httpx.get(f"{server.url}/admin/actors/{actor_id}", timeout=WAIT)
    assert answer.status_code == 200, answer.text
    workflow: dict[str, Any] = answer.json()["workflow"]
    return workflow


async def test_a_deadline_survives_kill_9_and_wakes_the_actor_by_its_alarm(
    server: ServerProcess,
) -> None:
    async with AsyncClient(server.url) as client:
        limited = client.limited.get_or_create("o-1")
        actor_id = await limited.resolve()
        await eventually(lambda: _logged(limited, "reserve"), timeout=WAIT)
    # The sleep is recorded (its commit carries the deadline's alarm) before the kill.
    await eventually(lambda: _sleeping(server, actor_id), timeout=WAIT)
    before = _workflow(server, actor_id)
    assert before["deadline_at"] == before["started_at"] + int(DEADLINE_S * 1000)
    server.kill()
    server.start()
    restarted = time.time()
    # Nobody calls the actor: only its alarm can wake it for the deadline.
    await eventually(lambda: _ended(server, actor_id), timeout=WAIT)
    ended = time.time()
    after = _workflow(server, actor_id)
    assert after["started_at"] == before["started_at"]  # kill -9 did not reset the start
    assert ended * 1000 >= before["deadline_at"]
    assert ended - restarted < DEADLINE_S  # counted from the start, not the restart
    assert after["status"] == "failed"
    assert (after["error"]["group"], after["error"]["code"]) == ("workflow", "timed_out")
    async with AsyncClient(server.url) as client:
        limited = client.limited.get("o-1")
        assert await limited.log() == ["reserve", "undo reserve"]
        with pytest.raises(WorkflowFailed) as failed:
            await limited.workflow_result(timeout=WAIT)
        assert failed.value.error["code"] == "timed_out"


def _sleeping(server: ServerProcess, actor_id: str) -> bool:
    return any(entry["location"] == "wait" for entry in _workflow(server, actor_id)["history"])


def test_the_cli_and_the_admin_api_fork_a_run_with_a_new_input(server: ServerProcess) -> None:
    actor_id = asyncio.run(_greeted(server, "g", {"who": "ann"}, "hello ann"))
    forked = _cli(
        server, "workflow", "fork", "greeter", "g", "--from", "greet", "--input", '{"who": "bob"}'
    )
    assert forked.returncode == 0, forked.stderr
    assert "forked the workflow of greeter [g] from greet: run 2" in forked.stdout
    assert "hello bob" in forked.stdout
    answer = httpx.post(
        f"{server.url}/admin/actors/{actor_id}/workflow/fork",
        json={"from": "greet", "input": {"who": "cy"}},
        timeout=WAIT,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["run"] == 3
    asyncio.run(_greeted(server, "g", None, "hello cy"))
    server.kill()
    server.start()
    workflow = _workflow(server, actor_id)
    assert (workflow["run"], workflow["output"]) == (3, "hello cy")
    assert workflow["forked_from"] == {"run": 2, "from": "greet"}
    assert [(run["run"], run["output"]) for run in workflow["runs"]] == [
        (2, "hello bob"),
        (1, "hello ann"),
    ]
    assert asyncio.run(_log(server, "g")) == ["fetch", "greet ann", "greet bob", "greet cy"]
    refused = _cli(server, "workflow", "fork", "greeter", "g", "--from", "nowhere")
    assert refused.returncode == 1
    assert "workflow.unknown_step" in refused.stderr
    bad = _cli(server, "workflow", "fork", "greeter", "g", "--from", "greet", "--input", "{")
    assert bad.returncode == 2
    assert "--input is not JSON" in bad.stderr


async def _greeted(
    server: ServerProcess, key: str, create_input: dict[str, Any] | None, expected: str
) -> str:
    async with AsyncClient(server.url) as client:
        if create_input is None:
            handle = client.greeter.get(key)
        else:
            handle = await client.greeter.create(key, input=create_input)
        assert await handle.workflow_result(timeout=WAIT) == expected
        return await handle.resolve()


async def _log(server: ServerProcess, key: str) -> Any:
    async with AsyncClient(server.url) as client:
        return await client.greeter.get(key).log()


async def _logged(handle: Any, line: str) -> bool:
    return line in await handle.log()


async def _ended(server: ServerProcess, actor_id: str) -> bool:
    async with httpx.AsyncClient(timeout=WAIT) as http:
        answer = await http.get(f"{server.url}/admin/actors/{actor_id}")
    return bool(answer.json()["workflow"]["status"] == "failed")


def _cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "perdure", *args, "--url", server.url]
    return subprocess.run(command, capture_output=True, text=True, timeout=WAIT * 2)
