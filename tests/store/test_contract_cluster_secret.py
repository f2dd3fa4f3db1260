"""The cluster's secret in the store contract (perdure.store.base), run against every
backend: the first secret proposed is kept and every later proposal gets it back, until
it is forgotten; several stores on one database (PostgreSQL: several nodes) proposing
at once all get the same one."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from perdure.store import ClusterSecret, SQLiteStore, Store, StoreClosed
from perdure.store.postgres.store import PostgresStore

from .test_contract import TIMEOUT, StoreFactory


async def test_the_first_secret_proposed_is_kept(store: Store) -> None:
    agreed = ClusterSecret(secret="made-by-the-first-node")
    assert await store.keep_cluster_secret(agreed) == agreed
    # A later proposal, of either kind, gets the kept one back and changes nothing.
    assert await store.keep_cluster_secret(ClusterSecret(secret="another")) == agreed
    assert await store.keep_cluster_secret(ClusterSecret(digest="pbkdf2-sha256$1$00$00")) == agreed


async def test_a_digest_is_kept_as_a_digest(store: Store) -> None:
    configured = ClusterSecret(digest="pbkdf2-sha256$100000$abcd$ef01")
    kept = await store.keep_cluster_secret(configured)
    assert (kept.secret, kept.digest) == (None, configured.digest)
    assert await store.keep_cluster_secret(ClusterSecret(secret="random")) == configured


async def test_a_forgotten_secret_makes_room_for_the_next(store: Store) -> None:
    assert await store.forget_cluster_secret() is False  # none yet
    await store.keep_cluster_secret(ClusterSecret(secret="old"))
    assert await store.forget_cluster_secret() is True
    new = ClusterSecret(digest="pbkdf2-sha256$1$00$11")
    assert await store.keep_cluster_secret(new) == new
    assert await store.forget_cluster_secret() is True
    assert await store.forget_cluster_secret() is False


async def test_the_secret_outlives_a_reopening(store_factory: StoreFactory, tmp_path: Path) -> None:
    if not isinstance(store_factory(tmp_path), SQLiteStore | PostgresStore):
        pytest.skip("a memory store keeps nothing once dropped")
    first = store_factory(tmp_path)
    await first.open()
    try:
        kept = await first.keep_cluster_secret(ClusterSecret(secret="durable"))
    finally:
        await first.close()
    again = store_factory(tmp_path)
    await again.open()
    try:
        assert await again.keep_cluster_secret(ClusterSecret(secret="later")) == kept
    finally:
        await again.close()


async def test_stores_proposing_at_once_agree(store_factory: StoreFactory, tmp_path: Path) -> None:
    """Several stores on one database (nodes starting together) each propose their own:
    every one of them gets the same secret back, one of those proposed."""
    if not isinstance(store_factory(tmp_path), PostgresStore):
        pytest.skip("only PostgreSQL has several processes on one database")
    stores = [store_factory(tmp_path) for _ in range(6)]
    for store in stores:
        await asyncio.wait_for(store.open(), TIMEOUT)
    try:
        for round_ in range(3):
            proposals = [ClusterSecret(secret=f"r{round_}-node{i}") for i in range(len(stores))]
            kept = await asyncio.wait_for(
                asyncio.gather(
                    *(s.keep_cluster_secret(p) for s, p in zip(stores, proposals, strict=True))
                ),
                TIMEOUT,
            )
            assert len(set(kept)) == 1, kept
            assert kept[0] in proposals
            assert await stores[0].forget_cluster_secret() is True
    finally:
        for store in stores:
            await store.close()


async def test_a_closed_store_refuses(store_factory: StoreFactory, tmp_path: Path) -> None:
    store = store_factory(tmp_path)
    with pytest.raises(StoreClosed):
        await store.keep_cluster_secret(ClusterSecret(secret="x"))
    with pytest.raises(StoreClosed):
        await store.forget_cluster_secret()


def test_a_kept_secret_is_the_secret_or_a_digest() -> None:
    with pytest.raises(ValueError, match="one of them"):
        ClusterSecret()
    with pytest.raises(ValueError, match="one of them"):
        ClusterSecret(secret="s", digest="d")
