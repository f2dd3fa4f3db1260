"""The PostgreSQL statements that take and give back actors: claims and leases.

Claiming, acquiring and releasing are write operations of the pipelined writer
(:mod:`perdure.store.postgres.writer`), one statement each, so they come after every
write this store submitted before them. Taking an actor locks its row ``FOR UPDATE``
first: that waits for every other session's transaction holding a lock on the row (a
previous owner's last commit, even the ``FOR KEY SHARE`` of one that writes no actor
column), and the ``UPDATE`` then re-reads the newest row version (``READ COMMITTED``),
so the lease test and the returned record see everything committed before. Expiry is
the database's clock (``clock_timestamp()``), which every node shares, unless the
caller passes ``now``.
"""

from __future__ import annotations

import asyncio
from typing import Any, LiteralString

from perdure.errors import ActorNotFound, ActorOwnedElsewhere
from perdure.store.base import ActorRecord, Lease
from perdure.store.postgres.ops import WriteOp
from perdure.store.postgres.sql import ACTOR_COLUMNS, record_from_row

__all__ = ["CLOCK", "GET_LEASE", "AcquireOp", "ClaimOp", "ReleaseOp"]

_T_COLUMNS = ", ".join("t." + column for column in ACTOR_COLUMNS.split(", "))
# The store's clock as CTE `c`: the caller's `now`, else the database's.
CLOCK: LiteralString = (
    "c AS (SELECT COALESCE(%(now)s::bigint,"
    " (extract(epoch FROM clock_timestamp()) * 1000)::bigint) AS ms)"
)
# A lease keeps other nodes out while its own expiry has not passed, or while its node
# heartbeats (a live node's leases need no renewal of their own; see base.py).
_FREE: LiteralString = (
    "(t.owner_node IS NULL OR ((t.lease_expires_at IS NULL OR t.lease_expires_at <= c.ms)"
    " AND NOT EXISTS (SELECT 1 FROM nodes AS n WHERE n.node_id = t.owner_node"
    " AND n.expires_at > c.ms)))"
)
# `was_until`: until when the lease found keeps others out (its node's heartbeat, if later).
_LOCK: LiteralString = (
    "l AS (SELECT actor_id AS locked, owner_node AS was_owner, GREATEST(lease_expires_at,"
    " (SELECT n.expires_at FROM nodes AS n WHERE n.node_id = owner_node)) AS was_until"
    " FROM actors WHERE actor_id = %(actor_id)s FOR UPDATE)"
)
# One row if the actor exists: the taken row's columns (NULL if refused), then the lease
# found on it (to name the owner that refused us).
_TAKE_RESULT: LiteralString = " SELECT u.*, l.was_owner, l.was_until FROM l LEFT JOIN u ON true"

_CLAIM: LiteralString = (
    f"WITH {CLOCK}, {_LOCK},"
    " u AS (UPDATE actors AS t SET generation = t.generation + 1, owner_node = NULL,"
    f" lease_expires_at = NULL FROM l, c WHERE t.actor_id = l.locked AND {_FREE}"
    f" RETURNING {_T_COLUMNS})" + _TAKE_RESULT
)

_ACQUIRE: LiteralString = (
    f"WITH {CLOCK}, {_LOCK},"
    " u AS (UPDATE actors AS t SET generation = t.generation + 1, owner_node = %(node)s,"
    " lease_expires_at = c.ms + %(ttl)s FROM l, c WHERE t.actor_id = l.locked"
    f" AND (t.owner_node = %(node)s OR {_FREE}) RETURNING {_T_COLUMNS}, t.lease_expires_at)"
    + _TAKE_RESULT
)

_CURRENT: LiteralString = (
    "t.actor_id = %(actor_id)s AND t.generation = %(generation)s AND t.owner_node = %(node)s"
)
# A statement that always answers one row (the writer reads one per operation).
_RELEASE: LiteralString = (
    "WITH r AS (UPDATE actors AS t SET owner_node = NULL, lease_expires_at = NULL"
    f" WHERE {_CURRENT} RETURNING 1) SELECT count(*) FROM r"
)

GET_LEASE: LiteralString = (
    "SELECT generation, owner_node, lease_expires_at FROM actors"
    " WHERE actor_id = %s AND owner_node IS NOT NULL"
)

_COLUMNS = len(ACTOR_COLUMNS.split(", "))


def _lease_from_row(row: tuple[Any, ...], node_id: str) -> tuple[ActorRecord, Lease]:
    """The record and lease of a row of actor columns followed by ``lease_expires_at``."""
    record = record_from_row(row)
    return record, Lease(record.actor_id, node_id, record.generation, row[_COLUMNS])


def _refused(actor_id: str, row: tuple[Any, ...]) -> ActorOwnedElsewhere:
    return ActorOwnedElsewhere(actor_id, row[-2], row[-1])


class ClaimOp(WriteOp):
    """:meth:`Store.claim_actor`: the result is the record after it, or None."""

    __slots__ = ("actor_id",)

    def __init__(self, future: asyncio.Future[Any], actor_id: str) -> None:
        super().__init__(future, _CLAIM, {"actor_id": actor_id, "now": None})
        self.actor_id = actor_id

    def read(self, row: tuple[Any, ...] | None) -> None:
        if row is None:
            self.result = None
        elif row[0] is None:
            self.error = _refused(self.actor_id, row)
        else:
            self.result = record_from_row(row)


class AcquireOp(WriteOp):
    """:meth:`Store.acquire_lease`: the result is ``(record, lease)``."""

    __slots__ = ("actor_id", "node_id")

    def __init__(
        self,
        future: asyncio.Future[Any],
        actor_id: str,
        node_id: str,
        ttl_ms: int,
        now: int | None,
    ) -> None:
        params = {"actor_id": actor_id, "node": node_id, "ttl": ttl_ms, "now": now}
        super().__init__(future, _ACQUIRE, params)
        self.actor_id = actor_id
        self.node_id = node_id

    def read(self, row: tuple[Any, ...] | None) -> None:
        if row is None:
            self.error = ActorNotFound(f"Actor `{self.actor_id}` does not exist or was destroyed.")
        elif row[0] is None:
            self.error = _refused(self.actor_id, row)
        else:
            self.result = _lease_from_row(row, self.node_id)


class ReleaseOp(WriteOp):
    """:meth:`Store.release_lease`: clears the owner if the lease is still current."""

    __slots__ = ()

    def __init__(self, future: asyncio.Future[Any], lease: Lease) -> None:
        params = {"actor_id": lease.actor_id, "generation": lease.generation, "node": lease.node_id}
        super().__init__(future, _RELEASE, params)

    def read(self, row: tuple[Any, ...] | None) -> None:
        self.result = None
