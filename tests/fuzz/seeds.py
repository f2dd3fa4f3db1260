"""Valid inputs for each fuzz target, so the fuzzers start from messages that get past
the first byte (the starting corpus of :mod:`tests.fuzz.run`)."""

from __future__ import annotations

from perdure.protocol import (
    ENCODINGS,
    ActionRequest,
    HttpActionRequest,
    HttpQueueSendRequest,
    SubscriptionRequest,
    encode_http,
    encode_to_server,
)
from tests.fuzz.harness import FRAME_SEPARATOR

_VALUES: list[object] = [
    None,
    [1, -2, 2**53, 2**70, 1.5, "text", b"\x00\xff", True],
    {"a": {"b": [[], {}]}, "$x": ["$BigInt", "1"]},
    {1, "x"},
]


def seeds(target: str) -> list[bytes]:
    """Inputs that decode (decoders) or reach an actor (http, websocket)."""
    if target in ENCODINGS:
        return [body for _, body in _bodies(target)]
    if target == "http":
        return [
            bytes([route, ENCODINGS.index(enc), 0]) + b"\0\0" + body
            for enc in ENCODINGS
            for route, body in _bodies(enc)
        ]
    if target == "websocket":
        return [bytes([0, ENCODINGS.index(enc), 0]) + b"\0\0" + _frames(enc) for enc in ENCODINGS]
    raise ValueError(f"no target {target!r}")


def _bodies(enc: str) -> list[tuple[int, bytes]]:
    # Route 0 is an action, route 2 a queue send (tests.fuzz.harness._HTTP_ROUTES).
    actions = [(0, encode_http(HttpActionRequest(args=[v]), enc)) for v in _VALUES]  # type: ignore[arg-type]
    queue = HttpQueueSendRequest(body=_VALUES[1], name="q", wait=True, timeout=10)
    return [*actions, (2, encode_http(queue, enc))]  # type: ignore[arg-type]


def _frames(enc: str) -> bytes:
    messages = [ActionRequest(id=i, name="echo", args=[v]) for i, v in enumerate(_VALUES)]
    frames = [encode_to_server(m, enc) for m in messages]  # type: ignore[arg-type]
    frames.append(encode_to_server(SubscriptionRequest(event_name="e", subscribe=True), enc))  # type: ignore[arg-type]
    return FRAME_SEPARATOR.join(f.encode() if isinstance(f, str) else f for f in frames)
