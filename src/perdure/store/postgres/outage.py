"""Outages of PostgreSQL: every call to the database is bounded in time.

A server that is down refuses connections at once, but one that is cut off or stalled
(a network partition, a paused VM) leaves a query waiting forever, and psycopg's own
clean-up of a cancelled query may wait 10 s more. So a read runs as a task of its own
that the caller stops waiting for after ``timeout`` seconds (the task is cancelled and
finishes its clean-up in the background). Connection failures and timeouts become
:class:`~perdure.errors.StoreUnavailable` (503, ``store.unavailable``); the pool and the
writer reconnect by themselves once the server answers again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import psycopg
from psycopg_pool import PoolTimeout

from perdure.errors import StoreUnavailable

__all__ = ["CONNECTION_ERRORS", "bounded", "unavailable"]

T = TypeVar("T")

# A refused or broken connection, a pool with no connection to give, a stalled socket.
CONNECTION_ERRORS = (psycopg.OperationalError, PoolTimeout, OSError, TimeoutError)


def unavailable(exc: BaseException | None, timeout: float) -> StoreUnavailable:
    """The error a caller gets when the database did not answer (``exc`` is the cause)."""
    error = StoreUnavailable(
        f"The store (PostgreSQL) did not answer within {timeout:g} s; try again shortly.",
        timeout=timeout,
    )
    error.__cause__ = exc
    return error


async def bounded(work: Coroutine[Any, Any, T], timeout: float) -> T:
    """Await ``work`` for at most ``timeout`` seconds; past that, or if it fails to reach
    the database, raise :class:`StoreUnavailable`."""
    task = asyncio.ensure_future(work)
    try:
        done, _ = await asyncio.wait((task,), timeout=timeout)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        task.add_done_callback(_retrieve)
        raise unavailable(None, timeout)
    try:
        return task.result()
    except CONNECTION_ERRORS as exc:
        raise unavailable(exc, timeout) from exc


def _retrieve(task: asyncio.Task[Any]) -> None:
    # An abandoned task's outcome is of no interest; retrieving it keeps asyncio quiet.
    if not task.cancelled():
        task.exception()
