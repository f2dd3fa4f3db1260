"""Structured logs: the JSON formatter on an actor's log (in process, traced and not), the
plain-text format kept as it was, and ``--otel`` without the extra. A real
``perdure serve --log-format json --otel`` process exporting to a loopback collector is in
tests/scenarios/observe/test_logs_server.py."""

from __future__ import annotations

import argparse
import io
import json
import logging
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from perdure import ActorRuntime
from perdure.cli.app import main
from perdure.observe.logs import TEXT_FORMAT, JsonFormatter
from perdure.observe.serving import OTEL_MISSING, add_serve_options
from perdure.observe.tracing import enable_tracing
from perdure.server import create_app
from perdure.store import SQLiteStore
from tests.support.apps.tracing import registry

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
LOOPBACK = ("127.0.0.1", 123)
HELLO = "/gateway/greeter/action/hello?rvt-method=getOrCreate&rvt-key=g1"
OOPS = "/gateway/greeter/action/oops?rvt-method=getOrCreate&rvt-key=g1"


@contextmanager
def captured(formatter: logging.Formatter) -> Iterator[io.StringIO]:
    """What perdure's actor logger writes during the block, through ``formatter``."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    logger = logging.getLogger("perdure.actor")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield stream
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@asynccontextmanager
async def client(path: Path, *, traced: bool) -> AsyncIterator[httpx.AsyncClient]:
    runtime = ActorRuntime(registry, SQLiteStore(path))
    if traced:
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))
        enable_tracing(runtime, provider)
    transport = httpx.ASGITransport(app=create_app(runtime, metrics=False), client=LOOPBACK)
    async with runtime, httpx.AsyncClient(transport=transport, base_url="http://x") as http:
        yield http


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines()]


async def test_an_actors_json_log_names_it_and_its_trace(tmp_path: Path) -> None:
    with captured(JsonFormatter()) as stream:
        async with client(tmp_path / "db", traced=True) as http:
            headers = {"traceparent": TRACEPARENT}
            response = await http.post(HELLO, json={"args": ["ann"]}, headers=headers)
            assert response.status_code == 200, response.text
    [entry] = [e for e in lines(stream) if e["message"] == "saying hello to ann"]
    assert entry["level"] == "INFO"
    assert entry["logger"] == "perdure.actor"
    assert (entry["actor_name"], entry["actor_key"], entry["actor_id"]) == (
        "greeter",
        ["g1"],
        response.headers["x-rivet-actor"],
    )
    # The action's span is current where the action logs: a child of the client's.
    assert entry["trace_id"] == TRACE_ID
    assert len(entry["span_id"]) == 16
    assert entry["span_id"] != TRACEPARENT.split("-")[2]
    assert entry["time"].endswith("Z")
    assert "exception" not in entry


async def test_an_untraced_json_log_carries_its_exception_and_no_trace(tmp_path: Path) -> None:
    with captured(JsonFormatter()) as stream:
        async with client(tmp_path / "db", traced=False) as http:
            response = await http.post(
                OOPS, json={"args": []}, headers={"traceparent": TRACEPARENT}
            )
            assert response.status_code == 200, response.text
    [entry] = [e for e in lines(stream) if e["message"] == "could not go on"]
    assert entry["level"] == "ERROR"
    assert "trace_id" not in entry
    assert "span_id" not in entry
    assert entry["actor_name"] == "greeter"
    assert "ValueError: bad value" in entry["exception"]
    assert entry["exception"].startswith("Traceback")


async def test_the_text_format_is_unchanged(tmp_path: Path) -> None:
    with captured(logging.Formatter("%(levelname)s %(name)s: %(message)s")) as stream:
        async with client(tmp_path / "db", traced=False) as http:
            await http.post(HELLO, json={"args": ["bob"]})
    assert "INFO perdure.actor: saying hello to bob\n" in stream.getvalue()
    assert TEXT_FORMAT == "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def test_otel_without_the_extra_is_refused_with_the_pip_command(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("opentelemetry.sdk.trace", "opentelemetry.exporter.otlp.proto.http"):
        monkeypatch.setitem(sys.modules, name, None)  # as if the extra were not installed
    with pytest.raises(SystemExit) as exited:
        # Refused while the arguments are read: the registry is never looked for.
        main(["serve", "no_such_module:registry", "--otel"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert OTEL_MISSING in error
    assert "pip install 'perdure[otel]'" in error
    assert "[config.otel_missing]" in error


def test_the_log_format_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERDURE_LOG_FORMAT", "json")
    parser = argparse.ArgumentParser()
    add_serve_options(parser)
    assert parser.parse_args([]).log_format == "json"
    assert parser.parse_args(["--log-format", "text"]).log_format == "text"
    assert parser.parse_args([]).otel is False


# --- a real server --------------------------------------------------------------------
