"""``perdure serve --reload`` as a developer runs it: a real process serving an app file in
its working directory; editing the file restarts the server with the new code, the data
stays, and SIGTERM stops both the watcher and its server."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.server import free_port

APP = """
from perdure import actor, setup

counter = actor(
    state={{"count": 0}},
    actions={{"add": lambda c, by: _add(c, by)}},
)


def _add(c, by):
    c.state["count"] += by
    return {{"count": c.state["count"], "version": {version}}}


registry = setup(use={{"counter": counter}})
"""
ADD = "/gateway/counter/action/add?rvt-method=getOrCreate&rvt-key=k"
WAIT = 30.0
REPO_SRC = Path(__file__).resolve().parents[3] / "src"


@pytest.fixture
def reloading(tmp_path: Path) -> Iterator[tuple[str, Path, subprocess.Popen[bytes]]]:
    (tmp_path / "reload_app.py").write_text(APP.format(version=1))
    port = free_port()
    # The child the watcher starts imports perdure the same way this test does.
    env = {**os.environ, "PYTHONPATH": f"{REPO_SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    log = (tmp_path / "serve.log").open("wb")
    command = [sys.executable, "-m", "perdure", "serve", "reload_app:registry", "--reload"]
    command += ["--port", str(port), "--data", str(tmp_path / "data")]
    process = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=log, stderr=log)
    try:
        yield f"http://127.0.0.1:{port}", tmp_path, process
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=WAIT)
        log.close()


def test_an_edit_restarts_the_server_with_the_new_code_and_the_data_stays(
    reloading: tuple[str, Path, subprocess.Popen[bytes]],
) -> None:
    url, folder, process = reloading
    assert _eventually(lambda: _add(url, 2)) == {"count": 2, "version": 1}
    (folder / "reload_app.py").write_text(APP.format(version=2))
    # The same actor, its state kept, answering with the new code.
    answer = _eventually(lambda: _add_if_version(url, 3, version=2))
    assert answer == {"count": 5, "version": 2}
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=WAIT) == 0
    log = (folder / "serve.log").read_text()
    # One restart: the store's files, written under the watched folder all along, are
    # not Python files and restart nothing.
    assert log.count("reload_app.py changed; restarting the server") == 1
    assert log.count("runtime started") == 2
    with pytest.raises(httpx.TransportError):  # the server stopped with the watcher
        httpx.get(f"{url}/health", timeout=2)


def _add(url: str, by: int) -> Any:
    answer = httpx.post(url + ADD, json={"args": [by]}, timeout=5)
    assert answer.status_code == 200, answer.text
    return answer.json()["output"]


def _add_if_version(url: str, by: int, *, version: int) -> Any:
    """``add`` once the server runs ``version`` of the code (asks it without changing
    anything until then: ``add(0)``)."""
    if _add(url, 0)["version"] != version:
        return None
    return _add(url, by)


def _eventually(call: Callable[[], Any]) -> Any:
    """The first truthy answer of ``call`` within WAIT seconds (a refused connection, as
    while the server restarts, counts as no answer)."""
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        try:
            answer = call()
        except httpx.TransportError:
            answer = None
        if answer:
            return answer
        time.sleep(0.1)
    raise AssertionError(f"no answer within {WAIT} s")
