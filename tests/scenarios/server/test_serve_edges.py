"""``perdure serve`` at its edges: a port already in use, and a shutdown with a sender
still waiting for its message to be completed."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx

from .helpers import gateway
from .process import REGISTRY, REPO_ROOT, ServerProcess, free_port

SERVE = [sys.executable, "-m", "perdure", "serve", REGISTRY]


def test_a_port_in_use_fails_at_once_before_serving(tmp_path: Path) -> None:
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        done = subprocess.run(
            [*SERVE, "--port", str(port), "--data", str(tmp_path / "data")],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in done.stderr
    assert "--port" in done.stderr
    output = done.stdout + done.stderr
    assert "serving" not in output
    assert "Errno" not in output
    # Nothing was opened: the data directory was never created.
    assert not (tmp_path / "data").exists()


def test_port_zero_logs_the_port_the_kernel_chose(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [*SERVE, "--port", "0", "--store", "memory://"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        assert process.stdout is not None
        deadline = time.monotonic() + 30
        line = ""
        while time.monotonic() < deadline and "serving" not in line:
            line = process.stdout.readline()
        assert "serving" in line, line
        port = int(line.rsplit(":", 1)[1])
        assert port > 0
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
    finally:
        process.kill()
        process.wait(timeout=10)
        assert process.stdout is not None
        process.stdout.close()


def test_shutdown_answers_a_waiting_sender_at_once(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data").start()
    answers: list[httpx.Response] = []
    url = gateway(server, "limits", "queue/jobs", "waiting-at-shutdown")

    def send() -> None:
        body = {"name": "jobs", "body": 1, "wait": True, "timeout": 120_000}
        answers.append(httpx.post(url, json=body, timeout=60))

    sender = threading.Thread(target=send)
    try:
        sender.start()
        time.sleep(1.0)  # the send is enqueued and waiting (nothing consumes `jobs`)
        assert not answers
        started = time.monotonic()
        assert server.terminate() == 0
        stopped_in = time.monotonic() - started
        sender.join(timeout=30)
    finally:
        server.kill()
    assert answers, "the waiting sender got no answer"
    assert answers[0].status_code == 200, answers[0].text
    assert answers[0].json() == {"status": "timedOut"}
    # Without the release the shutdown waited out uvicorn's 30 s graceful period.
    assert stopped_in < 10, stopped_in
