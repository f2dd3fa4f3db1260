"""The PostgreSQL write operations: each one is a single SQL statement.

Every write (create, commit, delete) is one statement whose result row says how it went,
so a batch of them can be pipelined — sent in one round trip, inside one transaction —
without waiting for one answer before sending the next. The expected failures raise no
database error at all:

- a commit writes its actor row first in a data-modifying CTE (``a``); the queue and
  history writes join ``a``, so when the actor is missing nothing is written and the
  result's count is 0;
- a create is ``INSERT … ON CONFLICT DO NOTHING``; when nothing was inserted, the same
  statement tells whether the name and key or the id was taken.

An unexpected error (a value out of range, say) aborts the whole batch, which the writer
then replays one statement at a time. All CTEs of a statement see the same snapshot, so a
commit's puts and deletes are reduced to their net effect first (a put then a delete of
the same message leaves it deleted, as the other backends do), which keeps the CTEs from
touching the same row twice.
"""

from __future__ import annotations

import asyncio
from typing import Any, LiteralString

from perdure.errors import ActorAlreadyExists
from perdure.keys import serialize_key
from perdure.store._shared import actor_id_taken, actor_missing, message_row
from perdure.store.base import ActorCommit, ActorRecord, EventRecord, QueueMessageRecord
from perdure.store.postgres.kv import KV_DELETE_RANGES, kv_parts

__all__ = [
    "CommitOp",
    "CreateOp",
    "DeleteOp",
    "MergeRows",
    "Params",
    "WriteOp",
    "merge_rows",
]

Params = dict[str, Any]


class WriteOp:
    """One statement of a group commit, its parameters, and its outcome."""

    __slots__ = ("abandoned", "error", "future", "params", "resent", "result", "sql")

    def __init__(self, future: asyncio.Future[Any], sql: LiteralString, params: Params) -> None:
        self.future = future
        self.sql = sql
        self.params = params
        self.result: Any = None
        self.error: BaseException | None = None
        # Sent again after a lost connection: it may already have been applied once.
        self.resent = False
        # Failed as unavailable before it was sent (an outage): never to be sent.
        self.abandoned = False

    def ensure_statement(self) -> None:
        """Build ``sql`` and ``params`` if they were left for later (see CommitOp)."""

    def reset(self) -> None:
        """Forget an outcome (the op is about to be replayed alone)."""
        self.result = None
        self.error = None

    def read(self, row: tuple[Any, ...] | None) -> None:
        """Turn the statement's result row into ``result`` or an expected ``error``."""
        raise NotImplementedError


# --- create ----------------------------------------------------------------------------

_INSERT = """
WITH ins AS (
    INSERT INTO actors (actor_id, name, key, created_at, generation, initialized, input,
                        state, wake_at, queue_next_id)
    VALUES (%(actor_id)s, %(name)s, %(key)s, %(created_at)s, %(generation)s,
            %(initialized)s, %(input)s, %(state)s, %(wake_at)s, %(queue_next_id)s)
    ON CONFLICT DO NOTHING
    RETURNING actor_id
)
SELECT (SELECT count(*) FROM ins),
       EXISTS (SELECT 1 FROM actors WHERE name = %(name)s AND key = %(key)s),
       EXISTS (SELECT 1 FROM actors WHERE actor_id = %(actor_id)s),
       EXISTS (SELECT 1 FROM actors
               WHERE actor_id = %(actor_id)s AND name = %(name)s AND key = %(key)s)"""

_NOTIFY_CREATED = ", (SELECT count(pg_notify(%(channel)s, %(wake_at)s::text)) FROM ins)"


