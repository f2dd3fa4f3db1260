"""The ``cbor`` encoding: the JSON-shaped objects of the ``json`` encoding, as CBOR.

The envelope is written by hand around each user value (encoded by
:func:`~perdure.protocol.values.encode_cbor_value`), because ids must be 64-bit CBOR
integers (head ``0x1b``): cbor-x only turns those into the ``BigInt`` the official
client's schema demands for ``id`` and ``actionId``. This is also what the original
server does (``rivetkit-core/src/registry/actor_connect.rs``,
``encode_actor_connect_message_cbor_manual``). The Error message always carries
``actionId`` (``null`` when it is not about an action).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from perdure.errors import InternalError, InvalidRequest
from perdure.protocol import _shape
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
from perdure.protocol.values import (
    decode_cbor,
    encode_cbor_value,
    may_need_revival,
    revive_cbor_value,
)

H = TypeVar("H")

_U64_MAX = 2**64 - 1
_NULL = b"\xf6"
_TRUE = b"\xf5"
_FALSE = b"\xf4"


def _head(major: int, length: int) -> bytes:
    prefix = major << 5
    if length < 24:
        return bytes((prefix | length,))
    if length < 0x100:
        return bytes((prefix | 24, length))
    if length < 0x10000:
        return bytes((prefix | 25,)) + length.to_bytes(2, "big")
    if length < 0x1_0000_0000:
        return bytes((prefix | 26,)) + length.to_bytes(4, "big")
    return bytes((prefix | 27,)) + length.to_bytes(8, "big")


def _text(value: str) -> bytes:
    try:
        encoded = value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InternalError(f"Cannot send a string as UTF-8: {exc}.") from None
    return _head(3, len(encoded)) + encoded


def _map(*entries: bytes) -> bytes:
    """A CBOR map from alternating encoded keys and values."""
    return _head(5, len(entries) // 2) + b"".join(entries)


def _u64(value: int, what: str) -> bytes:
    if type(value) is not int or not 0 <= value <= _U64_MAX:
        raise InternalError(f"Cannot send {what}: an id must be an int in 0 … 2**64 - 1.")
    return b"\x1b" + value.to_bytes(8, "big")


_FIELD_NAMES = (
    "body", "tag", "val", "id", "name", "args", "output", "actorId", "connectionId",
    "group", "code", "message", "metadata", "actor", "actionId", "generation", "key",
    "eventName", "subscribe", "status", "response", "wait", "timeout", "delay", "at",
)  # fmt: skip
_K = {name: _text(name) for name in _FIELD_NAMES}


def _envelope_prefix(tag: str, fields: int) -> bytes:
    # {"body": {"tag": <tag>, "val": {<fields> entries …
    return (
        _head(5, 1)
        + _K["body"]
        + _head(5, 2)
        + _K["tag"]
        + _text(tag)
        + _K["val"]
        + _head(5, fields)
    )


_ACTION_RESPONSE = _envelope_prefix("ActionResponse", 2) + _K["id"]
_EVENT = _envelope_prefix("Event", 2) + _K["name"]
_INIT = _envelope_prefix("Init", 2) + _K["actorId"]
_ACTION_REQUEST = _envelope_prefix("ActionRequest", 3) + _K["id"]
_SUBSCRIPTION_REQUEST = _envelope_prefix("SubscriptionRequest", 2) + _K["eventName"]


def _actor(actor: ActorInfo) -> bytes:
    entries = [_K["actorId"], _text(actor.actor_id)]
    entries += [_K["generation"], encode_cbor_value(actor.generation, "actor generation")]
    if actor.key is not None:
        entries += [_K["key"], _text(actor.key)]
    return _map(*entries)


# -- WebSocket ------------------------------------------------------------------------


def encode_to_client(msg: ToClient) -> bytes:
    """A server → client message as a binary CBOR frame."""
    if isinstance(msg, ActionResponse):
        output = encode_cbor_value(msg.output, "action output")
        return _ACTION_RESPONSE + _u64(msg.id, "ActionResponse") + _K["output"] + output
    if isinstance(msg, Event):
        args = encode_cbor_value(msg.args, f"event {msg.name!r} args")
        return _EVENT + _text(msg.name) + _K["args"] + args
    if isinstance(msg, Init):
        return _INIT + _text(msg.actor_id) + _K["connectionId"] + _text(msg.connection_id)
    if isinstance(msg, ErrorMessage):
        entries = [_K["group"], _text(msg.group), _K["code"], _text(msg.code)]
        entries += [_K["message"], _text(msg.message)]
        if msg.metadata is not None:
            entries += [_K["metadata"], encode_cbor_value(msg.metadata, "error metadata")]
        if msg.actor is not None:
            entries += [_K["actor"], _actor(msg.actor)]
        action_id = _NULL if msg.action_id is None else _u64(msg.action_id, "Error")
        entries += [_K["actionId"], action_id]
        return _envelope_prefix("Error", len(entries) // 2) + b"".join(entries)
    raise TypeError(f"not a server → client message: {msg!r}")


def encode_to_server(msg: ToServer) -> bytes:
    """A client → server message as a binary CBOR frame."""
    if isinstance(msg, ActionRequest):
        args = encode_cbor_value(msg.args, f"action {msg.name!r} args")
        return (
            _ACTION_REQUEST
            + _u64(msg.id, "ActionRequest")
            + _K["name"]
            + _text(msg.name)
            + _K["args"]
            + args
        )
    if isinstance(msg, SubscriptionRequest):
        subscribe = _TRUE if msg.subscribe else _FALSE
        return _SUBSCRIPTION_REQUEST + _text(msg.event_name) + _K["subscribe"] + subscribe
    raise TypeError(f"not a client → server message: {msg!r}")


def _identity(value: Any, what: str) -> Any:
    return value


def _parse(data: str | bytes, what: str) -> tuple[Any, _shape.Reviver]:
    if isinstance(data, str):
        raise InvalidRequest(f"Malformed {what}: the cbor encoding needs a binary frame.")
    data = bytes(data)
    obj = decode_cbor(data, what)
    # Most messages hold nothing to revive; skip the walk when the bytes prove it.
    return obj, (revive_cbor_value if may_need_revival(data) else _identity)


def decode_to_client(data: str | bytes) -> ToClient:
    """A server → client message from a CBOR frame."""
    obj, revive = _parse(data, "server message")
    return _shape.to_client_from_object(obj, revive)


def decode_to_server(data: str | bytes) -> ToServer:
    """A client → server message from a CBOR frame."""
    obj, revive = _parse(data, "client message")
    return _shape.to_server_from_object(obj, revive)


# -- HTTP -----------------------------------------------------------------------------


def _action_request(msg: HttpActionRequest) -> bytes:
    return _map(_K["args"], encode_cbor_value(msg.args, "action args"))


def _action_response(msg: HttpActionResponse) -> bytes:
    return _map(_K["output"], encode_cbor_value(msg.output, "action output"))


def _queue_send_request(msg: HttpQueueSendRequest) -> bytes:
    entries = [_K["body"], encode_cbor_value(msg.body, "queue message body")]
    if msg.name is not None:
        entries += [_K["name"], _text(msg.name)]
    entries += [_K["wait"], _TRUE if msg.wait else _FALSE]
    if msg.timeout is not None:
        entries += [_K["timeout"], encode_cbor_value(msg.timeout, "queue timeout")]
    if msg.delay is not None:
        entries += [_K["delay"], encode_cbor_value(msg.delay, "queue delay")]
    if msg.at is not None:
        entries += [_K["at"], encode_cbor_value(msg.at, "queue at")]
    return _map(*entries)


def _queue_send_response(msg: HttpQueueSendResponse) -> bytes:
    entries = [_K["status"], _text(msg.status)]
    if msg.response is not None:
        entries += [_K["response"], encode_cbor_value(msg.response, "queue response")]
    return _map(*entries)


def _response_error(msg: HttpResponseError) -> bytes:
    entries = [_K["group"], _text(msg.group), _K["code"], _text(msg.code)]
    entries += [_K["message"], _text(msg.message)]
    if msg.metadata is not None:
        entries += [_K["metadata"], encode_cbor_value(msg.metadata, "error metadata")]
    if msg.actor is not None:
        entries += [_K["actor"], _actor(msg.actor)]
    return _map(*entries)


def _resolve_response(msg: HttpResolveResponse) -> bytes:
    return _map(_K["actorId"], _text(msg.actor_id))


_HTTP_WRITERS: dict[type[Any], Callable[[Any], bytes]] = {
    HttpActionRequest: _action_request,
    HttpActionResponse: _action_response,
    HttpQueueSendRequest: _queue_send_request,
    HttpQueueSendResponse: _queue_send_response,
    HttpResponseError: _response_error,
    HttpResolveResponse: _resolve_response,
}


def encode_http(msg: HttpMessage) -> bytes:
    """An HTTP body as CBOR."""
    writer = _HTTP_WRITERS.get(type(msg))
    if writer is None:
        raise TypeError(f"not an HTTP message: {msg!r}")
    return writer(msg)


def decode_http(data: bytes, kind: type[H]) -> H:
    """An HTTP body of type ``kind`` from CBOR."""
    obj, revive = _parse(data, kind.__name__)
    return _shape.http_from_object(obj, kind, revive)
