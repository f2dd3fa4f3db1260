"""The inspector's read model: what the admin API shows about actors.

Reads go to the store (what is committed is what survives a crash), except what only a
live actor has: its current state and its connections. Nothing here wakes an actor, so
looking at a sleeping actor costs it nothing. Values are shown in the JSON form of the
RivetKit protocol (``["$BigInt", "…"]``, ``["$Uint8Array", base64]`` …); a stored value
that cannot be shown that way is shown as ``{"$unreadable": "<what it is>"}`` rather than
failing the whole answer.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from perdure._version import __version__
from perdure.errors import ActorNotFound, InvalidRequest
from perdure.protocol.values import to_json_value
from perdure.runtime.kernel.db_view import db_query, db_rows, db_tables
from perdure.runtime.queues.limits import RATE_PREFIX, limits_view
from perdure.store.base import ActorRecord, QueueMessageRecord, ScheduleRecord
from perdure.store.encoding import decode_value
from perdure.store.kv import INTERNAL_TAG, decode_key, encode_key, prefix_end
from perdure.workflows.control import shown_status
from perdure.workflows.core import decode_history, decode_runs
from perdure.workflows.history import Entry

if TYPE_CHECKING:
    from perdure.definition import ActorDefinition
    from perdure.runtime.actor.instance import ActorInstance
    from perdure.runtime.admin.view import RuntimeView

__all__ = ["ActorInspector", "dead_letter", "entry_view", "shown"]

AwakeFilter = Literal["all", "awake", "asleep"]
# A search reads at most this many stored actors per request; the cursor goes on from there.
_SCAN_LIMIT = 5000
_SCAN_PAGE = 500
# Fires of a recurring job shown when it keeps no history count of its own.
_FIRES_SHOWN = 20
# Keys of a limited queue listed (those with the most in progress); the totals count all.
_LIMIT_KEYS_SHOWN = 50


def shown(value: Any) -> Any:
    """``value`` in the protocol's JSON form, or a marker if it has none."""
    try:
        return to_json_value(value, "an inspected value")
    except Exception:
        return {"$unreadable": type(value).__name__}


