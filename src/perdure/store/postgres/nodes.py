"""The PostgreSQL statements of cluster membership and of a node's bulk lease renewal.

They run on a pooled connection (autocommit, one statement each), not through the
pipelined writer (:mod:`perdure.store.postgres.writer`): their order relative to commits
does not matter, and a node's heartbeat must not queue behind a large batch of commits.
Times are the database's clock (``clock_timestamp()``) unless the caller passes ``now``.

Renewing every lease a node holds is one statement (:data:`RENEW_LEASES`, the leases as
arrays through ``unnest``) that never waits for a row lock. A waiting one could deadlock
with the writer: a batch's transaction locks its actors' rows one after another, in
submission order, and holds them to its commit, so a renewal that had locked row B and
waited for row A (locked by that transaction, which then reached B) would wait for it
while it waited for the renewal; PostgreSQL breaks that only after ``deadlock_timeout``
by failing one of them. So the statement locks with ``SKIP LOCKED``; the rows it skips
that still carried the lease in its snapshot (a commit in flight, or another node taking
the actor) come back as busy, and the store renews those one at a time with
:data:`~perdure.store.postgres.lease.RENEW`: each waits for one row with no other lock
held, which cannot deadlock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, LiteralString

from perdure.store.base import Lease
from perdure.store.postgres.lease import CLOCK

__all__ = [
    "DEREGISTER_NODE",
    "HEARTBEAT_NODE",
    "LIST_NODES",
    "REGISTER_NODE",
    "RENEW_LEASES",
    "renew_leases_params",
]

_NODE_COLUMNS: LiteralString = (
    "n.node_id, n.address, n.started_at, n.heartbeat_at, n.expires_at, n.draining"
)

# Parameters: node, address, ttl, now.
REGISTER_NODE: LiteralString = (
    f"WITH {CLOCK} INSERT INTO nodes AS n"
    " (node_id, address, started_at, heartbeat_at, expires_at, draining)"
    " SELECT %(node)s::text, %(address)s::text, c.ms, c.ms, c.ms + %(ttl)s, false FROM c"
    " ON CONFLICT (node_id) DO UPDATE SET address = EXCLUDED.address,"
    " started_at = EXCLUDED.started_at, heartbeat_at = EXCLUDED.heartbeat_at,"
    f" expires_at = EXCLUDED.expires_at, draining = false RETURNING {_NODE_COLUMNS}"
)
# Parameters: node, ttl, draining, now. No row when the node is not registered.
HEARTBEAT_NODE: LiteralString = (
    f"WITH {CLOCK} UPDATE nodes AS n SET heartbeat_at = c.ms,"
    " expires_at = c.ms + %(ttl)s, draining = %(draining)s FROM c"
    f" WHERE n.node_id = %(node)s RETURNING {_NODE_COLUMNS}"
)
# RETURNING: the pool's reads fetch rows.
DEREGISTER_NODE: LiteralString = "DELETE FROM nodes WHERE node_id = %(node)s RETURNING node_id"
# Parameters: include_dead, now. `a.owner_node = n.node_id` (one collation: the
# database's) reads the partial index actors_owner_node; ids are listed in byte order.
LIST_NODES: LiteralString = (
    f"WITH {CLOCK} SELECT {_NODE_COLUMNS}, CASE WHEN %(counts)s THEN (SELECT count(*)"
    " FROM actors AS a WHERE a.owner_node = n.node_id) ELSE 0 END"
    " FROM nodes AS n, c WHERE %(include_dead)s OR n.expires_at > c.ms"
    ' ORDER BY n.node_id COLLATE "C"'
)

# Rows `actor_id, owner_node, generation, lease_expires_at`: the renewed leases, then the
# busy ones with a NULL expiry. `k` locks what it renews and re-checks each row it locks
# against its newest version (READ COMMITTED); the busy part reads the statement's
# snapshot. Arrays are sent in binary (`%()b`), as the merged commits send theirs.
RENEW_LEASES: LiteralString = (
    f"WITH {CLOCK},"
    " l AS (SELECT * FROM unnest(%(ids)b::text[], %(nodes)b::text[], %(generations)b::bigint[])"
    " AS l (actor_id, node_id, generation)),"
    ' k AS (SELECT t.actor_id FROM actors AS t JOIN l ON t.actor_id = l.actor_id COLLATE "C"'
    " AND t.owner_node = l.node_id AND t.generation = l.generation"
    " FOR NO KEY UPDATE OF t SKIP LOCKED),"
    " u AS (UPDATE actors AS t SET lease_expires_at = c.ms + %(ttl)s FROM c"
    " WHERE t.actor_id IN (SELECT actor_id FROM k)"
    " RETURNING t.actor_id, t.owner_node, t.generation, t.lease_expires_at)"
    " SELECT actor_id, owner_node, generation, lease_expires_at FROM u"
    " UNION ALL SELECT t.actor_id, t.owner_node, t.generation, NULL FROM actors AS t"
    ' JOIN l ON t.actor_id = l.actor_id COLLATE "C" AND t.owner_node = l.node_id'
    " AND t.generation = l.generation WHERE t.actor_id NOT IN (SELECT actor_id FROM k)"
)


def renew_leases_params(leases: Sequence[Lease], ttl_ms: int, now: int | None) -> dict[str, Any]:
    """The parameters of :data:`RENEW_LEASES`."""
    return {
        "ids": [lease.actor_id for lease in leases],
        "nodes": [lease.node_id for lease in leases],
        "generations": [lease.generation for lease in leases],
        "ttl": ttl_ms,
        "now": now,
    }
