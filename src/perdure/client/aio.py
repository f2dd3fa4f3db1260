"""The asyncio client: :class:`AsyncClient`, built on ``httpx.AsyncClient`` (one keep-alive
pool for every handle) and the ``websockets`` asyncio client (one socket per connection).

::

    async with create_client("http://localhost:6420") as client:
        counter = client.counter.get_or_create(["main"])
        print(await counter.increment(5))           # unknown attributes are actions
        conn = counter.connect()
        conn.on("newCount", lambda count: print("count", count))
        await conn.wait_open()

This module holds the asyncio I/O only (awaiting httpx, a reader task and a writer task
per socket, callbacks run inline or as tasks); what a request is and what a connection
does are written once in ``_shared`` and ``_connection`` (see :mod:`perdure.client`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import httpx
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed

from perdure.client._base import (
    DEFAULT_ENDPOINT,
    DEFAULT_MAX_RECONNECT_DELAY,
    DEFAULT_TIMEOUT,
    HttpCall,
    KeyArg,
    QueueResult,
    Target,
)
from perdure.client._connection import ConnectionBase
from perdure.client._connstate import Call
from perdure.client._errors import ActorError, TransportError
from perdure.client._frames import encode_frame
from perdure.client._retry import DEFAULT_RETRIES, Retrying
from perdure.client._shared import AccessorBase, ActionAttributes, ClientBase, HandleBase, reply_of
from perdure.handles import (
    WORKFLOW_CANCEL_ACTION,
    WORKFLOW_PAUSE_ACTION,
    WORKFLOW_RESULT_ACTION,
    WORKFLOW_RESUME_ACTION,
    ActorEvent,
    Duration,
    EventGap,
    Instant,
    ResultWait,
    WorkflowStatus,
    seconds,
)
from perdure.protocol.messages import ToServer
from perdure.protocol.resume import check_since

__all__ = [
    "AsyncActorAccessor",
    "AsyncActorConnection",
    "AsyncActorHandle",
    "AsyncClient",
    "create_client",
]

logger = logging.getLogger("perdure.client")
T = TypeVar("T")


def create_client(
    endpoint: str = DEFAULT_ENDPOINT,
    *,
    encoding: str = "json",
    headers: Mapping[str, str] | None = None,
    namespace: str | None = None,
    token: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    max_reconnect_delay: float = DEFAULT_MAX_RECONNECT_DELAY,
    retries: int = DEFAULT_RETRIES,
) -> AsyncClient:
    """An :class:`AsyncClient` for the server at ``endpoint``; see :class:`AsyncClient`."""
    return AsyncClient(
        endpoint,
        encoding=encoding,
        headers=headers,
        namespace=namespace,
        token=token,
        timeout=timeout,
        max_reconnect_delay=max_reconnect_delay,
        retries=retries,
    )


class AsyncClient(
    ClientBase[
        httpx.AsyncBaseTransport, httpx.AsyncClient, "AsyncActorAccessor", "AsyncActorConnection"
    ]
):
    """Talks to a perdure (or Rivet) server from asyncio code.

    ``client.<actor name>`` (or ``client.actor(name)``) gives an accessor with ``get``,
    ``get_or_create``, ``create`` and ``get_for_id``. ``encoding`` is ``"json"`` (the
    default), ``"cbor"`` or ``"bare"``; ``headers`` go on every request and upgrade;
    ``timeout`` (seconds, ``None`` for none) bounds each request and each action.
    ``retries`` (default 3, 0 for none): how many times a send or an action call whose
    outcome is unknown (no answer, a 503) is tried again with its idempotency key, so it
    is applied once and answered (docs/clients.md, "Retries").
    Use it as ``async with`` or call :meth:`close`: that closes the HTTP pool and
    disposes every connection.

    Unlike the official client, a ``get`` handle does not retry ``actor.not_found`` for
    seconds: a missing actor fails at once with :class:`~perdure.client.ActorError`.
    """

    _pool = httpx.AsyncClient

    def actor(self, name: str) -> AsyncActorAccessor:
        """The accessor for actors named ``name``."""
        return AsyncActorAccessor(self, name)

    async def close(self) -> None:
        """Dispose every connection and close the HTTP pool (idempotent)."""
        connections = self._closing()
        if connections is None:
            return
        await asyncio.gather(*(conn.dispose() for conn in connections))
        await self._http.aclose()

    dispose = close

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _perform(self, call: HttpCall[T]) -> T:
        """Send ``call``; again, after a pause, while its outcome is unknown and it
        may be retried (docs/clients.md, "Retries")."""
        retrying = Retrying(self.config.retries if call.retryable else 0)
        while True:
            try:
                with self._exchange(call) as request:
                    response = await self._http.send(request)
                return call.parse(reply_of(response))
            except (TransportError, ActorError) as exc:
                pause = retrying.pause(exc)
                if pause is None:
                    raise
            await asyncio.sleep(pause)


class AsyncActorAccessor(AccessorBase[AsyncClient, "AsyncActorHandle"]):
    """Handles to the actors of one name (``client.<name>``)."""

    def _handle(self, target: Target, params: Any) -> AsyncActorHandle:
        return AsyncActorHandle(self._client, target, params)

    async def create(
        self, key: KeyArg = None, *, input: Any = None, params: Any = None
    ) -> AsyncActorHandle:
        """Create the actor ``key`` now and return a handle bound to its id.

        Fails with ``ActorError`` (``actor.duplicate_key``) if the key is taken.
        """
        actor_id = await self._client._perform(self._create_call(key, input))
        return self.get_for_id(actor_id, params=params)


class AsyncActorHandle(HandleBase[AsyncClient], ActionAttributes[Awaitable[Any]]):
    """Calls one actor over HTTP: ``await handle.<action>(*args)``, :meth:`action`,
    :meth:`send`, :meth:`resolve`; :meth:`connect` opens a connection for events.

    Any attribute that is not one of those methods is an action; call an action named
    like a method (``send``, ``connect`` …) with ``handle.action("send", …)``.
    Handles are cheap and hold no connection; a ``get``/``get_or_create`` handle is
    resolved by the gateway on every call.
    """

    async def action(self, name: str, *args: Any) -> Any:
        """Call action ``name`` with ``args`` and return its output."""
        return await self._client._perform(self._action_call(name, args))

    @overload
    async def send(
        self,
        queue: str,
        body: Any,
        *,
        wait: Literal[False] = False,
        timeout: Duration | None = None,
        delay: Duration | None = None,
        at: Instant | None = None,
        idempotency_key: str | None = None,
    ) -> None: ...

    @overload
    async def send(
        self,
        queue: str,
        body: Any,
        *,
        wait: Literal[True],
        timeout: Duration | None = None,
        idempotency_key: str | None = None,
    ) -> QueueResult: ...

    async def send(
        self,
        queue: str,
        body: Any,
        *,
        wait: bool = False,
        timeout: Duration | None = None,
        delay: Duration | None = None,
        at: Instant | None = None,
        idempotency_key: str | None = None,
    ) -> QueueResult | None:
        """Send ``body`` to the actor's queue ``queue`` (durably enqueued on return).

        With ``wait=True`` wait until the message is completed or ``timeout`` (seconds
        or a ``timedelta``) passes: a :class:`~perdure.handles.SendResult` with
        ``status`` ``"completed"`` or ``"timedOut"`` and the ``response``.

        With ``delay`` (seconds or a ``timedelta``) or ``at`` (an aware ``datetime`` or
        epoch ms) the message is stored now and received from then on (docs/queues.md,
        "Delayed sends"); a delayed send cannot wait.

        ``idempotency_key``: applied at most once per key; a retry gets the first answer
        (docs/idempotency.md). Without one, the client makes one when it retries.
        """
        call = self._queue_call(queue, body, wait=wait, timeout=timeout, delay=delay, at=at)
        return await self._client._perform(call.keyed(self._key(idempotency_key)))

    async def workflow_status(self) -> WorkflowStatus:
        """The actor's workflow status ``{status, error, output}`` (``$workflow``)."""
        return await self._client._perform(self._status_call())

    async def workflow_result(self, timeout: Duration | None = None) -> Any:
        """Wait for the workflow to end and return its output (``$workflow_result``):
        :class:`~perdure.errors.WorkflowFailed` or :class:`~perdure.errors.WorkflowCancelled`
        if it did not complete, ``TimeoutError`` after ``timeout``. One request waits
        for the end (the server answers one within five minutes; then it asks again)."""
        wait = ResultWait(timeout)
        while True:
            seconds = wait.seconds()
            call = self._workflow_call(WORKFLOW_RESULT_ACTION, [seconds], seconds)
            status: WorkflowStatus = await self._client._perform(call)
            done, output = wait.settle(status)
            if done:
                return output

    async def cancel_workflow(self, reason: str | None = None) -> WorkflowStatus:
        """Cancel the workflow's run at its next durable point (``$workflow_cancel``);
        ``workflow.not_running`` (409) if it has ended."""
        return await self._client._perform(self._workflow_call(WORKFLOW_CANCEL_ACTION, [reason]))

    async def pause_workflow(self) -> WorkflowStatus:
        """Hold the run before its next step until resumed (``$workflow_pause``)."""
        return await self._client._perform(self._workflow_call(WORKFLOW_PAUSE_ACTION, []))

    async def resume_workflow(self) -> WorkflowStatus:
        """Let a paused run go on (``$workflow_resume``)."""
        return await self._client._perform(self._workflow_call(WORKFLOW_RESUME_ACTION, []))

    async def resolve(self) -> str:
        """The actor's id (a ``get_or_create`` handle creates the actor if needed)."""
        call = self._resolve_call()
        return call if isinstance(call, str) else await self._client._perform(call)

    def connect(self, params: Any = None) -> AsyncActorConnection:
        """Open a connection (in the background; needs a running event loop).

        ``params`` default to the handle's; they reach the actor's ``on_before_connect``.
        """
        return AsyncActorConnection(self._client, self._target, self._conn_params(params))

    async def events(
        self, since: int | None = None, *, params: Any = None
    ) -> AsyncIterator[ActorEvent | EventGap]:
        """Every event of the actor after number ``since`` (``None``: from now), each
        once and in order, across reconnects (docs/events.md): :class:`ActorEvent`
        items, and an :class:`EventGap` where the log no longer held what was asked
        for. A refused connection raises its :class:`~perdure.client.ActorError`."""
        start = check_since(since)
        conn = self.connect(params)
        items: asyncio.Queue[ActorEvent | EventGap | ActorError] = asyncio.Queue()
        conn._follow(items.put_nowait, start)
        try:
            while True:
                item = await items.get()
                if isinstance(item, ActorError):
                    raise item
                yield item
        finally:
            await conn.dispose()


