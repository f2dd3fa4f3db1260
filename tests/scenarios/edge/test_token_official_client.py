"""The official RivetKit client (tests/scenarios/compat/access.ts) against a server with a token:
``createClient({ token })`` over HTTP, the management API and WebSocket, and the
``can_subscribe``/``can_publish`` hooks. Needs Node.js and ``npm ci`` in tests/scenarios/compat."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scenarios.compat.runner import node_or_skip, run_program

from .access_server import TOKEN, access_server


@pytest.mark.parametrize("encoding", ["json", "cbor", "bare"])
def test_official_client_with_a_token(tmp_path: Path, encoding: str) -> None:
    node_or_skip()
    with access_server(tmp_path / "data") as server:
        run = run_program("access.ts", [server.url, encoding, TOKEN], timeout=60)
    report = run.report()
    assert run.done is not None, report
    assert not run.failed, report
    assert len(run.checks) == 8, report
