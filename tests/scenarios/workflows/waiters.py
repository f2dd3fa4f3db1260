"""Many callers waiting on one run's result over plain HTTP, each with one request.

Each waiter sends one ``$workflow_result`` that the server may hold ``hold`` seconds;
its answer must be the run's end: a waiter answered before the end (or one that had to
ask again) fails the test, so an answer per waiter proves one request per waiter.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

import httpx

from perdure.client import AsyncClient

__all__ = ["LONG_RUN", "check_long_wait", "create_timed", "wait_all"]

LONG_RUN = 30.0
"""Seconds: the run the issue's hundred waiters wait on (the slow tests)."""
SETTLE = 15.0
"""Seconds: how long after the run's end every waiter must have its answer."""


async def create_timed(url: str, key: str, plan: dict[str, Any]) -> str:
    """Create a ``timed`` run (``control_app``) that sleeps ``plan["seconds"]`` and
    returns ``plan["value"]``; its actor id."""
    async with AsyncClient(url) as client:
        handle = await client.timed.create(key, input=plan)
        return await handle.resolve()


async def wait_all(
    urls: Sequence[str], actor_id: str, count: int, hold: float
) -> list[dict[str, Any]]:
    """``count`` waiters spread over ``urls`` in turn; each one's answer (the status of
    the ended run). A waiter's request may last ``hold`` seconds and a few more."""
    limits = httpx.Limits(max_connections=count)
    async with httpx.AsyncClient(timeout=hold + 10, limits=limits) as http:

        async def one(url: str) -> dict[str, Any]:
            path = f"{url}/gateway/{actor_id}/action/$workflow_result"
            answer = await http.post(path, json={"args": [hold]})
            assert answer.status_code == 200, answer.text
            output: dict[str, Any] = answer.json()["output"]
            return output

        waiters = (one(urls[index % len(urls)]) for index in range(count))
        return list(await asyncio.gather(*waiters))


def check_long_wait(waiter_urls: list[str], create_url: str) -> None:
    """A hundred waiters over ``waiter_urls`` on a run of :data:`LONG_RUN` seconds
    (created through ``create_url``) each get its output from their one request: not
    before the run's end, and soon after it."""
    plan = {"seconds": LONG_RUN, "value": "at last"}
    created = time.monotonic()
    actor_id = asyncio.run(create_timed(create_url, "long", plan))
    answers = asyncio.run(wait_all(waiter_urls, actor_id, 100, LONG_RUN + 30))
    elapsed = time.monotonic() - created
    assert [answer["status"] for answer in answers] == ["completed"] * 100
    assert {json.dumps(answer["output"]) for answer in answers} == {'"at last"'}
    assert LONG_RUN <= elapsed < LONG_RUN + SETTLE, elapsed
