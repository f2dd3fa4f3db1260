"""The core of one live actor: what every part of it builds on.

An awake actor is made of parts: its queues (:mod:`perdure.runtime.queues`), its
schedules (:mod:`perdure.runtime.schedules`), its event log (:mod:`perdure.runtime.events`),
its connections and the contexts its code receives (:mod:`perdure.runtime.actor`). Each
part takes this core and nothing else of the actor: who the actor is (id, name, key,
generation, definition and options), the clock, the store it reads from, the observers,
the commit pipeline every write goes through, what keeps it awake, its abort signal, the
tasks it owns, its status and its alarms. The live instance
(:mod:`perdure.runtime.actor.instance`) builds the core and the parts and is the only
module that knows them all; a part that needs another part is handed it.

Why a core rather than the instance: a part that takes the whole instance can reach
every other part and the runtime behind it, and every such reach is a thread in one
knot (DESIGN §2). The core holds only what is shared and says so in its slots.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sized
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from perdure.keys import Key
from perdure.runtime.kernel.activity import ActivityTracker, SleepOwner
from perdure.runtime.kernel.clock import Clock
from perdure.runtime.kernel.commits import CommitPipeline, StateOwner
from perdure.runtime.kernel.idempotency import IdempotencyKeys
from perdure.runtime.kernel.kv import ActorKv
from perdure.runtime.kernel.tasks import TaskOwner

if TYPE_CHECKING:
    from perdure.definition import ActorDefinition
    from perdure.runtime.kernel.db import ActorDb
    from perdure.store.base import Store
    from perdure.telemetry import Observers

__all__ = [
    "PREWAKE_MS",
    "AbortSignal",
    "ActorCore",
    "ActorIdentity",
    "ActorStatus",
    "AlarmSink",
    "StopReason",
]

StopReason = Literal["sleep", "destroy", "shutdown"]
ActorStatus = Literal["starting", "running", "stopping", "stopped"]

# How early the alarm scheduler wakes a sleeping actor for its alarm (starting one takes
# a few milliseconds; a thousand alarms in one second would otherwise queue behind each
# other's starts). Here because schedules keep an actor awake that much before a fire.
PREWAKE_MS = 500

_log = logging.getLogger("perdure.actor")


@dataclass(frozen=True, slots=True)
class ActorIdentity:
    """Who answered a request: the actor's id, key and the generation of its instance."""

    actor_id: str
    key: Key
    generation: int


class AbortSignal:
    """Fires once, when the actor starts to sleep or be destroyed."""

    __slots__ = ("_event", "_fired")

    def __init__(self) -> None:
        self._fired = False
        # Made by the first waiter: an Event and its deque are ~870 bytes, on every
        # awake actor, and most are never waited on.
        self._event: asyncio.Event | None = None

    @property
    def aborted(self) -> bool:
        """True once the actor is shutting down."""
        return self._fired

    def fire(self) -> None:
        """Mark the signal as fired (idempotent)."""
        self._fired = True
        if self._event is not None:
            self._event.set()

    async def wait(self) -> None:
        """Return when the signal fires."""
        if self._fired:
            return
        if self._event is None:
            self._event = asyncio.Event()
        await self._event.wait()


class AlarmSink(Protocol):
    """Where an actor's alarms are told (the runtime's alarm scheduler), so that it is
    woken for them should it sleep first. One per runtime, shared by every actor."""

    def note(self, wake_at: int | None) -> None:
        """An actor waits for an alarm at ``wake_at`` (epoch ms)."""
        ...


