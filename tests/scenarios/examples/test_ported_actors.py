"""Ported code, seen from the network: what a client of a real ``perdure serve`` gets when a
literal port trips (the in-process half is tests/test_porting.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from perdure.client import create_client
from perdure.client._errors import ActorError
from tests.support.porting import fresh_porting_warnings  # noqa: F401  (autouse)
from tests.support.server import ServerProcess

WAIT = 10.0


async def test_a_camel_case_keyword_in_on_create_reaches_a_network_client_named(
    tmp_path: Path,
) -> None:
    server = ServerProcess("tests.support.apps.porting:registry", tmp_path / "data").start()
    try:
        async with create_client(server.url) as client:
            handle = client.trapCron.get_or_create(["k"])
            with pytest.raises(ActorError) as caught:
                await asyncio.wait_for(handle.getState(), WAIT)
    finally:
        server.terminate()
    error = caught.value
    assert (error.group, error.code) == ("api", "unknown_argument")
    assert error.message == (
        "cron.every(): unknown argument `maxHistory`; did you mean `max_history`?"
    )
