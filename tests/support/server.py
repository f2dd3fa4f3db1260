"""A real ``perdure serve`` subprocess for tests: start, SIGTERM, ``kill -9``, restart.

The same port and data directory are kept across restarts, so clients reconnect to the
same address and the server finds its data again.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 30.0
STOP_TIMEOUT = 20.0


def free_port() -> int:
    """A free TCP port on 127.0.0.1 below the kernel's ephemeral range.

    A port from the ephemeral range (what binding port 0 gives) can be picked as the
    source port of a client reconnecting to it while the server is down, and the socket
    then connects to itself.
    """
    for _ in range(200):
        port = random.randrange(20000, 32000)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port found")


class ServerProcess:
    """``python -m perdure serve REGISTRY --port P --data DIR`` (plus extra arguments)."""

    def __init__(
        self,
        registry: str,
        data_dir: Path,
        *,
        port: int | None = None,
        env: dict[str, str] | None = None,
        extra_args: list[str] | None = None,
    ) -> None:
        self.registry = registry
        self.data_dir = data_dir
        self.port = port or free_port()
        self.env = env or {}
        self.extra_args = extra_args or []
        self.cwd: Path = REPO_ROOT  # where the command runs
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self._log: IO[bytes] | None = None

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def running(self) -> bool:
        """True while the process is alive."""
        return self.process is not None and self.process.poll() is None

    def __enter__(self) -> ServerProcess:
        """``with ServerProcess(...) as server``: started, and killed at the end if running."""
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.running:
            self.kill()

    def start(self) -> ServerProcess:
        """Start the process and wait (bounded) until ``/health`` answers."""
        assert not self.running, "already running"
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.starts += 1
        self._close_log()
        self._log = (self.data_dir / f"server-{self.starts}.log").open("wb")
        env = {**os.environ, "PYTHONUNBUFFERED": "1", **self.env}
        self.process = subprocess.Popen(
            self.command(), cwd=self.cwd, env=env, stdout=self._log, stderr=subprocess.STDOUT
        )
        self._wait_healthy()
        return self

    def command(self) -> list[str]:
        """The command line that starts the server (``perdure serve``)."""
        return [
            sys.executable,
            "-m",
            "perdure",
            "serve",
            self.registry,
            "--port",
            str(self.port),
            "--data",
            str(self.data_dir),
            *self.extra_args,
        ]

    @property
    def health_url(self) -> str:
        """Where :meth:`start` waits for a 200."""
        return f"{self.url}/health"

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        with httpx.Client(timeout=1.0) as client:
            while time.monotonic() < deadline:
                if not self.running:
                    raise RuntimeError(f"server exited early:\n{self.log()}")
                try:
                    if client.get(self.health_url).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.05)
        self.kill()
        raise RuntimeError(f"server not healthy after {START_TIMEOUT} s:\n{self.log()}")

    def kill(self) -> None:
        """``kill -9``: no cleanup at all; reap the process."""
        if self.process is not None and self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=STOP_TIMEOUT)
        self._close_log()

    def terminate(self) -> int:
        """SIGTERM and wait (bounded) for the graceful exit; returns the exit status."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        finally:
            self._close_log()

    def restart(self) -> ServerProcess:
        """Start again on the same port and data directory."""
        return self.start()

    def log(self) -> str:
        """Everything the server printed, over all its starts."""
        parts = []
        for index in range(1, self.starts + 1):
            path = self.data_dir / f"server-{index}.log"
            if path.exists():
                parts.append(path.read_text(errors="replace"))
        return "\n".join(parts)

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


class HostAppProcess(ServerProcess):
    """``python -m uvicorn MODULE:APP`` (or the ``script`` given, run with python): a host
    ASGI app that mounts perdure at ``mount`` (docs/embedding.md), started from ``cwd``
    (default the repository); ready once ``{mount}/health`` answers. ``url`` is the
    host's root."""

    def __init__(
        self,
        app: str,
        data_dir: Path,
        *,
        mount: str = "/perdure",
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        port: int | None = None,
        script: str | None = None,
    ) -> None:
        super().__init__(app, data_dir, env=env, port=port)
        self.mount = mount
        self.cwd = cwd or REPO_ROOT
        self.script = script

    def command(self) -> list[str]:
        """uvicorn serving the host app; a bounded graceful shutdown (open streams would
        hold uvicorn's default one for ever)."""
        if self.script is not None:
            return [sys.executable, self.script]
        return [
            sys.executable,
            "-m",
            "uvicorn",
            self.registry,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--timeout-graceful-shutdown",
            "5",
        ]

    @property
    def health_url(self) -> str:
        """perdure's ``/health`` under the mount."""
        return f"{self.url}{self.mount}/health"