class CreateOp(WriteOp):
    """Insert an actor row; parameters are a snapshot of ``record`` taken at submission."""

    __slots__ = ("key", "name")

    def __init__(self, future: asyncio.Future[Any], record: ActorRecord, channel: str) -> None:
        self.name = record.name
        self.key = tuple(record.key)
        params: Params = {
            "actor_id": record.actor_id,
            "name": record.name,
            "key": serialize_key(self.key),
            "created_at": record.created_at,
            "generation": record.generation,
            "initialized": bool(record.initialized),
            "input": None if record.input is None else bytes(record.input),
            "state": None if record.state is None else bytes(record.state),
            "wake_at": record.wake_at,
            "queue_next_id": record.queue_next_id,
        }
        sql: LiteralString = _INSERT
        if record.wake_at is not None:
            sql = _INSERT + _NOTIFY_CREATED
            params["channel"] = channel
        super().__init__(future, sql, params)

    def read(self, row: tuple[Any, ...] | None) -> None:
        assert row is not None
        inserted, name_taken, id_taken, same_row = row[0], row[1], row[2], row[3]
        if inserted or (self.resent and same_row):
            # Resent: the row with this very id, name and key is the first attempt's.
            return
        # The lookups read the statement's snapshot; a row that another session inserted
        # meanwhile is invisible to both. Its name and key are then the likely clash
        # (ids are random), so "already exists" is the answer when neither is seen.
        if id_taken and not name_taken:
            self.error = actor_id_taken(str(self.params["actor_id"]))
        else:
            self.error = ActorAlreadyExists(self.name, self.key)


# --- commit ----------------------------------------------------------------------------

# The rows a commit writes beside its actor row. Every part joins `a` (the actor row's
# CTE), which has one row if the actor exists and none otherwise, and compares actor ids
# with the parameter rather than with `a.actor_id`: columns that differ in collation
# could not be compared directly. A part that writes one row takes scalar parameters;
# one that writes several takes one array per column (`unnest`), which costs more to
# encode — and most commits write one history entry or one message.
_UPSERTS: dict[str, tuple[str, tuple[tuple[str, str], ...], tuple[str, ...]]] = {
    # part: (table, (column, type) in row order, conflict key)
    "qp": (
        "queue_messages",
        (
            ("id", "bigint"), ("name", "text"), ("body", "bytea"), ("created_at", "bigint"),
            ("trace", "text"), ("attempts", "integer"), ("visible_at", "bigint"),
            ("dead_at", "bigint"), ("error", "text"),
        ),
        ("id",),
    ),
    "hp": ("workflow_history", (("location", "text"), ("entry", "bytea")), ("location",)),
    "sp": (
        "schedules",
        (
            ("id", "text"), ("kind", "text"), ("action", "text"), ("args", "bytea"),
            ("run_at", "bigint"), ("created_at", "bigint"), ("name", "text"),
            ("expression", "text"), ("timezone", "text"), ("interval_ms", "bigint"),
            ("max_history", "integer"), ("last_run_at", "bigint"), ("fire_seq", "bigint"),
            ("running_seq", "bigint"),
        ),
        ("id",),
    ),
    "fp": (
        "schedule_fires",
        (
            ("name", "text"), ("seq", "bigint"), ("action", "text"),
            ("scheduled_at", "bigint"), ("fired_at", "bigint"), ("result", "text"),
            ("finished_at", "bigint"), ("error", "bytea"),
        ),
        ("name", "seq"),
    ),
    "ep": (
        "actor_events",
        (("seq", "bigint"), ("name", "text"), ("args", "bytea"), ("emitted_at", "bigint")),
        ("seq",),
    ),
    "kp": (
        "idempotency_keys",
        (("key", "text"), ("fingerprint", "text"), ("created_at", "bigint"), ("answer", "bytea")),
        ("key",),
    ),
    "vp": ("actor_kv", (("key", "bytea"), ("value", "bytea")), ("key",)),
}  # fmt: skip
_DELETES: dict[str, tuple[str, str, str]] = {
    # part: (table, key column, type)
    "qd": ("queue_messages", "id", "bigint"),
    "hd": ("workflow_history", "location", "text"),
    "sd": ("schedules", "id", "text"),
    "vd": ("actor_kv", "key", "bytea"),
}
# A prune spares the fires this commit puts: the put replaces them (the same outcome as
# prune-then-put) without two CTEs touching one row.
_PRUNE = (
    "fd AS (DELETE FROM schedule_fires f USING a,"
    " unnest(%(fd_name)s::text[], %(fd_up_to)s::bigint[]) AS p (name, up_to)"
    " WHERE f.actor_id = %(actor_id)s AND f.name = p.name AND f.seq <= p.up_to"
    " AND NOT EXISTS (SELECT 1 FROM unnest(%(fd_keep_name)s::text[],"
    " %(fd_keep_seq)s::bigint[]) AS k (name, seq) WHERE k.name = f.name AND k.seq = f.seq))"
)


