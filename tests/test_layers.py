"""The layer rules of pyproject.toml hold (import-linter), so a wrong import fails the build."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports() -> list[str]:
    # The script installed beside this interpreter (the test extra brings it).
    found = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert found is not None, "import-linter is not installed: pip install -e '.[test]'"
    return [found]


def test_import_contracts_are_kept() -> None:
    result = subprocess.run(_lint_imports(), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    count = len(contracts["contracts"])
    assert count >= 10  # the layers, the runtime's rooms and face, the seams
    assert f"Contracts: {count} kept, 0 broken." in result.stdout, result.stdout[-2000:]


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # The server may not reach the store.
        (
            "server/gateway/routes.py",
            "from perdure.store.base import Store",
            "perdure.server.gateway.routes -> perdure.store.base",
        ),
        # The server reaches the runtime through its face only.
        (
            "server/gateway/routes.py",
            "from perdure.runtime.actor.instance import ActorInstance",
            "perdure.server.gateway.routes -> perdure.runtime.actor.instance",
        ),
        # Inside the runtime, the kernel is the bottom room.
        (
            "runtime/kernel/tasks.py",
            "from perdure.runtime.actor import instance",
            "perdure.runtime.kernel.tasks -> perdure.runtime.actor",
        ),
        # The parts of an actor do not know each other, even for type checkers.
        (
            "runtime/events/log.py",
            "from perdure.runtime.queues.actor_queue import ActorQueue",
            "perdure.runtime.events.log -> perdure.runtime.queues.actor_queue",
        ),
    ],
)
def test_a_wrong_import_breaks_a_contract(
    tmp_path: Path, module: str, line: str, broken: str
) -> None:
    """The contracts can fail: a copy of the package with one wrong import."""
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "perdure", copy / "perdure")
    bad = copy / "perdure" / module
    bad.write_text(bad.read_text() + f"\n{line}  # noqa\n")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    result = subprocess.run(
        _lint_imports(),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(copy), "PATH": str(Path(sys.executable).parent)},
    )
    assert result.returncode != 0
    assert broken in result.stdout, result.stdout[-3000:]
