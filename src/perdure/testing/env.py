"""``ActorTestEnv``: an in-process runtime on a throwaway store, with time under the test's
control.

The runtime runs on a :class:`~perdure.runtime.kernel.clock.ManualClock`, so every durable timer
(schedules, cron, workflow sleeps, step retry backoff, queue receive timeouts, the idle
sleep of actors, the alarms that wake hibernated actors) waits for ``advance`` rather than
for the wall clock. ``advance`` moves time from one due timer to the next, letting the
runtime come to rest after each (see :mod:`perdure.testing.settle`), so that three days of
an hourly cron fire 72 times, in order, each at its own time, in milliseconds of real time.

Real time still bounds what is about I/O, not durable time: action timeouts, the grace
periods of ``on_sleep``/``on_destroy`` and of shutdown, the state-save throttle.
"""

from __future__ import annotations

import datetime as _dt
import math
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from perdure._time import duration_seconds, instant_ms
from perdure.errors import ArgumentError
from perdure.registry import Registry
from perdure.runtime import ActorRuntime, ManualClock
from perdure.store import MemoryStore, SQLiteStore, Store
from perdure.store.encoding import decode_value
from perdure.store.kv import INTERNAL_TAG, KvKey, decode_key, encode_key, prefix_end
from perdure.testing.errors import SettleTimeout, TimeTravelError
from perdure.testing.settle import WatchedStore, settle

if TYPE_CHECKING:
    from types import TracebackType

    from perdure.handles import Handle
    from perdure.runtime import LocalClient

__all__ = ["ActorTestEnv", "StoreChoice"]

StoreChoice = Literal["memory", "sqlite"] | Store
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.UTC)
_ONE_MS = _dt.timedelta(milliseconds=1)
# Hibernated actors' alarms looked at per step; more due at once than this are still
# woken (the alarm scheduler reads them all), only the stepping may skip past some.
_ALARM_LOOKAHEAD = 1000


