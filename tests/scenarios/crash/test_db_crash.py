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

from pathlib import Path
from typing import Any

import pytest

from tests.support.apps.db_crash import KEYS, ROWS
from tests.support.kill_runs import apply_under_kills

REGISTRY = "tests.support.apps.db_crash:registry"
ACTORS = 3
SENDERS = 9  # three per actor: their statements queue behind each other


async def _run(tmp_path: Path, seconds: float, kills: int, store: list[str]) -> None:
    run = await apply_under_kills(
        REGISTRY,
        tmp_path / "data",
        seconds=seconds,
        kills=kills,
        actors=ACTORS,
        senders=SENDERS,
        store_args=store,
    )
    total = sum(len(a) for a in run.acked.values())
    print(f"{total} actions acknowledged across {kills + 1} kills ({run.context})")  # with -s
    assert run.starts == kills + 2
    assert total > 30, f"too few actions ran ({run.context})"
    for key, audit in run.audits.items():
        _check(audit, run.acked[key], run.tried[key], f"{key} {run.context}")


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
