"""The SQL of an actor's KV space (store/kv.py) on PostgreSQL.

BYTEA compares bytewise, the contract's order, so a prefix or a range is one range of
the primary key ``(actor_id, key)``. Writes are parts of the commit statement
(postgres/ops.py); the reads are single statements.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, LiteralString

from perdure.store.base import ActorCommit

__all__ = ["KV_DELETE_RANGES", "KV_GET", "kv_list_sql", "kv_parts"]

# ops.py's helpers that put a part's rows into the parameters and name the part.
_Rows = Callable[[str, list[tuple[Any, ...]], dict[str, Any]], str]
_Keys = Callable[[str, list[Any], dict[str, Any]], str]

# The commit's range deletes, ``[start, end)`` each (a NULL end: to the last key). They
# spare the keys the same commit puts: no two CTEs of one statement may touch one row.
KV_DELETE_RANGES = (
    "vr AS (DELETE FROM actor_kv t USING a,"
    " unnest(%(vr_start)s::bytea[], %(vr_end)s::bytea[]) AS r (s, e)"
    " WHERE t.actor_id = %(actor_id)s AND t.key >= r.s AND (r.e IS NULL OR t.key < r.e)"
    " AND t.key <> ALL(%(vr_keep)s::bytea[]))"
)

KV_GET: LiteralString = (
    "SELECT key, value FROM actor_kv WHERE actor_id = %s AND key = ANY(%s::bytea[])"
)

# LIMIT NULL is PostgreSQL's "no limit".
_KV_LIST: dict[tuple[bool, bool], LiteralString] = {
    (False, False): (
        "SELECT key, value FROM actor_kv WHERE actor_id = %s AND key >= %s ORDER BY key LIMIT %s"
    ),
    (False, True): (
        "SELECT key, value FROM actor_kv WHERE actor_id = %s AND key >= %s"
        " ORDER BY key DESC LIMIT %s"
    ),
    (True, False): (
        "SELECT key, value FROM actor_kv WHERE actor_id = %s AND key >= %s AND key < %s"
        " ORDER BY key LIMIT %s"
    ),
    (True, True): (
        "SELECT key, value FROM actor_kv WHERE actor_id = %s AND key >= %s AND key < %s"
        " ORDER BY key DESC LIMIT %s"
    ),
}


def kv_list_sql(bounded: bool, reverse: bool) -> LiteralString:
    """The list statement: with an upper bound or not, ascending or descending."""
    return _KV_LIST[bounded, reverse]


def kv_parts(
    commit: ActorCommit, params: dict[str, Any], upsert: _Rows, delete: _Keys
) -> list[str]:
    """The commit statement's KV parts (their rows go into ``params``): ranges, then
    deletes, then puts (the contract's order); the deletes spare the keys put."""
    parts: list[str] = []
    puts = {bytes(key): bytes(value) for key, value in commit.kv_put.items()}
    ranges = commit.kv_delete_range
    if ranges:
        parts.append("vr")
        params["vr_start"] = [bytes(start) for start, _ in ranges]
        params["vr_end"] = [None if end is None else bytes(end) for _, end in ranges]
        params["vr_keep"] = list(puts)
    deleted = sorted({bytes(key) for key in commit.kv_delete} - puts.keys())
    if deleted:
        parts.append(delete("vd", deleted, params))
    if puts:
        parts.append(upsert("vp", list(puts.items()), params))
    return parts
