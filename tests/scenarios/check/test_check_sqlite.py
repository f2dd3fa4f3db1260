"""``perdure check`` against a SQLite store the old code wrote through a real server."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from perdure.client import Client
from tests.scenarios.check.flows import DIRECTORY_VARIABLE
from tests.support.server import ServerProcess

from .conftest import Stored, runs


def _by_key(findings: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {finding["key"][0]: finding for finding in findings}


def _unchanged(stored: Stored, run: Any) -> Any:
    before = stored.snapshot()
    result = run()
    assert stored.snapshot() == before, "the check changed a file"
    return result


def _only_sleeping(stored: Stored, registry: str) -> dict[str, Any]:
    """The one problem ``registry`` finds: the sleeping workflow's (exit status 1)."""
    report, status = _unchanged(stored, lambda: stored.check_json(registry))
    assert status == 1, report
    found = _by_key(report["problems"])
    assert set(found) == {"sleeping"}, report
    return found["sleeping"]


def test_unchanged_code_passes_and_nothing_is_written_or_run(stored: Stored) -> None:
    keys = ("waiting", "midloop", "sleeping", "done", "rejected")
    ran = {key: runs(stored.work, key) for key in keys}
    done = _unchanged(stored, lambda: stored.check("same"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "OK: every stored workflow would restart cleanly" in done.stdout
    report, status = _unchanged(stored, lambda: stored.check_json("same"))
    assert status == 0, report
    assert report["ok"], report
    assert report["problems"] == [], report
    assert report["workflows"] == 6, report
    assert report["actors"] == 7, report
    # Four stop at their frontier; the finished one replays to its end; the one that
    # failed by raising (after its compensation) fails the same way again.
    assert report["outcomes"] == {"continues": 4, "ends": 1, "fails": 1}, report
    assert report["warnings"] == [], report
    # No step body ran: the new code's bodies mark "B", and nothing was added.
    assert {key: runs(stored.work, key) for key in ran} == ran
    assert not any(line.startswith("B ") for lines in ran.values() for line in lines)
    # No -wal or -shm file was created beside the database.
    assert sorted(p.name for p in stored.data.glob("perdure.db*")) == [
        "perdure.db",
        "perdure.db.lock",
    ]


def test_a_renamed_step_is_found_with_its_fix(stored: Stored) -> None:
    done = _unchanged(stored, lambda: stored.check("renamed"))
    assert done.returncode == 1, done.stdout + done.stderr
    text = done.stdout
    assert "DIVERGED  job/" in text, text
    assert "at `b`" in text, text
    assert "history: completed step `b`" in text, text
    assert "code:    step `b2`" in text, text
    assert 'ctx.removed("b", "step")' in text, text
    assert "ctx.get_version(" in text, text
    report, status = stored.check_json("renamed")
    assert status == 1
    found = _by_key(report["problems"])
    assert set(found) == {"waiting", "midloop", "sleeping"}, report
    assert {f["kind"] for f in found.values()} == {"diverged"}
    assert {f["location"] for f in found.values()} == {"b"}


def test_a_removed_step_is_found_where_the_replay_passed_it(stored: Stored) -> None:
    report, status = _unchanged(stored, lambda: stored.check_json("removed"))
    assert status == 1, report
    found = _by_key(report["problems"])
    # The sleeping workflow finished its loop: the loop's body is not replayed again.
    assert set(found) == {"waiting", "midloop"}, report
    assert found["midloop"]["location"] == "loop/~2/note", found
    assert found["waiting"]["location"] == "loop/~0/note", found
    assert found["midloop"]["history"] == "completed step `loop/~2/note`"
    assert 'ctx.removed("note", "step")' in found["midloop"]["fix"]


def test_a_step_removed_before_a_recorded_wait_is_found(stored: Stored) -> None:
    """The sleeping workflow's history holds ``mid``, then the pending ``nap``: the new
    code replays up to ``nap`` (its frontier) without reaching ``mid``. The engine would
    fail only once the workflow goes on; the check says so now."""
    sleeping = _only_sleeping(stored, "mid_removed")
    assert sleeping["location"] == "mid"
    assert sleeping["history"] == "completed step `mid`"
    assert sleeping["code"] == "goes on to `nap` without reaching it", sleeping
    assert 'ctx.removed("mid", "step")' in sleeping["fix"]


def test_a_reordered_step_is_found(stored: Stored) -> None:
    sleeping = _only_sleeping(stored, "reordered")
    assert sleeping["location"] == "nap"
    assert sleeping["history"] == "pending sleep `nap`"
    assert sleeping["code"] == "step `c`"
    assert 'ctx.removed("nap", "sleep")' in sleeping["fix"]
    assert "ctx.get_version(" in sleeping["fix"]


def test_changes_past_every_frontier_pass(stored: Stored) -> None:
    report, status = _unchanged(stored, lambda: stored.check_json("after_frontier"))
    assert status == 0, report
    assert report["ok"], report


def test_a_workflow_that_raises_on_replay_is_reported_not_fatal(stored: Stored) -> None:
    report, status = _unchanged(stored, lambda: stored.check_json("broken"))
    assert status == 1
    found = _by_key(report["problems"])
    assert set(found) == {"waiting", "midloop", "sleeping"}, report
    assert all(f["kind"] == "error" for f in found.values())
    assert "RuntimeError: the new code has a bug" in found["midloop"]["message"]
    assert found["midloop"]["location"] == "b"  # the last entry it reached
    # The other actors were still judged.
    assert report["workflows"] == 6
    assert report["outcomes"]["error"] == 3


def test_finished_workflows_warn_unless_strict(stored: Stored) -> None:
    report, status = _unchanged(stored, lambda: stored.check_json("finished_changed"))
    assert status == 0, report
    assert report["problems"] == [], report
    (warning,) = report["warnings"]
    assert warning["key"] == ["done"], warning
    assert warning["location"] == "b", warning
    assert warning["live"] is False
    assert warning["status"] == "completed"
    strict, status = stored.check_json("finished_changed", "--strict")
    assert status == 1, strict
    assert len(strict["problems"]) == 1, strict


def test_a_failed_run_that_now_fails_otherwise_warns_unless_strict(stored: Stored) -> None:
    """A failed run is finished: a replay that raises another error than the stored one
    is reported, but does not block the deploy."""
    ran = runs(stored.work, "rejected")
    assert ran == ["A reserve", "A reserve"], ran  # the step, then its compensation
    report, status = _unchanged(stored, lambda: stored.check_json("rejects_otherwise"))
    assert status == 0, report
    assert report["problems"] == [], report
    (warning,) = report["warnings"]
    assert warning["key"] == ["rejected"], warning
    assert warning["kind"] == "error", warning
    assert warning["live"] is False
    assert warning["status"] == "failed"
    assert "ValueError: no seats left" in warning["message"], warning
    assert "the stored run failed with ValueError: order rejected" in warning["message"]
    strict, status = stored.check_json("rejects_otherwise", "--strict")
    assert status == 1, strict
    assert runs(stored.work, "rejected") == ran


def test_an_actor_type_gone_from_the_registry_is_reported(stored: Stored) -> None:
    done = _unchanged(stored, lambda: stored.check("gone"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "MISSING  legacy/" in done.stdout, done.stdout
    assert "no actor of this name any more (it holds a running workflow)" in done.stdout


def test_each_replay_and_the_whole_check_are_bounded_in_time(stored: Stored) -> None:
    report, status = _unchanged(stored, lambda: stored.check_json("hangs", "--timeout", "0.5"))
    assert status == 1
    found = _by_key(report["problems"])
    assert set(found) == {"waiting", "midloop", "sleeping"}, report
    assert "did not reach its frontier within 0.5 s" in found["sleeping"]["message"]
    assert report["complete"]
    assert report["actors"] == 7
    done = stored.check("same", "--time-limit", "0.000001")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "NOT COMPLETE: the time limit ended the check" in done.stdout, done.stdout


def test_no_database_is_a_usage_error(stored: Stored) -> None:
    done = stored.check("same", store=str(stored.work / "nothing.db"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert not (stored.work / "nothing.db").exists()


def test_beside_a_running_server(stored: Stored, tmp_path: Path) -> None:
    """A server holds the file (and its -wal): the check reads beside it, as the
    server's own readers do, and the server goes on undisturbed."""
    copy = Stored(tmp_path / "data", stored.work)
    copy.data.mkdir()
    shutil.copy(stored.data / "perdure.db", copy.data / "perdure.db")
    server = ServerProcess(
        "tests.scenarios.check.flows:old", copy.data, env={DIRECTORY_VARIABLE: str(stored.work)}
    ).start()
    try:
        report, status = copy.check_json("renamed")
        assert status == 1, report
        assert {f["key"][0] for f in report["problems"]} == {"waiting", "midloop", "sleeping"}
        with Client(server.url) as client:
            assert client.counter.get_or_create("plain").ping() == "pong"
    finally:
        assert server.terminate() == 0, server.log()
