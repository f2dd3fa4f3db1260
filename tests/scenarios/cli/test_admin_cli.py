"""The admin commands (``perdure inspect``, ``workflow``, ``destroy``) run as the real
``perdure`` console script against a real ``perdure serve`` of ``tests.scenarios.cli.app``."""

from __future__ import annotations

import ipaddress
import json
import os
import pty
import re
import socket
import subprocess
from pathlib import Path
from typing import Any

import pytest

from perdure.client import Client
from tests.support.server import ServerProcess, free_port

from .conftest import Cli, start_server, wait_for


def _workflow(cli: Cli, key: str) -> Any:
    return json.loads(cli.ok("workflow", "status", "job", key, "--json"))


def _wait_status(cli: Cli, key: str, status: str) -> Any:
    def reached() -> Any:
        flow = _workflow(cli, key)
        return flow if flow["status"] == status else None

    return wait_for(reached, what=f"workflow of job [{key}] {status}")


def _runs(work_dir: Path, key: str, step: str) -> int:
    path = work_dir / f"runs-{key}-{step}"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _start_job(server: ServerProcess, key: str) -> None:
    with Client(server.url) as client:
        client.job.get_or_create(key).getState()


def _counter(server: ServerProcess, key: str | list[str], count: int) -> str:
    """Create the counter with ``key`` and bring it to ``count``; its id."""
    with Client(server.url) as client:
        counter = client.counter.get_or_create(key)
        counter.increment(count)
        return counter.resolve()


def _entry(flow: Any, name: str) -> Any:
    return next(e for e in flow["history"] if e["name"] == name)


# ------------------------------------------------------------------------ inspect


def test_inspect_shows_state_queue_and_schedules(server: ServerProcess, cli: Cli, key: str) -> None:
    with Client(server.url) as client:
        counter = client.counter.get_or_create(key)
        counter.increment(5)
        counter.send("inbox", {"to": "ops", "text": "hello"})
        counter.plan()

    def fired() -> bool:
        detail = json.loads(cli.ok("inspect", "counter", key, "--json"))
        return any(s["history"] for s in detail["schedules"])

    wait_for(fired, what="the every-second job's first fire")
    report = cli.ok("inspect", "counter", key)
    assert report.splitlines()[0] == f"counter [{key}]"
    assert '"count": 5' in report
    assert '"label": "café"' in report  # not escaped
    assert "next alarm  " in report
    assert "next alarm  none" not in report
    assert "queue (1 message)" in report
    assert '{"to":"ops","text":"hello"}' in report
    assert "every 1s" in report
    assert "beat()" in report
    assert "bump(10)" in report
    assert "last fires" in report
    assert "workflow" not in report  # a plain actor has none


def test_inspect_json_prints_the_api_answer(server: ServerProcess, cli: Cli, key: str) -> None:
    actor_id = _counter(server, key, 0)
    detail = json.loads(cli.ok("inspect", "counter", key, "--json"))
    assert detail["actor"]["actor_id"] == actor_id
    assert detail["actor"]["key"] == [key]
    assert detail["state"]["count"] == 0


def test_a_key_of_several_parts_is_given_part_by_part(server: ServerProcess, cli: Cli) -> None:
    _counter(server, ["eu", "room/7"], 2)
    report = cli.ok("inspect", "counter", "eu", "room/7")
    assert report.splitlines()[0] == "counter [eu/room\\/7]"
    assert '"count": 2' in report


def test_inspect_of_a_missing_actor_exits_1(cli: Cli, key: str) -> None:
    done = cli.fails("inspect", "counter", key)
    assert f"perdure: error: no actor counter [{key}]" in done
    assert "(actor.not_found)" in done


def test_an_unknown_actor_type_is_named_with_the_known_ones(cli: Cli) -> None:
    refused = cli.fails("inspect", "countr", "main")
    assert "has no actor type 'countr' (actor.unknown_name)" in refused
    assert "perdure: its actor types: counter, job, sleepy, waiter" in refused


def test_inspecting_an_asleep_actor_leaves_it_asleep(
    server: ServerProcess, cli: Cli, key: str
) -> None:
    with Client(server.url) as client:
        client.sleepy.get_or_create(key).increment(2)

    def asleep() -> bool:
        return not json.loads(cli.ok("inspect", "sleepy", key, "--json"))["actor"]["awake"]

    wait_for(asleep, what="the actor to fall asleep")
    for _ in range(2):  # the first look did not wake it for the second
        report = cli.ok("inspect", "sleepy", key).splitlines()
        assert "  status      asleep" in report
        assert '    "count": 2' in report  # its stored state
        assert "connections: none" in report


