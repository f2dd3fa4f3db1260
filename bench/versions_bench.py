"""What the version check costs a wake (issue 33, item 2; run by hand).

``python bench/versions_bench.py [--actors 200] [--rounds 5]``

In process: for each store, a runtime holds ``--actors`` workflow actors whose run took
one step and waits for a message; a round wakes each one with an action and puts it to
sleep again, so each wake takes the lease (on PostgreSQL), loads the history, replays the
step and waits. On PostgreSQL the runtime is a cluster node (``NodeConfig``): on this
branch every such wake reads the run's recorded version before the run starts (the
history the run then uses); on SQLite the runtime is alone and the check never runs.
Prints the median time per wake over the rounds. Run it with ``PYTHONPATH`` on the code
before the change and after, alternating, and compare the medians. ``--mixed`` (this
code only) also times rounds, alternating with the others in one process, where another
live node announces another version (a deploy under way): each wake then reads the
run's history before the actor starts, as the version check must.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.cluster import store_url
from tests.support.postgres import drop_schema, new_schema_name

from perdure import ActorRuntime, WorkflowContext, queue, setup, workflow
from perdure.runtime import NodeConfig
from perdure.store import SQLiteStore, Store, open_store


async def run(ctx: WorkflowContext) -> None:
    await ctx.step("prepare", lambda s: None)
    await ctx.queue.next("go", names="go")


registry = setup(
    use={
        "job": workflow(
            state={},
            queues={"go": queue()},
            run=run,
            actions={"ping": lambda c: 1},
            options={"sleep_timeout": 600},
        )
    }
)


async def wake_all(runtime: ActorRuntime, ids: list[str]) -> float:
    """Put every actor to sleep, then wake each with an action: seconds per wake."""
    for actor_id in ids:
        await runtime.sleep_actor(actor_id)
    client = runtime.client()
    started = time.perf_counter()
    for index in range(len(ids)):
        await client.job.get_or_create([f"k{index}"]).ping()
    return (time.perf_counter() - started) / len(ids)


async def mix(runtime: ActorRuntime, mixed: bool) -> None:
    """Make the cluster look mid-deploy (another live node on another version) or not."""
    store, cluster = runtime.store, runtime.cluster
    assert cluster is not None
    if mixed:
        await store.register_node("other", "http://127.0.0.1:9", 600_000, code_version="other")
    else:
        await store.deregister_node("other")
    await cluster.refresh()


async def per_wake(
    store: Store, node: NodeConfig | None, actors: int, rounds: int, mixed: bool
) -> dict[str, float]:
    """The median over ``rounds`` of the seconds one wake (action, then sleep) takes;
    with ``mixed``, rounds alternate with rounds where the cluster looks mid-deploy."""
    async with ActorRuntime(registry, store, node=node) as runtime:
        client = runtime.client()
        ids = []
        for index in range(actors):
            handle = client.job.get_or_create([f"k{index}"])
            await handle.ping()
            ids.append(await handle.resolve())
        await asyncio.sleep(0.5)  # every run has taken its step and waits
        times: dict[str, list[float]] = {"steady": [], "mixed": []}
        for _ in range(rounds):
            times["steady"].append(await wake_all(runtime, ids))
            if mixed:
                await mix(runtime, True)
                times["mixed"].append(await wake_all(runtime, ids))
                await mix(runtime, False)
        return {kind: statistics.median(found) for kind, found in times.items() if found}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--actors", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--mixed", action="store_true", help="also time wakes mid-deploy (this branch only)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        sqlite = await per_wake(
            SQLiteStore(Path(folder) / "bench.db"), None, args.actors, args.rounds, False
        )
    schema = new_schema_name()
    try:
        node = NodeConfig("bench-node", "http://127.0.0.1:1", lease_ttl_ms=30_000)
        postgres = await per_wake(
            open_store(store_url(schema), exclusive=False),
            node,
            args.actors,
            args.rounds,
            args.mixed,
        )
    finally:
        drop_schema(schema)
    print(f"sqlite (alone)          {sqlite['steady'] * 1e6:8.0f} µs per wake")
    print(f"postgres (a node)       {postgres['steady'] * 1e6:8.0f} µs per wake")
    if "mixed" in postgres:
        print(f"postgres (mid-deploy)   {postgres['mixed'] * 1e6:8.0f} µs per wake")


if __name__ == "__main__":
    asyncio.run(main())
