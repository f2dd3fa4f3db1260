"""A real ``perdure serve`` of ``tests.scenarios.cli.app`` and a runner of the real ``perdure``
console script against it (a subprocess, bounded by a timeout like every wait here)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.scenarios.cli.app import DIRECTORY_VARIABLE
from tests.support.server import REPO_ROOT, ServerProcess

CLI_TIMEOUT = 60.0
REGISTRY = "tests.scenarios.cli.app:registry"


def perdure_script() -> str:
    """The ``perdure`` console script installed beside this interpreter."""
    beside = Path(sys.executable).parent / "perdure"
    if beside.exists():
        return str(beside)
    found = shutil.which("perdure")
    assert found, "the perdure console script is not installed (pip install -e .)"
    return found


@dataclass
class Cli:
    """Runs ``perdure ARGS`` against one server; the environment names no URL or token."""

    url: str

    def __call__(
        self, *args: str, url: bool = True, env: dict[str, str] | None = None, **options: Any
    ) -> subprocess.CompletedProcess[str]:
        base = {
            k: v for k, v in os.environ.items() if k not in ("PERDURE_URL", "PERDURE_ADMIN_TOKEN")
        }
        command = [perdure_script(), *args, *(["--url", self.url] if url else [])]
        return subprocess.run(
            command,
            cwd=REPO_ROOT,
            env={**base, **(env or {})},
            capture_output=True,
            text=True,
            timeout=CLI_TIMEOUT,
            check=False,
            **options,
        )

    def ok(self, *args: str, **options: Any) -> str:
        """Run; the command must succeed; its stdout."""
        return self.expect(0, *args, **options).stdout

    def fails(self, *args: str, status: int = 1, **options: Any) -> str:
        """Run; the command must exit with ``status`` (1: refused); its stderr."""
        return self.expect(status, *args, **options).stderr

    def expect(self, status: int, *args: str, **options: Any) -> subprocess.CompletedProcess[str]:
        """Run; the command must exit with ``status``."""
        done = self(*args, **options)
        assert done.returncode == status, (
            f"perdure {' '.join(args)} -> {done.returncode}, not {status}:\n{done.stderr}"
        )
        return done


def wait_for(
    predicate: Callable[[], Any], *, timeout: float = 30.0, what: str = "condition"
) -> Any:
    """Poll ``predicate`` until it returns something truthy (which is returned)."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.1)


def start_server(data: Path, work: Path, extra_args: list[str] | None = None) -> ServerProcess:
    """A ``perdure serve`` of the admin CLI app; its steps use ``work``."""
    work.mkdir(parents=True, exist_ok=True)
    server = ServerProcess(
        REGISTRY, data, env={DIRECTORY_VARIABLE: str(work)}, extra_args=extra_args
    )
    return server.start()


@pytest.fixture(scope="module")
def work_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The directory the app's steps read block files from and write run counts to."""
    return tmp_path_factory.mktemp("admin-cli-work")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, work_dir: Path) -> Iterator[ServerProcess]:
    """One server for the module's tests (each test uses keys of its own)."""
    process = start_server(tmp_path_factory.mktemp("admin-cli-data"), work_dir)
    try:
        yield process
    finally:
        process.kill()


@pytest.fixture
def cli(server: ServerProcess) -> Cli:
    """``perdure …`` against the module's server."""
    return Cli(server.url)


@pytest.fixture
def key() -> str:
    """A key no other test uses."""
    return f"k-{uuid.uuid4().hex[:10]}"