# ---------------------------------------------------------------------- workflows


def test_retry_after_fixing_the_cause_completes_the_workflow(
    server: ServerProcess, cli: Cli, work_dir: Path, key: str
) -> None:
    block = work_dir / f"block-{key}"
    block.touch()
    _start_job(server, key)
    failed = _wait_status(cli, key, "failed")
    assert _entry(failed, "fetch")["error"]["message"] == "The upstream is blocked."

    report = cli.ok("inspect", "job", key)
    assert "workflow: failed" in report
    header = next(line for line in report.splitlines() if line.strip().startswith("LOCATION"))
    assert header.split() == ["LOCATION", "KIND", "STATUS", "ATTEMPTS", "LAST", "ERROR"]
    fetch_row = next(line for line in report.splitlines() if line.strip().startswith("fetch"))
    assert "The upstream is blocked. (user.blocked)" in fetch_row
    assert _runs(work_dir, key, "prepare") == 1

    again = cli.ok("workflow", "retry", "job", key, "--wait", "30")  # not fixed yet
    assert "workflow: failed" in again
    assert _runs(work_dir, key, "fetch") == 4  # two attempts, twice

    block.unlink()  # the cause, fixed
    done = cli.ok("workflow", "retry", "job", key, "--wait", "30")
    lines = done.splitlines()
    assert lines[:3] == [
        f"retried the workflow of job [{key}]",
        "workflow: completed",
        '  output  {"fetched":42,"finish_runs":1}',
    ]
    assert next(line for line in lines if line.strip().startswith("finish")).split() == [
        "finish",
        "step",
        "completed",
        "1",
    ]
    assert _runs(work_dir, key, "prepare") == 1  # completed steps are not rerun
    assert _runs(work_dir, key, "finish") == 1
    assert _workflow(cli, key)["status"] == "completed"


def test_replay_from_a_step_reruns_it_and_what_follows(
    server: ServerProcess, cli: Cli, work_dir: Path, key: str
) -> None:
    _start_job(server, key)
    _wait_status(cli, key, "completed")
    location = _entry(_workflow(cli, key), "fetch")["location"]
    runs_before = {step: _runs(work_dir, key, step) for step in ("prepare", "fetch", "finish")}
    assert runs_before == {"prepare": 1, "fetch": 1, "finish": 1}

    done = cli.ok("workflow", "replay", "job", key, "--from", location, "--wait", "30")
    assert done.startswith(f"replayed the workflow of job [{key}] from {location}\n")
    assert "workflow: completed" in done
    assert '{"fetched":42,"finish_runs":2}' in done
    assert _runs(work_dir, key, "prepare") == 1
    assert _runs(work_dir, key, "fetch") == 2
    assert _runs(work_dir, key, "finish") == 2


def test_a_workflow_still_running_after_the_wait_is_shown_as_it_is(
    server: ServerProcess, cli: Cli, work_dir: Path, key: str
) -> None:
    with Client(server.url) as client:
        client.waiter.get_or_create(key).getState()
    wait_for(lambda: _runs(work_dir, key, "first") == 1, what="the waiter's first step")
    done = cli.ok("workflow", "replay", "waiter", key, "--from", "first", "--wait", "0.5")
    assert "workflow: running" in done
    assert "(still running after 0.5 s: `perdure workflow status` shows it later)" in done
    wait_row = next(line for line in done.splitlines() if line.strip().startswith("wait-go"))
    assert wait_row.split()[:3] == ["wait-go", "message", "pending"]
    assert re.search(r"pending \(deadline in \d+m\) +-$", wait_row)  # an hour away, give or take
    wait_for(lambda: _runs(work_dir, key, "first") == 2, what="the replayed first step")


def test_workflow_operations_the_api_refuses_exit_1(
    server: ServerProcess, cli: Cli, key: str
) -> None:
    _start_job(server, key)
    _wait_status(cli, key, "completed")
    retry = cli.fails("workflow", "retry", "job", key)
    assert "(workflow.not_failed)" in retry
    replay = cli.fails("workflow", "replay", "job", key, "--from", "no-such-step")
    assert "(workflow.unknown_step)" in replay


def test_workflow_status_of_a_plain_actor_exits_1(
    server: ServerProcess, cli: Cli, key: str
) -> None:
    _counter(server, key, 1)
    done = cli.fails("workflow", "status", "counter", key)
    assert f"counter [{key}] is not a workflow actor" in done


# ------------------------------------------------------------------------ destroy


