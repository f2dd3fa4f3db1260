"""docs/testing.md's examples, run as a reader would run them: saved under the names they
give, the scripts run with python, the tests with pytest (the plugin installed)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.docs import named_files, python_blocks
from tests.support.server import REPO_ROOT

DOC = (REPO_ROOT / "docs" / "testing.md").read_text()
BLOCKS = python_blocks(DOC)
FILES = named_files(BLOCKS)


def run(args: list[str], where: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=where, capture_output=True, text=True, timeout=120, env=None)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for name, source in FILES.items():
        (tmp_path / name).write_text(source)
    return tmp_path


def test_every_block_is_python_and_the_named_ones_are_all_there() -> None:
    for block in BLOCKS:  # fragments too: `await` at the top level is allowed there
        compile(block, "<docs/testing.md>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    assert set(FILES) == {
        "reminders.py",
        "check_reminders.py",
        "check_heartbeat.py",
        "test_reminders.py",
        "conftest.py",
    }


@pytest.mark.timeout(120)
@pytest.mark.parametrize("script", ["check_reminders.py", "check_heartbeat.py"])
def test_the_scripts_run(project: Path, script: str) -> None:
    result = run([sys.executable, script], project)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.timeout(120)
def test_the_pytest_examples_pass_with_the_plugin(project: Path) -> None:
    result = run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "asyncio_mode=auto",
            "test_reminders.py",
        ],
        project,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "3 passed" in result.stdout
