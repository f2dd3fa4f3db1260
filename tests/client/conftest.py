"""A real ``perdure serve`` subprocess for the client tests.

``server`` is shared by the tests of a module (each test uses its own actor keys);
``fresh_server`` belongs to one test, which may kill and restart it on the same port and
data directory.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import httpx
import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
REGISTRY = "tests.client_app:registry"
START_TIMEOUT = 20.0
STOP_TIMEOUT = 10.0


def free_port() -> int:
    """A TCP port nothing listens on right now, below the kernel's ephemeral range.

    Outside that range no client socket can take the port while a test has the server
    down, and a client reconnecting to it cannot connect to itself (TCP self-connect).
    """
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(20000, 32000)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port found")


class ServerProcess:
    """``python -m perdure serve`` on a fixed port and data directory."""

    def __init__(self, data: Path, port: int | None = None) -> None:
        self.data = data
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._starts = 0

    def start(self) -> None:
        """Start the server and wait until ``GET /health`` answers."""
        assert self._proc is None, "already running"
        self._starts += 1
        self._log = open(self.data / f"server-{self._starts}.log", "wb")  # noqa: SIM115
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        self._proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "perdure",
                "serve",
                REGISTRY,
                "--port",
                str(self.port),
                "--data",
                str(self.data),
                "--log-level",
                "warning",
            ],
            cwd=REPO_ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        if not self._wait_healthy():
            self.kill()
            raise RuntimeError(
                f"the server did not answer within {START_TIMEOUT} s:\n{self.log_text()}"
            )

    def _wait_healthy(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        with httpx.Client(timeout=1.0) as http:
            while time.monotonic() < deadline:
                assert self._proc is not None
                if self._proc.poll() is not None:
                    return False
                try:
                    if http.get(f"{self.url}/health").status_code == 200:
                        return True
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        return False

    def kill(self) -> None:
        """Crash the server (SIGKILL): nothing gets a chance to shut down cleanly."""
        self._stop(signal.SIGKILL)

    def stop(self) -> None:
        """Stop the server gracefully (SIGTERM), killing it if it takes too long."""
        self._stop(signal.SIGTERM)

    def _stop(self, sig: signal.Signals) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.poll() is None:
                proc.send_signal(sig)
            try:
                proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(STOP_TIMEOUT)
        if self._log is not None:
            self._log.close()
            self._log = None

    def log_text(self) -> str:
        """Everything the server printed (for failure messages)."""
        return "\n".join(
            path.read_text(errors="replace") for path in sorted(self.data.glob("server-*.log"))
        )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A server shared by the tests of one module."""
    process = ServerProcess(tmp_path_factory.mktemp("perdure-data"))
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A server of this test alone (it may kill and restart it)."""
    process = ServerProcess(tmp_path)
    process.start()
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture
def unique(request: pytest.FixtureRequest) -> str:
    """A key no other test uses (the module's server is shared)."""
    return f"{request.node.name}-{time.monotonic_ns()}".replace(",", "-")
