"""The slow-client flags of ``perdure serve`` (``perdure.cli.serve_options``): flag, then
environment variable, then default (over a real server: tests/scenarios/edge)."""

from __future__ import annotations

import pytest

from perdure.cli.app import _parser
from perdure.cli.loading import CliError
from perdure.cli.serve_options import slow_client_limits
from perdure.server.edge.slow_clients import SlowClientLimits


def _limits(*argv: str) -> SlowClientLimits:
    return slow_client_limits(_parser().parse_args(["serve", "app:registry", *argv]))


def test_the_defaults() -> None:
    assert _limits() == SlowClientLimits(
        header_timeout=10.0, body_timeout=30.0, keep_alive_timeout=5.0
    )


def test_a_flag_wins_over_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERDURE_HEADER_TIMEOUT", "2.5")
    monkeypatch.setenv("PERDURE_BODY_TIMEOUT", "9")
    monkeypatch.setenv("PERDURE_KEEP_ALIVE_TIMEOUT", "")  # empty: the default
    assert _limits("--body-timeout", "7") == SlowClientLimits(
        header_timeout=2.5, body_timeout=7.0, keep_alive_timeout=5.0
    )


def test_bad_seconds_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SystemExit):
        _limits("--keep-alive-timeout", "0")
    monkeypatch.setenv("PERDURE_BODY_TIMEOUT", "soon")
    with pytest.raises(CliError, match="PERDURE_BODY_TIMEOUT must be a positive number"):
        _limits()
