"""The README's promises, run as a new user would run them."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.server import REPO_ROOT, ServerProcess, free_port

README = (REPO_ROOT / "README.md").read_text()


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README, flags=re.S)


@pytest.mark.timeout(300)
def test_first_command_serves_the_examples_and_shows_progress(tmp_path: Path) -> None:
    assert "bash scripts/demo" in README
    result = subprocess.run(
        [
            "bash",
            "scripts/demo",
            "--exit",
            "--port",
            str(free_port()),
            "--data",
            str(tmp_path / "data"),
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    progress = [line for line in lines if line.startswith("progress ")]
    assert "progress {'stage': 'completed', 'completed': 2, 'total': 2}" in progress
    assert "{'progress': {'stage': 'completed', 'completed': 2, 'total': 2}, 'sum': 12}" in lines
    # The cron pattern: the recurring job ran at least twice on the demo's short interval.
    runs = [int(line.split()[2].rstrip(",")) for line in lines if line.startswith("cron: runs ")]
    assert runs[0] == 0, lines
    assert runs[-1] >= 2, lines
    # Setup & teardown: open on wake, close on sleep, open again on the next wake, and
    # the server's log line for each.
    lifecycle = "setup/teardown: resource lifecycle in this server: ['open', 'close', 'open']"
    assert lifecycle in lines
    log = result.stdout + result.stderr
    assert log.count("woke: resource opened") == 2
    # Twice: the demo's goToSleep, then the server's shutdown.
    assert log.count("going to sleep: resource closed") == 2


@pytest.mark.timeout(120)
def test_quickstart_code_runs(tmp_path: Path) -> None:
    app, client, in_process = python_blocks()[:3]
    (tmp_path / "app.py").write_text(app)
    server = ServerProcess("app:registry", tmp_path / "data", env={"PYTHONPATH": str(tmp_path)})
    server.start()
    try:
        script = client.replace("http://localhost:6420", server.url)
        result = subprocess.run(
            [sys.executable, "-c", script],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        server.terminate()
    assert result.returncode == 0, result.stderr
    # The handler subscribed before the call, over the same connection: it always fires.
    assert result.stdout.splitlines()[:2] == ["changed 5", "5"]
    assert "{'sum': 7}" in result.stdout.splitlines()

    # The in-process script runs exactly as written, next to app.py.
    result = subprocess.run(
        [sys.executable, "-c", in_process],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().splitlines() == ["1"]


def test_every_python_block_is_run_by_a_test() -> None:
    # app.py, its client, the in-process script, the typed-models script: a new block
    # needs a test here before it can be promised to run.
    assert len(python_blocks()) == 4


@pytest.mark.timeout(120)
def test_typed_models_script_runs_as_written(tmp_path: Path) -> None:
    typed = python_blocks()[3]
    assert "ActorTestEnv" in typed
    (tmp_path / "tracker.py").write_text(typed)
    result = subprocess.run(
        [sys.executable, "tracker.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "{'completed': 0, 'total': 0}",
        "{'completed': 3, 'total': 0}",
    ]
    expected = "This prints `{'completed': 0, 'total': 0}`, then `{'completed': 3, 'total': 0}`."
    assert expected in README


def _section(title: str) -> str:
    start = README.index(f"## {title}\n")
    end = README.find("\n## ", start + 1)
    return README[start : end if end != -1 else None]


@pytest.mark.timeout(120)
def test_seeing_inside_commands_run_against_the_quickstart(tmp_path: Path) -> None:
    app, client = python_blocks()[:2]
    (tmp_path / "app.py").write_text(app)
    server = ServerProcess("app:registry", tmp_path / "data", env={"PYTHONPATH": str(tmp_path)})
    server.start()
    try:
        script = client.replace("http://localhost:6420", server.url)
        subprocess.run([sys.executable, "-c", script], cwd=tmp_path, check=True, timeout=60)
        [block] = re.findall(r"```sh\n(.*?)```", _section("Seeing inside"), flags=re.S)
        outputs = []
        for line in block.strip().splitlines():
            command = line.split("#", 1)[0].split()
            assert command[0] == "perdure"
            result = subprocess.run(
                [sys.executable, "-m", "perdure", *command[1:]],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=30,
                env={**os.environ, "PERDURE_URL": server.url},
            )
            assert result.returncode == 0, result.stderr
            outputs.append(result.stdout)
    finally:
        server.terminate()
    inspected, status = outputs
    assert "jobs" in inspected
    assert "apply" in inspected  # the workflow history shows the step the job went through
    assert "running" in status
