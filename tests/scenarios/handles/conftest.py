"""The implementations of the one handle API the suite runs against.

``run_scenario`` runs one scenario (``async def scenario(client, key)``) with a client of
each implementation:

- ``aio-json``, ``aio-cbor``, ``aio-bare``: :func:`perdure.client.create_client` against
  a real ``perdure serve`` process (one per test session);
- ``sync``: the blocking :class:`perdure.client.Client` against the same server;
- ``local``: ``runtime.client()`` of an in-process runtime on a memory store;
- ``actor``: ``c.client()`` inside an action of the ``host`` actor of that runtime,
  which calls the other actors (the scenario's assertions run inside the actor; a
  failure comes back with its traceback).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from perdure import ActorRuntime
from perdure.client import Client, create_client
from perdure.store import MemoryStore
from tests.scenarios.handles.sync_adapter import SyncClientAdapter
from tests.support.apps import handles as app
from tests.support.server import ServerProcess

Scenario = Callable[[Any, str], Awaitable[None]]
IMPLEMENTATIONS = ["aio-json", "aio-cbor", "aio-bare", "sync", "local", "actor"]
NETWORK = {"aio-json", "aio-cbor", "aio-bare", "sync"}


@pytest.fixture(scope="session")
def handles_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """``perdure serve tests.support.apps.handles:registry`` for the whole session."""
    data: Path = tmp_path_factory.mktemp("handles-data")
    process = ServerProcess(
        "tests.support.apps.handles:registry", data, extra_args=["--log-level", "warning"]
    )
    process.start()
    try:
        yield process
    finally:
        process.terminate()


@pytest.fixture(params=IMPLEMENTATIONS)
def implementation(request: pytest.FixtureRequest) -> str:
    """The name of the implementation under test."""
    name: str = request.param
    return name


@pytest.fixture
def key(request: pytest.FixtureRequest) -> str:
    """An actor key no other test uses (the server is shared)."""
    return f"{request.node.name}-{time.monotonic_ns()}".replace(",", "-")


@pytest.fixture
def run_scenario(
    request: pytest.FixtureRequest, implementation: str, key: str
) -> Callable[[Scenario], Awaitable[None]]:
    """``await run_scenario(scenario)`` with the implementation under test."""

    async def run(scenario: Scenario) -> None:
        if implementation in NETWORK:
            server: ServerProcess = request.getfixturevalue("handles_server")
            await _over_network(implementation, server.url, scenario, key)
            return
        async with ActorRuntime(app.registry, MemoryStore()) as runtime:
            await _in_process(implementation, runtime, scenario, key)

    return run


async def _in_process(
    implementation: str, runtime: ActorRuntime, scenario: Scenario, key: str
) -> None:
    if implementation == "local":
        await scenario(runtime.client(), key)
        return
    app.SCENARIOS[scenario.__name__] = scenario
    outcome = await runtime.client().host.get_or_create([key]).run(scenario.__name__, key)
    assert outcome == "ok", f"the scenario failed inside the actor:\n{outcome}"


async def _over_network(implementation: str, url: str, scenario: Scenario, key: str) -> None:
    if implementation == "sync":
        client = Client(url)
        try:
            await scenario(SyncClientAdapter(client), key)
        finally:
            await asyncio.to_thread(client.close)
        return
    encoding = implementation.removeprefix("aio-")
    async with create_client(url, encoding=encoding) as aio_client:
        await scenario(aio_client, key)
