"""The layer rules of pyproject.toml hold (import-linter), so a wrong import fails the build."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _lint_imports() -> list[str]:
    # The script installed beside this interpreter (the test extra brings it).
    found = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert found is not None, "import-linter is not installed: pip install -e '.[test]'"
    return [found]


def test_import_contracts_are_kept() -> None:
    result = subprocess.run(_lint_imports(), cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "Contracts: 7 kept, 0 broken." in result.stdout, result.stdout[-2000:]


def test_a_wrong_import_breaks_a_contract(tmp_path: Path) -> None:
    """The contracts can fail: a copy of the package whose server imports the store."""
    copy = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "perdure", copy / "perdure")
    bad = copy / "perdure" / "server" / "gateway" / "routes.py"
    bad.write_text(bad.read_text() + "\nfrom perdure.store.base import Store  # noqa\n")
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
    assert "perdure.server.gateway.routes -> perdure.store.base" in result.stdout
