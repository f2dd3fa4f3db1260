"""One server per SQLite data directory, with real ``perdure serve`` processes.

A second server on a directory in use exits within seconds, naming the directory and the
process that holds it, and the first goes on serving; a holder killed with ``kill -9``
never blocks a restart on the same directory.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from .helpers import gateway
from .process import REGISTRY, REPO_ROOT, STOP_TIMEOUT, ServerProcess, free_port

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="flock and SIGKILL")

# "Within seconds": the refused process imports perdure and the server stack first.
REFUSED_WITHIN = 15.0


def _increment(server: ServerProcess, key: str, amount: int) -> Any:
    url = gateway(server, "counter", "action/increment", key)
    with httpx.Client(timeout=10) as client:
        response = client.post(url, json={"args": [amount]})
    assert response.status_code == 200, response.text
    return response.json()["output"]


def _state(server: ServerProcess, key: str) -> Any:
    url = gateway(server, "counter", "action/getState", key, "get")
    with httpx.Client(timeout=10) as client:
        response = client.post(url, json={"args": []})
    assert response.status_code == 200, response.text
    return response.json()["output"]


def _second_server(data_dir: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run another ``perdure serve`` on ``data_dir`` until it exits; its output and time."""
    command = [sys.executable, "-m", "perdure", "serve", REGISTRY]
    command += ["--port", str(free_port()), "--data", str(data_dir)]
    started = time.monotonic()
    result = subprocess.run(
        command, cwd=REPO_ROOT, capture_output=True, text=True, timeout=STOP_TIMEOUT * 2
    )
    return result, time.monotonic() - started


def test_a_second_server_on_a_data_directory_in_use_exits_naming_the_holder(
    fresh_server: ServerProcess,
) -> None:
    fresh_server.start()
    assert fresh_server.process is not None
    holder_pid = fresh_server.process.pid
    _increment(fresh_server, "first", 2)

    result, elapsed = _second_server(fresh_server.data_dir)

    assert result.returncode == 1, result.stderr
    assert elapsed < REFUSED_WITHIN
    message = result.stderr
    assert message.startswith("perdure: error: "), message
    assert f"data directory {fresh_server.data_dir.resolve()} is in use" in message
    assert f"process {holder_pid}" in message
    assert f"serve {REGISTRY}" in message  # the holder's command line
    assert "perdure serving" not in result.stdout + result.stderr  # it never started
    # The first server goes on untouched: it still answers and writes.
    assert fresh_server.running
    assert _increment(fresh_server, "first", 3) == 5
    assert _state(fresh_server, "first")["count"] == 5
    assert fresh_server.terminate() == 0
    assert "Traceback" not in fresh_server.log()


def test_a_server_killed_with_sigkill_never_blocks_a_restart(
    fresh_server: ServerProcess,
) -> None:
    fresh_server.start()
    _increment(fresh_server, "survivor", 7)
    fresh_server.kill()  # kill -9: no cleanup, the lock file stays behind

    lock_file = fresh_server.data_dir / "perdure.db.lock"
    assert lock_file.exists()
    fresh_server.restart()  # raises if the new process exits instead of serving
    assert fresh_server.process is not None
    assert json.loads(lock_file.read_text())["pid"] == fresh_server.process.pid
    assert _state(fresh_server, "survivor")["count"] == 7
    assert _increment(fresh_server, "survivor", 1) == 8
    # The restarted server holds the directory in its turn.
    result, _ = _second_server(fresh_server.data_dir)
    assert result.returncode == 1
    assert f"process {fresh_server.process.pid}" in result.stderr
    assert fresh_server.terminate() == 0
