"""Structured logs: :class:`JsonFormatter` writes one JSON object per log record.

Fields (docs/tracing.md): ``time`` (UTC, ISO 8601 with milliseconds), ``level``,
``logger``, ``message``; ``exception`` (the formatted traceback) when the record has one;
``actor_name``, ``actor_key`` and ``actor_id`` when the record comes from an actor (its
``c.log``, and what perdure logs about it); ``trace_id`` and ``span_id`` (hex) when an
OpenTelemetry span is current where the record was logged. Trace ids need the ``otel``
extra; without it they are left out and everything else works.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from perdure.observe.redaction import RedactingFormatter

__all__ = ["ACTOR_FIELDS", "TEXT_FORMAT", "JsonFormatter", "configure_logging"]

#: The plain-text format of ``perdure serve`` (``--log-format text``).
TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
#: The record attributes an actor's logger adapter sets (runtime/actor/instance.py).
ACTOR_FIELDS = ("actor_name", "actor_key", "actor_id")


def _no_span_ids() -> tuple[str, str] | None:
    return None


def _span_ids_reader() -> Callable[[], tuple[str, str] | None]:
    """What reads the current span's ``(trace_id, span_id)``: imported here, not when
    perdure's CLI starts (and without the ``otel`` extra no span can be current)."""
    try:
        from opentelemetry import trace
    except ImportError:
        return _no_span_ids

    def current() -> tuple[str, str] | None:
        context = trace.get_current_span().get_span_context()
        if not context.is_valid:
            return None
        return f"{context.trace_id:032x}", f"{context.span_id:016x}"

    return current


class JsonFormatter(logging.Formatter):
    """Formats a record as one line of JSON (see the module docstring for its fields)."""

    def __init__(self) -> None:
        super().__init__()
        self._span_ids = _span_ids_reader()

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": _timestamp(record.created),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for field in ACTOR_FIELDS:
            value = getattr(record, field, None)
            if value is not None:
                entry[field] = value
        ids = self._span_ids()
        if ids is not None:
            entry["trace_id"], entry["span_id"] = ids
        if record.exc_info and not record.exc_text:
            # Cached on the record, as logging.Formatter does, for other handlers.
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = self.formatStack(record.stack_info)
        return json.dumps(entry, ensure_ascii=False, default=repr)


def _timestamp(created: float) -> str:
    seconds = int(created)
    millis = int((created - seconds) * 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"


def configure_logging(level: int, log_format: str = "text", secrets: Iterable[str] = ()) -> None:
    """Log to stderr at ``level``, as plain text or (``log_format="json"``) JSON lines,
    every line with credentials and ``secrets`` masked (:mod:`perdure.observe.redaction`)."""
    logging.basicConfig(level=level, format=TEXT_FORMAT)
    secrets = tuple(secrets)
    for handler in logging.getLogger().handlers:
        inner = handler.formatter or logging.Formatter(TEXT_FORMAT)
        if isinstance(inner, RedactingFormatter):
            inner = inner.inner  # configured before: wrap the original, once
        if log_format == "json":
            inner = JsonFormatter()
        handler.setFormatter(RedactingFormatter(inner, secrets))
