"""``perdure check`` against stored parents and their children (SQLite and PostgreSQL).

A real ``perdure serve`` of ``flows.family_old`` fills the store: a parent that
completed (its failed child caught), one that failed (its failed child not caught), and
one still waiting for a child that waits for a message; each with a completed (or
waiting) child and a failed one. The check replays the parents' recorded child starts
and waits without calling any child: on unchanged code every verdict is clean; with the
first child started at another location, the waiting parent is a problem and the
finished ones warnings. No step body runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from perdure.client import Client

from .conftest import Stored, fill_store, runs, wait_for


def test_check_replays_parents_with_completed_and_failed_children(
    tmp_path: Path, store_args: list[str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    stored = Stored(tmp_path / "data", work)
    ids = fill_store("family_old", stored, _drive, store_args)
    store = store_args[1] if store_args else None
    ran = {path.name: path.read_text() for path in work.iterdir()}

    report, status = stored.check_json("family_same", store=store)
    assert status == 0, report
    assert (report["problems"], report["warnings"]) == ([], []), report
    # Three parents and their six children.
    assert report["workflows"] == 9, report
    outcomes = {k: v for k, v in report["outcomes"].items() if v}
    # ends: the completed parent and two completed children; fails: the failed parent
    # and the three failed children; continues: the waiting parent and its held child.
    assert outcomes == {"ends": 3, "fails": 4, "continues": 2}, report

    report, status = stored.check_json("family_renamed", store=store)
    assert status == 1, report
    problems = _by_key(report["problems"])
    assert list(problems) == ["waiting"], report
    assert _by_key(report["warnings"]).keys() == {"done", "failed"}, report
    for finding in [*problems.values(), *_by_key(report["warnings"]).values()]:
        assert finding["kind"] == "diverged", finding
        assert finding["location"] == "ok", finding
        assert finding["actor_id"] in ids.values(), finding
    assert problems["waiting"]["live"] is True

    assert {path.name: path.read_text() for path in work.iterdir()} == ran, "a step body ran"


def _drive(url: str, work: Path) -> dict[str, str]:
    """Create the three parents and wait for their points; their ids by key."""
    plans = {"done": {}, "failed": {"catch": False}, "waiting": {"hold": True}}
    with Client(url) as client:
        ids = {key: client.family.create(key, input=plan).resolve() for key, plan in plans.items()}
        for key in ("done", "failed"):
            family = client.family.get(key)
            wait_for(lambda f=family: _status(f) in ("completed", "failed"), f"{key} ended")
        assert _status(client.family.get("done")) == "completed"
        assert "card declined" in json.dumps(client.family.get("done").workflow_status())
        assert _status(client.family.get("failed")) == "failed"
        held = client.kid.get([ids["waiting"], "bad"])
        wait_for(lambda: _status(held) == "failed", "the waiting parent's failed child")
    # The held child has not worked; its failed sibling has (its step marks the parent's
    # id: a child's key starts with it).
    assert runs(work, ids["waiting"]) == ["A work"]
    return ids


def _status(handle: Any) -> str:
    return str(handle.workflow_status()["status"])


def _by_key(findings: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {finding["key"][0]: finding for finding in findings}
