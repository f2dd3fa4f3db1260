"""Typed clients: the type checker sees the actors, their actions and their results.

``perdure types app:registry -o app_types.py`` writes a module with a client class for
the registry, ``AppClient`` (asyncio) and ``SyncAppClient`` (blocking), and a handle
class per actor. Wrap any client in it::

    from app_types import AppClient, SyncAppClient

    client = AppClient(create_client(url))  # or runtime.client(), c.client(), env.client
    counter = client.counter.get_or_create("main")  # `client.countr`: a type error
    total: int = await counter.increment(5)  # checked: the argument and the result
    SyncAppClient(Client(url)).counter.get("main").increment(5)

A generated module names actions by the functions that implement them (see
:mod:`perdure.typed._actions`), so their signatures are written once, in the actor's
code. docs/clients.md ("Typed clients") says why this design.

This room holds the bases the generated classes extend (:mod:`~perdure.typed.aio`,
:mod:`~perdure.typed.sync`), the typed actions (``_actions``) and the generator
(:mod:`~perdure.typed.generate`, used by the ``perdure types`` command). Like the
clients, the bases load no engine module: a client process imports this face and its
generated module, not the runtime.
"""

from perdure.typed._actions import (
    Action,
    ActionGroup,
    Group,
    Output,
    SyncActionGroup,
    action,
    async_action,
    group,
    untyped_action,
    untyped_output,
    workflow_output,
)
from perdure.typed.aio import (
    Key,
    TypedAccessor,
    TypedClient,
    TypedConnection,
    TypedHandle,
    TypedWorkflowHandle,
)
from perdure.typed.sync import (
    SyncTypedAccessor,
    SyncTypedClient,
    SyncTypedConnection,
    SyncTypedHandle,
    SyncTypedWorkflowHandle,
)

__all__ = [
    "Action",
    "ActionGroup",
    "Group",
    "Key",
    "Output",
    "SyncActionGroup",
    "SyncTypedAccessor",
    "SyncTypedClient",
    "SyncTypedConnection",
    "SyncTypedHandle",
    "SyncTypedWorkflowHandle",
    "TypedAccessor",
    "TypedClient",
    "TypedConnection",
    "TypedHandle",
    "TypedWorkflowHandle",
    "action",
    "async_action",
    "group",
    "untyped_action",
    "untyped_output",
    "workflow_output",
]