# Event retention (docs/events.md): one range of the actor's rows, bounded like the log.
_EVENT_PRUNE = (
    "ex AS (DELETE FROM actor_events e USING a WHERE e.actor_id = %(actor_id)s"
    " AND (e.seq <= %(ex_up_to)s::bigint OR e.emitted_at < %(ex_before)s::bigint))"
)

# Idempotency keys past their retention: one range of the actor's (actor_id, created_at).
# It spares the keys this commit puts (no two CTEs touch one row), as the fires' prune.
_KEY_PRUNE = (
    "kx AS (DELETE FROM idempotency_keys k USING a WHERE k.actor_id = %(actor_id)s"
    " AND k.created_at < %(kx_before)s::bigint AND k.key <> ALL(%(kx_keep)s::text[]))"
)


def _upsert_sql(part: str, many: bool) -> str:
    table, columns, key = _UPSERTS[part]
    names = ", ".join(column for column, _ in columns)
    if many:
        arrays = ", ".join(f"%({part}_{column})s::{kind}[]" for column, kind in columns)
        source = f"unnest({arrays}) AS r ({names})"
    else:
        values = ", ".join(f"%({part}_{column})s::{kind}" for column, kind in columns)
        source = f"(VALUES ({values})) AS r ({names})"
    updates = ", ".join(f"{c} = EXCLUDED.{c}" for c, _ in columns if c not in key)
    return (
        f"{part} AS (INSERT INTO {table} (actor_id, {names})"
        f" SELECT a.actor_id, {', '.join('r.' + column for column, _ in columns)}"
        f" FROM a, {source}"
        f" ON CONFLICT (actor_id, {', '.join(key)}) DO UPDATE SET {updates})"
    )


def _delete_sql(part: str, many: bool) -> str:
    table, column, kind = _DELETES[part]
    match = f"= ANY(%({part}_keys)s::{kind}[])" if many else f"= %({part}_keys)s::{kind}"
    return (
        f"{part} AS (DELETE FROM {table} t USING a"
        f" WHERE t.actor_id = %(actor_id)s AND t.{column} {match})"
    )


def _part_sql(part: str) -> str:
    """The CTE of one part id: ``qp1`` (one row), ``qpn`` (several), ``fd`` (a prune)."""
    if part == "fd":
        return _PRUNE
    if part == "ex":
        return _EVENT_PRUNE
    if part == "kx":
        return _KEY_PRUNE
    if part == "vr":
        return KV_DELETE_RANGES
    name, many = part[:2], part[2:] == "n"
    return _upsert_sql(name, many) if name in _UPSERTS else _delete_sql(name, many)


def _upsert(part: str, rows: list[tuple[Any, ...]], params: Params) -> str:
    """Put one upsert part's rows into ``params``; return the part id."""
    columns = _UPSERTS[part][1]
    if len(rows) == 1:
        for (column, _), value in zip(columns, rows[0], strict=True):
            params[f"{part}_{column}"] = value
        return part + "1"
    for index, (column, _) in enumerate(columns):
        params[f"{part}_{column}"] = [row[index] for row in rows]
    return part + "n"


def _delete(part: str, keys: list[Any], params: Params) -> str:
    """Put one delete part's keys into ``params``; return the part id."""
    if len(keys) == 1:
        params[f"{part}_keys"] = keys[0]
        return part + "1"
    params[f"{part}_keys"] = keys
    return part + "n"


# The actor row a commit may write: its id, and its generation if the commit is fenced.
_THIS_ACTOR = "actor_id = %(actor_id)s"
_THIS_ACTOR_FENCED = "actor_id = %(actor_id)s AND generation = %(fence)s"
# Locks the row against a concurrent delete (from another node) without rewriting it.
_LOCK_ACTOR = "a AS (SELECT actor_id FROM actors WHERE {row} FOR KEY SHARE)"
# Reads the previous wake_at, to notify only when the alarm moves earlier.
_OLD_WAKE = "old AS (SELECT actor_id, wake_at FROM actors WHERE {row} FOR UPDATE)"
_NOTIFY_EARLIER = (
    ", (SELECT count(pg_notify(%(channel)s, %(wake_at)s::text)) FROM a"
    " WHERE a.old_wake IS NULL OR a.old_wake > %(wake_at)s)"
)
_COLUMN_SQL: dict[str, LiteralString] = {
    name: f"{name} = %({name})s"
    for name in ("state", "initialized", "generation", "wake_at", "queue_next_id", "event_seq")
}

