"""The one way into an actor: resolve an address, then act on the actor through a ref.

Every request that comes from outside an actor reaches it here: the HTTP gateway and
WebSocket connections (``perdure.server``), the in-process client (``runtime.client()``
and ``c.client()``), schedule fires and the management API. The sequence is always the
same:

1. :meth:`ActorDispatch.check` refuses a bad operation against the actor's definition
   before anything is created (unknown action, wrong argument count, unknown queue,
   invalid message body) — the definition owns those rules, the dispatch only asks;
2. :meth:`ActorDispatch.resolve` turns an :class:`ActorAddress` (an id, or a name and key
   with ``get``/``getOrCreate``/``create``) into an :class:`ActorRef`;
3. the ref performs the operation (:meth:`ActorRef.call`, :meth:`ActorRef.send`,
   :meth:`ActorRef.connect`, :meth:`ActorRef.destroy` …), waking the actor if it sleeps.

Nothing outside ``perdure.runtime`` holds a live ``ActorInstance``: a ref names an actor
by id and finds its instance at each request, and a :class:`ConnectionRef` wraps one
open connection. That is what lets a later layer forward a request to the node that
owns the actor, or observe every request in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from perdure.errors import ActorNotFound
from perdure.keys import Key, normalize_key
from perdure.runtime.actor.operations import (
    NO_CONNECTION,
    ActorAddress,
    CallAction,
    Operation,
    SendMessage,
    perform_on,
)
from perdure.runtime.dispatch.refs import ActorRef, check_subscription

if TYPE_CHECKING:
    from perdure.definition import ActorDefinition
    from perdure.runtime.actor.instance import ActorInstance
    from perdure.runtime.dispatch.port import DispatchHost
    from perdure.store.base import ActorRecord

__all__ = ["ActorDispatch", "ActorSummary", "check_subscription"]


@dataclass(frozen=True, slots=True)
class ActorSummary:
    """A stored actor as the management API shows it."""

    actor_id: str
    name: str
    key: Key
    created_at: int

    @classmethod
    def of(cls, record: ActorRecord) -> ActorSummary:
        """The summary of a stored record."""
        return cls(record.actor_id, record.name, record.key, record.created_at)


class ActorDispatch:
    """The runtime's entry point for requests (``runtime.dispatch``)."""

    __slots__ = ("_runtime",)

    def __init__(self, runtime: DispatchHost) -> None:
        self._runtime = runtime

    # ------------------------------------------------------------ before an actor

    def definition(self, name: str) -> ActorDefinition:
        """The definition of actor ``name``; ``actor.unknown_name`` if not registered."""
        return self._runtime.definition(name)

    def check_subscription(self, name: str, event: str) -> None:
        """Refuse listening to an event that actor ``name`` does not declare
        (``actor.unknown_event``): see :func:`check_subscription`."""
        check_subscription(self.definition(name), event)

    def check(self, name: str, operation: Operation) -> Operation:
        """Refuse ``operation`` if actor ``name`` cannot accept it, before any actor is
        created or woken. Returns the operation to perform: a message comes back with
        its body as the queue's schema coerced it, marked validated, so that the body
        is validated once."""
        definition = self.definition(name)
        if isinstance(operation, CallAction):
            if not definition.is_workflow_action(operation.action):
                definition.find_action(operation.action, len(operation.args))
            return operation
        body = definition.validate_message(operation.queue, operation.body)
        op = operation
        # The same message with its body checked: its idempotency key too (a handle's
        # first send is checked here, with the key its caller gave).
        return SendMessage(
            op.queue, body, op.wait, op.timeout, True, op.delay, op.at, op.idempotency_key
        )

    async def resolve(self, address: ActorAddress, *, then: ActorAddress | None = None) -> ActorRef:
        """The ref of the actor ``address`` names (creating it for getOrCreate/create).

        ``then``: the address to look up if the id came from the runtime's memory of
        keys and its actor is found destroyed (default ``address``): a gateway that
        asks ``get`` first, to call a creation gate only when it must create, passes its
        getOrCreate here, so that a stale memory still ends in the key's actor."""
        if address.actor_id is not None:
            return ActorRef(self._runtime, address.actor_id)
        runtime = self._runtime
        name, key, method, input = address.name, address.key, address.method, address.input
        remembered = method != "create" and runtime.remembers(name, key)
        actor_id = await runtime.resolve(name, key, method, input)
        if not remembered:
            return ActorRef(runtime, actor_id)
        if then is not None:
            method, input = then.method, then.input

        async def refind() -> str:
            return await runtime.resolve(name, key, method, input, fresh=True)

        return ActorRef(runtime, actor_id, refind=refind)

    async def perform_in(self, instance: ActorInstance, operation: Operation) -> Any:
        """Perform an operation that an actor starts on itself (a schedule fire): the
        same path as a ref's, pinned to that instance, so that a fire racing a stop
        fails with the instance instead of waking a newer one."""
        return await perform_on(instance, operation, NO_CONNECTION)

    def ref(self, actor_id: str, *, forwarded: bool = False) -> ActorRef:
        """The ref of the actor with this id (not checked until it is used).

        ``forwarded``: the request was forwarded here by another node of the cluster,
        which found this node owning the actor; it is served here or refused with
        ``actor.not_owner``, never forwarded again.
        """
        return ActorRef(self._runtime, actor_id, forwarded)

    # ------------------------------------------------------------------ directory

    async def find(self, name: str, key: str | Sequence[str] | None) -> ActorSummary | None:
        """The stored actor with this name and key, or ``None``."""
        record = await self._runtime.store.find_actor(name, normalize_key(key))
        return None if record is None else ActorSummary.of(record)

    async def get(self, actor_id: str) -> ActorSummary | None:
        """The actor with this id, or ``None``."""
        record = await self._runtime.store.get_actor(actor_id)
        return None if record is None else ActorSummary.of(record)

    async def list(
        self, *, name: str | None = None, after: str | None = None, limit: int = 100
    ) -> list[ActorSummary]:
        """Actors ordered by id, optionally of one name, after a given id."""
        records = await self._runtime.store.list_actors(name=name, after=after, limit=limit)
        return [ActorSummary.of(record) for record in records]

    async def count(self, name: str | None = None) -> int:
        """How many actors are stored (of one name, if given), awake or asleep."""
        return await self._runtime.store.count_actors(name=name)

    def awake(self) -> dict[str, int]:
        """How many actors of each name are awake in this process."""
        counts: dict[str, int] = {}
        for instance in self._runtime.live_instances():
            counts[instance.name] = counts.get(instance.name, 0) + 1
        return counts

    async def get_or_create(
        self, name: str, key: str | Sequence[str] | None, input: Any = None
    ) -> tuple[ActorSummary, bool]:
        """``(actor, created)``: the actor with this name and key, created if new."""
        actor_id, created = await self._runtime.get_or_create_actor(name, key, input)
        summary = await self.get(actor_id)
        if summary is None:  # the id remembered for the key: its actor was destroyed since
            actor_id, created = await self._runtime.get_or_create_actor(
                name, key, input, fresh=True
            )
        return await self._summary(actor_id), created

    async def create(
        self, name: str, key: str | Sequence[str] | None, input: Any = None
    ) -> ActorSummary:
        """Create a new actor; ``actor.duplicate_key`` if the key exists."""
        return await self._summary(await self._runtime.create_actor(name, key, input))

    async def _summary(self, actor_id: str) -> ActorSummary:
        summary = await self.get(actor_id)
        if summary is None:
            raise ActorNotFound()
        return summary
