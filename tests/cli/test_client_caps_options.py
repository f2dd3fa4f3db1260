"""The per-client caps flags of ``perdure serve`` (``perdure.cli.serve_options``): flag,
then environment variable, then default (over a real server:
tests/scenarios/edge/test_client_caps.py)."""

from __future__ import annotations

import pytest

from perdure.cli.app import _parser
from perdure.cli.loading import CliError
from perdure.cli.serve_options import client_caps
from perdure.server.edge.client_caps import ClientCaps


def _caps(*argv: str) -> ClientCaps:
    return client_caps(_parser().parse_args(["serve", "app:registry", *argv]))


def test_the_defaults() -> None:
    assert _caps() == ClientCaps(max_streams=64, max_websockets=256, creation_rate=0)


def test_a_flag_wins_over_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERDURE_MAX_STREAMS_PER_CLIENT", "8")
    monkeypatch.setenv("PERDURE_MAX_WEBSOCKETS_PER_CLIENT", "0")  # no cap
    monkeypatch.setenv("PERDURE_CREATION_RATE_PER_CLIENT", "2.5")
    monkeypatch.setenv("PERDURE_CREATION_BURST_PER_CLIENT", "")  # empty: the default
    caps = _caps("--max-streams-per-client", "3", "--creation-burst-per-client", "10")
    assert caps == ClientCaps(max_streams=3, max_websockets=0, creation_rate=2.5, creation_burst=10)
    assert _caps("--creation-rate-per-client", "0.5").burst == 1


def test_bad_values_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    for argv in (
        ("--max-streams-per-client", "-1"),
        ("--max-websockets-per-client", "many"),
        ("--creation-rate-per-client", "inf"),
        ("--creation-burst-per-client", "1.5"),
    ):
        with pytest.raises(SystemExit):
            _caps(*argv)
    monkeypatch.setenv("PERDURE_CREATION_RATE_PER_CLIENT", "fast")
    with pytest.raises(CliError, match="PERDURE_CREATION_RATE_PER_CLIENT must be a number"):
        _caps()
