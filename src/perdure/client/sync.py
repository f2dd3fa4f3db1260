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

The classes here add only the blocking I/O (httpx calls, the two threads, a lock around
the core) to the bases both clients share (see :mod:`perdure.client`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import httpx
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection
from websockets.sync.client import connect as ws_connect

from perdure.client._base import HttpCall, KeyArg, QueueResult, Target
from perdure.client._connection import ConnectionBase
from perdure.client._connstate import Call
from perdure.client._errors import ActorError, TransportError
from perdure.client._frames import OPEN_TIMEOUT, encode_frame
from perdure.client._retry import Retrying
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

__all__ = ["ActorAccessor", "ActorConnection", "ActorHandle", "Client"]

logger = logging.getLogger("perdure.client")
T = TypeVar("T")
_Future = concurrent.futures.Future


class Client(ClientBase[httpx.BaseTransport, httpx.Client, "ActorAccessor", "ActorConnection"]):
    """Talks to a perdure (or Rivet) server from blocking code.

    Same API as :class:`~perdure.client.AsyncClient`, without ``await``: ``client.<actor
    name>`` (or ``client.actor(name)``) gives an accessor with ``get``,
    ``get_or_create``, ``create`` and ``get_for_id``. Use it as ``with`` or call
    :meth:`close` (closes the HTTP pool and disposes every connection). A ``get`` of a
    missing actor fails at once with ``actor.not_found`` (no retry, unlike the official
    client). See the module docstring for the threads a connection uses.
    """

    _pool = httpx.Client

    def actor(self, name: str) -> ActorAccessor:
        """The accessor for actors named ``name``."""
        return ActorAccessor(self, name)

    def close(self) -> None:
        """Dispose every connection and close the HTTP pool (idempotent)."""
        connections = self._closing()
        if connections is None:
            return
        for conn in connections:
            conn.dispose()
        self._http.close()

    dispose = close

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _perform(self, call: HttpCall[T]) -> T:
        """Send ``call``; again, after a pause, while its outcome is unknown and it
        may be retried (docs/clients.md, "Retries")."""
        retrying = Retrying(self.config.retries if call.retryable else 0)
        while True:
            try:
                with self._exchange(call) as request:
                    response = self._http.send(request)
                return call.parse(reply_of(response))
            except (TransportError, ActorError) as exc:
                pause = retrying.pause(exc)
                if pause is None:
                    raise
            time.sleep(pause)


class ActorAccessor(AccessorBase[Client, "ActorHandle"]):
    """Handles to the actors of one name (``client.<name>``)."""

    def _handle(self, target: Target, params: Any) -> ActorHandle:
        return ActorHandle(self._client, target, params)

    def create(self, key: KeyArg = None, *, input: Any = None, params: Any = None) -> ActorHandle:
        """Create the actor ``key`` now and return a handle bound to its id
        (``actor.duplicate_key`` if the key is taken)."""
        actor_id = self._client._perform(self._create_call(key, input))
        return self.get_for_id(actor_id, params=params)


class ActorHandle(HandleBase[Client], ActionAttributes[Any]):
    """Calls one actor over HTTP: ``handle.<action>(*args)``, :meth:`action`,
    :meth:`send`, :meth:`resolve`; :meth:`connect` opens a connection for events."""

    def action(self, name: str, *args: Any) -> Any:
        """Call action ``name`` with ``args`` and return its output."""
        return self._client._perform(self._action_call(name, args))

    @overload
    def send(
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
    def send(
        self,
        queue: str,
        body: Any,
        *,
        wait: Literal[True],
        timeout: Duration | None = None,
        idempotency_key: str | None = None,
    ) -> QueueResult: ...

    def send(
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
        """Send ``body`` to the actor's queue ``queue``; see
        :meth:`perdure.client.AsyncActorHandle.send`."""
        call = self._queue_call(queue, body, wait=wait, timeout=timeout, delay=delay, at=at)
        return self._client._perform(call.keyed(self._key(idempotency_key)))

    def workflow_status(self) -> WorkflowStatus:
        """The actor's workflow status ``{status, error, output}`` (``$workflow``)."""
        return self._client._perform(self._status_call())

    def workflow_result(self, timeout: Duration | None = None) -> Any:
        """Wait for the workflow to end and return its output (``$workflow_result``):
        :class:`~perdure.errors.WorkflowFailed` or :class:`~perdure.errors.WorkflowCancelled`
        if it did not complete, ``TimeoutError`` after ``timeout``. One request waits
        for the end (the server answers one within five minutes; then it asks again)."""
        wait = ResultWait(timeout)
        while True:
            seconds = wait.seconds()
            call = self._workflow_call(WORKFLOW_RESULT_ACTION, [seconds], seconds)
            status: WorkflowStatus = self._client._perform(call)
            done, output = wait.settle(status)
            if done:
                return output

    def cancel_workflow(self, reason: str | None = None) -> WorkflowStatus:
        """Cancel the workflow's run at its next durable point (``$workflow_cancel``);
        ``workflow.not_running`` (409) if it has ended."""
        return self._client._perform(self._workflow_call(WORKFLOW_CANCEL_ACTION, [reason]))

    def pause_workflow(self) -> WorkflowStatus:
        """Hold the run before its next step until resumed (``$workflow_pause``)."""
        return self._client._perform(self._workflow_call(WORKFLOW_PAUSE_ACTION, []))

    def resume_workflow(self) -> WorkflowStatus:
        """Let a paused run go on (``$workflow_resume``)."""
        return self._client._perform(self._workflow_call(WORKFLOW_RESUME_ACTION, []))

    def resolve(self) -> str:
        """The actor's id (a ``get_or_create`` handle creates the actor if needed)."""
        call = self._resolve_call()
        return call if isinstance(call, str) else self._client._perform(call)

    def connect(self, params: Any = None) -> ActorConnection:
        """Open a connection (in the background); ``params`` default to the handle's."""
        return ActorConnection(self._client, self._target, self._conn_params(params))

    def events(
        self, since: int | None = None, *, params: Any = None
    ) -> Iterator[ActorEvent | EventGap]:
        """Every event of the actor after number ``since`` (``None``: from now), each
        once and in order, across reconnects (docs/events.md), blocking for the next:
        :class:`ActorEvent` items, and an :class:`EventGap` where the log no longer held
        what was asked for. A refused connection raises its ``ActorError``."""
        start = check_since(since)
        items: queue.SimpleQueue[ActorEvent | EventGap | ActorError] = queue.SimpleQueue()
        conn = ActorConnection(
            self._client, self._target, self._conn_params(params), follow=(items.put, start)
        )
        try:
            while True:
                item = items.get()
                if isinstance(item, ActorError):
                    raise item
                yield item
        finally:
            conn.dispose()


class ActorConnection(ConnectionBase["_Future[Any]", Any]):
    """A live WebSocket connection to one actor; the blocking twin of
    :class:`~perdure.client.AsyncActorConnection` (same states, reconnects and errors).
    Callbacks run on the connection's callback thread (see the module docstring)."""

    def __init__(
        self,
        client: Client,
        target: Target,
        params: Any,
        *,
        follow: tuple[Callable[[Any], Any], int | None] | None = None,
    ) -> None:
        super().__init__(client, target, params)
        # Guards the core and the socket reference; effects are applied while holding
        # it so frames and callbacks keep the order the core decided, whatever thread.
        self._lock = threading.RLock()
        if follow is not None:  # handle.events(): set before the reader thread starts
            self._follow(*follow)
        self._ws: ClientConnection | None = None
        self._stop = threading.Event()
        self._calls: queue.SimpleQueue[Call | None] = queue.SimpleQueue()
        self._reader = threading.Thread(
            target=self._read_loop, name=f"perdure-conn-{target.name}", daemon=True
        )
        self._dispatcher = threading.Thread(
            target=self._dispatch_loop, name=f"perdure-callbacks-{target.name}", daemon=True
        )
        client._track(self)
        self._dispatcher.start()
        self._reader.start()

    # -- calls --------------------------------------------------------------------------

    def wait_open(self, timeout: Duration | None = 10.0) -> None:
        """Block until the connection is open; raises the server's ``ActorError`` if it
        refuses the connection, ``TransportTimeout`` after ``timeout`` (seconds or a
        ``timedelta``)."""
        limit = seconds(timeout, "wait_open() timeout")
        with self._opening() as future:
            _settled(future, limit, lambda: self._open_timeout(limit))

    def action(self, name: str, *args: Any) -> Any:
        """Call action ``name`` over the connection and return its output."""
        with self._calling(name, args) as future:
            return _settled(future, self._config.timeout, lambda: self._action_timeout(name))

    def dispose(self) -> None:
        """Close the connection for good (1000 ``"Disposed"``) and stop its threads;
        pending actions fail with :class:`~perdure.client.ConnectionDisposed`."""
        if not self._dispose_core():
            return
        # The reader sets no new socket once the core is disposed.
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

    def _guard(self) -> contextlib.AbstractContextManager[Any]:
        return self._lock

    def _new_future(self) -> _Future[Any]:
        return _Future()

    def _send(self, message: ToServer) -> None:
        ws = self._ws
        if ws is not None:
            # On a dead socket the reader sees the close and fails what was in flight.
            with contextlib.suppress(ConnectionClosed, OSError):
                ws.send(encode_frame(message, self._config.encoding))

    def _call(self, effect: Call) -> None:
        self._calls.put(effect)

    def _read_loop(self) -> None:
        while not self._stop.is_set():
            self._connecting()
            code, reason = 1006, ""
            try:
                code, reason = self._session()
            except Exception as exc:
                self._session_failed(exc)
            delay = self._session_ended(code, reason)
            if delay is None:
                return
            self._stop.wait(delay)

    def _session(self) -> tuple[int, str]:
        """One socket, from the upgrade to the close: (close code, reason)."""
        with ws_connect(self._plan.url, **self._socket_options()) as ws:
            with self._lock:
                if self._core.disposed:
                    return 1000, "Disposed"
                self._ws = ws
            try:
                # The close code and reason are read from the socket below.
                with contextlib.suppress(ConnectionClosed):
                    for frame in ws:
                        self._received(frame)
            finally:
                with self._lock:
                    self._ws = None
            return ws.close_code or 1006, ws.close_reason or ""

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


def _settled(
    future: _Future[Any], timeout: float | None, timed_out: Callable[[], Exception]
) -> Any:
    """``future``'s result, or ``timed_out()`` raised after ``timeout`` seconds."""
    try:
        return future.result(timeout)
    except TimeoutError:
        if future.done():
            raise  # the future itself failed with a timeout (a TransportTimeout)
        raise timed_out() from None


async def _await(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


if TYPE_CHECKING:
    # This client implements the one handle API of perdure.handles (checked by mypy).
    from perdure import handles

    _syncclient: type[handles.SyncClient] = Client
    _syncaccessor: type[handles.SyncAccessor] = ActorAccessor
    _synchandle: type[handles.SyncHandle] = ActorHandle
    _syncconnection: type[handles.SyncConnection] = ActorConnection