# (columns, parts, notify, fenced) -> SQL: one text per shape, so psycopg prepares each
# statement once per connection. Real workloads use a handful of shapes.
_COMMIT_SQL: dict[tuple[tuple[str, ...], tuple[str, ...], bool, bool], LiteralString] = {}


def _commit_sql(
    columns: tuple[str, ...], parts: tuple[str, ...], notify: bool, fenced: bool
) -> LiteralString:
    shape = (columns, parts, notify, fenced)
    cached = _COMMIT_SQL.get(shape)
    if cached is not None:
        return cached
    assignments = ", ".join(_COLUMN_SQL[column] for column in columns)
    row = _THIS_ACTOR_FENCED if fenced else _THIS_ACTOR
    ctes: list[str] = []
    if notify:
        ctes.append(_OLD_WAKE.format(row=row))
        ctes.append(
            f"a AS (UPDATE actors AS t SET {assignments} FROM old"
            " WHERE t.actor_id = old.actor_id RETURNING t.actor_id, old.wake_at AS old_wake)"
        )
    elif columns:
        ctes.append(f"a AS (UPDATE actors SET {assignments} WHERE {row} RETURNING actor_id)")
    else:
        ctes.append(_LOCK_ACTOR.format(row=row))
    ctes.extend(_part_sql(part) for part in parts)
    sql = "WITH " + ", ".join(ctes) + " SELECT (SELECT count(*) FROM a)"
    if notify:
        sql += _NOTIFY_EARLIER
    # Built only from the constants above, never from values.
    _COMMIT_SQL[shape] = sql
    return sql


class CommitOp(WriteOp):
    """Apply one :class:`ActorCommit`; its net effect is copied out at submission."""

    __slots__ = ("actor_id", "merge")

    def __init__(self, future: asyncio.Future[Any], commit: ActorCommit, channel: str) -> None:
        self.actor_id = commit.actor_id
        # A commit that can share a statement with other actors' commits keeps only its
        # rows (perdure.store.postgres.merge); its own statement is built if it ends up
        # alone. The others build their statement now, from the caller's commit.
        self.merge = merge_rows(commit)
        if self.merge is None:
            super().__init__(future, *_single_statement(commit, channel))
        else:
            super().__init__(future, "", {})

    def ensure_statement(self) -> None:
        if not self.sql and self.merge is not None:
            self.sql, self.params = _single_statement(self.merge.to_commit(self.actor_id), "")

    def read(self, row: tuple[Any, ...] | None) -> None:
        assert row is not None
        if not row[0]:
            self.error = actor_missing(self.actor_id)


class MergeRows:
    """A commit's net rows, for a merged statement (see :func:`merge_rows`)."""

    __slots__ = (
        "actor",
        "event_put",
        "history_delete",
        "history_put",
        "queue_delete",
        "queue_put",
    )

    def __init__(self, commit: ActorCommit) -> None:
        actor_id = commit.actor_id
        self.actor = (
            None if commit.state is None else bytes(commit.state),
            commit.initialized,
            commit.generation,
            commit.queue_next_id,
            commit.set_wake_at,
            commit.wake_at,
            commit.fence,
            commit.event_seq,
        )
        # Net effect, as the single statement computes it: a put that the same commit
        # deletes is dropped, and a repeated put keeps its last value.
        gone_ids = set(commit.queue_delete)
        messages = {m.id: m for m in commit.queue_put if m.id not in gone_ids}
        self.queue_put = [(actor_id, *message_row(m)) for m in messages.values()]
        self.queue_delete = [(actor_id, message_id) for message_id in sorted(gone_ids)]
        gone = set(commit.history_delete)
        self.history_put = [
            (actor_id, location, bytes(entry))
            for location, entry in commit.history_put.items()
            if location not in gone
        ]
        self.history_delete = [(actor_id, location) for location in sorted(gone)]
        self.event_put = [
            (actor_id, e.seq, e.name, bytes(e.args), e.emitted_at) for e in commit.event_put
        ]

    def to_commit(self, actor_id: str) -> ActorCommit:
        """A commit with the same net effect (to build the op's own statement)."""
        state, initialized, generation, queue_next_id, set_wake_at, wake_at, fence, event_seq = (
            self.actor
        )
        return ActorCommit(
            actor_id,
            fence=fence,
            state=state,
            initialized=initialized,
            generation=generation,
            set_wake_at=set_wake_at,
            wake_at=wake_at,
            queue_next_id=queue_next_id,
            queue_put=[QueueMessageRecord(*row[1:]) for row in self.queue_put],
            queue_delete=[message_id for _, message_id in self.queue_delete],
            history_put={location: entry for _, location, entry in self.history_put},
            history_delete=[location for _, location in self.history_delete],
            event_put=[EventRecord(*row[1:]) for row in self.event_put],
            event_seq=event_seq,
        )


