"""The blocking client, driven by the suite's async scenarios.

Each adapter method calls the same-named method of :class:`perdure.client.Client`'s
objects (in a worker thread when it blocks), so the scenarios check the blocking client's
own methods, arguments and errors; only the ``await`` is added. Listener callbacks run
on the connection's callback thread: the scenarios collect them thread-safely.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from perdure.client import ActorAccessor, ActorConnection, ActorHandle, Client
from perdure.handles import Duration, SendResult, WorkflowStatus

__all__ = ["SyncClientAdapter"]


def _in_thread(call: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    return functools.partial(asyncio.to_thread, call)


class SyncConnectionAdapter:
    def __init__(self, conn: ActorConnection) -> None:
        self._conn = conn
        # Registering listeners does not block: the same calls, unchanged.
        self.on = conn.on
        self.once = conn.once
        self.off = conn.off
        self.on_error = conn.on_error

    @property
    def actor_id(self) -> str | None:
        return self._conn.actor_id

    @property
    def is_connected(self) -> bool:
        return self._conn.is_connected

    async def action(self, name: str, *args: Any) -> Any:
        return await asyncio.to_thread(self._conn.action, name, *args)

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith("_"):
            raise AttributeError(name)
        return _in_thread(getattr(self._conn, name))

    async def wait_open(self, timeout: Duration | None = 10.0) -> None:
        await asyncio.to_thread(self._conn.wait_open, timeout)

    async def dispose(self) -> None:
        await asyncio.to_thread(self._conn.dispose)

    async def __aenter__(self) -> SyncConnectionAdapter:
        await asyncio.to_thread(self._conn.__enter__)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self._conn.__exit__, *exc)


class SyncHandleAdapter:
    def __init__(self, handle: ActorHandle) -> None:
        self._handle = handle

    async def action(self, name: str, *args: Any) -> Any:
        return await asyncio.to_thread(self._handle.action, name, *args)

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        if name.startswith("_"):
            raise AttributeError(name)
        return _in_thread(getattr(self._handle, name))

    async def send(
        self, queue: str, body: Any, *, wait: bool = False, timeout: Duration | None = None
    ) -> SendResult | None:
        send = functools.partial(self._handle.send, wait=wait, timeout=timeout)  # type: ignore[call-overload]
        result: SendResult | None = await asyncio.to_thread(send, queue, body)
        return result

    def connect(self, params: Any = None) -> SyncConnectionAdapter:
        return SyncConnectionAdapter(self._handle.connect(params))

    async def resolve(self) -> str:
        return await asyncio.to_thread(self._handle.resolve)

    async def workflow_status(self) -> WorkflowStatus:
        return await asyncio.to_thread(self._handle.workflow_status)


class SyncAccessorAdapter:
    def __init__(self, accessor: ActorAccessor) -> None:
        self._accessor = accessor

    def get(self, key: Any = None, *, params: Any = None) -> SyncHandleAdapter:
        return SyncHandleAdapter(self._accessor.get(key, params=params))

    def get_or_create(
        self, key: Any = None, *, input: Any = None, params: Any = None
    ) -> SyncHandleAdapter:
        return SyncHandleAdapter(self._accessor.get_or_create(key, input=input, params=params))

    def get_for_id(self, actor_id: str, *, params: Any = None) -> SyncHandleAdapter:
        return SyncHandleAdapter(self._accessor.get_for_id(actor_id, params=params))

    async def create(
        self, key: Any = None, *, input: Any = None, params: Any = None
    ) -> SyncHandleAdapter:
        create = functools.partial(self._accessor.create, input=input, params=params)
        return SyncHandleAdapter(await asyncio.to_thread(create, key))


class SyncClientAdapter:
    def __init__(self, client: Client) -> None:
        self._client = client

    def actor(self, name: str) -> SyncAccessorAdapter:
        return SyncAccessorAdapter(self._client.actor(name))

    def __getattr__(self, name: str) -> SyncAccessorAdapter:
        if name.startswith("_"):
            raise AttributeError(name)
        return self.actor(name)
