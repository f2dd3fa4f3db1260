"""Leases and dead letters on a real server, through the admin API and the ``perdure``
console script (SQLite).

- A consumer that does not complete in time sees the message again after its visibility
  timeout, not before; ``nack(delay)`` brings it back after the delay, not before; a
  nack at ``max_attempts`` makes it a dead letter at once, with the consumer's error.
- ``perdure dead-letters list|requeue|drop`` and the admin API list, requeue (attempts
  reset, then completable) and drop dead letters, and refuse with coded errors.
"""

from __future__ import annotations

import json
import subprocess
import time

import httpx
import pytest

from perdure.client import Client
from tests.scenarios.cli.conftest import Cli
from tests.support.apps.leases import MAX_ATTEMPTS

from .conftest import StartServer

pytestmark = pytest.mark.timeout(120)


def _elapsed_take(worker: object, timeout: float) -> tuple[object, float]:
    started = time.monotonic()
    taken = worker.take(timeout)  # type: ignore[attr-defined]
    return taken, time.monotonic() - started


def test_timeouts_and_nack_delays_on_a_real_server(start_server: StartServer) -> None:
    server = start_server(30.0)
    with Client(server.url) as client:
        worker = client.worker.get_or_create("timing")
        actor_id = worker.resolve()
        worker.send("jobs", {"n": 1})
        assert worker.take(0, 1.0) == {"id": 1, "body": {"n": 1}, "attempts": 1}
        leased_at = time.monotonic()
        assert worker.take() is None  # not completed, not yet timed out: hidden
        again = worker.take(10)
        assert time.monotonic() - leased_at >= 0.95
        assert again == {"id": 1, "body": {"n": 1}, "attempts": 2}
        worker.nack(1, 1.5, "try later")
        assert worker.take() is None
        third, waited = _elapsed_take(worker, 10)
        assert waited >= 1.45
        assert third == {"id": 1, "body": {"n": 1}, "attempts": MAX_ATTEMPTS}
        worker.nack(1, 0, "still broken")  # the last attempt: a dead letter at once
        assert worker.take() is None
    answer = httpx.get(f"{server.url}/admin/actors/{actor_id}/dead-letters", timeout=10).json()
    [letter] = answer["dead_letters"]
    assert letter["attempts"] == MAX_ATTEMPTS
    assert letter["error"].endswith("; last error: still broken")


def _two_dead_letters(url: str, key: str) -> str:
    """The worker ``key`` with dead letters 1 and 2 (and nothing live); its id."""
    with Client(url) as client:
        worker = client.worker.get_or_create(key)
        worker.send("jobs", {"n": 1})
        worker.send("jobs", "two")
        for _ in range(MAX_ATTEMPTS):
            assert [worker.take()["id"], worker.take()["id"]] == [1, 2]
            worker.nack(1, 0, "bad")
            worker.nack(2)
        actor_id: str = worker.resolve()
        return actor_id


def test_dead_letters_through_the_cli(start_server: StartServer) -> None:
    server = start_server(30.0)
    cli = Cli(server.url)
    _two_dead_letters(server.url, "cli")
    listed = cli.ok("dead-letters", "list", "worker", "cli")
    assert listed.splitlines()[0] == "worker [cli]: 2 dead letters"
    assert "  #1  jobs  attempts 3  died " in listed
    assert (
        "      error: delivered 3 times without completion (max_attempts 3); last error: bad"
        in listed
    )
    assert '      body:  {"n": 1}' in listed
    as_json = json.loads(cli.ok("dead-letters", "list", "worker", "cli", "--json"))
    assert [letter["id"] for letter in as_json["dead_letters"]] == [1, 2]
    assert "no dead letters in queue 'other'" in cli.ok(
        "dead-letters", "list", "worker", "cli", "--queue", "other"
    )
    requeued = cli.ok("dead-letters", "requeue", "worker", "cli", "--id", "1")
    assert requeued.strip() == "requeued message 1 of worker [cli] to 'jobs'"
    with Client(server.url) as client:
        worker = client.worker.get_or_create("cli")
        assert worker.take() == {"id": 1, "body": {"n": 1}, "attempts": 1}
        refused = cli.fails("dead-letters", "requeue", "worker", "cli", "--id", "1")
        assert "(actor.message_not_dead)" in refused  # live (and leased) again
        worker.complete(1)
        assert worker.size() == 0
    done = cli.fails(
        "dead-letters", "drop", "worker", "cli", "--id", "2", stdin=subprocess.DEVNULL, status=2
    )
    assert "not dropping message 2 without --yes" in done
    dropped = cli.ok("dead-letters", "drop", "worker", "cli", "--id", "2", "--yes")
    assert dropped.strip() == "dropped dead letter 2 of worker [cli]"
    assert (
        cli.ok("dead-letters", "list", "worker", "cli").strip() == "worker [cli]: no dead letters"
    )
    missing = cli.fails("dead-letters", "drop", "worker", "cli", "--id", "2", "--yes")
    assert "The actor has no dead letter 2. (actor.dead_letter_not_found)" in missing


def test_the_admin_api_refuses_with_codes(start_server: StartServer) -> None:
    server = start_server(30.0)
    actor_id = _two_dead_letters(server.url, "api")
    base = f"{server.url}/admin/actors"
    with httpx.Client(timeout=10) as http:
        only = http.get(f"{base}/{actor_id}/dead-letters", params={"queue": "jobs"}).json()
        assert [letter["id"] for letter in only["dead_letters"]] == [1, 2]
        detail = http.get(f"{base}/{actor_id}").json()
        assert detail["queue"] == []
        assert [letter["id"] for letter in detail["dead_letters"]] == [1, 2]
        for method, path, status, code in (
            ("POST", f"{actor_id}/dead-letters/9/requeue", 404, "dead_letter_not_found"),
            ("DELETE", f"{actor_id}/dead-letters/9", 404, "dead_letter_not_found"),
            ("POST", f"{actor_id}/dead-letters/x/requeue", 400, "invalid_message_id"),
            ("GET", "nobody/dead-letters", 404, "not_found"),
            ("POST", "nobody/dead-letters/1/requeue", 404, "not_found"),
        ):
            answer = http.request(method, f"{base}/{path}")
            assert (answer.status_code, answer.json()["code"]) == (status, code), path
        assert http.delete(f"{base}/{actor_id}/dead-letters/1").json() == {}
        left = http.get(f"{base}/{actor_id}/dead-letters").json()["dead_letters"]
        assert [letter["id"] for letter in left] == [2]
