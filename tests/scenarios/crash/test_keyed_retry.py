"""A keyed request whose answer is lost to a ``kill -9`` is applied once and answered
(docs/idempotency.md), over a real ``perdure serve`` on SQLite (and PostgreSQL).

- The answer is lost after the commit: an HTTP transport (tests/support/lost_answers.py)
  lets the request reach the server and its answer come back, then kills the server
  (SIGKILL), starts it again and reports a broken connection. The client's automatic
  retry sends the request again with the same key to the restarted server, which finds
  the key's record (written in the commit that applied the request) and answers the
  first answer.
- A waiting send is in flight at the kill: its message is committed, the answer is
  still to come. After the restart the retry waits again for that message, which is
  completed once.

Without the key the retry would apply the request a second time; every check reads the
actor's state through another client, so that would fail the test.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from perdure.client import AsyncClient, create_client
from tests.support.lost_answers import LoseAnswerAfter
from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(120)

REGISTRY = "tests.scenarios.client.app:registry"
WAIT = 30.0


def kill_and_restart(server: ServerProcess) -> Callable[[], None]:
    """What happens after the lost answer: ``kill -9``, then a restart."""

    def then() -> None:
        server.kill()
        server.restart()

    return then


@pytest.fixture
def server(tmp_path: Path, store_args: list[str]) -> ServerProcess:
    process = ServerProcess(
        REGISTRY, tmp_path / "data", extra_args=["--log-level", "warning", *store_args]
    )
    return process


async def test_a_send_whose_answer_died_with_the_server_is_applied_once(
    server: ServerProcess,
) -> None:
    await asyncio.to_thread(server.start)
    try:
        killer = LoseAnswerAfter("/queue/", kill_and_restart(server))
        async with AsyncClient(server.url, transport=killer) as client:  # type: ignore[arg-type]
            mailbox = client.mailbox.get_or_create("kill-send")
            async with asyncio.timeout(WAIT):
                assert await mailbox.send("jobs", {"order": 1}) is None
                assert await client.counter.get_or_create("kill-send").increment(1) == 1
        async with create_client(server.url) as plain:
            async with asyncio.timeout(WAIT):
                drained = await plain.mailbox.get_or_create("kill-send").drain()
    finally:
        server.kill()
    assert server.starts == 2
    assert drained == [{"order": 1}]  # enqueued once, though sent twice
    assert len(killer.keys) == 2
    assert killer.keys[0] is not None
    assert killer.keys[0] == killer.keys[1]


async def test_an_action_whose_answer_died_with_the_server_is_applied_once(
    server: ServerProcess,
) -> None:
    await asyncio.to_thread(server.start)
    try:
        killer = LoseAnswerAfter("/action/increment", kill_and_restart(server))
        async with AsyncClient(server.url, transport=killer) as client:  # type: ignore[arg-type]
            keyed = client.counter.get_or_create("kill-action").with_idempotency_key("inc-1")
            async with asyncio.timeout(WAIT):
                assert await keyed.increment(5) == 5  # the first answer, after the restart
        async with create_client(server.url) as plain:
            async with asyncio.timeout(WAIT):
                count = await plain.counter.get_or_create("kill-action").getCount()
    finally:
        server.kill()
    assert count == 5
    assert killer.keys == ["inc-1", "inc-1"]


async def test_a_waiting_send_in_flight_at_a_kill_is_completed_once(
    server: ServerProcess,
) -> None:
    await asyncio.to_thread(server.start)
    try:
        # Enough retries to span the restart (0.25 s doubling to 2 s: about 15 s).
        async with create_client(server.url, retries=10) as client:
            mailbox = client.mailbox.get_or_create("kill-wait")
            await mailbox.drain()  # the actor exists and is awake
            waiting = asyncio.ensure_future(
                mailbox.send("jobs", "job", wait=True, timeout=WAIT, idempotency_key="w-1")
            )
            await asyncio.sleep(0.5)  # the message is committed; the answer waits for it
            assert not waiting.done()
            await asyncio.to_thread(server.kill)
            await asyncio.to_thread(server.restart)
            completed = None
            async with asyncio.timeout(WAIT):
                while completed is None:
                    completed = await mailbox.completeNext("done")
                    await asyncio.sleep(0.05)
                result = await waiting
                leftover = await mailbox.drain()
    finally:
        server.kill()
    assert completed == "job"
    assert leftover == []  # the retry added no second message
    assert result.status == "completed"
    # The retry waits again for the message; when it arrives after the completion it
    # is answered without the response (a completion's response is not kept).
    assert result.response in ("done", None)
