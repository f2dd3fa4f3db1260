"""Knowing when the runtime has come to rest, so a test can assert right after time moves.

The runtime is at rest when nothing can happen until time moves again: no callback or task
is ready to run on the event loop, and no store operation is in flight (a SQLite commit
runs on the writer thread, a PostgreSQL query on a socket: the loop sees neither until it
ends). :class:`WatchedStore` counts the store operations in flight; :func:`settle` waits
until both are nil.

The event loop's ready queue is read from ``loop._ready`` (CPython's asyncio loops have
it). On a loop without one, rest is assumed after many iterations with no store operation.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from collections.abc import Callable
from typing import Any

from perdure.store.base import Store
from perdure.testing.errors import SettleTimeout

__all__ = ["WatchedStore", "settle"]

# Consecutive quiet looks before the runtime counts as at rest: one would do on a loop
# whose ready queue can be read (nothing ready and no I/O means nothing can run); the
# second look costs a loop iteration and guards against a callback added by the look.
_QUIET_LOOKS = 2
_QUIET_LOOKS_BLIND = 50  # a loop whose ready queue cannot be read
_IO_PAUSE = 0.0005  # real seconds to leave a thread or socket working alone


class WatchedStore:
    """A store whose operations in flight are counted (``busy``); the rest passes through.

    Every coroutine method is counted from its call until it returns; ``submit`` (a commit
    started without awaiting it) until its future is done.
    """

    def __init__(self, store: Store) -> None:
        object.__setattr__(self, "inner", store)
        object.__setattr__(self, "busy", 0)

    def __getattr__(self, name: str) -> Any:
        value = getattr(self.inner, name)
        if name == "submit":
            wrapped: Any = self._counted_submit(value)
        elif inspect.iscoroutinefunction(value):
            wrapped = self._counted(value)
        else:
            return value
        object.__setattr__(self, name, wrapped)  # wrapped once per name
        return wrapped

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(self.inner, name, value)  # e.g. the runtime setting store.observer

    def _counted(self, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        async def counted(*args: Any, **kwargs: Any) -> Any:
            self._add(1)
            try:
                return await method(*args, **kwargs)
            finally:
                self._add(-1)

        return counted

    def _counted_submit(self, method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def counted(*args: Any, **kwargs: Any) -> Any:
            future: asyncio.Future[Any] = method(*args, **kwargs)
            self._add(1)
            future.add_done_callback(lambda _: self._add(-1))
            return future

        return counted

    def _add(self, delta: int) -> None:
        object.__setattr__(self, "busy", self.busy + delta)


async def settle(store: WatchedStore, timeout: float) -> None:
    """Return once the runtime is at rest (see the module docstring); raise
    :class:`SettleTimeout` if it is still busy after ``timeout`` real seconds."""
    loop = asyncio.get_running_loop()
    ready = getattr(loop, "_ready", None)
    needed = _QUIET_LOOKS if ready is not None else _QUIET_LOOKS_BLIND
    give_up = loop.time() + timeout
    quiet = 0
    while quiet < needed:
        if loop.time() > give_up:
            raise SettleTimeout(
                f"The runtime did not come to rest within {timeout:g} s of real time "
                f"({store.busy} store operation(s) in flight, "
                f"{'some' if ready else 'no'} callbacks ready): an action, hook or step "
                "that waits on something outside the clock keeps it busy.",
                code="settle_timeout",
            )
        if store.busy:
            quiet = 0
            await asyncio.sleep(_IO_PAUSE)  # a thread or socket works: give it the time
            continue
        await asyncio.sleep(0)
        quiet = quiet + 1 if not ready and not store.busy else 0
