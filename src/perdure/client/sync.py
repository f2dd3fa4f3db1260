"""The blocking client: :class:`Client`, built on ``httpx.Client`` (one keep-alive pool)
and the ``websockets`` threaded client.

::

    with Client("http://localhost:6420") as client:
        counter = client.counter.get_or_create(["main"])
        print(counter.increment(5))                 # unknown attributes are actions
        conn = counter.connect()
        conn.on("newCount", lambda count: print("count", count))
        conn.wait_open()

**Threads.** Each connection runs two daemon threads: a *reader* that owns the socket
(opens it, reads frames, resolves pending actions, reconnects) and a *callback thread*
that runs every listener and ``on_open``/``on_close``/``on_error``/``on_status_change``
callback, one at a time, in the order things happened. Callbacks therefore never run in
your thread, must be thread-safe with respect to your code, and may block (even call
actions on the same connection) without stalling the socket. A coroutine function may be
used as a callback: it runs to completion on the callback thread's own event loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import queue
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Literal, TypeVar, overload

import httpx
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

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
from perdure.client._connstate import Backoff, Call, ConnectionCore, Effect, Reject, Resolve, Send
from perdure.client._errors import ConnectionDisposed, TransportError, TransportTimeout
from perdure.client._socket import (
    OPEN_TIMEOUT,
    decode_frame,
    encode_frame,
    handshake_error,
    plan_socket,
    user_agent,
)
from perdure.client._view import ConnectionView

__all__ = ["ActorAccessor", "ActorConnection", "ActorHandle", "Client"]

logger = logging.getLogger("perdure.client")
T = TypeVar("T")
_Future = concurrent.futures.Future


class Client:
    """Talks to a perdure (or Rivet) server from blocking code.

    Same API as :class:`~perdure.client.AsyncClient`, without ``await``: ``client.<actor
    name>`` (or ``client.actor(name)``) gives an accessor with ``get``,
    ``get_or_create``, ``create`` and ``get_for_id``. Use it as ``with`` or call
    :meth:`close` (closes the HTTP pool and disposes every connection). A ``get`` of a
    missing actor fails at once with ``actor.not_found`` (no retry, unlike the official
    client). See the module docstring for the threads a connection uses.
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
        transport: httpx.BaseTransport | None = None,
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
        self._http = httpx.Client(
            transport=transport, timeout=timeout, headers={"user-agent": user_agent()}
        )
        self._connections: set[ActorConnection] = set()
        self._lock = threading.Lock()
        self._closed = False

    def actor(self, name: str) -> ActorAccessor:
        """The accessor for actors named ``name``."""
        return ActorAccessor(self, name)

    def __getattr__(self, name: str) -> ActorAccessor:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.actor(name)

    def close(self) -> None:
        """Dispose every connection and close the HTTP pool (idempotent)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            connections = list(self._connections)
        for conn in connections:
            conn.dispose()
        self._http.close()

    dispose = close

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _perform(self, call: HttpCall[T]) -> T:
        if self._closed:
            raise ConnectionDisposed("The client is closed.")
        try:
            response = self._http.request(
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

    def _track(self, conn: ActorConnection) -> None:
        with self._lock:
            self._connections.add(conn)

    def _untrack(self, conn: ActorConnection) -> None:
        with self._lock:
            self._connections.discard(conn)


class ActorAccessor:
    """Handles to the actors of one name (``client.<name>``)."""

    def __init__(self, client: Client, name: str) -> None:
        self._client = client
        self.name = name

    def get(self, key: KeyArg = None, *, params: Any = None) -> ActorHandle:
        """A handle to the existing actor ``key`` (``actor.not_found`` at once if absent)."""
        return ActorHandle(self._client, query_target(self.name, key, "get"), params)

    def get_or_create(
        self, key: KeyArg = None, *, input: Any = None, params: Any = None
    ) -> ActorHandle:
        """A handle that creates the actor ``key`` (with ``input``) on first use."""
        target = query_target(self.name, key, "getOrCreate", input)
        return ActorHandle(self._client, target, params)

    def create(self, key: KeyArg = None, *, input: Any = None, params: Any = None) -> ActorHandle:
        """Create the actor ``key`` now and return a handle bound to its id
        (``actor.duplicate_key`` if the key is taken)."""
        actor_id = self._client._perform(create_call(self._client.config, self.name, key, input))
        return self.get_for_id(actor_id, params=params)

    def get_for_id(self, actor_id: str, *, params: Any = None) -> ActorHandle:
        """A handle to the actor with id ``actor_id``."""
        return ActorHandle(self._client, IdTarget(self.name, actor_id), params)


class ActorHandle:
    """Calls one actor over HTTP: ``handle.<action>(*args)``, :meth:`action`,
    :meth:`send`, :meth:`resolve`; :meth:`connect` opens a connection for events."""

    def __init__(self, client: Client, target: Target, params: Any) -> None:
        self._client = client
        self._target = target
        self._params = params

    def action(self, name: str, *args: Any) -> Any:
        """Call action ``name`` with ``args`` and return its output."""
        config = self._client.config
        return self._client._perform(action_call(config, self._target, name, args, self._params))

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args: Any) -> Any:
            return self.action(name, *args)

        call.__name__ = name
        return call

    @overload
    def send(
        self, name: str, body: Any, *, wait: Literal[False] = False, timeout: float | None = None
    ) -> None: ...

    @overload
    def send(
        self, name: str, body: Any, *, wait: Literal[True], timeout: float | None = None
    ) -> QueueResult: ...

    def send(
        self, name: str, body: Any, *, wait: bool = False, timeout: float | None = None
    ) -> QueueResult | None:
        """Send ``body`` to the actor's queue ``name``; see
        :meth:`perdure.client.AsyncActorHandle.send`."""
        call = queue_call(
            self._client.config, self._target, name, body, self._params, wait=wait, timeout=timeout
        )
        return self._client._perform(call)

    def resolve(self) -> str:
        """The actor's id (a ``get_or_create`` handle creates the actor if needed)."""
        plan = resolve_call(self._client.config, self._target)
        if isinstance(plan, str):
            return plan
        return self._client._perform(plan)

    def connect(self, params: Any = None) -> ActorConnection:
        """Open a connection (in the background); ``params`` default to the handle's."""
        if self._client._closed:
            raise ConnectionDisposed("The client is closed.")
        conn = ActorConnection(
            self._client, self._target, params if params is not None else self._params
        )
        self._client._track(conn)
        conn._start()
        return conn


