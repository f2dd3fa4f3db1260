"""What the asyncio and the threaded connection share around the socket itself: the
upgrade request, frame encoding and decoding, and the reading of a refused upgrade."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from websockets.exceptions import InvalidStatus

from perdure import __version__
from perdure.client._base import (
    ClientConfig,
    Encoding,
    HttpReply,
    Target,
    error_from_reply,
    websocket_protocols,
    websocket_url,
)
from perdure.client._connstate import ConnectionCore, Effect
from perdure.client._errors import ActorError, TransportError
from perdure.errors import InvalidRequest
from perdure.protocol import codec
from perdure.protocol.messages import Init, ToServer

__all__ = [
    "MAX_FRAME_BYTES",
    "OPEN_TIMEOUT",
    "SocketPlan",
    "decode_frame",
    "encode_frame",
    "handshake_error",
    "plan_socket",
    "user_agent",
]

OPEN_TIMEOUT = 15.0
"""Seconds an upgrade may take (the original's WebSocket open timeout)."""

MAX_FRAME_BYTES = 32 * 1024 * 1024
"""Largest frame accepted from the server (the original's limit)."""


@dataclass(frozen=True, slots=True)
class SocketPlan:
    """Everything needed to open a ``/connect`` socket."""

    url: str
    subprotocols: list[Any]
    headers: dict[str, str]
    max_size: int
    user_agent: str


def user_agent() -> str:
    """The ``User-Agent`` of both clients."""
    return f"perdure/{__version__}"


def plan_socket(config: ClientConfig, target: Target, params: Any) -> SocketPlan:
    """The upgrade request of a connection to ``target`` with ``params``."""
    return SocketPlan(
        url=websocket_url(config, target),
        subprotocols=list(websocket_protocols(config.encoding, params)),
        headers=dict(config.headers),
        max_size=MAX_FRAME_BYTES,
        user_agent=user_agent(),
    )


def encode_frame(message: ToServer, encoding: Encoding) -> str | bytes:
    """A client → server frame (text for json, binary otherwise)."""
    return codec.encode_to_server(message, encoding)


def decode_frame(
    core: ConnectionCore[Any], frame: str | bytes, encoding: Encoding
) -> tuple[list[Effect], bool]:
    """Feed one server frame to ``core``: its effects, and whether it was ``Init``.

    A frame that does not decode is reported to ``on_error`` and skipped; the rest of the
    stream may still be fine.
    """
    try:
        message = codec.decode_to_client(frame, encoding)
    except InvalidRequest as exc:
        error = TransportError(f"The server sent a malformed frame: {exc.message}")
        return core.transport_error(error), False
    return core.receive(message), isinstance(message, Init)


def handshake_error(
    core: ConnectionCore[Any], exc: InvalidStatus, encoding: Encoding
) -> list[Effect]:
    """The server refused the upgrade with an HTTP status: with a protocol error body
    (``actor.not_found`` for a ``get`` of a missing actor, say) it is a connection error,
    otherwise a transport one."""
    response = exc.response
    reply = HttpReply(response.status_code, response.headers, bytes(response.body or b""))
    error = error_from_reply(reply, encoding)
    if isinstance(error, ActorError):
        return core.connection_error(error)
    return core.transport_error(error)
