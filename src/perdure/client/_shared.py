"""What :class:`~perdure.client.AsyncClient` and :class:`~perdure.client.Client` share
above the I/O: the client (configuration, HTTP pool, connection bookkeeping), the
accessor, the handle, and the dynamic ``obj.<action>(...)`` attributes.

The bases here build every request (through :mod:`perdure.client._base`) and keep every
piece of state; the subclasses in :mod:`~perdure.client.aio` and
:mod:`~perdure.client.sync` only *perform* requests (``await`` an ``httpx.AsyncClient``
or block on an ``httpx.Client``) and declare the public methods that do so, since a
method is either ``async`` or not.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Generic, TypeVar, cast

import httpx

from perdure.client._base import (
    DEFAULT_ENDPOINT,
    DEFAULT_MAX_RECONNECT_DELAY,
    DEFAULT_TIMEOUT,
    ClientConfig,
    HttpCall,
    HttpReply,
    IdTarget,
    KeyArg,
    QueueResult,
    Target,
    action_call,
    create_call,
    query_target,
    queue_call,
    resolve_call,
)
from perdure.client._errors import ConnectionDisposed, TransportError, TransportTimeout
from perdure.client._frames import user_agent
from perdure.client._retry import DEFAULT_RETRIES, request_key
from perdure.handles import (
    WORKFLOW_RESULT_ACTION,
    WORKFLOW_STATUS_ACTION,
    Duration,
    IdempotencyKeyed,
    Instant,
    WorkflowStatus,
)

__all__ = [
    "AccessorBase",
    "ActionAttributes",
    "ClientBase",
    "HandleBase",
    "reply_of",
]

R = TypeVar("R")
TransportT = TypeVar("TransportT")
HttpT = TypeVar("HttpT", bound="httpx.Client | httpx.AsyncClient")
AccessorT = TypeVar("AccessorT")
ConnT = TypeVar("ConnT")
ClientT = TypeVar("ClientT", bound="ClientBase[Any, Any, Any, Any]")
HandleT = TypeVar("HandleT")


class ActionAttributes(Generic[R]):
    """Unknown public attributes are actions: ``obj.increment(5)`` is
    ``obj.action("increment", 5)``. ``R`` is what :meth:`action` returns (an awaitable in
    the async client)."""

    def action(self, name: str, *args: Any) -> R:
        """Call action ``name`` with ``args``."""
        raise NotImplementedError

    def __getattr__(self, name: str) -> Callable[..., R]:
        if name.startswith("_"):
            raise AttributeError(name)
        # A partial of a coroutine function still reads as one to inspect and asyncio.
        call = functools.partial(self.action, name)
        call.__name__ = name  # type: ignore[attr-defined]  # partials take attributes
        return call


class ClientBase(Generic[TransportT, HttpT, AccessorT, ConnT]):
    """The configuration, the HTTP pool and the open connections of a client.

    Parametrised by the HTTP transport and pool types and by the accessor and connection
    classes of the concrete client, which names its pool class (``_pool``) and its
    accessor (:meth:`actor`) and performs requests (``_perform``).
    """

    # httpx.AsyncClient or httpx.Client: one keep-alive pool for every handle.
    _pool: Callable[..., HttpT]

    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        *,
        encoding: str = "json",
        headers: Mapping[str, str] | None = None,
        namespace: str | None = None,
        token: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        max_reconnect_delay: float = DEFAULT_MAX_RECONNECT_DELAY,
        retries: int = DEFAULT_RETRIES,
        transport: TransportT | None = None,
    ) -> None:
        self.config = ClientConfig.build(
            endpoint,
            encoding=encoding,
            headers=headers,
            namespace=namespace,
            token=token,
            timeout=timeout,
            max_reconnect_delay=max_reconnect_delay,
            retries=retries,
        )
        self._http: HttpT = self._pool(
            transport=transport, timeout=timeout, headers={"user-agent": user_agent()}
        )
        self._connections: set[ConnT] = set()
        # Guards the set and the closed flag: the blocking client's connections untrack
        # themselves from their own threads (uncontended in the asyncio client).
        self._lock = threading.Lock()
        self._closed = False

    def actor(self, name: str) -> AccessorT:
        """The accessor for actors named ``name``."""
        raise NotImplementedError

    def __getattr__(self, name: str) -> AccessorT:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.actor(name)

    def _check_open(self) -> None:
        if self._closed:
            raise ConnectionDisposed("The client is closed.")

    @contextmanager
    def _exchange(self, call: HttpCall[Any]) -> Iterator[httpx.Request]:
        """The request ``call`` stands for, on this client's pool (refused once closed);
        httpx's failures while it is sent become :class:`TransportError`
        (:class:`TransportTimeout` when no answer came in time), ``retryable`` when the
        exchange got no answer (refused, broken, timed out)."""
        self._check_open()
        request = self._http.build_request(
            call.method,
            call.url,
            headers=call.headers,
            content=call.content,
            timeout=httpx.Timeout(call.timeout),
        )
        try:
            yield request
        except httpx.TimeoutException as exc:
            raise TransportTimeout(
                f"{call.method} {call.url}: no answer within {call.timeout} s.", retryable=True
            ) from exc
        except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
            raise TransportError(
                f"{call.method} {call.url} failed: {exc!r}", retryable=True
            ) from exc
        except httpx.HTTPError as exc:
            raise TransportError(f"{call.method} {call.url} failed: {exc!r}") from exc

    def _track(self, conn: ConnT) -> None:
        with self._lock:
            self._connections.add(conn)

    def _untrack(self, conn: ConnT) -> None:
        with self._lock:
            self._connections.discard(conn)

    def _closing(self) -> list[ConnT] | None:
        """Mark the client closed: the connections to dispose, or ``None`` if it already
        was (closing is idempotent)."""
        with self._lock:
            if self._closed:
                return None
            self._closed = True
            return list(self._connections)


def reply_of(response: httpx.Response) -> HttpReply:
    """What :attr:`HttpCall.parse` reads from an httpx response."""
    return HttpReply(response.status_code, response.headers, response.content)


class AccessorBase(Generic[ClientT, HandleT]):
    """Handles to the actors of one name (``client.<name>``)."""

    def __init__(self, client: ClientT, name: str) -> None:
        self._client = client
        self.name = name

    def _handle(self, target: Target, params: Any) -> HandleT:
        raise NotImplementedError

    def get(self, key: KeyArg = None, *, params: Any = None) -> HandleT:
        """A handle to the existing actor ``key``; calls fail with ``actor.not_found``
        if it does not exist (at once: no retry)."""
        return self._handle(query_target(self.name, key, "get"), params)

    def get_or_create(
        self, key: KeyArg = None, *, input: Any = None, params: Any = None
    ) -> HandleT:
        """A handle that creates the actor ``key`` (with ``input``) on first use."""
        return self._handle(query_target(self.name, key, "getOrCreate", input), params)

    def get_for_id(self, actor_id: str, *, params: Any = None) -> HandleT:
        """A handle to the actor with id ``actor_id``."""
        return self._handle(IdTarget(self.name, actor_id), params)

    def _create_call(self, key: KeyArg, input: Any) -> HttpCall[str]:
        return create_call(self._client.config, self.name, key, input)


class HandleBase(IdempotencyKeyed, Generic[ClientT]):
    """The address of one actor and the requests a handle makes to it; the subclasses
    perform them (``action``, ``send``, ``resolve``) and open connections."""

    def __init__(self, client: ClientT, target: Target, params: Any) -> None:
        self._client = client
        self._target = target
        self._params = params

    def _key(self, key: str | None = None) -> str | None:
        """A request's idempotency key: ``key``, the handle's, or a fresh one when the
        client retries (docs/clients.md, "Retries")."""
        chosen = key if key is not None else self._idempotency_key
        return request_key(self._client.config.retries, chosen)

    def _action_call(self, name: str, args: tuple[Any, ...]) -> HttpCall[Any]:
        # An action may only read: it carries a key, and is retried, when the caller
        # gave one (with_idempotency_key). A generated key would turn every read into a
        # write of the key's record (docs/clients.md, "Retries").
        config = self._client.config
        chosen = self._idempotency_key
        key = None if chosen is None else request_key(config.retries, chosen)
        return action_call(config, self._target, name, args, self._params).keyed(key)

    def _queue_call(
        self,
        name: str,
        body: Any,
        *,
        wait: bool,
        timeout: Duration | None,
        delay: Duration | None = None,
        at: Instant | None = None,
    ) -> HttpCall[QueueResult | None]:
        config = self._client.config
        return queue_call(
            config,
            self._target,
            name,
            body,
            self._params,
            wait=wait,
            timeout=timeout,
            delay=delay,
            at=at,
        )

    def _status_call(self) -> HttpCall[WorkflowStatus]:
        """The built-in ``$workflow`` action (a workflow actor's status; a read)."""
        config = self._client.config
        call = action_call(
            config, self._target, WORKFLOW_STATUS_ACTION, (), self._params, read=True
        )
        return cast("HttpCall[WorkflowStatus]", call)

    def _workflow_call(
        self, action: str, args: Sequence[Any], wait: float = 0.0
    ) -> HttpCall[WorkflowStatus]:
        """A built-in workflow action (``$workflow_cancel``…); ``wait``: how long the
        server may hold the answer (``$workflow_result``, a read), added to the HTTP
        timeout. The controls carry an idempotency key, as any action call."""
        config = self._client.config
        if action == WORKFLOW_RESULT_ACTION:
            call = action_call(config, self._target, action, args, self._params, read=True)
        else:
            call = action_call(config, self._target, action, args, self._params)
            call = call.keyed(self._key())
        if wait and call.timeout is not None:
            call = dataclasses.replace(call, timeout=call.timeout + wait)
        return cast("HttpCall[WorkflowStatus]", call)

    def _resolve_call(self) -> HttpCall[str] | str:
        return resolve_call(self._client.config, self._target)

    def _conn_params(self, params: Any) -> Any:
        """A connection's params: ``params`` if given, else the handle's."""
        return params if params is not None else self._params
