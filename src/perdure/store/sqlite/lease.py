"""The SQLite write operations that take and give back actors: claims and leases.

They run on the group-commit writer like every write (:mod:`perdure.store.sqlite.ops`),
so each comes after every write submitted before it, and one writer per database (the
data-directory lock) makes each statement's check-and-set atomic without more locking.
Times are computed on the event loop thread at submission (wall-clock ms, or the
caller's ``now``): for another node's expiry an earlier ``now`` errs on the safe side.
"""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any

from perdure.errors import ActorNotFound, ActorOwnedElsewhere
from perdure.store.base import Lease
from perdure.store.sqlite.ops import WriteOp

__all__ = ["AcquireOp", "ClaimOp", "ReleaseOp"]

# A lease keeps other nodes out while its own expiry has not passed, or while its node
# heartbeats (see base.py). Two parameters: now, now.
_FREE = (
    "(owner_node IS NULL OR ((lease_expires_at IS NULL OR lease_expires_at <= ?)"
    " AND NOT EXISTS (SELECT 1 FROM nodes WHERE nodes.node_id = actors.owner_node"
    " AND nodes.expires_at > ?)))"
)
# Until when the lease found keeps others out: its node's heartbeat, if later.
_OWNER = (
    "SELECT owner_node, max(coalesce(lease_expires_at, 0), coalesce((SELECT expires_at"
    " FROM nodes WHERE nodes.node_id = actors.owner_node), 0)) FROM actors WHERE actor_id = ?"
)


def _refusal(db: sqlite3.Connection, actor_id: str) -> ActorOwnedElsewhere | None:
    """Why a conditional take found no row: the live owner, or ``None`` (no actor)."""
    rows = db.execute(_OWNER, (actor_id,)).fetchall()
    if not rows:
        return None
    owner, expires_at = rows[0]
    return ActorOwnedElsewhere(actor_id, owner, expires_at)


class ClaimOp(WriteOp):
    """:meth:`Store.claim_actor`: one more generation, no owner; the result is the row
    after it, or None. Refused while a node's lease is live."""

    __slots__ = ("actor_id", "now", "sql")

    def __init__(self, future: asyncio.Future[Any], actor_id: str, columns: str, now: int):
        super().__init__(future)
        self.actor_id = actor_id
        self.now = now
        # One statement on the wake path; the lease is looked at again only if refused.
        self.sql = (
            "UPDATE actors SET generation = generation + 1, owner_node = NULL,"
            f" lease_expires_at = NULL WHERE actor_id = ? AND {_FREE} RETURNING {columns}"
        )

    def apply(self, db: sqlite3.Connection) -> None:
        rows = db.execute(self.sql, (self.actor_id, self.now, self.now)).fetchall()
        if rows:
            self.result = rows[0]
        else:
            self.error = _refusal(db, self.actor_id)


class AcquireOp(WriteOp):
    """:meth:`Store.acquire_lease`: the result is ``(row, expires_at)``."""

    __slots__ = ("actor_id", "expires_at", "node_id", "now", "sql")

    def __init__(
        self,
        future: asyncio.Future[Any],
        actor_id: str,
        node_id: str,
        expires_at: int,
        now: int,
        columns: str,
    ) -> None:
        super().__init__(future)
        self.actor_id = actor_id
        self.node_id = node_id
        self.expires_at = expires_at
        self.now = now
        self.sql = (
            "UPDATE actors SET generation = generation + 1, owner_node = ?,"
            " lease_expires_at = ? WHERE actor_id = ?"
            f" AND (owner_node = ? OR {_FREE}) RETURNING {columns}"
        )

    def apply(self, db: sqlite3.Connection) -> None:
        params = (self.node_id, self.expires_at, self.actor_id, self.node_id, self.now, self.now)
        rows = db.execute(self.sql, params).fetchall()
        if rows:
            self.result = (rows[0], self.expires_at)
            return
        self.error = _refusal(db, self.actor_id) or ActorNotFound(
            f"Actor `{self.actor_id}` does not exist or was destroyed."
        )


_CURRENT = "actor_id = ? AND generation = ? AND owner_node = ?"


class ReleaseOp(WriteOp):
    """:meth:`Store.release_lease`: clears the owner if the lease is still current."""

    __slots__ = ("lease",)

    def __init__(self, future: asyncio.Future[Any], lease: Lease) -> None:
        super().__init__(future)
        self.lease = lease

    def apply(self, db: sqlite3.Connection) -> None:
        lease = self.lease
        db.execute(
            f"UPDATE actors SET owner_node = NULL, lease_expires_at = NULL WHERE {_CURRENT}",
            (lease.actor_id, lease.generation, lease.node_id),
        )
