"""Delayed sends and idle expiry over real ``perdure serve`` processes (``kill -9``).

- A message sent with a delay (by the Python client, and by a raw HTTP body with
  perdure's ``delay`` field, answered ``queued``) is stored before the answer: after a
  ``kill -9`` and a restart the admin API shows it with its due time, nothing receives
  it early, and when due the alarm wakes the sleeping workflow, which takes it, with
  nobody asking for the actor.
- An idle actor with ``idle_ttl`` asleep when the server is killed is destroyed after
  its ttl by the restarted server (``on_destroy`` ran, its row is gone), again with
  nobody asking.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from perdure.client import Client
from tests.support.server import ServerProcess

pytestmark = pytest.mark.timeout(120)
REGISTRY = "tests.support.apps.later:registry"
DELAY = 6.0
TTL = 3.0


@pytest.fixture
def server(tmp_path: Path, store_args: list[str]) -> Iterator[ServerProcess]:
    env = {
        "PERDURE_SLEEP_S": "0.5",
        "PERDURE_TTL_S": str(TTL),
        "PERDURE_MARKER_DIR": str(tmp_path),
    }
    process = ServerProcess(REGISTRY, tmp_path / "data", env=env, extra_args=store_args)
    try:
        yield process.start()
    finally:
        process.kill()


def _details(url: str, actor_id: str) -> dict[str, Any] | None:
    answer = httpx.get(f"{url}/admin/actors/{actor_id}", timeout=10)
    if answer.status_code == 404:
        return None
    answer.raise_for_status()
    details: dict[str, Any] = answer.json()
    return details


def _until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        result = predicate()
        if result:
            return result
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def test_a_delayed_send_survives_a_kill_and_wakes_the_actor_when_due(
    server: ServerProcess,
) -> None:
    with Client(server.url) as client:
        inbox = client.inbox.get_or_create("later")
        actor_id = inbox.resolve()
        sent_at = time.time()
        inbox.send("jobs", "from the client", delay=DELAY)
    raw = httpx.post(
        f"{server.url}/gateway/inbox/queue/jobs",
        params={"rvt-namespace": "default", "rvt-method": "get", "rvt-key": "later"},
        json={"body": "from http", "name": "jobs", "wait": False, "delay": int(DELAY * 1000)},
        headers={"x-rivet-encoding": "json"},
        timeout=10,
    )
    assert raw.status_code == 200, raw.text
    assert raw.json() == {"status": "queued"}
    server.kill()
    server.restart()
    details = _details(server.url, actor_id)
    assert details is not None
    due = sorted(message["due_at"] for message in details["queue"])
    assert len(due) == 2
    assert due[0] >= int((sent_at + DELAY) * 1000) - 50
    assert details["state"]["got"] == []  # nothing received it early
    got = _until(
        lambda: (_details(server.url, actor_id) or {}).get("state", {}).get("got"),
        DELAY + 20,
        "the delayed messages to be received",
    )
    assert time.time() >= sent_at + DELAY - 0.05
    got = _until(
        lambda: len(g := _details(server.url, actor_id)["state"]["got"]) == 2 and g,  # type: ignore[index]
        10,
        "both messages",
    )
    assert sorted(got) == ["from http", "from the client"]
    assert _details(server.url, actor_id)["queue"] == []  # type: ignore[index]


def test_an_idle_actor_is_destroyed_after_its_ttl_across_a_restart(
    server: ServerProcess, tmp_path: Path
) -> None:
    with Client(server.url) as client:
        temp = client.temp.get_or_create("short-lived")
        actor_id = temp.resolve()
        assert temp.touch() == 1
        touched_at = time.time()
    _until(
        lambda: not _details(server.url, actor_id)["actor"]["awake"],  # type: ignore[index]
        10,
        "the actor to sleep",
    )
    server.kill()
    server.restart()
    marker = tmp_path / "destroyed-short-lived"
    _until(marker.exists, TTL + 20, "on_destroy to run")
    assert time.time() >= touched_at + TTL - 0.05
    _until(lambda: _details(server.url, actor_id) is None, 10, "the actor's row to go")
