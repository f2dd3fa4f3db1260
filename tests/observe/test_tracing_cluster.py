"""A trace crosses nodes: an action forwarded to the node that owns its actor is traced
in the caller's trace (two in-process nodes on one store, see
tests/runtime/cluster/test_member.py)."""

from __future__ import annotations

import asyncio
import contextvars

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from perdure.observe.tracing import enable_tracing
from perdure.server import create_app
from perdure.server.cluster.peers import HttpPeers
from tests.runtime.cluster.test_member import Nodes, _make_store

pytestmark = pytest.mark.timeout(30)

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"


class _Isolated(httpx.AsyncBaseTransport):
    """An in-process transport whose app runs in a fresh context, as across a network:
    nothing the caller's task holds (its current span) reaches the other node."""

    def __init__(self, inner: httpx.AsyncBaseTransport) -> None:
        self._inner = inner

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        task = asyncio.get_running_loop().create_task(
            self._inner.handle_async_request(request), context=contextvars.Context()
        )
        return await task


async def test_a_forwarded_action_joins_the_callers_trace() -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    make_store, cleanup = _make_store("memory")
    nodes = Nodes(make_store, ttl_ms=3000)
    for runtime in nodes.runtimes.values():
        enable_tracing(runtime, provider)
    await nodes.start()
    try:
        a, b = nodes["a"], nodes["b"]
        await a.client().counter.get_or_create(["traced"]).add(1)  # it lives on a
        assert a.cluster is not None
        assert b.cluster is not None
        a_peers = a.cluster.peers
        node_a = _Isolated(httpx.ASGITransport(app=create_app(a)))
        a.cluster.peers = a_peers
        app = create_app(b)
        mounts: dict[str, httpx.AsyncBaseTransport] = {"http://node-a": node_a}
        b.cluster.peers = HttpPeers(b.cluster, mounts=mounts, observer=b.observers)
        exporter.clear()
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://node-b"
        ) as http:
            response = await http.post(
                "/gateway/counter/action/add?rvt-method=getOrCreate&rvt-key=traced",
                json={"args": [2]},
                headers={"traceparent": TRACEPARENT},
            )
        assert response.status_code == 200, response.text
        actions = [s for s in exporter.get_finished_spans() if s.name == "action counter.add"]
        assert len(actions) == 1  # run once, on a
        assert actions[0].context is not None
        assert format(actions[0].context.trace_id, "032x") == TRACE_ID
        assert a.is_live((await a.dispatch.find("counter", ["traced"])).actor_id)  # type: ignore[union-attr]
    finally:
        await nodes.stop()
        cleanup()