class ActorTestEnv:
    """An in-process runtime for tests, on a memory or temporary SQLite store, with a clock
    that moves only when told to::

        async with ActorTestEnv(registry) as env:
            reminder = env.client.reminder.get_or_create("ada")
            await reminder.start()
            await env.advance(timedelta(days=3))
            assert await reminder.sent() == 1

    ``store``: ``"memory"`` (the default), ``"sqlite"`` (a file in a temporary directory,
    removed afterwards) or a :class:`~perdure.store.Store` (the env opens and closes it).
    ``start``: the clock's first reading (an aware ``datetime``; the wall-clock time by
    default). ``settle_timeout``: real seconds the runtime may take to come to rest after
    each step before :class:`SettleTimeout`. ``max_timers``: how many timer steps one
    ``advance`` may take. ``idle_sleep``: idle actors go to sleep after their
    ``sleep_timeout`` of clock time, as in production (``False`` keeps them awake).
    """

    def __init__(
        self,
        registry: Registry,
        *,
        store: StoreChoice = "memory",
        start: _dt.datetime | int | None = None,
        settle_timeout: float = 10.0,
        max_timers: int = 10_000,
        idle_sleep: bool = True,
    ) -> None:
        start_ms = _now_ms() if start is None else instant_ms(start, "ActorTestEnv start")
        self.clock = ManualClock(start_ms, idle_sleep=idle_sleep)
        self._store_choice = store
        self._tempdir: tempfile.TemporaryDirectory[str] | None = None
        self._store: WatchedStore | None = None
        self._registry = registry
        self._runtime: ActorRuntime | None = None
        self.settle_timeout = settle_timeout
        self.max_timers = max_timers

    # ------------------------------------------------------------------ lifetime

    async def __aenter__(self) -> ActorTestEnv:
        self._store = WatchedStore(self._open_store())
        runtime = ActorRuntime(self._registry, cast("Store", self._store), clock=self.clock)
        try:
            await runtime.start()
        except BaseException:
            self._cleanup()
            raise
        self._runtime = runtime
        await self.settle()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        runtime, self._runtime = self._runtime, None
        try:
            if runtime is not None:
                await runtime.stop()
        finally:
            self._cleanup()

    def _open_store(self) -> Store:
        choice = self._store_choice
        if isinstance(choice, Store):
            return choice
        if choice == "memory":
            return MemoryStore()
        if choice == "sqlite":
            self._tempdir = tempfile.TemporaryDirectory(prefix="perdure-test-")
            return SQLiteStore(Path(self._tempdir.name) / "perdure.db")
        raise ArgumentError(
            f'ActorTestEnv store must be "memory", "sqlite" or a Store, not {choice!r}.',
            code="invalid_store",
        )

    def _cleanup(self) -> None:
        if self._tempdir is not None:
            self._tempdir.cleanup()
            self._tempdir = None

    # ------------------------------------------------------------------ access

    @property
    def runtime(self) -> ActorRuntime:
        """The runtime (started by ``async with``)."""
        if self._runtime is None:
            raise RuntimeError("The test env is not started: use `async with ActorTestEnv(...)`.")
        return self._runtime

    @property
    def client(self) -> LocalClient:
        """The in-process client, ``runtime.client()``."""
        return self.runtime.client()

    @property
    def store(self) -> Store:
        """The store the runtime runs on (to read what it holds)."""
        if self._store is None:
            raise RuntimeError("The test env is not started: use `async with ActorTestEnv(...)`.")
        return cast("Store", self._store.inner)

    @property
    def now(self) -> _dt.datetime:
        """The clock's time (UTC)."""
        return _utc(self.clock.now_ms())

    async def kv(
        self, actor: str | Handle, prefix: KvKey | None = None, *, limit: int | None = None
    ) -> list[tuple[KvKey, Any]]:
        """The actor's KV records (``c.kv``; docs/storage.md) as its commits made them
        durable, read from the store (a sleeping actor is not woken): ``(key, value)``
        pairs in key order, keys as written (``str`` or ``bytes``), values decoded.
        ``actor``: an id, or a handle (resolved first); ``prefix`` keeps the keys that
        start with it (``None``: every key, ``bytes`` keys first); ``limit`` the first
        ones."""
        actor_id = actor if isinstance(actor, str) else await actor.resolve()
        # The user's keys: not the engine's records (INTERNAL_TAG) nor c.db's pages.
        start: bytes = b""
        end: bytes | None = INTERNAL_TAG
        if prefix is not None:
            start = encode_key(prefix)
            end = prefix_end(start)
        rows = await self.store.kv_list(actor_id, start=start, end=end, limit=limit)
        return [(decode_key(key), decode_value(value)) for key, value in rows]

    # ------------------------------------------------------------------ time

    async def advance(self, by: _dt.timedelta | float) -> None:
        """Move time forward by ``by`` (a ``timedelta`` or seconds); return once the work
        due by then has run and the runtime is at rest."""
        seconds = duration_seconds(by, "env.advance() duration")
        # A timedelta to the exact millisecond (its float seconds may fall just short).
        milliseconds = by / _ONE_MS if isinstance(by, _dt.timedelta) else seconds * 1000
        await self._move_to(self.clock.now_ms() + math.ceil(milliseconds))

    async def advance_to(self, when: _dt.datetime | int) -> None:
        """Move time forward to ``when`` (an aware ``datetime``, or epoch milliseconds), as
        ``advance`` does."""
        target = instant_ms(when, "env.advance_to() time")
        if target < self.clock.now_ms():
            raise TimeTravelError(
                f"Time never goes back: {_utc(target).isoformat()} is before "
                f"{self.now.isoformat()}."
            )
        await self._move_to(target)

    async def settle(self) -> None:
        """Let the work that is due now run until the runtime is at rest (time stands still).

        ``advance`` does this itself; call it after starting work that does not wait for
        its own result (a ``send`` without ``wait``, an event) to let it happen."""
        if self._store is None:
            raise RuntimeError("The test env is not started: use `async with ActorTestEnv(...)`.")
        await settle(self._store, self.settle_timeout)

    async def _move_to(self, target: int) -> None:
        await self.settle()
        for _ in range(self.max_timers):
            step = await self._next_timer(target)
            if step is None:
                break
            self.clock.set(step)
            await self.settle()
        else:
            raise SettleTimeout(
                f"More than {self.max_timers} timers fired while moving to "
                f"{_utc(target).isoformat()}: advance in smaller steps, or "
                "raise max_timers.",
                code="too_many_timers",
            )
        self.clock.set(target)
        await self.settle()

    async def _next_timer(self, target: int) -> int | None:
        """The next moment at or before ``target`` when something is due: a timer of an
        awake actor (or of the runtime) or the alarm of a hibernated one."""
        now = self.clock.now_ms()
        due = [self.clock.next_deadline()]
        runtime = self.runtime
        for actor_id, wake_at in await self.store.due_actors(target, _ALARM_LOOKAHEAD):
            if runtime.is_live(actor_id):
                continue  # an awake actor's timers are the clock's own
            if wake_at <= now:
                # Due, yet asleep (its alarm fell due as it went to sleep): the alarm
                # scheduler's next look wakes it, as it would in production.
                due.append(self.clock.next_deadline(polls=True))
                continue
            due.append(wake_at)
            break
        steps = [at for at in due if at is not None and now < at <= target]
        return min(steps, default=None)


def _now_ms() -> int:
    return (_dt.datetime.now(_dt.UTC) - _EPOCH) // _ONE_MS


def _utc(at_ms: int) -> _dt.datetime:
    return _EPOCH + at_ms * _ONE_MS
