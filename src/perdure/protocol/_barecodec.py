"""The ``bare`` encoding: vbare version 4 + BARE, per the client-protocol schema.

The schema is ``rivetkit-rust/packages/client-protocol/schemas/v4.bare`` in rivet-dev/rivet.
Every user value (``args``, ``output``, ``body``, ``response``, ``metadata``, event
``args``) is a nested CBOR byte string (``type Cbor data``), written by
:func:`~perdure.protocol.values.encode_cbor_value`; argument lists are one CBOR array.
Only version 4 is spoken: an older or newer version is refused with a clear error rather
than half understood.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from perdure.errors import InvalidRequest
from perdure.protocol.bare import BareReader, BareWriter
from perdure.protocol.messages import (
    ActionRequest,
    ActionResponse,
    ActorInfo,
    ErrorMessage,
    Event,
    HttpActionRequest,
    HttpActionResponse,
    HttpMessage,
    HttpQueueSendRequest,
    HttpQueueSendResponse,
    HttpResolveResponse,
    HttpResponseError,
    Init,
    SubscriptionRequest,
    ToClient,
    ToServer,
)
from perdure.protocol.values import decode_cbor_value, encode_cbor_value

__all__ = [
    "PROTOCOL_VERSION",
    "decode_http",
    "decode_to_client",
    "decode_to_server",
    "encode_http",
    "encode_to_client",
    "encode_to_server",
]

PROTOCOL_VERSION = 4
"""The client-protocol schema version written in front of every BARE message."""

H = TypeVar("H")

# Union tags: the position of each type in the schema's unions.
_TO_CLIENT_INIT, _TO_CLIENT_ERROR, _TO_CLIENT_ACTION_RESPONSE, _TO_CLIENT_EVENT = range(4)
_TO_SERVER_ACTION_REQUEST, _TO_SERVER_SUBSCRIPTION_REQUEST = range(2)


def _writer() -> BareWriter:
    writer = BareWriter()
    writer.version(PROTOCOL_VERSION)
    return writer


def _reader(data: str | bytes, what: str) -> BareReader:
    if isinstance(data, str):
        raise InvalidRequest(f"Malformed {what}: the bare encoding needs a binary frame.")
    reader = BareReader(bytes(data), what)
    version = reader.version()
    if version != PROTOCOL_VERSION:
        raise InvalidRequest(
            f"Unsupported client protocol version {version} in {what} "
            f"(this server speaks version {PROTOCOL_VERSION})."
        )
    return reader


def _write_value(writer: BareWriter, value: Any, what: str) -> None:
    writer.data(encode_cbor_value(value, what))


def _write_optional_value(writer: BareWriter, value: Any, what: str) -> None:
    writer.optional(value is not None)
    if value is not None:
        _write_value(writer, value, what)


def _read_value(reader: BareReader, what: str) -> Any:
    return decode_cbor_value(reader.data(what), what)


def _read_optional_value(reader: BareReader, what: str) -> Any:
    return _read_value(reader, what) if reader.optional(what) else None


def _read_args(reader: BareReader, what: str) -> list[Any]:
    args = _read_value(reader, what)
    if type(args) is not list:
        reader.fail(f"{what} must be a CBOR array, got {type(args).__name__}")
    return args


def _write_actor(writer: BareWriter, actor: ActorInfo | None) -> None:
    writer.optional(actor is not None)
    if actor is not None:
        writer.string(actor.actor_id)
        writer.uint(actor.generation)
        writer.optional(actor.key is not None)
        if actor.key is not None:
            writer.string(actor.key)


def _read_actor(reader: BareReader) -> ActorInfo | None:
    if not reader.optional("actor"):
        return None
    actor_id = reader.string("actor.actorId")
    generation = reader.uint("actor.generation")
    key = reader.string("actor.key") if reader.optional("actor.key") else None
    return ActorInfo(actor_id=actor_id, generation=generation, key=key)


def _write_error_fields(writer: BareWriter, msg: ErrorMessage | HttpResponseError) -> None:
    writer.string(msg.group)
    writer.string(msg.code)
    writer.string(msg.message)
    _write_optional_value(writer, msg.metadata, "error metadata")


# -- WebSocket ------------------------------------------------------------------------


def encode_to_client(msg: ToClient) -> bytes:
    """A server → client message as a binary BARE frame."""
    writer = _writer()
    if isinstance(msg, ActionResponse):
        writer.uint(_TO_CLIENT_ACTION_RESPONSE)
        writer.uint(msg.id)
        _write_value(writer, msg.output, "action output")
    elif isinstance(msg, Event):
        writer.uint(_TO_CLIENT_EVENT)
        writer.string(msg.name)
        _write_value(writer, msg.args, f"event {msg.name!r} args")
    elif isinstance(msg, Init):
        writer.uint(_TO_CLIENT_INIT)
        writer.string(msg.actor_id)
        writer.string(msg.connection_id)
    elif isinstance(msg, ErrorMessage):
        writer.uint(_TO_CLIENT_ERROR)
        _write_error_fields(writer, msg)
        writer.optional(msg.action_id is not None)
        if msg.action_id is not None:
            writer.uint(msg.action_id)
        _write_actor(writer, msg.actor)
    else:
        raise TypeError(f"not a server → client message: {msg!r}")
    return writer.getvalue()


def encode_to_server(msg: ToServer) -> bytes:
    """A client → server message as a binary BARE frame."""
    writer = _writer()
    if isinstance(msg, ActionRequest):
        writer.uint(_TO_SERVER_ACTION_REQUEST)
        writer.uint(msg.id)
        writer.string(msg.name)
        _write_value(writer, msg.args, f"action {msg.name!r} args")
    elif isinstance(msg, SubscriptionRequest):
        writer.uint(_TO_SERVER_SUBSCRIPTION_REQUEST)
        writer.string(msg.event_name)
        writer.boolean(msg.subscribe)
    else:
        raise TypeError(f"not a client → server message: {msg!r}")
    return writer.getvalue()


def decode_to_client(data: str | bytes) -> ToClient:
    """A server → client message from a BARE frame."""
    reader = _reader(data, "server message")
    tag = reader.uint("the message tag")
    message: ToClient
    if tag == _TO_CLIENT_ACTION_RESPONSE:
        message = ActionResponse(
            id=reader.uint("ActionResponse.id"),
            output=_read_value(reader, "ActionResponse.output"),
        )
    elif tag == _TO_CLIENT_EVENT:
        name = reader.string("Event.name")
        message = Event(name=name, args=_read_args(reader, "Event.args"))
    elif tag == _TO_CLIENT_INIT:
        actor_id = reader.string("Init.actorId")
        message = Init(actor_id=actor_id, connection_id=reader.string("Init.connectionId"))
    elif tag == _TO_CLIENT_ERROR:
        group = reader.string("Error.group")
        code = reader.string("Error.code")
        text = reader.string("Error.message")
        metadata = _read_optional_value(reader, "Error.metadata")
        action_id = reader.uint("Error.actionId") if reader.optional("Error.actionId") else None
        message = ErrorMessage(group, code, text, metadata, action_id, _read_actor(reader))
    else:
        reader.fail(f"unknown server message tag {tag} (expected 0 … 3)")
    reader.end()
    return message


def decode_to_server(data: str | bytes) -> ToServer:
    """A client → server message from a BARE frame."""
    reader = _reader(data, "client message")
    tag = reader.uint("the message tag")
    message: ToServer
    if tag == _TO_SERVER_ACTION_REQUEST:
        action_id = reader.uint("ActionRequest.id")
        name = reader.string("ActionRequest.name")
        message = ActionRequest(action_id, name, _read_args(reader, "ActionRequest.args"))
    elif tag == _TO_SERVER_SUBSCRIPTION_REQUEST:
        event_name = reader.string("SubscriptionRequest.eventName")
        message = SubscriptionRequest(event_name, reader.boolean("SubscriptionRequest.subscribe"))
    else:
        reader.fail(f"unknown client message tag {tag} (expected 0 or 1)")
    reader.end()
    return message


# -- HTTP -----------------------------------------------------------------------------


def _write_action_request(writer: BareWriter, msg: HttpActionRequest) -> None:
    _write_value(writer, msg.args, "action args")


def _write_action_response(writer: BareWriter, msg: HttpActionResponse) -> None:
    _write_value(writer, msg.output, "action output")


def _write_queue_send_request(writer: BareWriter, msg: HttpQueueSendRequest) -> None:
    _write_value(writer, msg.body, "queue message body")
    writer.optional(msg.name is not None)
    if msg.name is not None:
        writer.string(msg.name)
    # The official client always sends `wait`, so we do too (byte-identical requests).
    writer.optional(True)
    writer.boolean(msg.wait)
    writer.optional(msg.timeout is not None)
    if msg.timeout is not None:
        writer.u64(msg.timeout)
    if msg.delay is not None or msg.at is not None:
        # perdure's extension (a delayed send) follows the official fields, only when
        # given: the official client's bytes stay the same.
        for value in (msg.delay, msg.at):
            writer.optional(value is not None)
            if value is not None:
                writer.u64(value)


def _write_queue_send_response(writer: BareWriter, msg: HttpQueueSendResponse) -> None:
    writer.string(msg.status)
    _write_optional_value(writer, msg.response, "queue response")


def _write_response_error(writer: BareWriter, msg: HttpResponseError) -> None:
    _write_error_fields(writer, msg)
    _write_actor(writer, msg.actor)


def _write_resolve_response(writer: BareWriter, msg: HttpResolveResponse) -> None:
    writer.string(msg.actor_id)


def _read_action_request(reader: BareReader) -> HttpActionRequest:
    return HttpActionRequest(args=_read_args(reader, "HttpActionRequest.args"))


def _read_action_response(reader: BareReader) -> HttpActionResponse:
    return HttpActionResponse(output=_read_value(reader, "HttpActionResponse.output"))


def _read_queue_send_request(reader: BareReader) -> HttpQueueSendRequest:
    body = _read_value(reader, "HttpQueueSendRequest.body")
    name = reader.string("HttpQueueSendRequest.name") if reader.optional("name") else None
    wait = reader.boolean("HttpQueueSendRequest.wait") if reader.optional("wait") else False
    timeout = reader.u64("HttpQueueSendRequest.timeout") if reader.optional("timeout") else None
    delay = at = None
    if reader.remaining():  # perdure's extension: a delayed send
        delay = reader.u64("HttpQueueSendRequest.delay") if reader.optional("delay") else None
        at = reader.u64("HttpQueueSendRequest.at") if reader.optional("at") else None
    return HttpQueueSendRequest(
        body=body, name=name, wait=wait, timeout=timeout, delay=delay, at=at
    )


def _read_queue_send_response(reader: BareReader) -> HttpQueueSendResponse:
    status = reader.string("HttpQueueSendResponse.status")
    response = _read_optional_value(reader, "HttpQueueSendResponse.response")
    return HttpQueueSendResponse(status=status, response=response)


def _read_response_error(reader: BareReader) -> HttpResponseError:
    group = reader.string("HttpResponseError.group")
    code = reader.string("HttpResponseError.code")
    text = reader.string("HttpResponseError.message")
    metadata = _read_optional_value(reader, "HttpResponseError.metadata")
    return HttpResponseError(group, code, text, metadata, _read_actor(reader))


def _read_resolve_response(reader: BareReader) -> HttpResolveResponse:
    return HttpResolveResponse(actor_id=reader.string("HttpResolveResponse.actorId"))


_HTTP_CODECS: dict[
    type[Any], tuple[Callable[[BareWriter, Any], None], Callable[[BareReader], Any]]
] = {
    HttpActionRequest: (_write_action_request, _read_action_request),
    HttpActionResponse: (_write_action_response, _read_action_response),
    HttpQueueSendRequest: (_write_queue_send_request, _read_queue_send_request),
    HttpQueueSendResponse: (_write_queue_send_response, _read_queue_send_response),
    HttpResponseError: (_write_response_error, _read_response_error),
    HttpResolveResponse: (_write_resolve_response, _read_resolve_response),
}


def encode_http(msg: HttpMessage) -> bytes:
    """An HTTP body as vbare + BARE."""
    codec = _HTTP_CODECS.get(type(msg))
    if codec is None:
        raise TypeError(f"not an HTTP message: {msg!r}")
    writer = _writer()
    codec[0](writer, msg)
    return writer.getvalue()


def decode_http(data: bytes, kind: type[H]) -> H:
    """An HTTP body of type ``kind`` from vbare + BARE."""
    codec = _HTTP_CODECS.get(kind)
    if codec is None:
        raise TypeError(f"{kind!r} is not an HTTP message type")
    reader = _reader(data, kind.__name__)
    message = codec[1](reader)
    reader.end()
    assert isinstance(message, kind)
    return message
