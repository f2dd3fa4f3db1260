"""Many actors' commits in one PostgreSQL statement.

Each commit is normally one statement (:mod:`perdure.store.postgres.ops`), and with
psycopg a statement costs 60-70 µs of Python CPU whatever its size: with many actors
busy, that, not the database, is the limit. A run of commits of distinct actors that
change their actor row (the common case: every workflow step writes the state) is
therefore sent as one statement that takes every row as arrays (``unnest``).

The merged statement keeps each commit's guarantees. Every other row joins the actor
rows it updated (CTE ``a``), so a missing actor's rows are skipped while the others are
written, and its commit alone fails, as it would alone. Commits of distinct actors touch
disjoint rows, so the single snapshot all CTEs share is no constraint; within a commit,
puts and deletes are reduced to their net effect first, as the single statement does.
Commits that set no actor column, notify, write schedules or prune the event log take
the single path.
"""

from __future__ import annotations

from typing import Any, LiteralString

from perdure.store._shared import actor_missing
from perdure.store.postgres.ops import CommitOp, Params, WriteOp

__all__ = ["MergedCommits", "plan_statements"]

# `COLLATE "C"` on the parameters: the tables' actor_id columns use "C", and comparing
# two differing implicit collations is an error. Parameters are sent in binary (`%()b`):
# psycopg's text format quotes every array element with a regular expression.
_MERGED_SQL: LiteralString = """
WITH r AS (
    SELECT * FROM unnest(%(id)b::text[], %(state)b::bytea[], %(initialized)b::boolean[],
                         %(generation)b::bigint[], %(queue_next_id)b::bigint[],
                         %(set_wake)b::boolean[], %(wake_at)b::bigint[], %(fence)b::bigint[],
                         %(event_seq)b::bigint[])
        AS r (actor_id, state, initialized, generation, queue_next_id, set_wake, wake_at, fence,
              event_seq)
),
a AS (
    UPDATE actors AS t SET
        state = COALESCE(r.state, t.state),
        initialized = COALESCE(r.initialized, t.initialized),
        generation = COALESCE(r.generation, t.generation),
        queue_next_id = COALESCE(r.queue_next_id, t.queue_next_id),
        event_seq = COALESCE(r.event_seq, t.event_seq),
        wake_at = CASE WHEN r.set_wake THEN r.wake_at ELSE t.wake_at END
    FROM r WHERE t.actor_id = r.actor_id COLLATE "C"
        AND (r.fence IS NULL OR t.generation = r.fence)
    RETURNING t.actor_id
),
qp AS (
    INSERT INTO queue_messages (actor_id, id, name, body, created_at, trace,
                                attempts, visible_at, dead_at, error)
    SELECT a.actor_id, q.id, q.name, q.body, q.created_at, q.trace,
           q.attempts, q.visible_at, q.dead_at, q.error
    FROM unnest(%(qp_actor)b::text[], %(qp_id)b::bigint[], %(qp_name)b::text[],
                %(qp_body)b::bytea[], %(qp_created_at)b::bigint[], %(qp_trace)b::text[],
                %(qp_attempts)b::integer[], %(qp_visible_at)b::bigint[],
                %(qp_dead_at)b::bigint[], %(qp_error)b::text[])
        AS q (actor_id, id, name, body, created_at, trace, attempts, visible_at, dead_at, error)
    JOIN a ON a.actor_id = q.actor_id COLLATE "C"
    ON CONFLICT (actor_id, id) DO UPDATE
        SET name = EXCLUDED.name, body = EXCLUDED.body, created_at = EXCLUDED.created_at,
            trace = EXCLUDED.trace, attempts = EXCLUDED.attempts,
            visible_at = EXCLUDED.visible_at, dead_at = EXCLUDED.dead_at, error = EXCLUDED.error
),
qd AS (
    DELETE FROM queue_messages AS t
    USING unnest(%(qd_actor)b::text[], %(qd_id)b::bigint[]) AS d (actor_id, id), a
    WHERE t.actor_id = d.actor_id COLLATE "C" AND t.id = d.id
      AND a.actor_id = d.actor_id COLLATE "C"
),
hp AS (
    INSERT INTO workflow_history (actor_id, location, entry)
    SELECT a.actor_id, h.location, h.entry
    FROM unnest(%(hp_actor)b::text[], %(hp_location)b::text[], %(hp_entry)b::bytea[])
        AS h (actor_id, location, entry)
    JOIN a ON a.actor_id = h.actor_id COLLATE "C"
    ON CONFLICT (actor_id, location) DO UPDATE SET entry = EXCLUDED.entry
),
hd AS (
    DELETE FROM workflow_history AS t
    USING unnest(%(hd_actor)b::text[], %(hd_location)b::text[]) AS d (actor_id, location), a
    WHERE t.actor_id = d.actor_id COLLATE "C" AND t.location = d.location
      AND a.actor_id = d.actor_id COLLATE "C"
),
ep AS (
    INSERT INTO actor_events (actor_id, seq, name, args, emitted_at)
    SELECT a.actor_id, e.seq, e.name, e.args, e.emitted_at
    FROM unnest(%(ep_actor)b::text[], %(ep_seq)b::bigint[], %(ep_name)b::text[],
                %(ep_args)b::bytea[], %(ep_emitted_at)b::bigint[])
        AS e (actor_id, seq, name, args, emitted_at)
    JOIN a ON a.actor_id = e.actor_id COLLATE "C"
    ON CONFLICT (actor_id, seq) DO UPDATE
        SET name = EXCLUDED.name, args = EXCLUDED.args, emitted_at = EXCLUDED.emitted_at
)
SELECT array_agg(actor_id) FROM a"""