def _decoded(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return shown(decode_value(data))
    except Exception:
        return {"$unreadable": f"{len(data)} stored bytes"}


class ActorInspector:
    """Answers the admin API's reads for one runtime."""

    def __init__(self, runtime: RuntimeView) -> None:
        self._runtime = runtime

    # ---------------------------------------------------------------- overview

    async def overview(self) -> dict[str, Any]:
        """The runtime and its actor types, with counts."""
        runtime = self._runtime
        awake = runtime.dispatch.awake()
        types = []
        for name, definition in runtime.registry.actors.items():
            types.append(
                {
                    "name": name,
                    "kind": definition.kind,
                    "actors": await runtime.dispatch.count(name),
                    "awake": awake.get(name, 0),
                    "actions": sorted(definition.actions),
                    "queues": sorted(definition.queues or ()),
                    "events": sorted(definition.events or ()),
                }
            )
        cluster = runtime.cluster
        return {
            "runtime": "perdure",
            "version": __version__,
            "node": None if cluster is None else cluster.describe(),
            "types": types,
        }

    # ------------------------------------------------------------------ search

    async def search(
        self,
        *,
        name: str | None,
        text: str,
        awake: AwakeFilter,
        limit: int,
        cursor: str | None,
    ) -> dict[str, Any]:
        """Actors whose key (parts joined by ``/``) or id contains ``text``, in id order.

        Reads at most a bounded number of stored actors per call: ``cursor`` (the last
        id read) continues the search, so a rare match among many actors is found page
        by page instead of by one unbounded scan.
        """
        store = self._runtime.store
        found: list[dict[str, Any]] = []
        scanned = 0
        after = cursor
        needle = text.lower()
        while scanned < _SCAN_LIMIT:
            batch = await store.list_actors(name=name, after=after, limit=_SCAN_PAGE)
            for record in batch:
                scanned += 1
                after = record.actor_id
                if needle and not _matches(record, needle):
                    continue
                row = await self.actor_row(record)
                if awake == "all" or row["awake"] == (awake == "awake"):
                    found.append(row)
                    if len(found) == limit:
                        return {"actors": found, "cursor": after}
            if len(batch) < _SCAN_PAGE:
                return {"actors": found, "cursor": None}
        return {"actors": found, "cursor": after}

    async def actor_row(self, record: ActorRecord) -> dict[str, Any]:
        """The summary of a stored actor."""
        return {
            "actor_id": record.actor_id,
            "name": record.name,
            "key": list(record.key),
            "created_at": record.created_at,
            "awake": await self._is_awake(record.actor_id),
            "wake_at": record.wake_at,
        }

    async def _is_awake(self, actor_id: str) -> bool:
        runtime = self._runtime
        if runtime.is_live(actor_id):
            return True
        cluster = runtime.cluster
        if cluster is None:
            return False
        lease = await runtime.store.get_lease(actor_id)
        return lease is not None and cluster.listed(lease.node_id)

    # ----------------------------------------------------------------- details

    async def details(self, actor_id: str) -> dict[str, Any]:
        """Everything the inspector shows about one actor (``actor.not_found`` if none)."""
        runtime = self._runtime
        record = await runtime.store.get_actor(actor_id)
        if record is None:
            raise ActorNotFound()
        instance = runtime.live_instance(actor_id)
        definition = runtime.registry.actors.get(record.name)
        history = await runtime.store.load_history(actor_id)
        meta, entries = decode_history(history)
        held = _held_messages(entries)
        queue = await runtime.store.load_queue(actor_id)
        live = [message for message in queue if message.dead_at is None]
        return {
            "actor": await self.actor_row(record),
            "state": _decoded(record.state) if instance is None else shown(instance.state),
            "connections": [] if instance is None else _connections(instance),
            "queue": [_message(message, message.id in held) for message in live],
            "dead_letters": [dead_letter(m) for m in queue if m.dead_at is not None],
            "limits": await self._limits(actor_id, definition, live, held),
            "schedules": await self._schedules(actor_id),
            # The actor's type has an SQL database (db=): the inspector's "SQL database" card.
            "db": definition is not None and definition.db is not None,
            "workflow": None
            if definition is None or definition.kind != "workflow"
            else {
                **_workflow(meta, entries),
                **_family(meta, entries),
                "runs": _archived_runs(history),
            },
        }

    async def _limits(
        self,
        actor_id: str,
        definition: ActorDefinition | None,
        live: list[QueueMessageRecord],
        held: set[int],
    ) -> dict[str, Any]:
        """The limited queues (docs/queues.md): in progress per key, from the stored
        leases, the held messages of the workflow's history and the rate windows."""
        limits = {
            name: spec.limits
            for name, spec in ((definition.queues or {}) if definition else {}).items()
            if spec.limits is not None
        }
        if not limits:
            return {}
        store = self._runtime.store
        windows = await store.kv_list(actor_id, start=RATE_PREFIX, end=prefix_end(RATE_PREFIX))
        now = self._runtime.clock.now_ms()
        return limits_view(limits, live, held, windows, now, _LIMIT_KEYS_SHOWN)

    async def dead_letters(self, actor_id: str, queue: str | None) -> list[dict[str, Any]]:
        """The actor's dead letters (of one queue, if given), read from the store without
        waking it; ``actor.not_found`` if there is no such actor."""
        store = self._runtime.store
        if await store.get_actor(actor_id) is None:
            raise ActorNotFound()
        return [
            dead_letter(message)
            for message in await store.load_queue(actor_id)
            if message.dead_at is not None and (queue is None or message.name == queue)
        ]

    async def kv(
        self, actor_id: str, *, prefix: str | None, after: str | None, limit: int
    ) -> dict[str, Any]:
        """One page of the actor's KV records (docs/storage.md), in key order, read from
        the store without waking it: what is committed. ``prefix`` keeps the string
        keys that start with it (``None``: every key, bytes keys first); ``after`` is
        the ``next`` cursor of the page before. ``actor.not_found`` if there is no such
        actor; ``actor.invalid_request`` for a cursor that is not one."""
        store = self._runtime.store
        if await store.get_actor(actor_id) is None:
            raise ActorNotFound()
        start = b""
        # The user's keys, not the engine's (INTERNAL_TAG) nor c.db's pages (after it).
        end: bytes | None = INTERNAL_TAG
        if prefix is not None:
            start = encode_key(prefix)
            end = prefix_end(start)
        if after is not None:
            try:
                cursor = bytes.fromhex(after)
            except ValueError:
                raise InvalidRequest("`after` is not a cursor of this API.") from None
            start = max(start, cursor + b"\x00")  # the first key after the cursor
        rows = await store.kv_list(actor_id, start=start, end=end, limit=limit + 1)
        page = rows[:limit]
        return {
            "records": [_record(key, value) for key, value in page],
            "next": page[-1][0].hex() if len(rows) > limit else None,
        }

    # The actor's SQL database (c.db), read from the store as committed, without waking
    # it: one snapshot of its pages per request (runtime/kernel/db_view.py).

    async def db_tables(self, actor_id: str) -> list[dict[str, Any]]:
        """The tables and views of the actor's database, with their schema."""
        await self._stored(actor_id)
        return await db_tables(self._runtime.store, actor_id)

    async def db_rows(self, actor_id: str, table: str, offset: int, limit: int) -> dict[str, Any]:
        """Rows ``[offset, offset + limit)`` of one table, values shown as JSON."""
        await self._stored(actor_id)
        page = await db_rows(self._runtime.store, actor_id, table, offset, limit)
        return page | {"rows": _shown_rows(page["rows"])}

    async def db_query(self, actor_id: str, sql: str, params: Any) -> dict[str, Any]:
        """A read-only query (``db.read_only`` for one that writes)."""
        await self._stored(actor_id)
        answer = await db_query(self._runtime.store, actor_id, sql, params)
        return answer | {"rows": _shown_rows(answer["rows"])}

    async def _stored(self, actor_id: str) -> None:
        if await self._runtime.store.get_actor(actor_id) is None:
            raise ActorNotFound()

    async def _schedules(self, actor_id: str) -> list[dict[str, Any]]:
        store = self._runtime.store
        views = []
        for job in await store.load_schedules(actor_id):
            fires = []
            if job.name is not None:
                limit = job.max_history or _FIRES_SHOWN
                fires = [
                    {
                        "seq": fire.seq,
                        "scheduled_at": fire.scheduled_at,
                        "fired_at": fire.fired_at,
                        "finished_at": fire.finished_at,
                        "result": fire.result,
                        "error": _decoded(fire.error),
                    }
                    for fire in await store.load_fire_history(actor_id, job.name, limit)
                ]
            views.append(_schedule(job, fires))
        return views


def _record(key: bytes, value: bytes) -> dict[str, Any]:
    """A KV record as the admin API shows it: the key as its user wrote it (a bytes key
    as ``["$Uint8Array", base64]``), the value decoded, and the value's stored size."""
    try:
        shown_key = shown(decode_key(key))
    except ValueError:
        shown_key = {"$unreadable": f"{len(key)} stored bytes"}
    return {"key": shown_key, "value": _decoded(value), "size": len(value)}


def _shown_rows(rows: list[list[Any]]) -> list[list[Any]]:
    return [[shown(value) for value in row] for row in rows]


def _matches(record: ActorRecord, needle: str) -> bool:
    return needle in "/".join(record.key).lower() or needle in record.actor_id.lower()


def _connections(instance: ActorInstance) -> list[dict[str, Any]]:
    return [
        {
            "id": conn.id,
            "params": shown(conn.params),
            "state": shown(conn.state),
            "subscriptions": sorted(conn.subscriptions),
        }
        for conn in list(instance.conns.values())
    ]


def _held_messages(entries: dict[str, Entry]) -> set[int]:
    """Ids of messages a workflow received as completable and has not completed."""
    held = set()
    for entry in entries.values():
        if entry.kind == "message":
            for message in entry.data.get("m", []):
                if message.get("c") is False:
                    held.add(int(message["id"]))
    return held


def _message(message: QueueMessageRecord, held: bool) -> dict[str, Any]:
    return {
        "id": message.id,
        "name": message.name,
        "body": _decoded(message.body),
        "created_at": message.created_at,
        "held": held,
        "attempts": message.attempts,
        "visible_at": message.visible_at,
        # A delayed send not delivered yet (docs/queues.md): when receivers may see it.
        "due_at": message.visible_at if message.attempts == 0 else None,
    }


def dead_letter(message: QueueMessageRecord) -> dict[str, Any]:
    """A dead letter as the admin API shows it (docs/queues.md)."""
    return {
        "id": message.id,
        "queue": message.name,
        "body": _decoded(message.body),
        "created_at": message.created_at,
        "attempts": message.attempts,
        "dead_at": message.dead_at,
        "error": message.error,
    }


def _schedule(job: ScheduleRecord, fires: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": job.id,
        "kind": job.kind,
        "name": job.name,
        "action": job.action,
        "args": _decoded(job.args),
        "run_at": job.run_at,
        "created_at": job.created_at,
        "expression": job.expression,
        "timezone": job.timezone,
        "interval_ms": job.interval_ms,
        "max_history": job.max_history,
        "last_run_at": job.last_run_at,
        "history": fires,
    }


def _workflow(meta: dict[str, Any] | None, entries: dict[str, Entry]) -> dict[str, Any]:
    meta = meta or {"status": "pending"}
    ordered = sorted(entries.items(), key=lambda item: item[1].seq)
    return {
        "status": shown_status(meta),
        "error": shown(meta.get("error")),
        "output": shown(meta.get("output")),
        "run": meta.get("run", 1),
        "forked_from": meta.get("forkedFrom"),
        "input": shown(meta.get("input")),
        "started_at": meta.get("startedAt"),
        "deadline_at": meta.get("deadlineAt"),
        # The code version the run is on (a cluster), and the one it waits for if held.
        "code_version": meta.get("codeVersion"),
        "waiting_for_version": meta.get("waitingForVersion"),
        "history": [entry_view(location, entry) for location, entry in ordered],
    }


def _family(meta: dict[str, Any] | None, entries: dict[str, Entry]) -> dict[str, Any]:
    """The current run's parent and children (docs/workflow-children.md)."""
    ordered = sorted(entries.items(), key=lambda item: item[1].seq)
    return {
        "parent": _parent((meta or {}).get("parent")),
        "children": [_child(loc, entry) for loc, entry in ordered if entry.kind == "child"],
    }


def _parent(parent: dict[str, Any] | None) -> dict[str, Any] | None:
    """The workflow that started this one as its child (docs/workflow-children.md)."""
    if parent is None:
        return None
    return {
        "actor_id": parent.get("id"),
        "name": parent.get("name"),
        "key": parent.get("key"),
        "location": parent.get("at"),
        "detached": bool(parent.get("detached")),
    }


def _child(location: str, entry: Entry) -> dict[str, Any]:
    """A child this workflow started: its actor and, once a wait saw it, how it ended."""
    data = entry.data
    return {
        "actor_id": data.get("id"),
        "name": data.get("n"),
        "key": data.get("k"),
        "location": location,
        "detached": bool(data.get("d")),
        "status": data.get("end") or ("running" if "id" in data else "starting"),
    }


def _archived_runs(history: dict[str, bytes]) -> list[dict[str, Any]]:
    """The runs a fork archived, newest first, each shown as the current one is."""
    runs = decode_runs(history)
    return [_workflow(meta, entries) for _, (meta, entries) in sorted(runs.items(), reverse=True)]


def entry_view(location: str, entry: Entry) -> dict[str, Any]:
    """One history entry as the admin API shows it."""
    data = entry.data
    segments = location.split("/")
    parent = segments[-2] if len(segments) > 1 else ""
    view: dict[str, Any] = {
        "location": location,
        "name": segments[-1],
        "kind": entry.kind,
        "status": entry.status,
        "seq": entry.seq,
        "depth": sum(1 for segment in segments[:-1] if not segment.startswith("~")),
        "iteration": int(parent[1:]) if parent.startswith("~") and parent[1:].isdigit() else None,
        "attempts": data.get("a"),
        "error": shown(data.get("e")),
        "errors": shown(data.get("errors") or []),
        "output": shown(data.get("o")),
        "retry_at": data.get("r"),
        "deadline": data.get("t") if entry.kind in ("sleep", "message") else None,
    }
    if entry.kind == "loop":
        view["iterations"] = data.get("i")
    if entry.kind == "message":
        view["messages"] = [
            {
                "id": message.get("id"),
                "name": message.get("name"),
                "body": shown(message.get("body")),
                "completed": message.get("c", True),
            }
            for message in data.get("m", [])
        ]
    if entry.kind in ("child", "child_result") and "id" in data:
        view["child_id"] = data["id"]
    if data.get("rb"):
        view["rolled_back"] = True
    return view
