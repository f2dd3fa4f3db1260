"""How the admin commands print an admin API answer (``perdure.cli.admin_report``): pure
functions of the JSON and the current time, checked without a server."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from perdure.cli.admin_report import actor_label, inspect_report, workflow_lines

NOW = 1_800_000_000_000  # epoch milliseconds


def _local(ms: int) -> str:
    return f"{dt.datetime.fromtimestamp(ms / 1000).astimezone():%Y-%m-%d %H:%M:%S %Z}"


def _entry(location: str, kind: str, status: str, **extra: Any) -> dict[str, Any]:
    name = location.rsplit("/", 1)[-1]
    entry: dict[str, Any] = {"location": location, "name": name, "kind": kind, "status": status}
    entry |= {"seq": 0, "depth": location.count("/"), "attempts": None, "error": None}
    entry |= {"errors": [], "output": None, "retry_at": None, "deadline": None}
    return entry | extra


DETAIL: dict[str, Any] = {
    "actor": {
        "actor_id": "a1b2c3",
        "name": "job",
        "key": ["eu", "r/7"],
        "created_at": NOW - 5 * 60_000,
        "awake": True,
        "wake_at": NOW + 3 * 60_000 + 5_000,
    },
    "state": {"stage": "fetching", "note": "café"},
    "connections": [{"id": "c1", "params": {"user": "ann"}, "state": None, "subscriptions": ["x"]}],
    "queue": [{"id": 7, "name": "jobs", "body": {"n": "y" * 80}, "created_at": NOW, "held": True}],
    "schedules": [
        {
            "id": "0123456789abcdef",
            "kind": "cron",
            "name": None,
            "action": "tick",
            "args": [1, "a"],
            "run_at": NOW + 90_000,
            "created_at": NOW,
            "expression": "*/5 * * * *",
            "timezone": "UTC",
            "interval_ms": None,
            "max_history": 10,
            "last_run_at": NOW - 1000,
            "history": [
                {
                    "seq": 3,
                    "scheduled_at": NOW - 2000,
                    "fired_at": NOW - 2000,
                    "finished_at": NOW - 1000,
                    "result": "error",
                    "error": {"group": "user", "code": "boom", "message": "Boom."},
                }
            ],
        }
    ],
    "workflow": {
        "status": "failed",
        "error": {"message": "Step fetch failed."},
        "output": None,
        "history": [
            _entry("prepare", "step", "completed", attempts=1),
            _entry(
                "fetch",
                "step",
                "exhausted",
                attempts=2,
                error={"group": "user", "code": "blocked", "message": "Blocked\nupstream."},
            ),
            _entry("loop/~0/wait", "sleep", "pending", deadline=NOW + 42_000),
            _entry(
                "retrying",
                "step",
                "failed",
                attempts=1,
                retry_at=NOW + 2 * 3600_000 + 5 * 60_000,
                errors=[{"message": "old"}],
            ),
        ],
    },
}


def test_the_report_has_every_part() -> None:
    lines = inspect_report(DETAIL, now_ms=NOW)
    text = "\n".join(lines)
    assert lines[0] == "job [eu/r\\/7]"
    assert "  id          a1b2c3" in lines
    assert f"  created     {_local(NOW - 5 * 60_000)} (5m ago)" in lines
    assert "  status      awake" in lines
    assert f"  next alarm  {_local(NOW + 185_000)} (in 3m)" in lines
    assert '    "note": "café"' in lines  # pretty JSON, indented under "state"
    assert "connections (1)" in lines
    assert "queue (1 message)" in lines
    assert '{"n":"' + "y" * 50 in text
    assert "y" * 80 not in text  # long bodies are cut
    assert "schedules (1)" in lines
    assert "cron */5 * * * * UTC" in text
    assert 'tick(1,"a")' in text
    assert "01234567" in text
    assert "0123456789abcdef" not in text
    assert "Boom. (user.boom)" in text
    assert "workflow: failed" in lines


def test_the_workflow_history_is_an_aligned_table() -> None:
    lines = workflow_lines(DETAIL["workflow"], now_ms=NOW)
    assert lines[:2] == ["workflow: failed", "  error   Step fetch failed."]
    table = lines[lines.index("") + 1 :]
    header = table[0]
    columns = [header.index(name) for name in ("KIND", "STATUS", "ATTEMPTS", "LAST ERROR")]
    for row in table[1:]:
        # every cell starts where its header does, after two spaces at least (a row
        # with an empty last cell ends early: lines are not padded at the end)
        for start in (c for c in columns if c < len(row)):
            assert row[start - 2 : start] == "  "
            assert row[start] != " "
    fetch = next(row for row in table if row.strip().startswith("fetch"))
    assert fetch.split()[1:4] == ["step", "exhausted", "2"]
    assert fetch.endswith("Blocked upstream. (user.blocked)")  # one line
    assert "pending (deadline in 42s)" in next(r for r in table if "loop/~0/wait" in r)
    retrying = next(r for r in table if r.strip().startswith("retrying"))
    assert "failed (retry in 2h 5m)" in retrying
    assert retrying.endswith("(before) old")
    prepare = next(r for r in table if r.strip().startswith("prepare"))
    assert prepare.split() == ["prepare", "step", "completed", "1"]


def test_an_empty_actor_says_so() -> None:
    detail: dict[str, Any] = {
        "actor": {"actor_id": "x", "name": "solo", "key": [], "created_at": NOW, "awake": False},
        "state": None,
        "connections": [],
        "queue": [],
        "schedules": [],
        "workflow": None,
    }
    lines = inspect_report(detail, now_ms=NOW + 10)
    assert lines[0] == "solo []"
    assert "  status      asleep" in lines
    assert "  next alarm  none" in lines
    assert f"  created     {_local(NOW)} (now)" in lines
    assert {"connections: none", "queue: empty", "schedules: none"} <= set(lines)
    assert not any(line.startswith("workflow") for line in lines)


@pytest.mark.parametrize(
    ("key", "label"), [([], "a []"), (["x"], "a [x]"), (["x", "y/z"], "a [x/y\\/z]")]
)
def test_actor_labels(key: list[str], label: str) -> None:
    assert actor_label("a", key) == label


def test_long_lists_are_cut_with_a_count_of_the_rest() -> None:
    message = DETAIL["queue"][0]
    detail = DETAIL | {"queue": [message | {"id": n} for n in range(1, 26)]}
    lines = inspect_report(detail, now_ms=NOW)
    start = lines.index("queue (25 messages)")
    assert [line.split()[0] for line in lines[start + 2 : start + 22]] == [
        str(n) for n in range(1, 21)
    ]
    assert lines[start + 22] == "  … and 5 more (--json lists them all)"
