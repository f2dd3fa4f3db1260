"""Reading the JSON-shaped objects shared by the ``json`` and ``cbor`` encodings.

Both encodings carry the same object structure (``{"body": {"tag": …, "val": {…}}}`` on
the WebSocket, flat objects over HTTP); they differ only in how the bytes parse and how
user values are revived. Every check here raises
:class:`~perdure.errors.InvalidRequest` naming the message and the field at fault.

Lenient on purpose: unknown keys are ignored (a newer peer may add fields), and a missing
*user value* (``output``, ``metadata``, a queue ``body`` or ``response``) reads as
``None`` because JavaScript drops ``undefined`` properties when it serializes. Structural
fields (tags, ids, names, argument lists) are required.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import cbor2

from perdure.errors import InvalidRequest
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

__all__ = ["Reviver", "http_from_object", "to_client_from_object", "to_server_from_object"]

Reviver = Callable[[Any, str], Any]
"""Turns a parsed user value into its Python form (``(value, what) -> value``)."""

H = TypeVar("H")

_U64_MAX = 2**64 - 1
_ABSENT = object()


def _fail(message: str) -> NoReturn:
    raise InvalidRequest(message)


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _object(value: Any, what: str) -> dict[Any, Any]:
    if type(value) is not dict:
        _fail(f"Invalid {what}: expected an object, got {_kind(value)}.")
    return value


def _get(obj: dict[Any, Any], key: str) -> Any:
    value = obj.get(key, _ABSENT)
    # CBOR `undefined` is how cbor-x writes a JavaScript `undefined`: treat it as absent.
    return _ABSENT if value is cbor2.undefined else value


def _required(obj: dict[Any, Any], key: str, what: str) -> Any:
    value = _get(obj, key)
    if value is _ABSENT:
        _fail(f"Invalid {what}: missing field `{key}`.")
    return value


def _str(obj: dict[Any, Any], key: str, what: str) -> str:
    value = _required(obj, key, what)
    if type(value) is not str:
        _fail(f"Invalid {what}: field `{key}` must be a string, got {_kind(value)}.")
    return value


def _optional_str(obj: dict[Any, Any], key: str, what: str) -> str | None:
    value = _get(obj, key)
    if value is _ABSENT or value is None:
        return None
    if type(value) is not str:
        _fail(f"Invalid {what}: field `{key}` must be a string, got {_kind(value)}.")
    return value


def _bool(obj: dict[Any, Any], key: str, what: str) -> bool:
    value = _required(obj, key, what)
    if type(value) is not bool:
        _fail(f"Invalid {what}: field `{key}` must be a boolean, got {_kind(value)}.")
    return value


def _uint(value: Any, key: str, what: str) -> int:
    """An unsigned 64-bit id: a number, or the ``["$BigInt", "…"]`` the official client
    sends for ids."""
    if type(value) is int:
        number = value
    elif (
        type(value) is list
        and len(value) == 2
        and value[0] == "$BigInt"
        and type(value[1]) is str
        and value[1].isascii()
        and value[1].isdigit()
        and len(value[1]) <= 20
    ):
        number = int(value[1])
    elif type(value) is float and value.is_integer() and 0 <= value <= 2**53:
        number = int(value)  # a JavaScript number that cbor-x wrote as float64
    else:
        _fail(
            f"Invalid {what}: field `{key}` must be an unsigned integer "
            f'(or ["$BigInt", "<digits>"]), got {_kind(value)}.'
        )
    if not 0 <= number <= _U64_MAX:
        _fail(f"Invalid {what}: field `{key}` is out of range (0 … 2**64 - 1): {number}.")
    return number


def _required_uint(obj: dict[Any, Any], key: str, what: str) -> int:
    return _uint(_required(obj, key, what), key, what)


def _optional_uint(obj: dict[Any, Any], key: str, what: str) -> int | None:
    value = _get(obj, key)
    if value is _ABSENT or value is None:
        return None
    return _uint(value, key, what)


def _value(obj: dict[Any, Any], key: str, what: str, revive: Reviver) -> Any:
    value = _get(obj, key)
    if value is _ABSENT or value is None:
        return None
    return revive(value, f"{what} `{key}`")


def _args(obj: dict[Any, Any], key: str, what: str, revive: Reviver) -> list[Any]:
    value = _required(obj, key, what)
    if type(value) is not list:
        _fail(f"Invalid {what}: field `{key}` must be an array, got {_kind(value)}.")
    revived = revive(value, f"{what} `{key}`")
    if type(revived) is not list:
        # e.g. an unescaped ["$BigInt", "1"]: a tag, not an argument list.
        _fail(f"Invalid {what}: field `{key}` must be an array, got a tagged {_kind(revived)}.")
    return revived


def _actor(obj: dict[Any, Any], what: str) -> ActorInfo | None:
    value = _get(obj, "actor")
    if value is _ABSENT or value is None:
        return None
    inner = f"{what} `actor`"
    actor = _object(value, inner)
    return ActorInfo(
        actor_id=_str(actor, "actorId", inner),
        generation=_required_uint(actor, "generation", inner),
        key=_optional_str(actor, "key", inner),
    )


def _body(obj: Any, what: str, tags: tuple[str, ...]) -> tuple[str, dict[Any, Any]]:
    message = _object(obj, what)
    body = _object(_required(message, "body", what), f"{what} `body`")
    tag = _required(body, "tag", f"{what} `body`")
    if tag not in tags:
        _fail(
            f"Invalid {what}: unknown `body.tag` {tag!r:.40} (expected one of {', '.join(tags)})."
        )
    return tag, _object(_required(body, "val", f"{what} `body`"), f"{tag} message")


_TO_SERVER_TAGS = ("ActionRequest", "SubscriptionRequest")
_TO_CLIENT_TAGS = ("Init", "Error", "ActionResponse", "Event")


def to_server_from_object(obj: Any, revive: Reviver) -> ToServer:
    """A client → server WebSocket message from its JSON-shaped object."""
    tag, val = _body(obj, "client message", _TO_SERVER_TAGS)
    if tag == "ActionRequest":
        return ActionRequest(
            id=_required_uint(val, "id", tag),
            name=_str(val, "name", tag),
            args=_args(val, "args", tag, revive),
        )
    return SubscriptionRequest(
        event_name=_str(val, "eventName", tag),
        subscribe=_bool(val, "subscribe", tag),
    )


def to_client_from_object(obj: Any, revive: Reviver) -> ToClient:
    """A server → client WebSocket message from its JSON-shaped object."""
    tag, val = _body(obj, "server message", _TO_CLIENT_TAGS)
    if tag == "ActionResponse":
        return ActionResponse(
            id=_required_uint(val, "id", tag), output=_value(val, "output", tag, revive)
        )
    if tag == "Event":
        return Event(name=_str(val, "name", tag), args=_args(val, "args", tag, revive))
    if tag == "Init":
        return Init(
            actor_id=_str(val, "actorId", tag), connection_id=_str(val, "connectionId", tag)
        )
    return ErrorMessage(
        group=_str(val, "group", tag),
        code=_str(val, "code", tag),
        message=_str(val, "message", tag),
        metadata=_value(val, "metadata", tag, revive),
        action_id=_optional_uint(val, "actionId", tag),
        actor=_actor(val, tag),
    )


def _http_action_request(obj: dict[Any, Any], revive: Reviver) -> HttpActionRequest:
    what = "HttpActionRequest"
    if _get(obj, "args") is None:
        return HttpActionRequest(args=[])  # the original server reads `args: null` as none
    return HttpActionRequest(args=_args(obj, "args", what, revive))


def _http_action_response(obj: dict[Any, Any], revive: Reviver) -> HttpActionResponse:
    return HttpActionResponse(output=_value(obj, "output", "HttpActionResponse", revive))


def _http_queue_send_request(obj: dict[Any, Any], revive: Reviver) -> HttpQueueSendRequest:
    what = "HttpQueueSendRequest"
    wait = _get(obj, "wait")
    if wait is not _ABSENT and wait is not None and type(wait) is not bool:
        _fail(f"Invalid {what}: field `wait` must be a boolean, got {_kind(wait)}.")
    return HttpQueueSendRequest(
        body=_value(obj, "body", what, revive),
        name=_optional_str(obj, "name", what),
        wait=wait is True,
        timeout=_optional_uint(obj, "timeout", what),
        delay=_optional_uint(obj, "delay", what),
        at=_optional_uint(obj, "at", what),
    )


def _http_queue_send_response(obj: dict[Any, Any], revive: Reviver) -> HttpQueueSendResponse:
    what = "HttpQueueSendResponse"
    return HttpQueueSendResponse(
        status=_str(obj, "status", what),
        response=_value(obj, "response", what, revive),
    )


def _http_response_error(obj: dict[Any, Any], revive: Reviver) -> HttpResponseError:
    what = "HttpResponseError"
    return HttpResponseError(
        group=_str(obj, "group", what),
        code=_str(obj, "code", what),
        message=_str(obj, "message", what),
        metadata=_value(obj, "metadata", what, revive),
        actor=_actor(obj, what),
    )


def _http_resolve_response(obj: dict[Any, Any], revive: Reviver) -> HttpResolveResponse:
    return HttpResolveResponse(actor_id=_str(obj, "actorId", "HttpResolveResponse"))


_HTTP_READERS: dict[type[Any], Callable[[dict[Any, Any], Reviver], HttpMessage]] = {
    HttpActionRequest: _http_action_request,
    HttpActionResponse: _http_action_response,
    HttpQueueSendRequest: _http_queue_send_request,
    HttpQueueSendResponse: _http_queue_send_response,
    HttpResponseError: _http_response_error,
    HttpResolveResponse: _http_resolve_response,
}


def http_from_object(obj: Any, kind: type[H], revive: Reviver) -> H:
    """An HTTP body of type ``kind`` from its JSON-shaped object."""
    reader = _HTTP_READERS.get(kind)
    if reader is None:
        raise TypeError(f"{kind!r} is not an HTTP message type")
    message = reader(_object(obj, kind.__name__), revive)
    assert isinstance(message, kind)
    return message
