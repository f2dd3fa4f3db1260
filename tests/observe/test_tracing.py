"""OpenTelemetry traces, checked with the SDK's in-memory exporter.

The app runs in process on a real SQLite file: over ``httpx.ASGITransport`` for HTTP,
and on a real uvicorn server on loopback for the WebSocket test. The ``relay`` workflow
waits on a manual clock, so a test can stop the runtime while a traced message waits in
the queue, or after the workflow received it and before the step that follows.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from websockets.asyncio.client import connect

from perdure import ActorRuntime
from perdure.observe.tracing import TracingObserver, enable_tracing
from perdure.protocol.codec import decode_to_client, encode_to_server
from perdure.protocol.messages import ActionRequest, ActionResponse, Init
from perdure.runtime.kernel.clock import Clock, ManualClock
from perdure.server import create_app
from perdure.store import SQLiteStore
from perdure.telemetry import Observers
from tests.support.apps.tracing import registry
from tests.support.server import free_port
from tests.support.wait import eventually

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
LOOPBACK = ("127.0.0.1", 123)
WAIT = 10.0


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> TracerProvider:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


@dataclass
class Rig:
    runtime: ActorRuntime
    http: httpx.AsyncClient


@asynccontextmanager
async def serving(
    path: Path, provider: TracerProvider, clock: Clock | None = None
) -> AsyncIterator[Rig]:
    """A traced runtime on ``path`` and an HTTP client of its app (runtime stopped after)."""
    runtime = ActorRuntime(registry, SQLiteStore(path), clock=clock)
    enable_tracing(runtime, provider)
    transport = httpx.ASGITransport(app=create_app(runtime, metrics=False), client=LOOPBACK)
    async with runtime, httpx.AsyncClient(transport=transport, base_url="http://x") as http:
        yield Rig(runtime, http)


def gateway(name: str, route: str, key: str) -> str:
    return f"/gateway/{name}/{route}?rvt-method=getOrCreate&rvt-key={key}"


async def send_job(http: httpx.AsyncClient, key: str, value: int, name: str = "relay") -> None:
    body = {"name": "jobs", "body": {"value": value}, "wait": False}
    headers = {"traceparent": TRACEPARENT}
    response = await http.post(gateway(name, "queue/jobs", key), json=body, headers=headers)
    assert response.status_code == 200, response.text


def named(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [span for span in exporter.get_finished_spans() if span.name == name]


def hex_trace(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.trace_id:032x}"


def parent_id(span: ReadableSpan) -> str | None:
    return None if span.parent is None else f"{span.parent.span_id:016x}"


def span_id(span: ReadableSpan) -> str:
    assert span.context is not None
    return f"{span.context.span_id:016x}"


async def until_spans(
    exporter: InMemorySpanExporter, name: str, count: int = 1, *, tick: Callable[[], Any] = list
) -> list[ReadableSpan]:
    """Wait (bounded) until ``count`` spans called ``name`` ended; ``tick`` runs each poll."""

    def enough() -> bool:
        tick()
        return len(named(exporter, name)) >= count

    await eventually(enough, timeout=WAIT, interval=0.01, what=f"{count} span(s) {name!r}")
    return named(exporter, name)


def sent_only(exporter: InMemorySpanExporter) -> ReadableSpan:
    """The one message's send span, after a first run that applied nothing."""
    assert not named(exporter, "step relay.apply")
    [send] = named(exporter, "queue_send relay.jobs")
    return send


# --- actions ------------------------------------------------------------------------------


