"""The SQL of the PostgreSQL store's reads, and row decoding.

Writes live in :mod:`perdure.store.postgres.ops` (one statement per operation), claims
and leases in :mod:`perdure.store.postgres.lease`.
"""

from __future__ import annotations

from typing import Any

from perdure.keys import deserialize_key
from perdure.store.base import ActorRecord

__all__ = [
    "ACTOR_COLUMNS",
    "DUE_ACTORS",
    "FIND_ACTOR",
    "GET_ACTOR",
    "LOAD_EVENTS",
    "LOAD_FIRES",
    "LOAD_HISTORY",
    "LOAD_KEY",
    "LOAD_QUEUE",
    "LOAD_SCHEDULES",
    "NEXT_WAKE_AT",
    "record_from_row",
]

ACTOR_COLUMNS = (
    "actor_id, name, key, created_at, generation, initialized, input, state, wake_at,"
    " queue_next_id, event_seq"
)
GET_ACTOR = f"SELECT {ACTOR_COLUMNS} FROM actors WHERE actor_id = %s"
FIND_ACTOR = f"SELECT {ACTOR_COLUMNS} FROM actors WHERE name = %s AND key = %s"
LOAD_QUEUE = (
    "SELECT id, name, body, created_at, trace, attempts, visible_at, dead_at, error"
    " FROM queue_messages WHERE actor_id = %s ORDER BY id"
)
LOAD_HISTORY = "SELECT location, entry FROM workflow_history WHERE actor_id = %s"
LOAD_KEY = (
    "SELECT key, fingerprint, created_at, answer FROM idempotency_keys"
    " WHERE actor_id = %s AND key = %s"
)
# One range of the index idempotency_keys_age (actor_id, created_at).
LOAD_KEYS = (
    "SELECT key, created_at FROM idempotency_keys WHERE actor_id = %s AND created_at >= %s"
    " ORDER BY created_at DESC LIMIT %s"
)
# COLLATE "C": ids sort in byte order, as in the other backends, whatever the locale.
LOAD_SCHEDULES = (
    "SELECT id, kind, action, args, run_at, created_at, name, expression, timezone,"
    " interval_ms, max_history, last_run_at, fire_seq, running_seq"
    ' FROM schedules WHERE actor_id = %s ORDER BY id COLLATE "C"'
)
LOAD_FIRES = (
    "SELECT name, seq, action, scheduled_at, fired_at, result, finished_at, error"
    " FROM schedule_fires WHERE actor_id = %s AND name = %s ORDER BY seq DESC LIMIT %s"
)
# `wake_at IS NOT NULL` matches the partial index actors_wake_at.
DUE_ACTORS = (
    "SELECT actor_id, wake_at FROM actors WHERE wake_at IS NOT NULL AND wake_at <= %s"
    " ORDER BY wake_at, actor_id LIMIT %s"
)
NEXT_WAKE_AT = "SELECT min(wake_at) FROM actors WHERE wake_at IS NOT NULL"
LOAD_EVENTS = (
    "SELECT seq, name, args, emitted_at FROM actor_events"
    " WHERE actor_id = %s AND seq > %s ORDER BY seq LIMIT %s"
)


def record_from_row(row: tuple[Any, ...]) -> ActorRecord:
    """The :class:`ActorRecord` of a row selected with :data:`ACTOR_COLUMNS`."""
    return ActorRecord(
        actor_id=row[0],
        name=row[1],
        key=deserialize_key(row[2]),
        created_at=row[3],
        generation=row[4],
        initialized=row[5],
        input=row[6],
        state=row[7],
        wake_at=row[8],
        queue_next_id=row[9],
        event_seq=row[10],
    )
