"""The container recipes (deploy/): what the image and the compose files run agrees, and the
HAProxy file is valid. Running them for real is scripts/smoke_recipes.py's job (CI runs it:
the same RUN lines and commands, in a clean venv, with PostgreSQL and HAProxy)."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parent.parent


def load_recipes() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "smoke_recipes", REPO / "scripts" / "smoke_recipes.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["smoke_recipes"] = module
    spec.loader.exec_module(module)
    return module


recipes = load_recipes()


def dockerfile() -> list[tuple[str, str]]:
    return recipes.instructions((REPO / "deploy" / "Dockerfile").read_text())


def image_cmd() -> list[str]:
    return [recipes.exec_form(args) for keyword, args in dockerfile() if keyword == "CMD"][-1]


def test_the_dockerfile_runs_unprivileged_and_checks_its_health() -> None:
    keywords = [keyword for keyword, _ in dockerfile()]
    assert keywords.count("FROM") == 2  # a build stage, then the runtime image
    users = [args for keyword, args in dockerfile() if keyword == "USER"]
    assert users == ["perdure"]
    health = [args for keyword, args in dockerfile() if keyword == "HEALTHCHECK"]
    assert len(health) == 1
    assert "http://127.0.0.1:6420/health" in health[0]
    cmd = image_cmd()
    assert cmd[:3] == ["perdure", "serve", "examples.app:registry"]
    assert cmd[cmd.index("--port") + 1] == "6420"
    assert cmd[cmd.index("--data") + 1] == "/data"


def test_compose_files_run_the_image_command_and_require_a_token() -> None:
    single = recipes.compose("compose.yaml", {"PERDURE_TOKEN": "t"})["services"]["perdure"]
    assert single["command"] == image_cmd()
    with pytest.raises(AssertionError, match="PERDURE_TOKEN"):
        recipes.compose("compose.yaml", {})
    cluster = recipes.compose(
        "compose.cluster.yaml", {"PERDURE_TOKEN": "t", "POSTGRES_PASSWORD": "p"}
    )
    nodes = {
        name: s for name, s in cluster["services"].items() if s.get("image") == "perdure:latest"
    }
    assert sorted(nodes) == ["node-a", "node-b", "node-c"]
    for name, service in nodes.items():
        command = service["command"]
        assert command[:3] == image_cmd()[:3]
        assert command[command.index("--node-id") + 1] == name
        assert command[command.index("--advertise") + 1] == f"http://{name}:6421"
        assert command[command.index("--store") + 1].startswith(
            "postgresql://perdure@postgres:5432/"
        )
        assert service["environment"]["PERDURE_TOKEN"] == "t"
        assert service["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_haproxy_file_balances_the_three_nodes_and_is_valid(tmp_path: Path) -> None:
    config = (REPO / "deploy" / "haproxy.cfg").read_text()
    servers = [
        line.split()[1:3] for line in config.splitlines() if line.strip().startswith("server ")
    ]
    assert servers == [
        ["node-a", "node-a:6421"],
        ["node-b", "node-b:6421"],
        ["node-c", "node-c:6421"],
    ]
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not Path(haproxy).exists():
        pytest.skip("HAProxy is not installed")
    path = tmp_path / "haproxy.cfg"
    path.write_text(config)
    check = subprocess.run(
        [haproxy, "-c", "-f", str(path)], capture_output=True, text=True, timeout=15
    )
    assert check.returncode == 0, check.stdout + check.stderr


def test_dockerignore_keeps_local_folders_out_of_the_build_context() -> None:
    ignore = recipes.ignored_by(recipes.dockerignore())
    names = [".git", ".venv", "src", "docs", "node_modules", ".perdure", "README.md"]
    assert ignore(str(REPO), names) == {".git", ".venv", "node_modules", ".perdure"}
    compat = REPO / "tests" / "scenarios" / "compat"
    assert ignore(str(compat), ["node_modules", "suite.ts"]) == {"node_modules"}
