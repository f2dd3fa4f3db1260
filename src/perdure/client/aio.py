"""The asyncio client: :class:`AsyncClient`, built on ``httpx.AsyncClient`` (one keep-alive
pool for every handle) and the ``websockets`` asyncio client (one socket per connection).

::

    async with create_client("http://localhost:6420") as client:
        counter = client.counter.get_or_create(["main"])
        print(await counter.increment(5))           # unknown attributes are actions
        conn = counter.connect()
        conn.on("newCount", lambda count: print("count", count))
        await conn.wait_open()
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TypeVar, overload

import httpx
from websockets.asyncio.client import ClientConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

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
from perdure.client._connstate import (
    Backoff,
    Call,
    ConnectionCore,
    Effect,
    Reject,
    Resolve,
    Send,
)
from perdure.client._errors import ConnectionDisposed, TransportError, TransportTimeout
from perdure.client._socket import (
    OPEN_TIMEOUT,
    SocketPlan,
    decode_frame,
    encode_frame,
    handshake_error,
    plan_socket,
    user_agent,
)
from perdure.client._view import ConnectionView

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
    )


class AsyncClient:
    """Talks to a perdure (or Rivet) server from asyncio code.

    ``client.<actor name>`` (or ``client.actor(name)``) gives an accessor with ``get``,
    ``get_or_create``, ``create`` and ``get_for_id``. ``encoding`` is ``"json"`` (the
    default), ``"cbor"`` or ``"bare"``; ``headers`` go on every request and upgrade;
    ``timeout`` (seconds, ``None`` for none) bounds each request and each action.
    Use it as ``async with`` or call :meth:`close`: that closes the HTTP pool and
    disposes every connection.

    Unlike the official client, a ``get`` handle does not retry ``actor.not_found`` for
    seconds: a missing actor fails at once with :class:`~perdure.client.ActorError`.
    """

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
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.config = ClientConfig.build(
            endpoint,
            encoding=encoding,
            headers=headers,
            namespace=namespace,
            token=token,
            timeout=timeout,
            max_reconnect_delay=max_reconnect_delay,
        )
        self._http = httpx.AsyncClient(
            transport=transport, timeout=timeout, headers={"user-agent": user_agent()}
        )
        self._connections: set[AsyncActorConnection] = set()
        self._closed = False

    def actor(self, name: str) -> AsyncActorAccessor:
        """The accessor for actors named ``name``."""
        return AsyncActorAccessor(self, name)

    def __getattr__(self, name: str) -> AsyncActorAccessor:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.actor(name)

    async def close(self) -> None:
        """Dispose every connection and close the HTTP pool (idempotent)."""
        if self._closed:
            return
        self._closed = True
        await asyncio.gather(*(conn.dispose() for conn in list(self._connections)))
        await self._http.aclose()

    dispose = close

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _perform(self, call: HttpCall[T]) -> T:
        if self._closed:
            raise ConnectionDisposed("The client is closed.")
        try:
            response = await self._http.request(
                call.method,
                call.url,
                headers=call.headers,
                content=call.content,
                timeout=httpx.Timeout(call.timeout),
            )
        except httpx.TimeoutException as exc:
            raise TransportTimeout(
                f"{call.method} {call.url}: no answer within {call.timeout} s."
            ) from exc
        except httpx.HTTPError as exc:
            raise TransportError(f"{call.method} {call.url} failed: {exc!r}") from exc
        return call.parse(HttpReply(response.status_code, response.headers, response.content))


class AsyncActorAccessor:
    """Handles to the actors of one name (``client.<name>``)."""

    def __init__(self, client: AsyncClient, name: str) -> None:
        self._client = client
        self.name = name

    def get(self, key: KeyArg = None, *, params: Any = None) -> AsyncActorHandle:
        """A handle to the existing actor ``key``; calls fail with ``actor.not_found``
        if it does not exist (at once: no retry)."""
        return AsyncActorHandle(self._client, query_target(self.name, key, "get"), params)

    def get_or_create(
        self, key: KeyArg = None, *, input: Any = None, params: Any = None
    ) -> AsyncActorHandle:
        """A handle that creates the actor ``key`` (with ``input``) on first use."""
        target = query_target(self.name, key, "getOrCreate", input)
        return AsyncActorHandle(self._client, target, params)

    async def create(
        self, key: KeyArg = None, *, input: Any = None, params: Any = None
    ) -> AsyncActorHandle:
        """Create the actor ``key`` now and return a handle bound to its id.

        Fails with ``ActorError`` (``actor.duplicate_key``) if the key is taken.
        """
        actor_id = await self._client._perform(
            create_call(self._client.config, self.name, key, input)
        )
        return self.get_for_id(actor_id, params=params)

    def get_for_id(self, actor_id: str, *, params: Any = None) -> AsyncActorHandle:
        """A handle to the actor with id ``actor_id``."""
        return AsyncActorHandle(self._client, IdTarget(self.name, actor_id), params)


class AsyncActorHandle:
    """Calls one actor over HTTP: ``await handle.<action>(*args)``, :meth:`action`,
    :meth:`send`, :meth:`resolve`; :meth:`connect` opens a connection for events.

    Any attribute that is not one of those methods is an action; call an action named
    like a method (``send``, ``connect`` …) with ``handle.action("send", …)``.
    Handles are cheap and hold no connection; a ``get``/``get_or_create`` handle is
    resolved by the gateway on every call.
    """

    def __init__(self, client: AsyncClient, target: Target, params: Any) -> None:
        self._client = client
        self._target = target
        self._params = params

    async def action(self, name: str, *args: Any) -> Any:
        """Call action ``name`` with ``args`` and return its output."""
        config = self._client.config
        return await self._client._perform(
            action_call(config, self._target, name, args, self._params)
        )

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith("_"):
            raise AttributeError(name)

        async def call(*args: Any) -> Any:
            return await self.action(name, *args)

        call.__name__ = name
        return call

    @overload
    async def send(
        self, name: str, body: Any, *, wait: Literal[False] = False, timeout: float | None = None
    ) -> None: ...

    @overload
    async def send(
        self, name: str, body: Any, *, wait: Literal[True], timeout: float | None = None
    ) -> QueueResult: ...

    async def send(
        self, name: str, body: Any, *, wait: bool = False, timeout: float | None = None
    ) -> QueueResult | None:
        """Send ``body`` to the actor's queue ``name`` (durably enqueued on return).

        With ``wait=True`` wait until the message is completed or ``timeout`` seconds
        pass: ``{"status": "completed" | "timedOut", "response": …}``.
        """
        call = queue_call(
            self._client.config, self._target, name, body, self._params, wait=wait, timeout=timeout
        )
        return await self._client._perform(call)

    async def resolve(self) -> str:
        """The actor's id (a ``get_or_create`` handle creates the actor if needed)."""
        plan = resolve_call(self._client.config, self._target)
        if isinstance(plan, str):
            return plan
        return await self._client._perform(plan)

    def connect(self, params: Any = None) -> AsyncActorConnection:
        """Open a connection (in the background; needs a running event loop).

        ``params`` default to the handle's; they reach the actor's ``on_before_connect``.
        """
        if self._client._closed:
            raise ConnectionDisposed("The client is closed.")
        conn = AsyncActorConnection(
            self._client, self._target, params if params is not None else self._params
        )
        self._client._connections.add(conn)
        return conn


