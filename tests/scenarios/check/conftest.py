"""A store written by a real ``perdure serve`` of the old code, and the real ``perdure
check`` command to run against it (subprocesses, every wait bounded)."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from perdure.client import Client
from tests.scenarios.check.flows import DIRECTORY_VARIABLE
from tests.scenarios.cli.conftest import perdure_script
from tests.support.server import REPO_ROOT, ServerProcess

T = TypeVar("T")

CHECK_TIMEOUT = 120.0
WAIT_TIMEOUT = 20.0


def wait_for(condition: Callable[[], Any], what: str) -> None:
    deadline = time.monotonic() + WAIT_TIMEOUT
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {WAIT_TIMEOUT} s waiting for {what}")
        time.sleep(0.02)


def runs(work: Path, key: str) -> list[str]:
    """The step bodies that ran for ``key``: ``<version> <location>`` lines."""
    path = work / f"runs-{key}"
    return path.read_text().splitlines() if path.exists() else []


def _app(registry: str) -> str:
    """``flows.REGISTRY``, or a ``module:registry`` given whole."""
    return registry if ":" in registry else f"tests.scenarios.check.flows:{registry}"


@dataclass
class Stored:
    """The data directory the old code wrote, and the directory its step bodies mark."""

    data: Path
    work: Path

    def check(self, registry: str, *args: str, store: str | None = None) -> Any:
        """``perdure check tests.scenarios.check.flows:REGISTRY`` on this store; the process."""
        where = ["--store", store] if store else ["--data", str(self.data)]
        return subprocess.run(
            [perdure_script(), "check", _app(registry), *where, *args],
            cwd=REPO_ROOT,
            env={**os.environ, DIRECTORY_VARIABLE: str(self.work)},
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT,
            check=False,
        )

    def check_json(self, registry: str, *args: str, store: str | None = None) -> Any:
        """The ``--json`` report and the exit status."""
        done = self.check(registry, "--json", *args, store=store)
        assert done.returncode in (0, 1), done.stderr
        return json.loads(done.stdout), done.returncode

    def snapshot(self) -> dict[str, str]:
        """Every file of both directories by content hash (the lock file aside: the check
        holds it while it reads, writing its name there, as any holder does)."""
        files = [*self.data.iterdir(), *self.work.iterdir()]
        return {
            str(path): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in files
            if path.is_file() and not path.name.endswith(".lock")
        }


def drive_old_code(url: str, work: Path) -> None:
    """Bring the stored workflows to their points: waiting on a receive, mid-loop,
    sleeping, finished, failed by raising after its compensation; plus an actor of a
    type the new code drops, and a plain actor."""
    with Client(url) as client:
        client.job.get_or_create("waiting").ping()
        client.quick.get_or_create("done").ping()
        client.legacy.get_or_create("old").ping()
        client.counter.get_or_create("plain").ping()
        rejected = client.order.get_or_create("rejected")
        rejected.ping()
        midloop = client.job.get_or_create("midloop")
        for iteration in (1, 2):
            midloop.send("go", "next")
            wait_for(
                lambda i=iteration: f"A loop/~{i}/note" in runs(work, "midloop"),
                f"midloop at iteration {iteration}",
            )
        client.job.get_or_create("sleeping").send("go", "stop")
        wait_for(lambda: rejected.workflow_status()["status"] == "failed", "rejected failed")
    wait_for(lambda: "A mid" in runs(work, "sleeping"), "sleeping past its loop")
    wait_for(lambda: "A loop/~0/note" in runs(work, "waiting"), "waiting at its receive")
    wait_for(lambda: "A b" in runs(work, "done"), "quick finished")
    wait_for(lambda: "A start" in runs(work, "old"), "legacy waiting")


def stored_locations(database: Path) -> dict[str, set[str]]:
    """Locations in the stored history by actor key (read without touching the file)."""
    db = sqlite3.connect(f"{database.as_uri()}?immutable=1", uri=True)
    try:
        rows = db.execute(
            "SELECT a.key, h.location FROM workflow_history h JOIN actors a USING (actor_id)"
        ).fetchall()
    finally:
        db.close()
    found: dict[str, set[str]] = {}
    for key, location in rows:
        found.setdefault(str(key), set()).add(location)
    return found


def fill_store(
    registry: str,
    stored: Stored,
    drive: Callable[[str, Path], T],
    store_args: Sequence[str] = (),
) -> T:
    """Serve ``flows.<registry>`` (the old code) on ``stored``'s data directory (or the
    store ``store_args`` name), ``drive(url, work)`` it, then stop it gracefully;
    what ``drive`` returned."""
    server = ServerProcess(
        _app(registry),
        stored.data,
        env={DIRECTORY_VARIABLE: str(stored.work)},
        extra_args=list(store_args),
    ).start()
    try:
        return drive(server.url, stored.work)
    finally:
        # A graceful stop lets each workflow reach its wait (the sleep's entry is
        # written then) before the actors go to sleep.
        assert server.terminate() == 0, server.log()


@pytest.fixture(scope="package")
def stored(tmp_path_factory: pytest.TempPathFactory) -> Stored:
    root = tmp_path_factory.mktemp("check")
    data, work = root / "data", root / "work"
    work.mkdir()
    fill_store("old", Stored(data, work), drive_old_code)
    locations = stored_locations(data / "perdure.db")
    assert "nap" in locations["sleeping"], locations
    assert "loop/~2/note" in locations["midloop"], locations
    return Stored(data, work)