class AsyncActorConnection(ConnectionBase["asyncio.Future[Any]", Awaitable[Any]]):
    """A live WebSocket connection to one actor: events, and actions over the socket.

    The socket opens in the background; ``status`` goes ``idle`` → ``connecting`` →
    ``connected`` (on the server's ``Init``) and ``disconnected`` when it drops, after
    which it reconnects by itself (250 ms doubling to 30 s, with jitter) and
    re-subscribes every event that has listeners. Actions made while disconnected wait
    for the next socket (up to the client timeout); actions in flight when the socket
    drops fail with :class:`~perdure.client.TransportError` (they may or may not have
    run). Callbacks may be plain functions or coroutine functions (run as tasks the
    connection owns); their exceptions are logged to ``perdure.client``.
    """

    def __init__(self, client: AsyncClient, target: Target, params: Any) -> None:
        self._loop = asyncio.get_running_loop()  # first: without a loop, nothing is tracked
        super().__init__(client, target, params)
        self._outbox: asyncio.Queue[ToServer] | None = None
        self._ws: ClientConnection | None = None
        self._callback_tasks: set[asyncio.Task[Any]] = set()
        client._track(self)
        self._task = self._loop.create_task(self._run(), name=f"perdure-conn-{target.name}")

    # -- calls --------------------------------------------------------------------------

    async def wait_open(self, timeout: Duration | None = 10.0) -> None:
        """Wait until the connection is open.

        Raises the server's :class:`~perdure.client.ActorError` if it refuses the
        connection, :class:`~perdure.client.TransportTimeout` after ``timeout`` (seconds
        or a ``timedelta``).
        """
        limit = seconds(timeout, "wait_open() timeout")
        with self._opening() as future:
            await _settled(future, limit, lambda: self._open_timeout(limit))

    async def action(self, name: str, *args: Any) -> Any:
        """Call action ``name`` over the connection and return its output."""
        with self._calling(name, args) as future:
            return await _settled(future, self._config.timeout, lambda: self._action_timeout(name))

    async def dispose(self) -> None:
        """Close the connection for good (close code 1000, reason ``"Disposed"``);
        pending actions fail with :class:`~perdure.client.ConnectionDisposed`."""
        if not self._dispose_core():
            return
        ws = self._ws
        if ws is not None:
            # Already gone means nothing is left to tell the server.
            with contextlib.suppress(OSError, ConnectionClosed):
                await ws.close(1000, "Disposed")
        self._task.cancel()
        current = asyncio.current_task()
        pending = [task for task in self._callback_tasks if task is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(self._task, *pending, return_exceptions=True)
        self._client._untrack(self)

    async def __aenter__(self) -> AsyncActorConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.dispose()

    # -- I/O ----------------------------------------------------------------------------

    def _new_future(self) -> asyncio.Future[Any]:
        return self._loop.create_future()

    def _send(self, message: ToServer) -> None:
        if self._outbox is not None:
            self._outbox.put_nowait(message)

    def _call(self, effect: Call) -> None:
        for callback in effect.callbacks:
            try:
                result = callback(*effect.args)
            except Exception:
                logger.exception("A connection callback %r raised", callback)
                continue
            if inspect.isawaitable(result):
                task = self._loop.create_task(_guard(result, callback))
                self._callback_tasks.add(task)
                task.add_done_callback(self._callback_tasks.discard)

    async def _run(self) -> None:
        while not self._core.disposed:
            self._connecting()
            code, reason = 1006, ""
            try:
                code, reason = await self._session()
            except Exception as exc:
                self._session_failed(exc)
            delay = self._session_ended(code, reason)
            if delay is None:
                return
            await asyncio.sleep(delay)

    async def _session(self) -> tuple[int, str]:
        """One socket, from the upgrade to the close: (close code, reason)."""
        async with ws_connect(self._plan.url, **self._socket_options()) as ws:
            if self._core.disposed:
                return 1000, "Disposed"
            self._ws = ws
            self._outbox = asyncio.Queue()
            writer = self._loop.create_task(self._write(ws, self._outbox))
            try:
                # The close code and reason are read from the socket afterwards.
                with contextlib.suppress(ConnectionClosed):
                    async for frame in ws:
                        self._received(frame)
            finally:
                writer.cancel()
                await asyncio.gather(writer, return_exceptions=True)
                self._ws = None
                self._outbox = None
            return ws.close_code or 1006, ws.close_reason or ""

    async def _write(self, ws: ClientConnection, outbox: asyncio.Queue[ToServer]) -> None:
        # One writer per socket keeps frames in the order the core produced them.
        try:
            while True:
                message = await outbox.get()
                await ws.send(encode_frame(message, self._config.encoding))
        except ConnectionClosed:
            return


async def _settled(
    future: asyncio.Future[Any], timeout: float | None, timed_out: Callable[[], Exception]
) -> Any:
    """``future``'s result, or ``timed_out()`` raised after ``timeout`` seconds."""
    try:
        return await asyncio.wait_for(future, timeout)
    except TimeoutError:
        if future.done() and not future.cancelled():
            raise  # the future itself failed with a timeout (a TransportTimeout)
        raise timed_out() from None


async def _guard(awaitable: Awaitable[Any], callback: Callable[..., Any]) -> None:
    try:
        await awaitable
    except Exception:
        logger.exception("A connection callback %r raised", callback)


if TYPE_CHECKING:
    # This client implements the one handle API of perdure.handles (checked by mypy).
    from perdure import handles

    _client: type[handles.Client] = AsyncClient
    _accessor: type[handles.Accessor] = AsyncActorAccessor
    _handle: type[handles.Handle] = AsyncActorHandle
    _connection: type[handles.Connection] = AsyncActorConnection