class ActorConnection(ConnectionView):
    """A live WebSocket connection to one actor; the blocking twin of
    :class:`~perdure.client.AsyncActorConnection` (same states, reconnects and errors).
    Callbacks run on the connection's callback thread (see the module docstring)."""

    def __init__(self, client: Client, target: Target, params: Any) -> None:
        self._client = client
        self._config = client.config
        self._plan = plan_socket(client.config, target, params)
        self._core: ConnectionCore[_Future[Any]] = ConnectionCore(
            Backoff(maximum=self._config.max_reconnect_delay)
        )
        # Guards the core and the socket reference; effects are applied while holding
        # it so frames and callbacks keep the order the core decided, whatever thread.
        self._lock = threading.RLock()
        self._ws: ClientConnection | None = None
        self._stop = threading.Event()
        self._calls: queue.SimpleQueue[Call | None] = queue.SimpleQueue()
        self._reader = threading.Thread(
            target=self._read_loop, name=f"perdure-conn-{target.name}", daemon=True
        )
        self._dispatcher = threading.Thread(
            target=self._dispatch_loop, name=f"perdure-callbacks-{target.name}", daemon=True
        )

    def _start(self) -> None:
        self._dispatcher.start()
        self._reader.start()

    def _guard(self) -> contextlib.AbstractContextManager[Any]:
        return self._lock

    # -- calls --------------------------------------------------------------------------

    def wait_open(self, timeout: float | None = 10.0) -> None:
        """Block until the connection is open; raises the server's ``ActorError`` if it
        refuses the connection, ``TransportTimeout`` after ``timeout`` seconds."""
        future: _Future[Any] = _Future()
        with self._lock:
            self._apply(self._core.add_open_waiter(future))
        try:
            future.result(timeout)
        except TimeoutError:
            if future.done():
                raise
            raise TransportTimeout(f"The connection did not open within {timeout} s.") from None
        finally:
            with self._lock:
                self._core.remove_open_waiter(future)

    def action(self, name: str, *args: Any) -> Any:
        """Call action ``name`` over the connection and return its output."""
        future: _Future[Any] = _Future()
        with self._lock:
            action_id, effects = self._core.request_action(name, list(args), future)
            self._apply(effects)
        timeout = self._config.timeout
        try:
            return future.result(timeout)
        except TimeoutError:
            if future.done():
                raise
            raise TransportTimeout(
                f"Action {name!r} got no answer within {timeout} s "
                f"(connection status: {self.status})."
            ) from None
        finally:
            with self._lock:
                self._core.abandon_action(action_id)

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args: Any) -> Any:
            return self.action(name, *args)

        call.__name__ = name
        return call

    def dispose(self) -> None:
        """Close the connection for good (1000 ``"Disposed"``) and stop its threads;
        pending actions fail with :class:`~perdure.client.ConnectionDisposed`."""
        with self._lock:
            if self._core.disposed:
                return
            self._apply(self._core.dispose())
            ws = self._ws
        self._stop.set()
        if ws is not None:
            with contextlib.suppress(OSError, ConnectionClosed):  # already gone
                ws.close(1000, "Disposed")
        current = threading.current_thread()
        if self._reader.is_alive() and current is not self._reader:
            self._reader.join(OPEN_TIMEOUT + 5)
        self._calls.put(None)
        if self._dispatcher.is_alive() and current is not self._dispatcher:
            self._dispatcher.join(OPEN_TIMEOUT + 5)
        self._client._untrack(self)

    def __enter__(self) -> ActorConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.dispose()

    # -- I/O ----------------------------------------------------------------------------

    def _apply(self, effects: list[Effect]) -> None:
        # Called with the lock held.
        for effect in effects:
            if isinstance(effect, Send):
                ws = self._ws
                if ws is not None:
                    # On a dead socket the reader sees the close and fails what was in flight.
                    with contextlib.suppress(ConnectionClosed, OSError):
                        ws.send(encode_frame(effect.message, self._config.encoding))
            elif isinstance(effect, Resolve):
                if not effect.future.done():
                    effect.future.set_result(effect.value)
            elif isinstance(effect, Reject):
                if not effect.future.done():
                    effect.future.set_exception(effect.error)
            elif isinstance(effect, Call):
                self._calls.put(effect)

    def _read_loop(self) -> None:
        while not self._stop.is_set():
            with self._lock:
                self._apply(self._core.connecting())
            try:
                code, reason, opened = self._session()
            except Exception as exc:
                # A bug must not kill the thread silently and leave callers waiting.
                logger.exception("The connection's reader failed")
                with self._lock:
                    self._apply(self._core.transport_error(TransportError(repr(exc))))
                code, reason, opened = 1006, "", False
            with self._lock:
                self._apply(self._core.socket_closed(code, reason, opened=opened))
                if self._core.disposed:
                    return
                delay = self._core.next_reconnect_delay()
            self._stop.wait(delay)

    def _session(self) -> tuple[int, str, bool]:
        """One socket, from the upgrade to the close: (close code, reason, opened)."""
        plan = self._plan
        try:
            with ws_connect(
                plan.url,
                subprotocols=plan.subprotocols,
                additional_headers=plan.headers,
                open_timeout=OPEN_TIMEOUT,
                max_size=plan.max_size,
                user_agent_header=plan.user_agent,
            ) as ws:
                return self._serve(ws)
        except InvalidStatus as exc:
            with self._lock:
                self._apply(handshake_error(self._core, exc, self._config.encoding))
        except (OSError, InvalidHandshake, TimeoutError) as exc:
            error = TransportError(
                f"Cannot open the connection to {plan.url.split('?', 1)[0]}: {exc}"
            )
            with self._lock:
                self._apply(self._core.transport_error(error))
        return 1006, "", False

    def _serve(self, ws: ClientConnection) -> tuple[int, str, bool]:
        with self._lock:
            if self._core.disposed:
                return 1000, "Disposed", False
            self._ws = ws
        opened = False
        try:
            for frame in ws:
                with self._lock:
                    effects, is_init = decode_frame(self._core, frame, self._config.encoding)
                    self._apply(effects)
                opened = opened or is_init
        except ConnectionClosed:
            pass  # the close code and reason are read from the socket below
        finally:
            with self._lock:
                self._ws = None
        return ws.close_code or 1006, ws.close_reason or "", opened

    def _dispatch_loop(self) -> None:
        runner: asyncio.Runner | None = None
        try:
            while True:
                item = self._calls.get()
                if item is None:
                    return
                for callback in item.callbacks:
                    try:
                        result = callback(*item.args)
                        if inspect.isawaitable(result):
                            runner = runner or asyncio.Runner()
                            runner.run(_await(result))
                    except Exception:
                        logger.exception("A connection callback %r raised", callback)
        finally:
            if runner is not None:
                runner.close()


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable
