"""The pytest plugin, as a user gets it: pytest run in a fresh directory (installing perdure
registered the plugin), on test files that use its fixtures."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

USER_TESTS = """
from datetime import timedelta

import pytest

from perdure import actor, setup


def _add(c, n):
    c.state["n"] += n


def _n(c):
    return c.state["n"]


counter = setup(use={"counter": actor(state={"n": 0}, actions={"add": _add, "n": _n})})
other = setup(use={"other": actor(state={}, actions={"hello": lambda c: "hi"})})

pytestmark = [pytest.mark.perdure(registry=counter), pytest.mark.asyncio]


async def test_the_marker_gives_the_registry(perdure_env):
    handle = perdure_env.client.counter.get_or_create("a")
    await handle.add(2)
    before = perdure_env.now
    await perdure_env.advance(timedelta(hours=1))
    assert perdure_env.now - before == timedelta(hours=1)
    assert await handle.n() == 2


async def test_the_store_is_the_chosen_one(perdure_env, request):
    assert type(perdure_env.store).__name__ == request.config.getoption("expected_store")


@pytest.mark.perdure(store="sqlite")
async def test_a_marker_chooses_sqlite(perdure_env):
    assert type(perdure_env.store).__name__ == "SQLiteStore"


class TestOverridden:
    @pytest.fixture
    def perdure_registry(self):
        return other

    async def test_an_overriding_fixture_wins(self, perdure_env):
        assert await perdure_env.client.other.get_or_create("x").hello() == "hi"
"""

CONFTEST = """
def pytest_addoption(parser):
    parser.addoption("--expected-store", default="MemoryStore")
"""

NO_REGISTRY = """
import pytest


@pytest.mark.asyncio
async def test_without_a_registry(perdure_env):
    pass
"""


def run_pytest(where: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args],
        cwd=where,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_user.py").write_text(textwrap.dedent(USER_TESTS))
    return tmp_path


@pytest.mark.parametrize("mode", ["strict", "auto"])
def test_the_fixtures_work_in_either_asyncio_mode(project: Path, mode: str) -> None:
    result = run_pytest(project, "-o", f"asyncio_mode={mode}")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout


def test_the_store_option_chooses_sqlite(project: Path) -> None:
    result = run_pytest(project, "--perdure-store=sqlite", "--expected-store=SQLiteStore")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "4 passed" in result.stdout


def test_a_missing_registry_says_how_to_give_one(tmp_path: Path) -> None:
    (tmp_path / "test_nothing.py").write_text(NO_REGISTRY)
    result = run_pytest(tmp_path)
    assert result.returncode != 0
    assert "@pytest.mark.perdure(registry=...)" in result.stdout
    assert "perdure_registry" in result.stdout


def test_the_marker_is_registered(tmp_path: Path) -> None:
    result = run_pytest(tmp_path, "--markers")
    assert result.returncode == 0, result.stderr
    assert "@pytest.mark.perdure(registry=None" in result.stdout


def test_loading_the_plugin_loads_no_engine_module() -> None:
    probe = (
        "import sys, perdure.testing.plugin\n"
        "engine = [m for m in sys.modules if m.startswith(('perdure.runtime', "
        "'perdure.store', 'perdure.workflows'))]\n"
        "print(engine)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
