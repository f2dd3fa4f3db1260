"""Encoding and decoding protocol messages in the three RivetKit encodings.

The encoding is chosen per request: the ``x-rivet-encoding`` header over HTTP, the
``rivet_encoding.<enc>`` WebSocket subprotocol on ``/connect`` (see :func:`parse_encoding`).

- ``json`` — JSON text with RivetKit's tagged values (:mod:`perdure.protocol.values`);
  WebSocket frames are text frames.
- ``cbor`` — the same object shapes as CBOR; binary frames.
- ``bare`` — vbare version 4 + BARE per the client-protocol schema, user values nested as
  CBOR; binary frames. The official client's default.

Every function here is pure and both directions exist: the server encodes ``ToClient``
and decodes ``ToServer``, a client the reverse, and each pair round-trips. Decoding never
raises anything but :class:`~perdure.errors.InvalidRequest` (code ``invalid_request``) for
bad input, whatever the bytes. Encoding a value outside the wire value model raises
:class:`~perdure.errors.InternalError` saying where it is; passing a non-message object is a
programming error (``TypeError``).
"""

from __future__ import annotations

from typing import Final, Literal, Protocol, TypeVar

from perdure.errors import InvalidRequest
from perdure.protocol import _barecodec, _cborcodec, _jsoncodec
from perdure.protocol._budget import ValueTooLarge, check_outgoing, check_value, outgoing_too_long
from perdure.protocol.messages import (
    ActionRequest,
    ActionResponse,
    ErrorMessage,
    Event,
    HttpActionRequest,
    HttpActionResponse,
    HttpMessage,
    HttpQueueSendRequest,
    HttpQueueSendResponse,
    HttpResolveResponse,
    HttpResponseError,
    ToClient,
    ToServer,
)

__all__ = [
    "ENCODINGS",
    "PROTOCOL_VERSION",
    "Encoding",
    "ValueTooLarge",
    "check_value",
    "content_type",
    "decode_http",
    "decode_to_client",
    "decode_to_server",
    "encode_http",
    "encode_to_client",
    "encode_to_server",
    "is_binary",
    "outgoing_too_long",
    "parse_encoding",
]

Encoding = Literal["json", "cbor", "bare"]
"""A wire encoding of the client protocol."""

ENCODINGS: Final[tuple[Encoding, ...]] = ("json", "cbor", "bare")

PROTOCOL_VERSION: Final = _barecodec.PROTOCOL_VERSION
"""The client-protocol version this package speaks (the vbare prefix of ``bare``)."""

H = TypeVar("H")


class _Codec(Protocol):
    """What each encoding module provides (modules satisfy this structurally)."""

    def encode_to_client(self, msg: ToClient) -> str | bytes: ...
    def decode_to_client(self, data: str | bytes) -> ToClient: ...
    def encode_to_server(self, msg: ToServer) -> str | bytes: ...
    def decode_to_server(self, data: str | bytes) -> ToServer: ...
    def encode_http(self, msg: HttpMessage) -> bytes: ...
    def decode_http(self, data: bytes, kind: type[H]) -> H: ...


_CODECS: dict[str, _Codec] = {"json": _jsoncodec, "cbor": _cborcodec, "bare": _barecodec}
_HTTP_KINDS = frozenset(
    {
        HttpActionRequest,
        HttpActionResponse,
        HttpQueueSendRequest,
        HttpQueueSendResponse,
        HttpResponseError,
        HttpResolveResponse,
    }
)
_CONTENT_TYPES: dict[str, str] = {
    "json": "application/json",
    "cbor": "application/octet-stream",
    "bare": "application/octet-stream",
}


def parse_encoding(value: str | None, default: Encoding = "json") -> Encoding:
    """The encoding named by a header or subprotocol value; ``default`` when absent.

    The original server also answers in JSON when the header is missing. An unknown name
    raises :class:`~perdure.errors.InvalidRequest` with code ``invalid_encoding``.
    """
    if value is None or value == "":
        return default
    for enc in ENCODINGS:
        if value == enc:
            return enc
    raise InvalidRequest(
        f"Unknown encoding {value!r:.40}: expected one of json, cbor, bare.",
        code="invalid_encoding",
    )


def content_type(enc: Encoding) -> str:
    """The HTTP ``Content-Type`` for bodies in ``enc``."""
    return _CONTENT_TYPES[enc]


def is_binary(enc: Encoding) -> bool:
    """Whether WebSocket frames in ``enc`` are binary (``cbor``, ``bare``) or text."""
    return enc != "json"


def encode_to_client(msg: ToClient, enc: Encoding, limit: int | None = None) -> str | bytes:
    """Encode a server → client WebSocket message (``str`` for json, else ``bytes``).

    With ``limit``, a message whose user value certainly encodes to more than ``limit``
    bytes is refused (``message.outgoing_too_long``) before the encoder runs.
    """
    if limit is not None:
        check_outgoing(_outgoing_value(msg), limit)
    return _CODECS[enc].encode_to_client(msg)


def decode_to_client(data: str | bytes, enc: Encoding) -> ToClient:
    """Decode a server → client WebSocket frame; InvalidRequest if malformed."""
    return _CODECS[enc].decode_to_client(data)


def encode_to_server(msg: ToServer, enc: Encoding) -> str | bytes:
    """Encode a client → server WebSocket message (``str`` for json, else ``bytes``)."""
    return _CODECS[enc].encode_to_server(msg)


def decode_to_server(data: str | bytes, enc: Encoding) -> ToServer:
    """Decode a client → server WebSocket frame; InvalidRequest if malformed, or if its
    arguments are outside the value domain or over a budget (:mod:`._budget`)."""
    msg = _CODECS[enc].decode_to_server(data)
    if type(msg) is ActionRequest:
        check_value(msg.args, "`args`")
    return msg


def encode_http(msg: HttpMessage, enc: Encoding, limit: int | None = None) -> bytes:
    """Encode an HTTP request or response body; ``limit`` as in :func:`encode_to_client`."""
    if limit is not None:
        check_outgoing(_outgoing_value(msg), limit)
    return _CODECS[enc].encode_http(msg)


def decode_http(data: bytes, enc: Encoding, kind: type[H]) -> H:
    """Decode an HTTP body that should be a ``kind``; InvalidRequest if malformed."""
    if kind not in _HTTP_KINDS:
        raise TypeError(f"{kind!r} is not an HTTP message type")
    msg = _CODECS[enc].decode_http(data, kind)
    # What a server receives is checked against the value domain (what it answers is not:
    # a client reads whatever the server sends).
    if isinstance(msg, HttpActionRequest):
        check_value(msg.args, "`args`")
    elif isinstance(msg, HttpQueueSendRequest):
        check_value(msg.body, "`body`")
    return msg


# The user value of each message kind: what can make a message large.
_VALUE_FIELDS: dict[type, str] = {
    ActionResponse: "output",
    HttpActionResponse: "output",
    Event: "args",
    HttpQueueSendResponse: "response",
    ErrorMessage: "metadata",
    HttpResponseError: "metadata",
    HttpActionRequest: "args",
    HttpQueueSendRequest: "body",
}


def _outgoing_value(msg: ToClient | HttpMessage) -> object:
    """The user value of an outgoing message (``None`` for one without)."""
    field = _VALUE_FIELDS.get(type(msg))
    return None if field is None else getattr(msg, field)
