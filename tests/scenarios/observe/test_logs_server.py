"""Structured logs and traces of a real ``perdure serve --log-format json --otel`` process,
exported to a loopback OTLP collector (the formatter in process: tests/observe/test_logs.py)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from perdure.observe.serving import OTEL_SHUTDOWN_TIMEOUT_S
from tests.support.server import ServerProcess, free_port
from tests.support.wait import eventually

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
HELLO = "/gateway/greeter/action/hello?rvt-method=getOrCreate&rvt-key=g1"


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: keeps each request's decoded spans."""

    requests: list[ExportTraceServiceRequest]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        if self.path == "/v1/traces":
            self.requests.append(ExportTraceServiceRequest.FromString(body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@contextmanager
def collector() -> Iterator[tuple[str, list[ExportTraceServiceRequest]]]:
    received: list[ExportTraceServiceRequest] = []
    handler = type("Handler", (_Collector,), {"requests": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", received
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _spans(requests: list[ExportTraceServiceRequest]) -> list[tuple[str, Any, Any]]:
    """``(service name, resource spans' attributes, span)`` of every exported span."""
    found = []
    for request in requests:
        for resource_spans in request.resource_spans:
            attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    found.append((attributes.get("service.name"), attributes, span))
    return found


def test_perdure_serve_logs_json_and_exports_spans_over_otlp(tmp_path: Path) -> None:
    with collector() as (endpoint, received):
        server = ServerProcess(
            "tests.support.apps.tracing:registry",
            tmp_path / "data",
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_BSP_SCHEDULE_DELAY": "50"},
            extra_args=["--log-format", "json", "--otel"],
        )
        server.start()
        try:
            with httpx.Client(base_url=server.url, timeout=10) as http:
                headers = {"traceparent": TRACEPARENT}
                response = http.post(HELLO, json={"args": ["cy"]}, headers=headers)
                assert response.status_code == 200, response.text

            def exported() -> bool:
                return any(span.name == "action greeter.hello" for _, _, span in _spans(received))

            eventually_sync(exported, what="the action span at the collector")
        finally:
            assert server.terminate() == 0
        log = server.log()
    entries = [json.loads(line) for line in log.splitlines() if line.strip()]  # all JSON
    [hello] = [e for e in entries if e["message"] == "saying hello to cy"]
    assert (hello["actor_name"], hello["actor_key"]) == ("greeter", ["g1"])
    assert hello["actor_id"] == response.headers["x-rivet-actor"]
    assert hello["trace_id"] == TRACE_ID
    assert any(e["logger"] == "uvicorn" for e in entries)  # the server's own lines too
    [(service, _, action)] = [s for s in _spans(received) if s[2].name == "action greeter.hello"]
    assert service == "perdure"
    assert action.trace_id.hex() == TRACE_ID
    assert action.parent_span_id.hex() == TRACEPARENT.split("-")[2]
    assert action.span_id.hex() == hello["span_id"]


def eventually_sync(predicate: Any, *, what: str, timeout: float = 15.0) -> None:
    """Poll ``predicate`` from a synchronous test (bounded)."""
    asyncio.run(eventually(predicate, timeout=timeout, interval=0.05, what=what))


def test_with_no_collector_answering_the_server_still_exits_promptly(tmp_path: Path) -> None:
    """The exporter retries a collector that refuses connections for its whole timeout
    (10 s); a stopping server gives it a bounded time, says what it dropped, and exits."""
    server = ServerProcess(
        "tests.support.apps.tracing:registry",
        tmp_path / "data",
        # Nothing listens there: every export is refused and retried.
        env={"OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}"},
        extra_args=["--otel"],
    )
    server.start()
    with httpx.Client(base_url=server.url, timeout=10) as http:
        assert http.post(HELLO, json={"args": ["cy"]}).status_code == 200
    asked = time.monotonic()
    assert server.terminate() == 0
    took = time.monotonic() - asked
    # The bound is OTEL_SHUTDOWN_TIMEOUT_S (2 s) after the runtime stops; before it, the
    # exit waited out the retries (7 to 11 s measured).
    assert took < 2 + OTEL_SHUTDOWN_TIMEOUT_S + 1, f"exited after {took:.1f} s"
    assert "spans not exported: the OTLP collector did not answer" in server.log()
