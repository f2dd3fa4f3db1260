"""The PostgreSQL statements of cluster membership.

They run on a pooled connection (autocommit, one statement each), not through the
pipelined writer (:mod:`perdure.store.postgres.writer`): their order relative to commits
does not matter, and a node's heartbeat must not queue behind a large batch of commits.
Times are the database's clock (``clock_timestamp()``) unless the caller passes ``now``.
"""

from __future__ import annotations

from typing import LiteralString

from perdure.store.postgres.lease import CLOCK

__all__ = [
    "DEREGISTER_NODE",
    "FORGET_CLUSTER_SECRET",
    "HEARTBEAT_NODE",
    "KEEP_CLUSTER_SECRET",
    "LIST_NODES",
    "READ_CLUSTER_SECRET",
    "REGISTER_NODE",
]

_NODE_COLUMNS: LiteralString = (
    "n.node_id, n.address, n.started_at, n.heartbeat_at, n.expires_at, n.draining, n.code_version"
)

# Parameters: node, address, ttl, now, version.
REGISTER_NODE: LiteralString = (
    f"WITH {CLOCK} INSERT INTO nodes AS n"
    " (node_id, address, started_at, heartbeat_at, expires_at, draining, code_version)"
    " SELECT %(node)s::text, %(address)s::text, c.ms, c.ms, c.ms + %(ttl)s, false,"
    " %(version)s::text FROM c"
    " ON CONFLICT (node_id) DO UPDATE SET address = EXCLUDED.address,"
    " started_at = EXCLUDED.started_at, heartbeat_at = EXCLUDED.heartbeat_at,"
    " expires_at = EXCLUDED.expires_at, draining = false,"
    f" code_version = EXCLUDED.code_version RETURNING {_NODE_COLUMNS}"
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

# The cluster's secret (migration 8): one row, kept by the first node to start. Two
# statements, not one: a single statement's read would not see a row another session
# inserted after it began (and on which the insert waited), so the read runs after the
# insert, in a snapshot of its own. Parameters: secret, digest.
KEEP_CLUSTER_SECRET: LiteralString = (
    "INSERT INTO cluster_secret (id, secret, digest, created_at)"
    " VALUES (1, %(secret)s, %(digest)s, (extract(epoch FROM clock_timestamp()) * 1000)::bigint)"
    " ON CONFLICT (id) DO NOTHING RETURNING id"
)
READ_CLUSTER_SECRET: LiteralString = "SELECT secret, digest FROM cluster_secret WHERE id = 1"
FORGET_CLUSTER_SECRET: LiteralString = "DELETE FROM cluster_secret RETURNING id"
