"""Background tasks with an owner: no stray ``create_task``.

Every task the runtime starts belongs to a :class:`TaskOwner` that keeps a strong
reference, logs an unexpected failure, and cancels and awaits what is left on ``close``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["TaskOwner"]

T = TypeVar("T")
_log = logging.getLogger("perdure.tasks")


class TaskOwner:
    """A set of tasks that live no longer than their owner."""

    __slots__ = ("_closed", "_name", "_tasks")

    def __init__(self, name: object) -> None:
        """``name``: what names the owner in errors and logs (its ``str()``; an actor
        instance is passed as itself, so that no name string is made per actor)."""
        self._name = name
        # Made at the first task: most awake actors have none running (an empty set is
        # 216 bytes an actor).
        self._tasks: set[asyncio.Task[Any]] | None = None
        self._closed = False

    def spawn(self, coro: Coroutine[Any, Any, T], *, name: str | None = None) -> asyncio.Task[T]:
        """Start ``coro`` as a task owned by this owner."""
        if self._closed:
            coro.close()
            raise RuntimeError(f"{self._name} is closed; cannot start {name or coro!r}")
        task = asyncio.get_running_loop().create_task(coro, name=name)
        if self._tasks is None:
            self._tasks = set()
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        if self._tasks is not None:
            self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            _log.error("%s: task %s failed", self._name, task.get_name(), exc_info=exc)

    def __len__(self) -> int:
        return 0 if self._tasks is None else len(self._tasks)

    async def close(self, timeout: float | None = None) -> None:
        """Cancel every task still running and wait for them to finish."""
        self._closed = True
        pending = [task for task in self._tasks or () if not task.done()]
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.wait(pending, timeout=timeout)
