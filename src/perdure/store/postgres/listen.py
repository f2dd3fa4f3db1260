"""``LISTEN`` for wake-ups: tells this node when any node sets an earlier alarm.

Commits that move an actor's ``wake_at`` earlier send ``NOTIFY <channel>, '<wake_at>'``
in their own transaction (see :mod:`perdure.store.postgres.ops`), so a notification
arrives only once the alarm is committed. One connection per store listens and calls the
registered callbacks with the ``wake_at``. If that connection drops it reconnects;
notifications sent meanwhile are lost, so listeners must also poll (the alarm scheduler
does, every second).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import psycopg
from psycopg import sql

from perdure.store.base import WakeupCallback

__all__ = ["WakeupCallback", "WakeupListener"]

_log = logging.getLogger("perdure.store.postgres.store")

Connection = psycopg.AsyncConnection[Any]
_RETRY_FIRST, _RETRY_MAX = 0.1, 5.0


class WakeupListener:
    """One listening connection and its task; callbacks run on the event loop."""

    def __init__(self, connect: Callable[[], Awaitable[Connection]], channel: str) -> None:
        self._connect = connect
        self._channel = channel
        self._callbacks: list[WakeupCallback] = []
        self._conn: Connection | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Connect and ``LISTEN``: notifications committed from now on are delivered."""
        self._conn = await self._listening_connection()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="perdure-postgres-listener"
        )

    def add(self, callback: WakeupCallback) -> Callable[[], None]:
        """Register ``callback``; the returned function unregisters it."""
        self._callbacks.append(callback)

        def remove() -> None:
            if callback in self._callbacks:
                self._callbacks.remove(callback)

        return remove

    async def stop(self) -> None:
        """Stop listening and close the connection."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            # The task ends by itself on cancellation; gather keeps its error off the log.
            await asyncio.gather(task, return_exceptions=True)
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    async def _listening_connection(self) -> Connection:
        conn = await self._connect()
        try:
            await conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _run(self) -> None:
        delay = _RETRY_FIRST
        while True:
            conn = self._conn
            try:
                if conn is None:
                    conn = self._conn = await self._listening_connection()
                delay = _RETRY_FIRST
                async for notify in conn.notifies():
                    try:
                        wake_at = int(notify.payload)
                    except ValueError:
                        continue
                    self._dispatch(wake_at)
            except psycopg.OperationalError as exc:
                _log.warning("PostgreSQL wake-up listener lost its connection: %s", exc)
                self._conn = None
                if conn is not None:
                    await conn.close()
                await asyncio.sleep(delay)
                delay = min(delay * 2, _RETRY_MAX)

    def _dispatch(self, wake_at: int) -> None:
        for callback in list(self._callbacks):
            try:
                callback(wake_at)
            except Exception:
                _log.exception("a wake-up callback failed")
