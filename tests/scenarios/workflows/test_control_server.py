"""Cancel, pause and the pushed result of workflows over a real ``perdure serve`` on
SQLite, with ``kill -9``: the Python network client and plain HTTP."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from perdure.client import ActorError, AsyncClient
from perdure.errors import WorkflowCancelled
from tests.scenarios.workflows.waiters import check_long_wait, create_timed, wait_all
from tests.support.server import ServerProcess
from tests.support.wait import eventually

REGISTRY = "tests.scenarios.workflows.control_app:registry"
WAIT = 15.0


async def test_a_cancel_mid_step_compensates_once_and_survives_kill_9(
    server: ServerProcess,
) -> None:
    async with AsyncClient(server.url) as client:
        saga = client.saga.get_or_create("order-1")
        await eventually(lambda: _logged(saga, "slow started"), timeout=WAIT)
        await saga.cancel_workflow("customer asked")  # lands once the slow step is done
        with pytest.raises(WorkflowCancelled) as raised:
            await saga.workflow_result(timeout=WAIT)
        assert raised.value.reason == "customer asked"
        log = await saga.log()
    assert log == [
        "reserve",
        "charge",
        "slow started",
        "slow done",
        "undo slow",
        "undo charge",
        "undo reserve",
    ]
    server.kill()
    server.start()
    async with AsyncClient(server.url) as client:
        saga = client.saga.get("order-1")
        assert (await saga.workflow_status())["status"] == "cancelled"
        await asyncio.sleep(0.3)
        assert await saga.log() == log  # ended for good: nothing ran or undid again
        with pytest.raises(ActorError) as refused:
            await saga.cancel_workflow()
        assert (refused.value.group, refused.value.code) == ("workflow", "not_running")


async def test_a_pause_survives_kill_9_and_a_resume_finishes_the_run(
    server: ServerProcess,
) -> None:
    async with AsyncClient(server.url) as client:
        paced = client.paced.get_or_create("p")
        await eventually(lambda: _counted_at_least(paced, 2), timeout=WAIT)
        assert (await paced.pause_workflow())["status"] == "paused"
        held = await paced.count()
    server.kill()
    server.start()
    async with AsyncClient(server.url) as client:
        paced = client.paced.get("p")
        assert (await paced.workflow_status())["status"] == "paused"
        await asyncio.sleep(0.8)  # four of its sleeps' worth: nothing moves
        assert await paced.count() in (held, held + 1)  # a step in flight may have ended
        paused_at = await paced.count()
        await asyncio.sleep(0.5)
        assert await paced.count() == paused_at
        await paced.resume_workflow()
        assert await paced.workflow_result(timeout=WAIT) == 10
        assert await paced.count() == 10


def test_a_hundred_waiters_each_wait_in_one_request(server: ServerProcess) -> None:
    """Plain HTTP: each waiter sends one `$workflow_result` and its answer is the end."""
    seconds = 3.0
    actor_id = asyncio.run(create_timed(server.url, "t", {"seconds": seconds, "value": "v!"}))
    started = time.monotonic()
    answers = asyncio.run(wait_all([server.url], actor_id, 100, WAIT))
    elapsed = time.monotonic() - started
    assert [answer["status"] for answer in answers] == ["completed"] * 100
    assert {json.dumps(answer["output"]) for answer in answers} == {'"v!"'}
    assert elapsed < seconds + WAIT  # bounded: every wait has its timeout


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_a_hundred_waiters_on_a_30_s_run_each_wait_in_one_request(
    server: ServerProcess,
) -> None:
    """The issue's figure: a run of 30 s, each waiter's one request held until its end."""
    check_long_wait([server.url], server.url)


async def _logged(handle: Any, line: str) -> bool:
    return line in await handle.log()


async def _counted_at_least(handle: Any, count: int) -> bool:
    return int(await handle.count()) >= count


def _cli(server: ServerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "perdure", *args, "--url", server.url]
    return subprocess.run(command, capture_output=True, text=True, timeout=WAIT * 2)


def test_the_cli_and_the_admin_api_pause_resume_and_cancel(server: ServerProcess) -> None:
    asyncio.run(_start_paced(server, "c"))
    paused = _cli(server, "workflow", "pause", "paced", "c", "--json")
    assert paused.returncode == 0, paused.stderr
    assert json.loads(paused.stdout)["status"] == "paused"
    resumed = _cli(server, "workflow", "resume", "paced", "c", "--wait", "0")
    assert resumed.returncode == 0, resumed.stderr
    assert "resumed the workflow of paced [c]" in resumed.stdout
    with httpx.Client(timeout=WAIT) as http:
        actor_id = asyncio.run(_resolve(server, "c"))
        answer = http.post(
            f"{server.url}/admin/actors/{actor_id}/workflow/cancel", json={"reason": "ops"}
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["workflow"]["status"] in ("running", "cancelled")
    asyncio.run(_ended(server, "c", "cancelled"))
    again = _cli(server, "workflow", "cancel", "paced", "c", "--reason", "twice")
    assert again.returncode == 1
    assert "workflow.not_running" in again.stderr


async def _start_paced(server: ServerProcess, key: str) -> None:
    async with AsyncClient(server.url) as client:
        await client.paced.get_or_create(key).resolve()


async def _resolve(server: ServerProcess, key: str) -> str:
    async with AsyncClient(server.url) as client:
        return await client.paced.get(key).resolve()


async def _ended(server: ServerProcess, key: str, status: str) -> None:
    async with AsyncClient(server.url) as client:
        handle = client.paced.get(key)

        async def ended() -> bool:
            return (await handle.workflow_status())["status"] == status

        await eventually(ended, timeout=WAIT)


async def test_a_run_killed_in_its_first_step_resumes_without_a_call(tmp_path: Path) -> None:
    """A starting run submits its busy alarm at once: a kill -9 inside its first step
    leaves the alarm, which wakes the actor after the restart with nobody calling it."""
    marks = tmp_path / "marks.txt"
    process = ServerProcess(
        REGISTRY,
        tmp_path / "data",
        env={"PERDURE_MARKS": str(marks)},
        extra_args=["--log-level", "warning"],
    )
    process.start()
    try:
        async with AsyncClient(process.url) as client:
            actor_id = await client.eager.get_or_create("e").resolve()
        await eventually(lambda: marks.exists() and marks.read_text() == "mark\n", timeout=WAIT)
        process.kill()  # inside the step's pause: nothing of the step is recorded
        process.start()
        # Nobody calls the actor: the admin API reads the store and wakes nothing.
        await eventually(lambda: _admin_status(process, actor_id) == "completed", timeout=WAIT)
        assert marks.read_text() == "mark\nmark\n"  # the step ran again, once
    finally:
        process.kill()


def _admin_status(server: ServerProcess, actor_id: str) -> str:
    answer = httpx.get(f"{server.url}/admin/actors/{actor_id}", timeout=WAIT)
    return str(answer.json()["workflow"]["status"])
