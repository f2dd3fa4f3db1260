"""The messages of the RivetKit client protocol (version 4), as plain Python values.

These are the shapes that travel between a client and the server, independent of the
encoding (``json``, ``cbor`` or ``bare``; see :mod:`perdure.protocol.codec`). User values
(action arguments and outputs, event arguments, queue bodies, error metadata) are ordinary
Python values: ``None``, ``bool``, ``int`` (any size), ``float``, ``str``, ``bytes``,
``list``, ``dict``, ``set``/``frozenset`` and timezone-aware ``datetime``.

WebSocket ``/connect``:

- client → server (:data:`ToServer`): :class:`ActionRequest`, :class:`SubscriptionRequest`
- server → client (:data:`ToClient`): :class:`Init`, :class:`ErrorMessage`,
  :class:`ActionResponse`, :class:`Event`

HTTP bodies (:data:`HttpMessage`): :class:`HttpActionRequest` → :class:`HttpActionResponse`
(``POST /action/{name}``), :class:`HttpQueueSendRequest` → :class:`HttpQueueSendResponse`
(``POST /queue/{name}``), :class:`HttpResponseError` (any failed request) and
:class:`HttpResolveResponse`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

__all__ = [
    "ActionRequest",
    "ActionResponse",
    "ActorInfo",
    "ErrorMessage",
    "Event",
    "HttpActionRequest",
    "HttpActionResponse",
    "HttpMessage",
    "HttpQueueSendRequest",
    "HttpQueueSendResponse",
    "HttpResolveResponse",
    "HttpResponseError",
    "Init",
    "QueueSendStatus",
    "SubscriptionRequest",
    "ToClient",
    "ToServer",
]

# The statuses the original server sends; other strings are accepted when decoding so a
# newer server does not break an older client.
QueueSendStatus: TypeAlias = Literal["completed", "timedOut"]


@dataclass(frozen=True, slots=True)
class ActorInfo:
    """Which actor (and which incarnation of it) produced an error.

    ``key`` is the actor key in the engine's joined form (parts joined with ``/``).
    """

    actor_id: str
    generation: int
    key: str | None = None


# -- WebSocket, client -> server ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActionRequest:
    """Call action ``name`` with ``args``; ``id`` (an unsigned 64-bit integer chosen by
    the client, usually counting up from 0) pairs the request with its response."""

    id: int
    name: str
    args: list[Any]


@dataclass(frozen=True, slots=True)
class SubscriptionRequest:
    """Start (``subscribe=True``) or stop receiving broadcasts of ``event_name``."""

    event_name: str
    subscribe: bool


ToServer: TypeAlias = ActionRequest | SubscriptionRequest


# -- WebSocket, server -> client ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Init:
    """First frame on a new connection: the client is connected once it receives this."""

    actor_id: str
    connection_id: str


@dataclass(frozen=True, slots=True)
class ErrorMessage:
    """An error on the connection.

    With ``action_id`` it answers that action request; without it the connection itself
    failed (the server closes the socket right after). ``actor`` is optional context the
    protocol carries since version 4.
    """

    group: str
    code: str
    message: str
    metadata: Any = None
    action_id: int | None = None
    actor: ActorInfo | None = None


@dataclass(frozen=True, slots=True)
class ActionResponse:
    """The successful result of the action request with the same ``id``."""

    id: int
    output: Any


@dataclass(frozen=True, slots=True)
class Event:
    """A broadcast of event ``name``; ``args`` are the listener's positional arguments."""

    name: str
    args: list[Any]


ToClient: TypeAlias = Init | ErrorMessage | ActionResponse | Event


# -- HTTP bodies ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HttpActionRequest:
    """Body of ``POST /action/{name}``: the positional arguments."""

    args: list[Any]


@dataclass(frozen=True, slots=True)
class HttpActionResponse:
    """Body of a successful ``POST /action/{name}``."""

    output: Any


@dataclass(frozen=True, slots=True)
class HttpQueueSendRequest:
    """Body of ``POST /queue/{name}``.

    ``wait`` asks the server to hold the response until the message is completed (or
    ``timeout`` milliseconds pass). ``name`` repeats the queue name of the URL; the
    official client always sends it.

    ``delay`` (milliseconds) or ``at`` (epoch milliseconds) make it a delayed send: a
    perdure extension (docs/queues.md, "Delayed sends"), sent only when given, so the
    official client's bodies are unchanged. In BARE they follow the official fields.
    """

    body: Any
    name: str | None = None
    wait: bool = False
    timeout: int | None = None
    delay: int | None = None
    at: int | None = None


@dataclass(frozen=True, slots=True)
class HttpQueueSendResponse:
    """Answer to a queue send: ``status`` is ``"completed"`` or ``"timedOut"``;
    ``response`` is what the consumer completed the message with (when waiting)."""

    status: str
    response: Any = None


@dataclass(frozen=True, slots=True)
class HttpResponseError:
    """Body of any failed HTTP request (the status code says the class of failure)."""

    group: str
    code: str
    message: str
    metadata: Any = None
    actor: ActorInfo | None = None


@dataclass(frozen=True, slots=True)
class HttpResolveResponse:
    """Answer to a resolve request: the id of the addressed actor."""

    actor_id: str


HttpMessage: TypeAlias = (
    HttpActionRequest
    | HttpActionResponse
    | HttpQueueSendRequest
    | HttpQueueSendResponse
    | HttpResponseError
    | HttpResolveResponse
)
