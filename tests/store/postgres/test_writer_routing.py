"""Several writer connections (issue 17): each actor's commits stay in order on one of them."""

from __future__ import annotations

import asyncio

import pytest

from perdure.store import ActorCommit
from perdure.store.postgres.store import PostgresStore
from tests.store.postgres.test_store import TIMEOUT, opened, record, schema
from tests.support.postgres import POSTGRES_URL

__all__ = ["schema"]


async def test_each_actors_commits_in_flight_at_once_apply_in_order(schema: str) -> None:
    actors = [f"a{index}" for index in range(30)]
    async with opened(schema, writers=3) as store:
        for actor_id in actors:
            await store.create_actor(record(actor_id))
        assert store._writer is not None
        used = {id(store._writer.writer_for(actor_id)) for actor_id in actors}
        assert len(used) > 1, "30 actors all mapped to one writer"
        # Every commit of every actor is submitted before any is awaited: many batches
        # on three connections, several commits of one actor in flight at once.
        futures = [
            store.submit(
                ActorCommit(actor_id, state=str(step).encode(), history_put={f"s{step}": b"x"})
            )
            for step in range(20)
            for actor_id in actors
        ]
        await asyncio.wait_for(asyncio.gather(*futures), TIMEOUT)
        pids = {
            writer._conn.info.backend_pid
            for writer in store._writer.writers
            if writer._conn is not None
        }
        assert len(pids) == 3
        for actor_id in actors:
            got = await store.get_actor(actor_id)
            assert got is not None
            assert got.state == b"19"
            assert len(await store.load_history(actor_id)) == 20


def test_writers_must_be_at_least_one() -> None:
    with pytest.raises(ValueError, match="writers"):
        PostgresStore(POSTGRES_URL, writers=0)
