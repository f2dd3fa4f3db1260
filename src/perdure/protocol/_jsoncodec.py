"""The ``json`` encoding: JSON text with RivetKit's tagged values.

Output is compact (as ``JSON.stringify`` writes it) and ASCII-only: non-ASCII characters
are ``\\u`` escapes, which keeps a string holding a lone surrogate (valid in JavaScript
and in JSON) sendable. Ids are written ``["$BigInt", "<n>"]``, as the original server and
the official client do; the client's schema rejects a plain number there. The Error
message always carries ``actionId`` (``null`` when it is not about an action), which the
client's schema requires.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from perdure.errors import InternalError, InvalidRequest
from perdure.protocol import _shape
from perdure.protocol._budget import count_json_containers
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
from perdure.protocol.values import UnsendableValue, from_json_value, to_json_value

H = TypeVar("H")

_U64_MAX = 2**64 - 1

_dumps = json.JSONEncoder(
    ensure_ascii=True, allow_nan=False, separators=(",", ":"), check_circular=True
).encode


class _ConstantRefused(ValueError):
    """``NaN``, ``Infinity``: Python's parser takes them, JSON does not."""


def _reject_constant(name: str) -> Any:
    raise _ConstantRefused(f"{name} is not valid JSON")


_loads = json.JSONDecoder(parse_constant=_reject_constant).decode


def _text(obj: Any, what: str) -> str:
    try:
        return _dumps(obj)
    except (ValueError, TypeError, RecursionError) as exc:
        raise UnsendableValue(f"Cannot send {what} as JSON: {type(exc).__name__}.") from None


def _id(value: int, what: str) -> list[str]:
    if type(value) is not int or not 0 <= value <= _U64_MAX:
        raise InternalError(f"Cannot send {what}: an id must be an int in 0 … 2**64 - 1.")
    return ["$BigInt", str(value)]


def _actor(actor: ActorInfo) -> dict[str, Any]:
    out: dict[str, Any] = {"actorId": actor.actor_id, "generation": actor.generation}
    if actor.key is not None:
        out["key"] = actor.key  # the client's schema accepts a string or no key, not null
    return out


def _body(tag: str, val: dict[str, Any]) -> dict[str, Any]:
    return {"body": {"tag": tag, "val": val}}


# -- WebSocket ------------------------------------------------------------------------


def encode_to_client(msg: ToClient) -> str:
    """A server → client message as a JSON text frame."""
    if isinstance(msg, ActionResponse):
        output = to_json_value(msg.output, "action output")
        obj = _body("ActionResponse", {"id": _id(msg.id, "ActionResponse"), "output": output})
    elif isinstance(msg, Event):
        args = to_json_value(msg.args, f"event {msg.name!r} args")
        obj = _body("Event", {"name": msg.name, "args": args})
    elif isinstance(msg, Init):
        obj = _body("Init", {"actorId": msg.actor_id, "connectionId": msg.connection_id})
    elif isinstance(msg, ErrorMessage):
        val: dict[str, Any] = {"group": msg.group, "code": msg.code, "message": msg.message}
        if msg.metadata is not None:
            val["metadata"] = to_json_value(msg.metadata, "error metadata")
        if msg.actor is not None:
            val["actor"] = _actor(msg.actor)
        val["actionId"] = None if msg.action_id is None else _id(msg.action_id, "Error")
        obj = _body("Error", val)
    else:
        raise TypeError(f"not a server → client message: {msg!r}")
    return _text(obj, type(msg).__name__)


def encode_to_server(msg: ToServer) -> str:
    """A client → server message as a JSON text frame."""
    if isinstance(msg, ActionRequest):
        args = to_json_value(msg.args, f"action {msg.name!r} args")
        obj = _body(
            "ActionRequest", {"id": _id(msg.id, "ActionRequest"), "name": msg.name, "args": args}
        )
    elif isinstance(msg, SubscriptionRequest):
        obj = _body(
            "SubscriptionRequest", {"eventName": msg.event_name, "subscribe": msg.subscribe}
        )
    else:
        raise TypeError(f"not a client → server message: {msg!r}")
    return _text(obj, type(msg).__name__)


