"""``perdure serve``'s tracing and log options: ``--otel`` and ``--log-format``.

Kept out of cli/app.py: the options, the check that the ``otel`` extra is installed (done
while the command line is parsed, so a missing extra stops the server before it opens
its store), and the OTLP exporter's setup. OpenTelemetry is imported only when
``--otel`` is given.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any

from perdure.observe.logs import configure_logging

__all__ = ["OTEL_MISSING", "add_serve_options", "configure_logging", "enable_otel"]

_OTEL_MODULES = (
    "opentelemetry.sdk.trace",
    "opentelemetry.exporter.otlp.proto.http.trace_exporter",
)
#: What ``--otel`` says when the extra is not installed (its code: config.otel_missing).
OTEL_MISSING = (
    "--otel needs OpenTelemetry, which is not installed [config.otel_missing]: "
    "pip install 'perdure[otel]'"
)


def add_serve_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--otel`` and ``--log-format`` to ``perdure serve``."""
    parser.add_argument(
        "--otel",
        action=_OtelFlag,
        help="export traces over OTLP/HTTP to $OTEL_EXPORTER_OTLP_ENDPOINT (default "
        "http://localhost:4318), service $OTEL_SERVICE_NAME (default perdure); needs "
        "pip install 'perdure[otel]' (`perdure docs tracing`)",
    )
    parser.add_argument(
        "--log-format",
        choices=["text", "json"],
        default=os.environ.get("PERDURE_LOG_FORMAT") or "text",
        help="text (default) or json: one JSON object per line with actor and trace ids "
        "(env PERDURE_LOG_FORMAT)",
    )


class _OtelFlag(argparse.Action):
    """``--otel``: refused while parsing when the ``otel`` extra is missing."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=False, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        if not otel_installed():
            parser.error(OTEL_MISSING)
        setattr(namespace, self.dest, True)


def otel_installed() -> bool:
    """True when the ``otel`` extra's SDK and OTLP/HTTP exporter can be imported."""
    try:
        for name in _OTEL_MODULES:
            importlib.import_module(name)  # imported anyway by enable_otel, soon after
    except ImportError:
        return False
    return True


_log = logging.getLogger("perdure.server")

OTEL_SHUTDOWN_TIMEOUT_S = 2.0
"""How long a stopping server gives the exporter to send the spans it still holds."""


def enable_otel(runtime: Any) -> Callable[[], None]:
    """Trace ``runtime`` and export its spans over OTLP/HTTP, configured by the standard
    ``OTEL_*`` environment variables; the provider becomes OpenTelemetry's global one, so
    spans that actor code makes join perdure's traces.

    Returns what the server calls once it has stopped: it sends the spans still held, for
    at most :data:`OTEL_SHUTDOWN_TIMEOUT_S`, then stops the exporter, so that a server
    with no collector to answer still exits promptly."""
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import SERVICE_NAME, Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    from perdure.observe.tracing import enable_tracing

    resource = Resource.create()  # reads OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "perdure"}))
    # The SDK flushes and shuts the provider down at interpreter exit.
    # No exit hook of the SDK's: it would wait out the exporter's retries (its timeout,
    # 10 s by default) when no collector answers. The server stops the provider itself.
    provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    exporter = OTLPSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    enable_tracing(runtime, provider)

    def shut_down() -> None:
        # The SDK's shutdown takes no time limit: run it on a thread and wait a bounded
        # time. If it is still retrying then, stopping the exporter ends its retries
        # (they wait on the exporter's shutdown event); the spans left are dropped.
        stopping = threading.Thread(target=provider.shutdown, name="otel shutdown", daemon=True)
        stopping.start()
        stopping.join(OTEL_SHUTDOWN_TIMEOUT_S)
        if stopping.is_alive():
            _log.warning(
                "spans not exported: the OTLP collector did not answer within %.0f s",
                OTEL_SHUTDOWN_TIMEOUT_S,
            )
            exporter.shutdown()  # type: ignore[no-untyped-call]  # the SDK leaves it untyped

    return shut_down
