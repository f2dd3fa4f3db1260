"""The seed's cron example on a real ``perdure serve examples.app:registry`` process.

The interval is 1 s and the actor sleeps after 0.3 s idle (``PERDURE_CRON_INTERVAL``,
``PERDURE_CRON_SLEEP_TIMEOUT``), so every tick wakes a sleeping actor through its alarm.
The tests read the database file directly (as another process would): calling the actor
would wake it and keep it awake.
"""

from __future__ import annotations

import asyncio
import itertools
import sqlite3
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from perdure.client import create_client
from perdure.keys import serialize_key
from perdure.store.encoding import decode_value
from tests.support.server import ServerProcess

INTERVAL_MS = 1000
ENV = {"PERDURE_CRON_INTERVAL": "1", "PERDURE_CRON_SLEEP_TIMEOUT": "0.3"}
WAIT = 10.0
DOWNTIME = 3.6  # past three or four due times


class Database:
    """Reads of the server's SQLite file."""

    def __init__(self, data_dir: Path, key: str) -> None:
        self.path = data_dir / "perdure.db"
        self.key = serialize_key((key,))

    def rows(self, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        with sqlite3.connect(self.path, timeout=5) as connection:
            return list(connection.execute(sql, params))

    def actor(self) -> tuple[str, dict[str, Any], int]:
        """``(actor_id, state, generation)`` of the cron actor."""
        ((actor_id, state, generation),) = self.rows(
            "SELECT actor_id, state, generation FROM actors WHERE name = ? AND key = ?",
            "cronActor",
            self.key,
        )
        return actor_id, decode_value(state), generation

    def state(self) -> dict[str, Any]:
        return self.actor()[1]

    def job(self) -> tuple[int, int]:
        """``(run_at, fire_seq)`` of the recurring job."""
        ((run_at, fire_seq),) = self.rows(
            "SELECT s.run_at, s.fire_seq FROM schedules s JOIN actors a USING (actor_id)"
            " WHERE a.key = ? AND s.id = 'cron:workflow-tick'",
            self.key,
        )
        return run_at, fire_seq

    def fires(self) -> list[tuple[int, int, int, str]]:
        """``(seq, scheduled_at, fired_at, result)`` of every recorded fire, by seq."""
        return [
            (seq, scheduled, fired, result)
            for seq, scheduled, fired, result in self.rows(
                "SELECT f.seq, f.scheduled_at, f.fired_at, f.result FROM schedule_fires f"
                " JOIN actors a USING (actor_id) WHERE a.key = ? ORDER BY f.seq",
                self.key,
            )
        ]

    def fire(self, seq: int) -> tuple[int, int, int, str] | None:
        return next((fire for fire in self.fires() if fire[0] == seq), None)


def wait_for(predicate: Any, what: str, timeout: float = WAIT) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            result = predicate()
        except (sqlite3.OperationalError, ValueError):
            result = None  # the file is being created, or the row is not there yet
        if result:
            return result
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


async def create_cron_actor(server: ServerProcess, key: str) -> None:
    async with create_client(server.url) as client:
        state = await client.cronActor.get_or_create([key]).getState()
    assert state == {"runs": 0, "lastRunAt": None}


@pytest.fixture
def cron_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """The example registry's server with a 1 s interval (not started yet)."""
    server = ServerProcess("examples.app:registry", tmp_path / "data", env=ENV)
    try:
        yield server
    finally:
        server.kill()


@pytest.fixture
def key() -> str:
    return f"cron-{uuid.uuid4().hex[:8]}"


async def test_the_job_fires_while_its_actor_is_otherwise_asleep(
    cron_server: ServerProcess, key: str
) -> None:
    cron_server.start()
    await create_cron_actor(cron_server, key)
    db = Database(cron_server.data_dir, key)
    _, _, created_generation = db.actor()
    await asyncio.to_thread(wait_for, lambda: db.state()["runs"] >= 3, "three runs")
    _, state, generation = db.actor()
    # Nobody called the actor after creating it: each run woke it from sleep (a new
    # generation per wake), and the workflow processed each tick once.
    assert generation >= created_generation + 3
    fires = db.fires()
    assert [result for *_, result in fires[:3]] == ["ok", "ok", "ok"]
    assert state["lastRunAt"] in {scheduled for _, scheduled, _, _ in fires}
    cron_server.terminate()


def check_coalesced(db: Database, due: int, seq: int, restarted_at: int) -> int:
    """After a restart: the first fire is the missed deadline ``due``, alone; return the
    deadline of the next fire, which is back on the cadence."""
    first = wait_for(lambda: db.fire(seq), "the coalesced fire")
    _, scheduled, fired, _ = first
    assert scheduled == due
    assert fired >= restarted_at - 100
    assert fired - due >= 3 * INTERVAL_MS  # several deadlines were missed …
    second = wait_for(lambda: db.fire(seq + 1), "the next fire")
    # … and fired once: the next fire is the first cadence point after the restart.
    assert second[1] > fired
    assert (second[1] - due) % INTERVAL_MS == 0
    assert second[1] - fired <= INTERVAL_MS
    wait_for(lambda: db.state()["lastRunAt"] >= second[1], "the workflow to process it")
    return int(second[1])


def check_no_duplicates(db: Database) -> None:
    fires = db.fires()
    deadlines = [scheduled for _, scheduled, _, result in fires if result != "skipped"]
    assert deadlines == sorted(set(deadlines)), "a deadline fired twice"
    ok = sum(1 for *_, result in fires if result == "ok")
    runs = db.state()["runs"]
    # Every ok fire enqueued one tick; a run killed mid-way may have enqueued one too.
    assert ok <= runs <= len(deadlines)


async def test_missed_fires_coalesce_after_sigterm_and_kill_9(
    cron_server: ServerProcess, key: str
) -> None:
    cron_server.start()
    await create_cron_actor(cron_server, key)
    db = Database(cron_server.data_dir, key)
    await asyncio.to_thread(wait_for, lambda: db.state()["runs"] >= 2, "two runs")

    # Graceful stop, down for several deadlines, start again.
    cron_server.terminate()
    due, seq = db.job()
    await asyncio.sleep(max(0.0, (due - now_ms()) / 1000) + DOWNTIME)
    restarted_at = now_ms()
    cron_server.start()
    await asyncio.to_thread(check_coalesced, db, due, seq + 1, restarted_at)

    # kill -9 at an arbitrary moment, down again, start again.
    await asyncio.sleep(0.37)
    cron_server.kill()
    due, seq = db.job()
    await asyncio.sleep(max(0.0, (due - now_ms()) / 1000) + DOWNTIME)
    restarted_at = now_ms()
    cron_server.start()
    await asyncio.to_thread(check_coalesced, db, due, seq + 1, restarted_at)
    await asyncio.to_thread(watch_runs, db, 3.2)
    check_no_duplicates(db)
    cron_server.terminate()


def watch_runs(db: Database, seconds: float) -> None:
    """Observe the state for a while: ``runs`` goes up by one per tick, each with a new
    ``lastRunAt`` on the cadence (one interval later, or a whole number of intervals if
    the machine stalled long enough for a fire to coalesce)."""
    seen = [db.state()]
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        state = db.state()
        if state != seen[-1]:
            seen.append(state)
        time.sleep(0.02)
    assert len(seen) >= 3, seen
    for before, after in itertools.pairwise(seen):
        assert after["runs"] == before["runs"] + 1, seen
        step = after["lastRunAt"] - before["lastRunAt"]
        assert step > 0, seen
        assert step % INTERVAL_MS == 0, seen


async def test_the_example_client_sees_runs_advance(cron_server: ServerProcess, key: str) -> None:
    from examples.cron_client import main

    cron_server.start()
    state = await main(cron_server.url, key, runs=2, timeout=WAIT)
    assert state["runs"] == 2
    assert state["lastRunAt"] is not None
    cron_server.terminate()
