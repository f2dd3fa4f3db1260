"""The SQLite statements of cluster membership: the ``nodes`` table (migration 4).

One process serves a SQLite database, so its "cluster" is at most that process; the
table is real all the same, so that ``perdure nodes`` run beside the server reads it.
Writes run on the group-commit writer like every write; :data:`LIST_NODES` is a read.
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

from perdure.store.sqlite.ops import WriteOp

__all__ = [
    "DEREGISTER_NODE",
    "FORGET_CLUSTER_SECRET",
    "HEARTBEAT_NODE",
    "KEEP_CLUSTER_SECRET",
    "LIST_NODES",
    "READ_CLUSTER_SECRET",
    "REGISTER_NODE",
    "StatementOp",
]

_NODE_COLUMNS = "node_id, address, started_at, heartbeat_at, expires_at, draining, code_version"

REGISTER_NODE = (
    "INSERT INTO nodes (node_id, address, started_at, heartbeat_at, expires_at, draining,"
    " code_version) VALUES (?, ?, ?, ?, ?, 0, ?)"
    " ON CONFLICT (node_id) DO UPDATE SET address = excluded.address,"
    " started_at = excluded.started_at, heartbeat_at = excluded.heartbeat_at,"
    " expires_at = excluded.expires_at, draining = 0, code_version = excluded.code_version"
)
HEARTBEAT_NODE = (
    "UPDATE nodes SET heartbeat_at = ?, expires_at = ?, draining = ?"
    f" WHERE node_id = ? RETURNING {_NODE_COLUMNS}"
)
DEREGISTER_NODE = "DELETE FROM nodes WHERE node_id = ?"
# Parameters: count actors (0/1), include_dead (0/1), now. `owner_node = ...` lets SQLite read the
# partial index actors_owner_node. Node ids sort in byte order (SQLite's BINARY).
LIST_NODES = (
    f"SELECT {_NODE_COLUMNS}, CASE WHEN ? THEN (SELECT COUNT(*) FROM actors AS a"
    " WHERE a.owner_node = n.node_id) ELSE 0 END"
    " FROM nodes AS n WHERE ? OR n.expires_at > ? ORDER BY n.node_id"
)

# The cluster's secret (migration 8): one row, kept by the first to ask; the insert and
# the read run together in the writer's transaction. Parameters: secret, digest, now.
KEEP_CLUSTER_SECRET = (
    "INSERT INTO cluster_secret (id, secret, digest, created_at) VALUES (1, ?, ?, ?)"
    " ON CONFLICT (id) DO NOTHING"
)
READ_CLUSTER_SECRET = "SELECT secret, digest FROM cluster_secret WHERE id = 1"
FORGET_CLUSTER_SECRET = "DELETE FROM cluster_secret RETURNING id"


class StatementOp(WriteOp):
    """One statement on the write connection; the result is the rows it returns."""

    __slots__ = ("params", "sql")

    def __init__(self, future: asyncio.Future[Any], sql: str, params: tuple[Any, ...]) -> None:
        super().__init__(future)
        self.sql = sql
        self.params = params

    def apply(self, db: sqlite3.Connection) -> None:
        self.result = db.execute(self.sql, self.params).fetchall()
