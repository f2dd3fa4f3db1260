"""The secret the nodes of a cluster authenticate each other with.

Every request one node hands another (a forwarded operation, a piped socket, a relayed
raw request) carries the cluster's secret, and a node serves such a request only with
it. There is no cluster without one. The nodes agree on it through their store, the one
thing they share (:meth:`~perdure.store.base.Store.keep_cluster_secret`):

- **Configured** (``--cluster-secret``, ``PERDURE_CLUSTER_SECRET``,
  :attr:`NodeConfig.secret <perdure.runtime.cluster.member.NodeConfig>`): the first node
  to start keeps a salted digest of it, never the secret itself. A node given another
  secret, or none, refuses to join.
- **Not configured**: the first node to start makes a random one
  (``secrets.token_urlsafe(32)``) and the store keeps it; later nodes read it, so a
  cluster is authenticated with no configuration. A node given a secret of its own
  refuses to join (unless it is that very one).

A node agrees before it registers (:meth:`ClusterMember.start
<perdure.runtime.cluster.member.ClusterMember.start>`): one that refuses to join has
taken nothing. To change the secret, forget the kept one
(:meth:`~perdure.store.base.Store.forget_cluster_secret`, ``perdure
reset-cluster-secret``) and restart the nodes (docs/deploy.md).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import os
import secrets

from perdure.errors import ClusterSecretMismatch
from perdure.store.base import ClusterSecret, Store

__all__ = ["DIGEST_ITERATIONS", "agree_cluster_secret", "digest_matches", "secret_digest"]

DIGEST_ITERATIONS = 100_000
"""PBKDF2-SHA256 rounds of a configured secret's digest: whoever reads the database
cannot cheaply try guesses of a short one (a node computes it once, when it starts)."""
_SCHEME = "pbkdf2-sha256"


def secret_digest(
    secret: str, *, salt: bytes | None = None, rounds: int = DIGEST_ITERATIONS
) -> str:
    """``pbkdf2-sha256$ROUNDS$SALT$DIGEST`` (hex) of ``secret``, with a random salt."""
    salt = os.urandom(16) if salt is None else salt
    derived = hashlib.pbkdf2_hmac("sha256", secret.encode(), salt, rounds)
    return f"{_SCHEME}${rounds}${salt.hex()}${derived.hex()}"


def digest_matches(secret: str, digest: str) -> bool:
    """Whether ``digest`` (:func:`secret_digest`) is of ``secret``; compared in constant
    time. An unreadable digest matches nothing."""
    try:
        scheme, rounds, salt, expected = digest.split("$")
        if scheme != _SCHEME:
            return False
        derived = hashlib.pbkdf2_hmac("sha256", secret.encode(), bytes.fromhex(salt), int(rounds))
    except ValueError:
        return False
    return hmac.compare_digest(derived.hex(), expected)


async def agree_cluster_secret(store: Store, configured: str | None) -> str:
    """The secret this node and its peers authenticate each other with: ``configured``
    if the cluster keeps that one (or keeps nothing yet, and now keeps its digest), else
    the one the store keeps when none is configured (made here if this node is the
    first). :class:`~perdure.errors.ClusterSecretMismatch` when the node may not join:
    given another secret than the cluster's, or none where the cluster's was configured.
    """
    if configured is None:
        kept = await store.keep_cluster_secret(ClusterSecret(secret=secrets.token_urlsafe(32)))
        if kept.secret is not None:
            return kept.secret
        raise ClusterSecretMismatch(
            "This cluster's secret was set with --cluster-secret (or PERDURE_CLUSTER_SECRET) "
            "and this node was given none: start it with the same --cluster-secret as the "
            "other nodes."
        )
    digest = await asyncio.to_thread(secret_digest, configured)
    kept = await store.keep_cluster_secret(ClusterSecret(digest=digest))
    if kept.digest is not None:
        if kept.digest == digest:  # this node's own proposal was kept
            return configured
        if await asyncio.to_thread(digest_matches, configured, kept.digest):
            return configured
        raise ClusterSecretMismatch(
            "This node's --cluster-secret (or PERDURE_CLUSTER_SECRET) is not the secret this "
            "cluster's nodes were started with: give it theirs. To change the cluster's "
            "secret, stop every node, run `perdure reset-cluster-secret --store URL`, and "
            "start them all with the new one (`perdure docs deploy`)."
        )
    assert kept.secret is not None
    if hmac.compare_digest(kept.secret.encode(), configured.encode()):
        return configured
    raise ClusterSecretMismatch(
        "This cluster's nodes agreed on a secret of their own (none of them was given "
        "--cluster-secret) and this node was given another one: start it without "
        "--cluster-secret and PERDURE_CLUSTER_SECRET. To give the cluster a secret of your "
        "own, stop every node, run `perdure reset-cluster-secret --store URL`, and start "
        "them all with the same --cluster-secret (`perdure docs deploy`)."
    )
