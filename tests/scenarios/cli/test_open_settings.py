"""``perdure serve`` names at startup each setting that leaves a route open beyond this
machine (docs/edge.md, the security model), and says nothing on the safe defaults."""

from __future__ import annotations

from pathlib import Path

from tests.support.server import ServerProcess

REGISTRY = "tests.scenarios.edge.access_app:registry"


def _startup_log(data: Path, *args: str) -> str:
    server = ServerProcess(REGISTRY, data, extra_args=["--log-level", "info", *args]).start()
    try:
        server.terminate()
    finally:
        server.kill()
    return server.log()


def test_a_server_open_to_the_network_says_so(tmp_path: Path) -> None:
    log = _startup_log(tmp_path / "open", "--host", "0.0.0.0", "--cors-origin", "*")
    warnings = [line for line in log.splitlines() if "WARNING" in line and "open:" in line]
    assert len(warnings) == 2, log
    assert "--host 0.0.0.0 with no --token" in warnings[0]
    assert "--cors-origin *" in warnings[1]


def test_the_defaults_say_nothing(tmp_path: Path) -> None:
    log = _startup_log(tmp_path / "quiet")
    assert "serving tests.scenarios.edge.access_app:registry" in log
    assert "open:" not in log
