"""Leases survive ``kill -9`` (a real server, SQLite and PostgreSQL).

- A consumer that dies holding a message (the server is killed) does not get it back at
  once after the restart: it stays hidden until its visibility timeout, then comes back
  with one more attempt, and completing it then removes it.
- A message that kills its consumer at every delivery still counts its attempts (the
  lease is durable before the consumer runs) and becomes a dead letter after
  ``max_attempts``; requeued, it is delivered again and can be completed.
- A workflow consuming the same queue takes every message exactly once across a kill,
  the one an action had leased included, once its lease ran out.
"""

from __future__ import annotations

import time

import httpx
import pytest

from perdure.client import Client, TransportError
from tests.support.apps.leases import MAX_ATTEMPTS

from .conftest import StartServer

pytestmark = pytest.mark.timeout(180)
LEASE = 4.0


def test_a_consumer_killed_holding_a_message_gets_it_after_the_timeout(
    start_server: StartServer, store_args: list[str]
) -> None:
    server = start_server(LEASE, store=store_args)
    with Client(server.url) as client:
        worker = client.worker.get_or_create("crash")
        worker.send("jobs", {"n": 7})
        assert worker.take() == {"id": 1, "body": {"n": 7}, "attempts": 1}
        taken_at = time.monotonic()
    server.kill()
    server.restart()
    with Client(server.url) as client:
        worker = client.worker.get_or_create("crash")
        early = worker.take()
        if time.monotonic() - taken_at < LEASE - 0.5:  # a slow restart may eat the lease
            assert early is None, "a leased message was delivered again before its timeout"
        again = early or worker.take(LEASE + 5)
        assert time.monotonic() - taken_at >= LEASE - 0.05
        assert again == {"id": 1, "body": {"n": 7}, "attempts": 2}
        worker.complete(1)
        assert worker.size() == 0


def _dead_letters(url: str, actor_id: str) -> list[dict[str, object]]:
    answer = httpx.get(f"{url}/admin/actors/{actor_id}/dead-letters", timeout=10)
    answer.raise_for_status()
    letters: list[dict[str, object]] = answer.json()["dead_letters"]
    return letters


def test_a_message_that_kills_its_consumer_becomes_a_dead_letter(
    start_server: StartServer,
) -> None:
    server = start_server(1.0)
    with Client(server.url) as client:
        worker = client.worker.get_or_create("poison")
        actor_id = worker.resolve()
        worker.send("jobs", "poison")
    for _ in range(MAX_ATTEMPTS):
        with Client(server.url) as client, pytest.raises(TransportError):
            client.worker.get_or_create("poison").take_and_die()  # waits out the lease
        assert server.process is not None
        server.process.wait(timeout=20)  # it killed itself
        server.restart()
    with Client(server.url) as client:
        worker = client.worker.get_or_create("poison")
        assert worker.take(2.5) is None  # the fourth delivery made it a dead letter
        assert worker.size() == 0
    [letter] = _dead_letters(server.url, actor_id)
    assert (letter["id"], letter["queue"], letter["body"]) == (1, "jobs", "poison")
    assert letter["attempts"] == MAX_ATTEMPTS
    assert letter["error"] == "delivered 3 times without completion (max_attempts 3)"
    requeue = f"{server.url}/admin/actors/{actor_id}/dead-letters/1/requeue"
    answer = httpx.post(requeue, timeout=10)
    assert answer.json() == {"requeued": {"id": 1, "queue": "jobs", "attempts": 0}}
    with Client(server.url) as client:
        worker = client.worker.get_or_create("poison")
        assert worker.take() == {"id": 1, "body": "poison", "attempts": 1}
        worker.complete(1)
        assert worker.size() == 0
    assert _dead_letters(server.url, actor_id) == []


def test_a_workflow_takes_each_message_once_across_a_kill(
    start_server: StartServer, store_args: list[str]
) -> None:
    jobs = 40
    server = start_server(1.0, step=0.03, store=store_args)
    with Client(server.url) as client:
        pipeline = client.pipeline.get_or_create("p")
        for index in range(jobs):
            pipeline.send("jobs", {"value": 1 << index})
        leased = pipeline.take()  # an action leases one the workflow has not taken yet
        assert leased is not None
        assert leased["attempts"] == 1
        done_before = pipeline.total()[1]
    server.kill()
    assert done_before < jobs, "the workflow finished before the kill: slow its steps"
    server.restart()
    deadline = time.monotonic() + 60
    with Client(server.url) as client:
        pipeline = client.pipeline.get_or_create("p")
        while pipeline.total()[1] < jobs and time.monotonic() < deadline:
            time.sleep(0.1)
        # Every value once: the sum of distinct powers of two says which were applied.
        assert pipeline.total() == [(1 << jobs) - 1, jobs]
        assert pipeline.size() == 0