async def test_an_http_action_is_a_child_of_the_clients_traceparent(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with serving(tmp_path / "db", provider) as rig:
        http = rig.http
        response = await http.post(
            gateway("greeter", "action/hello", "k1"),
            json={"args": ["ann"]},
            headers={"traceparent": TRACEPARENT, "tracestate": "vendor=1"},
        )
        assert response.status_code == 200, response.text
    [action] = named(exporter, "action greeter.hello")
    assert (hex_trace(action), parent_id(action)) == (TRACE_ID, PARENT_ID)
    assert action.parent is not None
    assert action.parent.is_remote
    assert action.kind == SpanKind.SERVER
    assert action.status.status_code == StatusCode.UNSET
    assert dict(action.attributes or {}) == {
        "perdure.actor.name": "greeter",
        "perdure.actor.key": ("k1",),
        "perdure.actor.id": response.headers["x-rivet-actor"],
        "perdure.action": "hello",
    }
    assert action.context is not None
    assert action.context.trace_state.get("vendor") == "1"
    # A commit the SQLite store writes inline is the child of the work it makes durable;
    # one its writer thread writes (a group of commits) starts a trace of its own.
    commits = named(exporter, "commit")
    assert commits
    assert all(span.parent is None or hex_trace(span) == TRACE_ID for span in commits)
    assert all(int((span.attributes or {})["perdure.commit.batch"]) >= 1 for span in commits)


async def test_an_action_called_by_an_action_is_its_child(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with serving(tmp_path / "db", provider) as rig:
        url = gateway("greeter", "action/introduce", "k1")
        response = await rig.http.post(url, json={"args": ["k2", "cy"]})
        assert response.json() == {"output": "hello cy"}
    [outer] = named(exporter, "action greeter.introduce")
    [inner] = named(exporter, "action greeter.hello")
    assert (hex_trace(inner), parent_id(inner)) == (hex_trace(outer), span_id(outer))
    assert inner.kind == SpanKind.INTERNAL
    assert (inner.attributes or {})["perdure.actor.key"] == ("k2",)


@pytest.mark.parametrize("header", [None, "00-not-a-trace-01", f"00-{'0' * 32}-{PARENT_ID}-01"])
async def test_without_a_valid_traceparent_an_action_starts_a_trace(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter, header: str | None
) -> None:
    headers = {} if header is None else {"traceparent": header}
    async with serving(tmp_path / "db", provider) as rig:
        http = rig.http
        url = gateway("greeter", "action/hello", "k1")
        response = await http.post(url, json={"args": ["bob"]}, headers=headers)
        assert response.status_code == 200, response.text
    [action] = named(exporter, "action greeter.hello")
    assert action.parent is None
    assert action.kind == SpanKind.INTERNAL
    assert hex_trace(action) != TRACE_ID


async def test_a_failing_action_ends_its_span_with_an_error(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with serving(tmp_path / "db", provider) as rig:
        response = await rig.http.post(gateway("greeter", "action/refuse", "k1"), json={"args": []})
        assert response.status_code == 500
    [action] = named(exporter, "action greeter.refuse")
    assert action.status.status_code == StatusCode.ERROR
    assert action.status.description == "user.refused: Not today."
    assert (action.attributes or {})["error.type"] == "user.refused"
    assert [event.name for event in action.events] == ["exception"]


async def test_a_request_refused_before_the_actor_runs_makes_no_span(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with serving(tmp_path / "db", provider) as rig:
        http = rig.http
        url = gateway("greeter", "action/hello", "k1")
        response = await http.post(url, json={"args": [1, 2]})  # wrong arity: refused early
        assert response.status_code == 400
        response = await http.post(gateway("flaky", "action/nope", "k1"), json={"args": []})
        assert response.status_code == 404
    # Refused before any actor code ran: no action span.
    assert not [span for span in exporter.get_finished_spans() if span.name.startswith("action")]


# --- WebSocket ----------------------------------------------------------------------------


async def test_a_websocket_connections_traceparent_parents_its_actions(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    runtime = ActorRuntime(registry, SQLiteStore(tmp_path / "db"))
    enable_tracing(runtime, provider)
    port = free_port()
    config = uvicorn.Config(
        create_app(runtime, metrics=False), port=port, lifespan="off", log_config=None
    )
    server = uvicorn.Server(config)
    async with runtime:
        task = asyncio.create_task(server.serve())
        try:
            await eventually(lambda: server.started, timeout=WAIT, what="uvicorn to start")
            url = f"ws://127.0.0.1:{port}/gateway/greeter/connect?rvt-method=getOrCreate&rvt-key=w"
            async with connect(
                url,
                subprotocols=["rivet", "rivet_encoding.json"],  # type: ignore[list-item]
                additional_headers={"traceparent": TRACEPARENT},
                open_timeout=WAIT,
            ) as ws:
                init = decode_to_client(await asyncio.wait_for(ws.recv(), WAIT), "json")
                assert isinstance(init, Init)
                for request_id, name in enumerate(["ann", "bob"]):
                    frame = encode_to_server(ActionRequest(request_id, "hello", [name]), "json")
                    await ws.send(frame)
                    answer = decode_to_client(await asyncio.wait_for(ws.recv(), WAIT), "json")
                    assert isinstance(answer, ActionResponse), answer
        finally:
            server.should_exit = True
            await asyncio.wait_for(task, WAIT)
    actions = named(exporter, "action greeter.hello")
    assert len(actions) == 2
    for action in actions:
        assert (hex_trace(action), parent_id(action)) == (TRACE_ID, PARENT_ID)


# --- workflow steps -----------------------------------------------------------------------


async def test_each_step_attempt_is_a_span_and_a_failed_one_is_an_error(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with serving(tmp_path / "db", provider) as rig:
        http = rig.http
        response = await http.post(gateway("flaky", "action/getState", "f1"), json={"args": []})
        assert response.status_code == 200, response.text
        steps = await until_spans(exporter, "step flaky.fail-once", 2)
    failed, succeeded = sorted(steps, key=lambda s: (s.attributes or {})["perdure.step.attempt"])
    assert (failed.attributes or {})["perdure.step.location"] == "fail-once"
    assert (failed.attributes or {})["perdure.step.attempt"] == 1
    assert (succeeded.attributes or {})["perdure.step.attempt"] == 2
    assert failed.status.status_code == StatusCode.ERROR
    assert "first attempt fails" in (failed.status.description or "")
    [event] = failed.events
    assert event.name == "exception"
    assert (event.attributes or {})["exception.type"] == "RuntimeError"
    assert succeeded.status.status_code == StatusCode.UNSET
    # No message caused them: each attempt is a trace of its own (not the waking request's).
    assert failed.parent is None
    assert succeeded.parent is None


async def test_a_traced_message_parents_the_step_that_follows_its_receive(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    async with serving(tmp_path / "db", provider) as rig:
        await send_job(rig.http, "w1", 7, "worker")
        [apply] = await until_spans(exporter, "step worker.apply")
    [send] = named(exporter, "queue_send worker.jobs")
    assert (hex_trace(send), parent_id(send)) == (TRACE_ID, PARENT_ID)
    assert send.kind == SpanKind.PRODUCER
    assert (send.attributes or {})["perdure.queue"] == "jobs"
    assert (hex_trace(apply), parent_id(apply)) == (TRACE_ID, span_id(send))
    assert (apply.attributes or {})["perdure.step.location"] == "jobs-loop/~0/apply"


async def test_a_message_waiting_in_the_queue_keeps_its_trace_across_a_restart(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    clock = ManualClock()
    async with serving(tmp_path / "db", provider, clock) as rig:
        await send_job(rig.http, "r2", 1)  # durable once answered; the workflow warms up
    send = sent_only(exporter)
    async with serving(tmp_path / "db", provider, clock) as rig:
        # The actor's alarm (the warm-up's end) wakes it as the clock moves.
        [apply] = await until_spans(exporter, "step relay.apply", tick=lambda: clock.advance(61))
        url = gateway("relay", "action/getState", "r2")
        response = await rig.http.post(url, json={"args": []})
        assert response.json()["output"] == {"applied": [1]}
    assert (hex_trace(apply), parent_id(apply)) == (TRACE_ID, span_id(send))


async def test_a_received_message_keeps_its_trace_when_the_workflow_replays(
    tmp_path: Path, provider: TracerProvider, exporter: InMemorySpanExporter
) -> None:
    clock = ManualClock()
    async with serving(tmp_path / "db", provider, clock) as rig:
        await send_job(rig.http, "r3", 3)
        clock.advance(61)  # the warm-up ends: the workflow takes the message, then pauses
        store = rig.runtime.store
        record = await store.find_actor("relay", ("r3",))
        assert record is not None

        async def taken() -> bool:
            return not await store.load_queue(record.actor_id)

        await eventually(taken, timeout=WAIT, what="the workflow to take the message")
    send = sent_only(exporter)
    # Only the workflow's history knows the trace now: the replay reports it again.
    async with serving(tmp_path / "db", provider, clock):
        [apply] = await until_spans(exporter, "step relay.apply", tick=lambda: clock.advance(61))
    assert (hex_trace(apply), parent_id(apply)) == (TRACE_ID, span_id(send))


# --- the seam -----------------------------------------------------------------------------


def test_the_fan_out_traces_only_with_a_tracing_observer(provider: TracerProvider) -> None:
    observers = Observers()
    assert not observers.traces
    tracing = TracingObserver(provider)
    observers.add(tracing)
    assert observers.traces
    assert observers.trace_carrier() is None  # no span is current here
    span = observers.enter_trace(TRACEPARENT, None)
    assert span is not None
    try:
        assert observers.trace_carrier() == TRACEPARENT
    finally:
        span.end(None)
    assert observers.trace_carrier() is None
    observers.remove(tracing)
    assert not observers.traces