def test_destroy_yes_then_inspect_says_not_found(server: ServerProcess, cli: Cli, key: str) -> None:
    actor_id = _counter(server, key, 1)
    assert cli.ok("destroy", "counter", key, "--yes").strip() == (
        f"destroyed counter [{key}] (id {actor_id})"
    )
    after = cli.fails("inspect", "counter", key)
    assert "(actor.not_found)" in after


def test_destroy_without_yes_refuses_when_stdin_is_no_terminal(
    server: ServerProcess, cli: Cli, key: str
) -> None:
    _counter(server, key, 3)
    done = cli.fails("destroy", "counter", key, stdin=subprocess.DEVNULL, status=2)
    assert "without --yes" in done
    assert '"count": 3' in cli.ok("inspect", "counter", key)


@pytest.mark.parametrize(("answer", "destroyed"), [("n", False), ("y", True)])
def test_destroy_asks_on_a_terminal(
    server: ServerProcess, cli: Cli, key: str, answer: str, destroyed: bool
) -> None:
    _counter(server, key, 1)
    leader, follower = pty.openpty()
    try:
        os.write(leader, f"{answer}\n".encode())  # waits in the terminal until read
        done = cli("destroy", "counter", key, stdin=follower)
    finally:
        os.close(leader)
        os.close(follower)
    assert "[y/N]" in done.stdout
    assert done.returncode == (0 if destroyed else 1)
    exists = cli("inspect", "counter", key).returncode == 0
    assert exists is not destroyed


# ------------------------------------------------------------ access and failures


def test_a_server_with_a_token_wants_it(tmp_path: Path) -> None:
    server = start_server(
        tmp_path / "data", tmp_path / "work", ["--admin-token", "cli-test-token-s3cret"]
    )
    try:
        _counter(server, "main", 7)
        cli = Cli(server.url)
        refused = cli.fails("inspect", "counter", "main")
        assert "perdure: error:" in refused
        assert "(admin.unauthorized)" in refused
        assert "--token" in refused
        wrong = cli.fails("inspect", "counter", "main", "--token", "nope")
        assert "(admin.unauthorized)" in wrong
        assert '"count": 7' in cli.ok(
            "inspect", "counter", "main", "--token", "cli-test-token-s3cret"
        )
        by_env = cli.ok(
            "inspect", "counter", "main", env={"PERDURE_ADMIN_TOKEN": "cli-test-token-s3cret"}
        )
        assert '"count": 7' in by_env
    finally:
        server.kill()


def _outward_address() -> str | None:
    """This machine's address on its default route, if it has one (no packet is sent)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("198.51.100.1", 9))  # TEST-NET-2: only picks the route
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if ipaddress.ip_address(address).is_loopback else address


def test_without_a_token_only_loopback_may_inspect(tmp_path: Path) -> None:
    address = _outward_address()
    if address is None:
        pytest.skip("this machine has no address but loopback")
    server = start_server(tmp_path / "data", tmp_path / "work", ["--host", "0.0.0.0"])
    try:
        _counter(server, "main", 1)
        refused = Cli(f"http://{address}:{server.port}").fails("inspect", "counter", "main")
        assert "(admin.forbidden)" in refused
        assert "on the server's host with a loopback --url" in refused
        assert '"count": 1' in Cli(server.url).ok("inspect", "counter", "main")
    finally:
        server.kill()


def test_a_server_without_admin_says_so(tmp_path: Path) -> None:
    server = start_server(tmp_path / "data", tmp_path / "work", ["--no-admin"])
    try:
        _counter(server, "main", 1)
        refused = Cli(server.url).fails("inspect", "counter", "main")
        assert "turned off on this server (--no-admin). (admin.disabled)" in refused
        assert "--token" not in refused  # no hint that could not help
    finally:
        server.kill()


def test_no_server_at_the_url_is_said_plainly() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    refused = Cli(url).fails("inspect", "counter", "main")
    assert refused.strip() == f"perdure: error: no server answers at {url}"


def test_the_url_comes_from_perdure_url(cli: Cli, server: ServerProcess, key: str) -> None:
    _counter(server, key, 4)
    report = cli.ok("inspect", "counter", key, url=False, env={"PERDURE_URL": server.url})
    assert '"count": 4' in report


@pytest.mark.parametrize(
    "args",
    [
        ["workflow"],
        ["workflow", "replay", "job", "k"],  # no --from
        ["inspect"],  # no NAME
        ["inspect", "counter", "k", "--url", "ftp://example"],
    ],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    Cli("http://127.0.0.1:1").fails(*args, url=False, status=2)
