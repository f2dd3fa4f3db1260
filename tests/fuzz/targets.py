"""What each fuzz target does with one input: shared by the atheris runner
(:mod:`tests.fuzz.run`), the hypothesis tests and the regression replay.

Every target raises only on a *crash*: an exception that is not a coded perdure error, or
(for the app targets) a :class:`~tests.fuzz.harness.Crash`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from typing import Any

from perdure.errors import PerdureError
from perdure.protocol import (
    HttpActionRequest,
    HttpQueueSendRequest,
    decode_http,
    decode_to_server,
)
from perdure.protocol.codec import Encoding

DECODE_SECONDS = 1.0
"""Most one input may take in the decoders (far more than any does)."""

DECODER_TARGETS = ("json", "cbor", "bare")
APP_TARGETS = ("http", "websocket")
TARGETS = DECODER_TARGETS + APP_TARGETS


def decode_anything(data: bytes, enc: Encoding) -> None:
    """Feed ``data`` to every server-side decoder of ``enc``; only coded errors may escape,
    and only within :data:`DECODE_SECONDS`."""
    started = time.monotonic()
    for kind in (HttpActionRequest, HttpQueueSendRequest):
        _coded_or_nothing(partial(decode_http, data, enc, kind))
    _coded_or_nothing(lambda: decode_to_server(data, enc))
    if enc == "json":
        text = data.decode("utf-8", "surrogateescape")  # lone surrogates too
        _coded_or_nothing(lambda: decode_to_server(text, enc))
    elapsed = time.monotonic() - started
    if elapsed > DECODE_SECONDS:
        raise AssertionError(f"decoding {len(data)} bytes took {elapsed:.2f}s")


def _coded_or_nothing(call: Callable[[], Any]) -> None:
    try:
        call()
    except PerdureError as exc:
        if not (exc.group and exc.code):
            raise AssertionError(f"uncoded {exc!r}") from exc
