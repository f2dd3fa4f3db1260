"""``c.kv`` writes ride in the action's commit: a real ``perdure serve`` (SQLite) killed
with SIGKILL at random moments under concurrent actions never keeps half of one.

Each action writes five KV records, overwrites one, deletes one and writes one more,
and appends its number to the state (tests/support/apps/kv_crash.py). After the kills,
every actor is audited: every action whose answer arrived is in the state, and every
action in the state has all its records and no other action has any (an action in
flight at a kill is wholly there or wholly absent); the one marker left and ``last``
agree with the state's last action. ``PERDURE_CRASH_SEED`` replays a failed run's kill
moments. The suite's run takes about ten seconds; the soak (``-m slow``) runs a minute,
on SQLite and on PostgreSQL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.apps.kv_crash import RECORDS
from tests.support.kill_runs import apply_under_kills

REGISTRY = "tests.support.apps.kv_crash:registry"
ACTORS = 4
SENDERS = 12  # three per actor: their commits share group commits


async def _run(tmp_path: Path, seconds: float, kills: int, store: list[str] | None = None) -> None:
    run = await apply_under_kills(
        REGISTRY,
        tmp_path / "data",
        seconds=seconds,
        kills=kills,
        actors=ACTORS,
        senders=SENDERS,
        store_args=store,
    )
    assert run.starts == kills + 2
    total = sum(len(a) for a in run.acked.values())
    assert total > 50, f"too few actions ran ({run.context})"
    for key, audit in run.audits.items():
        _check(audit, run.acked[key], run.tried[key], f"{key} {run.context}")


def _check(audit: dict[str, Any], acked: set[int], tried: set[int], context: str) -> None:
    ops: list[int] = audit["ops"]
    assert len(ops) == len(set(ops)), f"an action applied twice ({context})"
    assert acked <= set(ops), f"acknowledged actions lost: {sorted(acked - set(ops))} ({context})"
    assert set(ops) <= tried
    records = {int(n): count for n, count in audit["records"].items()}
    half = {n: c for n, c in records.items() if c != RECORDS}
    assert not half, f"actions with some of their records: {half} ({context})"
    assert set(records) == set(ops), (
        f"records without state: {sorted(set(records) - set(ops))}, "
        f"state without records: {sorted(set(ops) - set(records))} ({context})"
    )
    last = ops[-1] if ops else None
    assert audit["state_last"] == last
    assert audit["last"] == last, f"`last` is not the state's last action ({context})"
    assert audit["marks"] == ([] if last is None else [last]), context


@pytest.mark.timeout(90)
async def test_kill_9_never_keeps_half_an_action(tmp_path: Path) -> None:
    await _run(tmp_path, seconds=7.0, kills=4)


@pytest.mark.slow
@pytest.mark.timeout(400)
async def test_kill_9_soak(tmp_path: Path, store_args: list[str]) -> None:
    """A minute and 30 kills, on SQLite and on PostgreSQL."""
    await _run(tmp_path, seconds=60.0, kills=30, store=store_args)