class AsyncActorConnection(ConnectionView):
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
        self._client = client
        self._config = client.config
        self._plan: SocketPlan = plan_socket(client.config, target, params)
        self._core: ConnectionCore[asyncio.Future[Any]] = ConnectionCore(
            Backoff(maximum=self._config.max_reconnect_delay)
        )
        self._loop = asyncio.get_running_loop()
        self._outbox: asyncio.Queue[Send] | None = None
        self._ws: ClientConnection | None = None
        self._callback_tasks: set[asyncio.Task[Any]] = set()
        self._task = self._loop.create_task(self._run(), name=f"perdure-conn-{target.name}")

    # -- calls --------------------------------------------------------------------------

    async def wait_open(self, timeout: float | None = 10.0) -> None:
        """Wait until the connection is open.

        Raises the server's :class:`~perdure.client.ActorError` if it refuses the
        connection, :class:`~perdure.client.TransportTimeout` after ``timeout`` seconds.
        """
        future: asyncio.Future[Any] = self._loop.create_future()
        self._apply(self._core.add_open_waiter(future))
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            if future.done() and not future.cancelled():
                raise
            raise TransportTimeout(f"The connection did not open within {timeout} s.") from None
        finally:
            self._core.remove_open_waiter(future)

    async def action(self, name: str, *args: Any) -> Any:
        """Call action ``name`` over the connection and return its output."""
        future: asyncio.Future[Any] = self._loop.create_future()
        action_id, effects = self._core.request_action(name, list(args), future)
        self._apply(effects)
        timeout = self._config.timeout
        try:
            return await asyncio.wait_for(future, timeout)
        except TimeoutError:
            if future.done() and not future.cancelled():
                raise
            raise TransportTimeout(
                f"Action {name!r} got no answer within {timeout} s "
                f"(connection status: {self.status})."
            ) from None
        finally:
            self._core.abandon_action(action_id)

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith("_"):
            raise AttributeError(name)

        async def call(*args: Any) -> Any:
            return await self.action(name, *args)

        call.__name__ = name
        return call

    async def dispose(self) -> None:
        """Close the connection for good (close code 1000, reason ``"Disposed"``);
        pending actions fail with :class:`~perdure.client.ConnectionDisposed`."""
        if self._core.disposed:
            return
        self._apply(self._core.dispose())
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
        self._client._connections.discard(self)

    async def __aenter__(self) -> AsyncActorConnection:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.dispose()

    # -- I/O ----------------------------------------------------------------------------

    def _apply(self, effects: list[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, Send):
                if self._outbox is not None:
                    self._outbox.put_nowait(effect)
            elif isinstance(effect, Resolve):
                if not effect.future.done():
                    effect.future.set_result(effect.value)
            elif isinstance(effect, Reject):
                if not effect.future.done():
                    effect.future.set_exception(effect.error)
            elif isinstance(effect, Call):
                self._call(effect)

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
            self._apply(self._core.connecting())
            try:
                code, reason, opened = await self._session()
            except Exception as exc:
                # A bug must not end the task silently and leave callers waiting.
                logger.exception("The connection's reader failed")
                self._apply(self._core.transport_error(TransportError(repr(exc))))
                code, reason, opened = 1006, "", False
            self._apply(self._core.socket_closed(code, reason, opened=opened))
            if self._core.disposed:
                return
            await asyncio.sleep(self._core.next_reconnect_delay())

    async def _session(self) -> tuple[int, str, bool]:
        """One socket, from the upgrade to the close: (close code, reason, opened)."""
        opened = False
        plan = self._plan
        try:
            async with ws_connect(
                plan.url,
                subprotocols=plan.subprotocols,
                additional_headers=plan.headers,
                open_timeout=OPEN_TIMEOUT,
                max_size=plan.max_size,
                user_agent_header=plan.user_agent,
            ) as ws:
                if self._core.disposed:
                    return 1000, "Disposed", False
                self._ws = ws
                self._outbox = asyncio.Queue()
                writer = self._loop.create_task(self._write(ws, self._outbox))
                try:
                    opened = await self._read(ws)
                finally:
                    writer.cancel()
                    await asyncio.gather(writer, return_exceptions=True)
                    self._ws = None
                    self._outbox = None
                return ws.close_code or 1006, ws.close_reason or "", opened
        except InvalidStatus as exc:
            self._apply(handshake_error(self._core, exc, self._config.encoding))
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            self._apply(self._core.transport_error(TransportError(_describe(plan.url, exc))))
        return 1006, "", opened

    async def _read(self, ws: ClientConnection) -> bool:
        opened = False
        try:
            async for frame in ws:
                effects, is_init = decode_frame(self._core, frame, self._config.encoding)
                opened = opened or is_init
                self._apply(effects)
        except ConnectionClosed:
            pass  # the close code and reason are read from the socket afterwards
        return opened

    async def _write(self, ws: ClientConnection, outbox: asyncio.Queue[Send]) -> None:
        # One writer per socket keeps frames in the order the core produced them.
        try:
            while True:
                effect = await outbox.get()
                await ws.send(encode_frame(effect.message, self._config.encoding))
        except ConnectionClosed:
            return


async def _guard(awaitable: Awaitable[Any], callback: Callable[..., Any]) -> None:
    try:
        await awaitable
    except Exception:
        logger.exception("A connection callback %r raised", callback)


def _describe(url: str, exc: BaseException) -> str:
    detail = str(exc) or type(exc).__name__
    return f"Cannot open the connection to {url.split('?', 1)[0]}: {detail}"
