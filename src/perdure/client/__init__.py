"""Clients for perdure servers (and any server speaking the RivetKit client protocol).

Two clients with one API, built on one no-I/O core (:mod:`perdure.client._base`,
:mod:`perdure.client._connstate`):

- :func:`create_client` / :class:`AsyncClient` for asyncio code (``httpx.AsyncClient`` +
  ``websockets`` asyncio);
- :class:`Client` for blocking code (``httpx.Client`` + ``websockets`` threads).

::

    from perdure.client import create_client

    async with create_client("http://localhost:6420") as client:
        handle = client.progressActor.get_or_create(["main"])
        conn = handle.connect()
        conn.on("progressUpdated", lambda p: print("progress", p))
        await handle.send("jobs", {"value": 5})
        print(await handle.getState())              # unknown attributes are actions

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
    "Status",
    "TransportError",
    "TransportTimeout",
    "create_client",
]
