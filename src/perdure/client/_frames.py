"""What the asyncio and the threaded connection share around the socket itself: the
upgrade request, frame encoding and decoding, and the reading of a socket that failed."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from websockets.exceptions import InvalidHandshake, InvalidStatus

from perdure._version import __version__
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
    "session_error",
    "user_agent",
]

logger = logging.getLogger("perdure.client")

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

    def connect_options(self) -> dict[str, Any]:
        """The keyword arguments of ``websockets``' ``connect`` (asyncio and threaded
        alike) after the URL."""
        return {
            "subprotocols": self.subprotocols,
            "additional_headers": self.headers,
            "open_timeout": OPEN_TIMEOUT,
            "max_size": self.max_size,
            "user_agent_header": self.user_agent,
        }


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


def session_error(
    core: ConnectionCore[Any], exc: Exception, url: str, encoding: Encoding
) -> list[Effect]:
    """A socket's session ended with ``exc``: a refused upgrade (see
    :func:`handshake_error`), a socket that could not be opened or broke, or a bug in the
    reader, which is logged; all but the first go to ``on_error`` as transport errors."""
    if isinstance(exc, InvalidStatus):
        return handshake_error(core, exc, encoding)
    if isinstance(exc, OSError | InvalidHandshake | TimeoutError):
        detail = str(exc) or type(exc).__name__
        where = url.split("?", 1)[0]  # the query may carry a token
        return core.transport_error(
            TransportError(f"Cannot open the connection to {where}: {detail}")
        )
    # A bug must not end the reader silently and leave callers waiting.
    logger.error("The connection's reader failed", exc_info=exc)
    return core.transport_error(TransportError(repr(exc)))
