"""How a node agrees on its cluster's secret with the store
(perdure.runtime.cluster.secret): the configured one (kept as a digest), or one the first
node made; a node given another, or none where one was configured, refuses to join."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from perdure.errors import ClusterSecretMismatch
from perdure.runtime.cluster.secret import (
    agree_cluster_secret,
    digest_matches,
    secret_digest,
)
from perdure.store import ClusterSecret, MemoryStore


@pytest.fixture
async def store() -> AsyncIterator[MemoryStore]:
    store = MemoryStore()
    await store.open()
    try:
        yield store
    finally:
        await store.close()


async def _kept(store: MemoryStore) -> ClusterSecret:
    return await store.keep_cluster_secret(ClusterSecret(secret="probe"))


def test_a_digest_matches_its_secret_only() -> None:
    digest = secret_digest("s3cret", rounds=1000)
    assert digest.startswith("pbkdf2-sha256$1000$")
    assert "s3cret" not in digest
    assert digest_matches("s3cret", digest)
    assert not digest_matches("s3cret!", digest)
    assert secret_digest("s3cret", rounds=1000) != digest  # salted
    for unreadable in ("", "sha1$1$00$00", "pbkdf2-sha256$x$00$00", "pbkdf2-sha256$1$zz$00"):
        assert not digest_matches("s3cret", unreadable)


async def test_nodes_without_a_secret_agree_on_the_first_ones(store: MemoryStore) -> None:
    first = await agree_cluster_secret(store, None)
    assert len(first) >= 40  # secrets.token_urlsafe(32)
    assert await agree_cluster_secret(store, None) == first
    assert await _kept(store) == ClusterSecret(secret=first)
    # Given that very secret explicitly, a node joins too.
    assert await agree_cluster_secret(store, first) == first


async def test_a_configured_secret_is_kept_as_a_digest(store: MemoryStore) -> None:
    assert await agree_cluster_secret(store, "the-cluster-secret") == "the-cluster-secret"
    kept = await _kept(store)
    assert kept.secret is None
    assert kept.digest is not None
    assert "the-cluster-secret" not in kept.digest
    assert digest_matches("the-cluster-secret", kept.digest)
    # Every node given the same one joins (its own digest has another salt).
    assert await agree_cluster_secret(store, "the-cluster-secret") == "the-cluster-secret"


async def test_another_secret_than_the_configured_one_is_refused(store: MemoryStore) -> None:
    await agree_cluster_secret(store, "the-cluster-secret")
    with pytest.raises(ClusterSecretMismatch) as wrong:
        await agree_cluster_secret(store, "another-secret")
    assert "--cluster-secret" in wrong.value.message
    assert "PERDURE_CLUSTER_SECRET" in wrong.value.message
    assert "perdure reset-cluster-secret" in wrong.value.message
    with pytest.raises(ClusterSecretMismatch) as missing:
        await agree_cluster_secret(store, None)
    assert "start it with the same --cluster-secret" in missing.value.message
    assert wrong.value.identifier == "cluster.secret_mismatch"


async def test_a_secret_where_the_nodes_agreed_on_theirs_is_refused(store: MemoryStore) -> None:
    agreed = await agree_cluster_secret(store, None)
    with pytest.raises(ClusterSecretMismatch) as refused:
        await agree_cluster_secret(store, "my-own-secret")
    assert "start it without --cluster-secret and PERDURE_CLUSTER_SECRET" in refused.value.message
    assert await _kept(store) == ClusterSecret(secret=agreed)  # nothing changed


async def test_after_a_reset_the_next_node_sets_the_secret(store: MemoryStore) -> None:
    await agree_cluster_secret(store, None)
    assert await store.forget_cluster_secret()
    assert await agree_cluster_secret(store, "now-configured") == "now-configured"
    with pytest.raises(ClusterSecretMismatch):
        await agree_cluster_secret(store, None)