# The actor-row values in the order of the `r` columns after actor_id.
_ACTOR_COLUMNS = (
    "state",
    "initialized",
    "generation",
    "queue_next_id",
    "set_wake",
    "wake_at",
    "fence",
    "event_seq",
)
_ROW_ARRAYS: dict[str, tuple[str, ...]] = {
    "queue_put": (
        "qp_actor",
        "qp_id",
        "qp_name",
        "qp_body",
        "qp_created_at",
        "qp_trace",
        "qp_attempts",
        "qp_visible_at",
        "qp_dead_at",
        "qp_error",
    ),
    "queue_delete": ("qd_actor", "qd_id"),
    "history_put": ("hp_actor", "hp_location", "hp_entry"),
    "history_delete": ("hd_actor", "hd_location"),
    "event_put": ("ep_actor", "ep_seq", "ep_name", "ep_args", "ep_emitted_at"),
}


class MergedCommits:
    """Commits of distinct actors sent as one statement; settles each of them."""

    __slots__ = ("ops", "params", "sql")

    def __init__(self, ops: list[CommitOp]) -> None:
        self.ops = ops
        self.sql = _MERGED_SQL
        params: Params = {"id": [op.actor_id for op in ops]}
        rows = [op.merge for op in ops]
        for index, column in enumerate(_ACTOR_COLUMNS):
            params[column] = [row.actor[index] for row in rows if row is not None]
        for attribute, names in _ROW_ARRAYS.items():
            flat = [item for row in rows if row is not None for item in getattr(row, attribute)]
            for index, name in enumerate(names):
                params[name] = [item[index] for item in flat]
        self.params = params

    def reset(self) -> None:
        for op in self.ops:
            op.reset()

    def read(self, row: tuple[Any, ...] | None) -> None:
        assert row is not None
        written = set(row[0] or ())
        for op in self.ops:
            if op.actor_id not in written:
                op.error = actor_missing(op.actor_id)


def plan_statements(ops: list[WriteOp]) -> list[WriteOp | MergedCommits]:
    """The statements that apply ``ops`` in order: runs of mergeable commits of
    distinct actors become one statement each (a repeated actor starts a new run)."""
    statements: list[WriteOp | MergedCommits] = []
    run: list[CommitOp] = []
    actors: set[str] = set()

    def close_run() -> None:
        if len(run) == 1:
            run[0].ensure_statement()
            statements.append(run[0])
        elif run:
            statements.append(MergedCommits(list(run)))
        run.clear()
        actors.clear()

    for op in ops:
        if not isinstance(op, CommitOp) or op.merge is None:
            close_run()
            statements.append(op)
            continue
        if op.actor_id in actors:
            close_run()
        run.append(op)
        actors.add(op.actor_id)
    close_run()
    return statements