def merge_rows(commit: ActorCommit) -> MergeRows | None:
    """The rows of ``commit`` if it can join a merged statement, else ``None``."""
    changes_actor = (
        commit.state is not None
        or commit.initialized is not None
        or commit.generation is not None
        or commit.queue_next_id is not None
        or commit.set_wake_at
        or commit.event_seq is not None
    )
    if not changes_actor:
        return None  # the single statement only locks the row; an UPDATE would rewrite it
    if commit.set_wake_at and commit.wake_at is not None:
        return None  # may have to notify other nodes of an earlier alarm
    if commit.schedule_put or commit.schedule_delete or commit.fire_put or commit.fire_prune:
        return None
    if commit.event_prune is not None:
        return None  # retention, every so many events: its own statement
    if commit.key_put or commit.key_prune is not None:
        return None  # a keyed request's commit: its own statement
    if commit.kv_put or commit.kv_delete or commit.kv_delete_range:
        return None  # KV writes (c.kv): their own statement
    return MergeRows(commit)


def _single_statement(commit: ActorCommit, channel: str) -> tuple[LiteralString, Params]:
    """The one statement that applies ``commit``, and its parameters."""
    params: Params = {"actor_id": commit.actor_id}
    if commit.fence is not None:
        params["fence"] = commit.fence
    columns = _actor_changes(commit, params)
    notify = commit.set_wake_at and commit.wake_at is not None
    if notify:
        params["channel"] = channel
    parts: list[str] = []
    _queue_parts(commit, params, parts)
    _history_parts(commit, params, parts)
    if commit.schedule_put or commit.schedule_delete or commit.fire_put or commit.fire_prune:
        _schedule_parts(commit, params, parts)
    if commit.event_put or commit.event_prune is not None:
        _event_parts(commit, params, parts)
    if commit.key_put or commit.key_prune is not None:
        _key_parts(commit, params, parts)
    if commit.kv_put or commit.kv_delete or commit.kv_delete_range:
        parts.extend(kv_parts(commit, params, _upsert, _delete))
    return _commit_sql(columns, tuple(parts), notify, commit.fence is not None), params


def _queue_parts(commit: ActorCommit, params: Params, parts: list[str]) -> None:
    # Puts apply before deletes (as in the other backends): a message put and deleted by
    # the same commit ends deleted.
    if commit.queue_delete:
        deleted = set(commit.queue_delete)
        parts.append(_delete("qd", sorted(deleted), params))
        messages = [m for m in commit.queue_put if m.id not in deleted]
    else:
        messages = commit.queue_put
    if messages:
        rows = {m.id: message_row(m) for m in messages}
        parts.append(_upsert("qp", list(rows.values()), params))


def _history_parts(commit: ActorCommit, params: Params, parts: list[str]) -> None:
    entries = commit.history_put
    if commit.history_delete:
        deleted = set(commit.history_delete)
        parts.append(_delete("hd", sorted(deleted), params))
        entries = {loc: entry for loc, entry in entries.items() if loc not in deleted}
    if entries:
        rows = [(location, bytes(entry)) for location, entry in entries.items()]
        parts.append(_upsert("hp", rows, params))


