"""The settings perdure serve names at startup as open beyond this machine
(perdure.cli.exposure); over a real server: tests/scenarios/cli/test_open_settings.py."""

from __future__ import annotations

import pytest

from perdure.cli.exposure import Exposure, open_settings


def _exposure(**changes: object) -> Exposure:
    settings: dict[str, object] = {
        "host": "127.0.0.1",
        "token": False,
        "admin_token": False,
        "admin": True,
    }
    settings.update(changes)
    return Exposure(**settings)  # type: ignore[arg-type]


@pytest.mark.parametrize("host", ["127.0.0.1", "::1", "[::1]", "localhost", "127.0.0.2"])
def test_the_defaults_on_loopback_leave_nothing_open(host: str) -> None:
    assert open_settings(_exposure(host=host)) == []


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.0.0.5", "app.internal"])
def test_a_reachable_host_without_a_token_is_named(host: str) -> None:
    (sentence,) = open_settings(_exposure(host=host))
    assert f"--host {host} with no --token" in sentence
    assert open_settings(_exposure(host=host, token=True, admin_token=True)) == []


def test_the_client_token_opening_the_admin_surface_is_named() -> None:
    (sentence,) = open_settings(_exposure(host="0.0.0.0", token=True))
    assert "no --admin-token" in sentence
    assert open_settings(_exposure(host="0.0.0.0", token=True, admin=False)) == []


def test_any_origin_and_wide_trusted_proxies_are_named() -> None:
    found = open_settings(
        _exposure(cors_origins=["*"], proxy_headers=True, trusted_proxies=["0.0.0.0/0"])
    )
    assert len(found) == 2
    assert "--cors-origin *" in found[0]
    assert "--proxy-headers trusts" in found[1]
    named = _exposure(proxy_headers=True, trusted_proxies=["127.0.0.1", "10.0.0.0/8"])
    assert open_settings(named) == []
    assert open_settings(_exposure(cors_origins=["https://app.example"])) == []