class ActorCore:
    """What every part of one live actor needs (see the module docstring).

    ``alarms`` is told of a new earliest alarm; ``sleep_owner`` is put to sleep when
    the sleep timer runs out; ``connections`` is the actor's open connections (any one
    keeps it awake). The commit pipeline's arguments are
    :class:`~perdure.runtime.kernel.commits.CommitPipeline`'s. (Shared objects rather
    than bound methods: each bound method would be one more object per awake actor.)
    """

    # One per awake actor (tens of thousands may be): slots, and the logger and the
    # alarms made at first use.
    __slots__ = (
        "_alarm_sink",
        "_alarms",
        "_db",
        "_keys",
        "_kv",
        "_logger",
        "_wake_at",
        "abort",
        "activity",
        "actor_id",
        "clock",
        "commits",
        "definition",
        "generation",
        "key",
        "name",
        "observer",
        "options",
        "status",
        "store",
        "tasks",
    )

    def __init__(
        self,
        definition: ActorDefinition,
        identity: ActorIdentity,
        *,
        name: str,
        store: Store,
        clock: Clock,
        observer: Observers,
        wake_at: int | None,
        alarms: AlarmSink,
        sleep_owner: SleepOwner,
        connections: Sized,
        state_owner: StateOwner,
        last_state: bytes | None,
        fence: int | None,
        state_written: Callable[[], None] | None,
        on_write_failed: Callable[[BaseException], None],
    ) -> None:
        self.definition = definition
        self.options = definition.options
        self.actor_id = identity.actor_id
        self.key = identity.key
        self.generation = identity.generation
        self.name = name
        self.store = store
        self.clock = clock
        self.observer = observer
        self.status: ActorStatus = "starting"
        self.abort = AbortSignal()
        self.tasks = TaskOwner(self)
        self._logger: logging.LoggerAdapter[logging.Logger] | None = None
        self._keys: IdempotencyKeys | None = None  # made by the first keyed request
        self._kv: ActorKv | None = None  # made by the first use of c.kv
        self._db: ActorDb | None = None  # opened at start when the actor has db=
        # Alarms by source ("workflow", "schedule", "queue"); the earliest is the stored
        # wake_at.
        self._alarms: dict[str, int] | None = None
        self._wake_at = wake_at
        self._alarm_sink = alarms
        self.activity = ActivityTracker(
            sleep_owner,
            sleep_timeout=self.options.sleep_timeout,
            no_sleep=self.options.no_sleep,
            connections=connections,
            clock=clock,
        )
        self.commits = CommitPipeline(
            store,
            identity.actor_id,
            state_owner,
            last_state=last_state,
            fence=fence,
            state_written=state_written,
            state_schema=definition.state_schema,
            on_failure=on_write_failed,
            state_warning=self.options.state_size_warning,
        )

    def __str__(self) -> str:
        return f"actor {self.label}"

    @property
    def label(self) -> str:
        """Names the actor in errors and logs: ``name/actor_id``."""
        return f"{self.name}/{self.actor_id}"

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """The actor's logger; actor_*: the fields of a JSON log line (observe/logs.py)."""
        logger = self._logger
        if logger is None:
            extra = {
                "actor": self.label,
                "actor_name": self.name,
                "actor_key": self.key,
                "actor_id": self.actor_id,
            }
            logger = self._logger = logging.LoggerAdapter(_log, extra)
        return logger

    @property
    def idempotency(self) -> IdempotencyKeys:
        """The actor's keyed requests (docs/idempotency.md), made at first use."""
        keys = self._keys
        if keys is None:
            keys = self._keys = IdempotencyKeys(self)
        return keys

    @property
    def kv(self) -> ActorKv:
        """The actor's KV space (``c.kv``), made at first use."""
        kv = self._kv
        if kv is None:
            kv = self._kv = ActorKv(self)
        return kv

    @property
    def db(self) -> ActorDb | None:
        """The actor's SQL database (``c.db``), once opened; ``None`` without ``db=``."""
        return self._db

    async def open_db(self) -> ActorDb | None:
        """Open the actor's SQL database if it has one (at start, before any hook)."""
        spec = self.definition.db
        if spec is None:
            return None
        from perdure.runtime.kernel.db import ActorDb  # apsw: only for actors with db=

        db = ActorDb(self.kv, spec, inline=self.store.reads_inline)
        await db.open()
        self._db = db
        return db

    async def close_db(self) -> None:
        """Close the SQL database (the actor has stopped)."""
        db = self._db
        if db is not None:
            await db.close()

    @property
    def running(self) -> bool:
        """True while the actor takes work (started, not stopping)."""
        return self.status == "running"

    def request_flush(self) -> asyncio.Future[None]:
        """A future that resolves when everything done so far is durable (flushes
        requested in one event-loop tick share one commit)."""
        return self.commits.request_flush()

    # ------------------------------------------------------------------- alarms

    @property
    def wake_at(self) -> int | None:
        """The stored alarm: the earliest of every source's."""
        return self._wake_at

    def set_alarm(self, source: str, at: int | None) -> None:
        """Set or clear one source's alarm; the earliest becomes the stored ``wake_at``."""
        alarms = self._alarms
        if at is None:
            if alarms is not None:
                alarms.pop(source, None)
        else:
            if alarms is None:
                alarms = self._alarms = {}
            alarms[source] = at
        earliest = min(alarms.values()) if alarms else None
        if earliest != self._wake_at:
            self.write_wake_at(earliest)
            self._alarm_sink.note(earliest)

    def write_wake_at(self, at: int | None) -> None:
        """Stage ``at`` as the stored alarm (with the next commit)."""
        self._wake_at = at
        self.commits.set_wake_at(at)

    def note_alarm(self, at: int | None) -> None:
        """Tell the alarm scheduler of an alarm the actor waits for (a timer of its own
        that it wants to be woken for should it sleep first)."""
        self._alarm_sink.note(at)