def _schedule_parts(commit: ActorCommit, params: Params, parts: list[str]) -> None:
    # Deletes and prunes apply before puts (the contract): a job deleted and put again by
    # one commit is the new one.
    columns = [column for column, _ in _UPSERTS["sp"][1]]
    schedules = {
        s.id: tuple(bytes(s.args) if c == "args" else getattr(s, c) for c in columns)
        for s in commit.schedule_put.values()
    }
    deleted = sorted(set(commit.schedule_delete) - schedules.keys())
    if deleted:
        parts.append(_delete("sd", deleted, params))
    if schedules:
        parts.append(_upsert("sp", list(schedules.values()), params))
    fire_columns = [column for column, _ in _UPSERTS["fp"][1]]
    fires = {
        (f.name, f.seq): tuple(
            (None if f.error is None else bytes(f.error)) if c == "error" else getattr(f, c)
            for c in fire_columns
        )
        for f in commit.fire_put
    }
    if commit.fire_prune:
        parts.append("fd")
        params["fd_name"] = [name for name, _ in commit.fire_prune]
        params["fd_up_to"] = [up_to for _, up_to in commit.fire_prune]
        params["fd_keep_name"] = [name for name, _ in fires]
        params["fd_keep_seq"] = [seq for _, seq in fires]
    if fires:
        parts.append(_upsert("fp", list(fires.values()), params))


def _event_parts(commit: ActorCommit, params: Params, parts: list[str]) -> None:
    # The prune reads the statement's snapshot, so it never sees the events put beside
    # it: prune-then-put, as the contract says.
    if commit.event_prune is not None:
        parts.append("ex")
        params["ex_up_to"], params["ex_before"] = commit.event_prune
    if commit.event_put:
        rows = [(e.seq, e.name, bytes(e.args), e.emitted_at) for e in commit.event_put]
        parts.append(_upsert("ep", rows, params))


def _key_parts(commit: ActorCommit, params: Params, parts: list[str]) -> None:
    # Prune-then-put, as the contract says: the put replaces a pruned key of its own.
    rows = {k.key: (k.key, k.fingerprint, k.created_at, bytes(k.answer)) for k in commit.key_put}
    if commit.key_prune is not None:
        parts.append("kx")
        params["kx_before"], params["kx_keep"] = commit.key_prune, list(rows)
    if rows:
        parts.append(_upsert("kp", list(rows.values()), params))


def _actor_changes(commit: ActorCommit, params: Params) -> tuple[str, ...]:
    """The ``actors`` columns a commit sets; their values go into ``params``."""
    columns: list[str] = []
    if commit.state is not None:
        columns.append("state")
        params["state"] = bytes(commit.state)
    if commit.initialized is not None:
        columns.append("initialized")
        params["initialized"] = bool(commit.initialized)
    if commit.generation is not None:
        columns.append("generation")
        params["generation"] = commit.generation
    if commit.set_wake_at:
        columns.append("wake_at")
        params["wake_at"] = commit.wake_at
    if commit.queue_next_id is not None:
        columns.append("queue_next_id")
        params["queue_next_id"] = commit.queue_next_id
    if commit.event_seq is not None:
        columns.append("event_seq")
        params["event_seq"] = commit.event_seq
    return tuple(columns)


# --- delete ----------------------------------------------------------------------------

_DELETE = """
WITH d AS (DELETE FROM actors WHERE actor_id = %(actor_id)s RETURNING actor_id),
     q AS (DELETE FROM queue_messages WHERE actor_id = %(actor_id)s),
     h AS (DELETE FROM workflow_history WHERE actor_id = %(actor_id)s),
     s AS (DELETE FROM schedules WHERE actor_id = %(actor_id)s),
     f AS (DELETE FROM schedule_fires WHERE actor_id = %(actor_id)s),
     e AS (DELETE FROM actor_events WHERE actor_id = %(actor_id)s),
     k AS (DELETE FROM idempotency_keys WHERE actor_id = %(actor_id)s),
     v AS (DELETE FROM actor_kv WHERE actor_id = %(actor_id)s)
SELECT count(*) FROM d"""


class DeleteOp(WriteOp):
    """Delete an actor and all its rows; the result says if it existed."""

    __slots__ = ()

    def __init__(self, future: asyncio.Future[Any], actor_id: str) -> None:
        super().__init__(future, _DELETE, {"actor_id": actor_id})

    def read(self, row: tuple[Any, ...] | None) -> None:
        assert row is not None
        self.result = row[0] > 0