def _parse(data: str | bytes, what: str) -> Any:
    if not isinstance(data, str):
        try:
            data = bytes(data).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidRequest(f"Malformed JSON in {what}: not valid UTF-8 ({exc}).") from None
        except TypeError:
            raise InvalidRequest(f"Malformed JSON in {what}: expected text.") from None
    count_json_containers(data, what)
    try:
        return _loads(data)
    except RecursionError:
        raise InvalidRequest(f"Malformed JSON in {what}: nested too deeply.") from None
    except ValueError as exc:
        raise InvalidRequest(f"Malformed JSON in {what}: {_reason(exc)}.") from None


def _reason(exc: ValueError) -> str:
    """The parser's own words for bad JSON, but not Python's about its digit limit."""
    if isinstance(exc, (json.JSONDecodeError, _ConstantRefused)):
        return str(exc)
    if "integer string conversion" in str(exc):
        return "an integer has more than 4300 digits"
    return "not valid JSON"


def decode_to_client(data: str | bytes) -> ToClient:
    """A server → client message from a JSON frame."""
    return _shape.to_client_from_object(_parse(data, "server message"), from_json_value)


def decode_to_server(data: str | bytes) -> ToServer:
    """A client → server message from a JSON frame."""
    return _shape.to_server_from_object(_parse(data, "client message"), from_json_value)


# -- HTTP -----------------------------------------------------------------------------


def _action_request(msg: HttpActionRequest) -> dict[str, Any]:
    return {"args": to_json_value(msg.args, "action args")}


def _action_response(msg: HttpActionResponse) -> dict[str, Any]:
    return {"output": to_json_value(msg.output, "output")}


def _queue_send_request(msg: HttpQueueSendRequest) -> dict[str, Any]:
    out: dict[str, Any] = {"body": to_json_value(msg.body, "queue message body")}
    if msg.name is not None:
        out["name"] = msg.name
    out["wait"] = msg.wait
    if msg.timeout is not None:
        out["timeout"] = msg.timeout
    if msg.delay is not None:
        out["delay"] = msg.delay
    if msg.at is not None:
        out["at"] = msg.at
    return out


def _queue_send_response(msg: HttpQueueSendResponse) -> dict[str, Any]:
    out: dict[str, Any] = {"status": msg.status}
    if msg.response is not None:
        out["response"] = to_json_value(msg.response, "queue response")
    return out


def _response_error(msg: HttpResponseError) -> dict[str, Any]:
    out: dict[str, Any] = {"group": msg.group, "code": msg.code, "message": msg.message}
    if msg.metadata is not None:
        out["metadata"] = to_json_value(msg.metadata, "error metadata")
    if msg.actor is not None:
        out["actor"] = _actor(msg.actor)
    return out


def _resolve_response(msg: HttpResolveResponse) -> dict[str, Any]:
    return {"actorId": msg.actor_id}


_HTTP_WRITERS: dict[type[Any], Callable[[Any], dict[str, Any]]] = {
    HttpActionRequest: _action_request,
    HttpActionResponse: _action_response,
    HttpQueueSendRequest: _queue_send_request,
    HttpQueueSendResponse: _queue_send_response,
    HttpResponseError: _response_error,
    HttpResolveResponse: _resolve_response,
}


def encode_http(msg: HttpMessage) -> bytes:
    """An HTTP body as UTF-8 JSON."""
    writer = _HTTP_WRITERS.get(type(msg))
    if writer is None:
        raise TypeError(f"not an HTTP message: {msg!r}")
    return _text(writer(msg), type(msg).__name__).encode("ascii")


def decode_http(data: bytes, kind: type[H]) -> H:
    """An HTTP body of type ``kind`` from JSON."""
    return _shape.http_from_object(_parse(data, kind.__name__), kind, from_json_value)
