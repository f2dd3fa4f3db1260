"""Clients for perdure servers (and any server speaking the RivetKit client protocol).

Both implement the one handle API of :mod:`perdure.handles` (as do ``runtime.client()``
and ``c.client()`` in process; see ``docs/clients.md``). Two clients with one API:

- :func:`create_client` / :class:`AsyncClient` for asyncio code (``httpx.AsyncClient`` +
  ``websockets`` asyncio), in :mod:`perdure.client.aio`;
- :class:`Client` for blocking code (``httpx.Client`` + ``websockets`` threads), in
  :mod:`perdure.client.sync`.

Those two modules hold only the I/O: performing a request (``await`` or block), opening
and reading a socket, waiting for a future, running callbacks (tasks or a callback
thread), and the public methods that do so (a method is ``async`` or it is not).
Everything else is written once, underneath:

- ``_base``: configuration, addressing, and every HTTP request as an ``HttpCall``
  (method, URL, headers, body, and the ``parse`` of its reply), without I/O;
- ``_connstate``: a connection's state machine, without I/O: each event in, a list of
  effects out (send a frame, settle a future, call listeners);
- ``_frames``: the upgrade request, frames, and what a failed socket means;
- ``_shared``: the bases of the client (config, HTTP pool, the open connections), the
  accessor and the handle, generic in the concrete classes, plus ``obj.<action>(…)``;
- ``_connection``: the base of both connections: the state and listener API, and one
  step per event of a connection's life (the core fed, its effects applied), which the
  subclasses' reader loops call; ``_errors``: the errors.

``import perdure.client`` loads only these modules, ``perdure.errors``, ``perdure.keys``
and ``perdure.protocol`` (and httpx, websockets, cbor2): no engine module.

::

    from perdure.client import create_client

    async with create_client("http://localhost:6420") as client:
        handle = client.progressActor.get_or_create(["main"])
        conn = handle.connect()
        conn.on("progressUpdated", lambda p: print("progress", p))
        await handle.send("jobs", {"value": 5})
        print(await handle.getState())              # unknown attributes are actions
        print(await handle.workflow_status())       # {status, error, output}

Errors the server reports arrive as :class:`ActorError` (``group``, ``code``, ``message``,
``metadata``, ``actor``); failures to reach it as :class:`TransportError`.

Differences from the official TypeScript client, on purpose:

- the default encoding is ``"json"`` (the official default is ``"bare"``; all three work);
- a ``get`` handle fails at once with ``actor.not_found`` when the actor does not exist,
  instead of retrying for seconds;
- a key part containing ``,`` is refused (the gateway would split it into two parts and
  silently address another actor).
"""

from perdure.client._base import ClientConfig, QueueResult
from perdure.client._connstate import CloseEvent, Status
from perdure.client._errors import (
    ActorError,
    ConnectionDisposed,
    TransportError,
    TransportTimeout,
)
from perdure.client.aio import (
    AsyncActorAccessor,
    AsyncActorConnection,
    AsyncActorHandle,
    AsyncClient,
    create_client,
)
from perdure.client.sync import ActorAccessor, ActorConnection, ActorHandle, Client
from perdure.handles import SendResult, WorkflowStatus
from perdure.protocol.messages import ActorInfo

__all__ = [
    "ActorAccessor",
    "ActorConnection",
    "ActorError",
    "ActorHandle",
    "ActorInfo",
    "AsyncActorAccessor",
    "AsyncActorConnection",
    "AsyncActorHandle",
    "AsyncClient",
    "Client",
    "ClientConfig",
    "CloseEvent",
    "ConnectionDisposed",
    "QueueResult",
    "SendResult",
    "Status",
    "TransportError",
    "TransportTimeout",
    "WorkflowStatus",
    "create_client",
]
