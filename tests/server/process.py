"""Running ``perdure serve`` as a real subprocess for the server tests."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]
REGISTRY = "tests.server_app:registry"
START_TIMEOUT = 20.0
STOP_TIMEOUT = 20.0


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ServerProcess:
    """``python -m perdure serve tests.server_app:registry`` on a data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.port = 0
        self.log_path = data_dir / "server.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        """``ws://127.0.0.1:<port>``."""
        return f"ws://127.0.0.1:{self.port}"

    def start(self) -> ServerProcess:
        """Start the process and wait (bounded) until ``/health`` answers."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        self.log_path = self.data_dir / f"server-{self.port}.log"
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "perdure",
                    "serve",
                    REGISTRY,
                    "--port",
                    str(self.port),
                    "--data",
                    str(self.data_dir),
                ],
                cwd=REPO_ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._wait_healthy()
        return self

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        with httpx.Client(timeout=1.0) as client:
            while time.monotonic() < deadline:
                assert self.process is not None
                if self.process.poll() is not None:
                    raise RuntimeError(f"server exited early:\n{self.log()}")
                try:
                    if client.get(f"{self.url}/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"server not healthy after {START_TIMEOUT} s:\n{self.log()}")

    def terminate(self, timeout: float = STOP_TIMEOUT) -> int:
        """SIGTERM, then wait (bounded) for a graceful exit; returns the exit status."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        """SIGKILL (no cleanup at all) and reap the process."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=STOP_TIMEOUT)

    def log(self) -> str:
        """What the server printed so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""
