"""``perdure serve``'s tracing and log options: ``--otel`` and ``--log-format``.

Kept out of cli/app.py: the options, the check that the ``otel`` extra is installed (done
while the command line is parsed, so a missing extra stops the server before it opens
its store), and the OTLP exporter's setup. OpenTelemetry is imported only when
``--otel`` is given.
"""

from __future__ import annotations

import argparse
import importlib
import os
from collections.abc import Sequence
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
        "pip install 'perdure[otel]' (docs/tracing.md)",
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


def enable_otel(runtime: Any) -> None:
    """Trace ``runtime`` and export its spans over OTLP/HTTP, configured by the standard
    ``OTEL_*`` environment variables; the provider becomes OpenTelemetry's global one, so
    spans that actor code makes join perdure's traces."""
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
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(provider)
    enable_tracing(runtime, provider)
