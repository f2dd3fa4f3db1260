"""``c.queue``: what actor code outside workflows sends and receives with.

The receives name the queues they read as ``names=`` (all queues when omitted), as
rivetkit's ``c.queue.next({ names })`` does. The positional spelling of before,
``c.queue.next(names="jobs")``, still works with a ``DeprecationWarning``: in a workflow,
``ctx.queue.next("jobs")`` names the receive's history entry and reads any queue, and
one call should not mean two things.

``signal=`` stops a waiting receive, as rivetkit's ``AbortSignal`` does: an
``asyncio.Event`` (``set()`` it to stop the wait; the Python shape of an
``AbortController`` and its signal in one) or the actor's ``c.abort_signal``. A waiting
``next``/``next_batch`` then raises ``ActorAborted`` (``actor.aborted``), and ``iter``
ends quietly, exactly as when the actor itself shuts down.
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import functools
import math
import warnings
from collections.abc import AsyncIterator, Callable, Iterable
from typing import Any, ParamSpec, TypeVar

from perdure._names import keywords_checked
from perdure._time import optional_duration, send_delay
from perdure.errors import ActorAborted, ArgumentError
from perdure.queue_message import QueueMessage
from perdure.runtime.kernel.core import AbortSignal
from perdure.runtime.queues.actor_queue import ActorQueue, StopSignal
from perdure.runtime.queues.leases import LeaseOptions, lease_options

__all__ = ["QueueReceiver", "names_by_keyword"]

P = ParamSpec("P")
R = TypeVar("R")


def names_by_keyword(call: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
    """Accept the deprecated positional queue names of a receive (``c.queue.next(names="jobs")``)
    as ``names=``, with a ``DeprecationWarning`` that shows the new spelling. Type
    checkers see the keyword-only signature, so they point the old spelling out too."""

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        @functools.wraps(fn)
        def receive(*args: Any, **kwargs: Any) -> Any:
            # (self, names); an options object (rivetkit's ``{ names }``) is left to fail
            # binding, which keywords_checked turns into its own coded error.
            if len(args) > 1 and type(args[1]) is not dict:
                if len(args) > 2 or "names" in kwargs:
                    raise ArgumentError(
                        f"{call} takes the queues to read once, as names=.", code="names_twice"
                    )
                warnings.warn(
                    f"{call[:-2]}({args[1]!r}) is deprecated: write "
                    f"{call[:-2]}(names={args[1]!r}). (In a workflow, ctx.queue.next's first "
                    "argument names its history entry and reads any queue.)",
                    DeprecationWarning,
                    stacklevel=3,  # the user's line: below it are this and keywords_checked
                )
                kwargs["names"] = args[1]
                args = args[:1]
            return fn(*args, **kwargs)

        return receive  # the same call, one spelling more

    return decorate


class QueueReceiver:
    """``c.queue``: send and receive for actor code outside workflows."""

    def __init__(self, queue: ActorQueue) -> None:
        self._queue = queue
        self._core = queue.core

    @keywords_checked("c.queue.send()")
    async def send(
        self,
        name: str,
        body: Any,
        *,
        delay: float | _dt.timedelta | None = None,
        at: _dt.datetime | int | None = None,
    ) -> None:
        """Enqueue a message durably (does not wait for processing). ``delay`` (seconds
        or ``timedelta``) or ``at`` (aware ``datetime`` or epoch ms): receivers see it
        only from then on (docs/queues.md, "Delayed sends")."""
        seconds, at_ms = send_delay(delay, at, wait=False, call="c.queue.send()")
        await self._queue.send(name, body, delay=seconds, at=at_ms)

    def size(self) -> int:
        """How many messages are queued (including received-but-uncompleted ones)."""
        return len(self._queue)

    @keywords_checked("c.queue.next_batch()")
    @names_by_keyword("c.queue.next_batch()")
    async def next_batch(
        self,
        *,
        names: Iterable[str] | str | None = None,
        count: int = 1,
        timeout: float | _dt.timedelta | None = None,
        completable: bool = False,
        visibility_timeout: float | _dt.timedelta | None = None,
        max_attempts: int | None = None,
        signal: StopSignal | None = None,
    ) -> list[QueueMessage]:
        """Wait for at least one matching message; return up to ``count`` ([] on timeout).

        ``timeout`` is seconds or a ``timedelta``; ``None`` waits until one comes. A
        ``completable`` receive leases its messages (docs/queues.md): ``visibility_timeout``
        and ``max_attempts`` override the queue's, and the lease is durable before this
        returns. ``signal`` (an ``asyncio.Event`` or ``c.abort_signal``) stops the wait
        with ``ActorAborted`` once set, as the actor's own shutdown does.
        """
        call = "c.queue.next_batch()"
        _check_signal(call, signal)
        timeout = optional_duration(timeout, f"{call} timeout")
        options = lease_options(call, completable, visibility_timeout, max_attempts)
        wanted = _names(names)
        self._queue.check_receive(wanted, completable, call)
        clock = self._core.clock
        deadline = None if timeout is None else clock.now_ms() + math.ceil(timeout * 1000)
        activity = self._core.activity
        while True:
            left = None if deadline is None else max(0.0, (deadline - clock.now_ms()) / 1000)
            activity.run_waiting(True)
            try:
                if not await self._queue.wait_for(wanted, left, signal):
                    return []
            finally:
                activity.run_waiting(False)
            # Woken for a message another receiver took first, or one that became a dead
            # letter: wait again for what is left of the timeout.
            batch = self._take(wanted, count, completable, options)
            if batch:
                if completable:
                    await self._core.request_flush()  # the lease, before the consumer runs
                return batch

    @keywords_checked("c.queue.next()")
    @names_by_keyword("c.queue.next()")
    async def next(
        self,
        *,
        names: Iterable[str] | str | None = None,
        timeout: float | _dt.timedelta | None = None,
        completable: bool = False,
        visibility_timeout: float | _dt.timedelta | None = None,
        max_attempts: int | None = None,
        signal: StopSignal | None = None,
    ) -> QueueMessage | None:
        """One message, waiting up to ``timeout`` (``None`` on timeout); ``ActorAborted``
        if ``signal`` fires first."""
        _check_signal("c.queue.next()", signal)
        batch = await self.next_batch(
            names=names,
            count=1,
            timeout=timeout,
            completable=completable,
            visibility_timeout=visibility_timeout,
            max_attempts=max_attempts,
            signal=signal,
        )
        return batch[0] if batch else None

    @keywords_checked("c.queue.try_next_batch()")
    @names_by_keyword("c.queue.try_next_batch()")
    def try_next_batch(
        self,
        *,
        names: Iterable[str] | str | None = None,
        count: int = 1,
        completable: bool = False,
        visibility_timeout: float | _dt.timedelta | None = None,
        max_attempts: int | None = None,
    ) -> list[QueueMessage]:
        """Up to ``count`` messages, without waiting. A completable receive's lease is
        durable with the actor's next flush (``await c.queue.next(...)`` waits for it)."""
        call = "c.queue.try_next_batch()"
        options = lease_options(call, completable, visibility_timeout, max_attempts)
        wanted = _names(names)
        self._queue.check_receive(wanted, completable, call)
        return self._take(wanted, count, completable, options)

    @keywords_checked("c.queue.try_next()")
    @names_by_keyword("c.queue.try_next()")
    def try_next(
        self,
        *,
        names: Iterable[str] | str | None = None,
        completable: bool = False,
        visibility_timeout: float | _dt.timedelta | None = None,
        max_attempts: int | None = None,
    ) -> QueueMessage | None:
        """One message or ``None``, without waiting."""
        batch = self.try_next_batch(
            names=names,
            count=1,
            completable=completable,
            visibility_timeout=visibility_timeout,
            max_attempts=max_attempts,
        )
        return batch[0] if batch else None

    @keywords_checked("c.queue.iter()")
    @names_by_keyword("c.queue.iter()")
    async def iter(
        self,
        *,
        names: Iterable[str] | str | None = None,
        completable: bool = False,
        visibility_timeout: float | _dt.timedelta | None = None,
        max_attempts: int | None = None,
        signal: StopSignal | None = None,
    ) -> AsyncIterator[QueueMessage]:
        """Messages as they come; ends quietly when the actor shuts down or ``signal``
        fires."""
        lease_options("c.queue.iter()", completable, visibility_timeout, max_attempts)
        _check_signal("c.queue.iter()", signal)
        while True:
            try:
                message = await self.next(
                    names=names,
                    completable=completable,
                    visibility_timeout=visibility_timeout,
                    max_attempts=max_attempts,
                    signal=signal,
                )
            except ActorAborted:
                return
            if message is not None:
                yield message

    def _take(
        self, wanted: frozenset[str] | None, count: int, completable: bool, options: LeaseOptions
    ) -> list[QueueMessage]:
        """Receive up to ``count`` available messages: leased if ``completable``. Messages
        that became dead letters instead are replaced by the next ones."""
        queue = self._queue
        if not completable:
            return queue.take(queue.available(wanted, count), completable=False)
        taken: list[QueueMessage] = []
        while len(taken) < count:
            records = queue.available(wanted, count - len(taken))
            if not records:
                break
            taken.extend(queue.leases.take(records, options))
        return taken


def _check_signal(call: str, signal: object) -> None:
    """Refuse, at the call, a ``signal`` that is not one (a JavaScript habit:
    ``{"aborted": True}``, or a ``threading.Event``, whose ``wait`` blocks the loop)."""
    if signal is not None and not isinstance(signal, (asyncio.Event, AbortSignal)):
        raise ArgumentError(
            f"{call}: signal= takes an asyncio.Event (set() it to stop the wait) or "
            f"c.abort_signal, not {type(signal).__name__}.",
            code="invalid_signal",
        )


def _names(names: Iterable[str] | str | None) -> frozenset[str] | None:
    if names is None:
        return None
    if isinstance(names, str):
        return frozenset((names,))
    as_set = frozenset(names)
    return as_set or None
