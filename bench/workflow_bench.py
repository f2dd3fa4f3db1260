"""Workflow benchmarks (run by hand: ``python bench/workflow_bench.py [a|b|c ...] [--runs N]``).

(a) the seed's progress workload over the network: 2,000 jobs sent over HTTP by 32
    concurrent senders to one actor, until ``completed == 2000``, with a WebSocket
    subscriber counting all 4,000 events (a real ``perdure serve`` subprocess);
(b) a workflow of 1,000 trivial durable steps: time per step (in-process, SQLite);
(c) 100 actors each running the progress workload at once: steps per second
    (in-process, SQLite, group commit).

``--store postgres`` runs (a) and (c) on the PostgreSQL of the tests (``PERDURE_TEST_POSTGRES_URL``
or 127.0.0.1), each run in a fresh schema that is dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from examples.progress import registry as progress_registry
from rawhttp import RawConnection
from tests.support.postgres import drop_schema, new_schema_name, schema_url
from tests.support.server import ServerProcess

from perdure import ActorRuntime, WorkflowContext, setup, workflow
from perdure.client import create_client
from perdure.store import SQLiteStore, Store, open_store
from perdure.tuning import tune_garbage_collector


@contextmanager
def store_url(kind: str) -> Iterator[str | None]:
    """``None`` for SQLite (the default), else a PostgreSQL URL in a fresh schema."""
    if kind == "sqlite":
        yield None
        return
    schema = new_schema_name()
    try:
        yield schema_url(schema)
    finally:
        drop_schema(schema)


async def bench_progress_over_http(
    jobs: int = 2000, senders: int = 32, store: str = "sqlite"
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, store_url(store) as url:
        extra = [] if url is None else ["--store", url]
        server = ServerProcess("examples.app:registry", Path(tmp), extra_args=extra)
        await asyncio.to_thread(server.start)
        try:
            async with create_client(server.url) as client:
                handle = client.progressActor.get_or_create(["bench"])
                conn = handle.connect()
                events = 0
                done = asyncio.Event()

                def on_progress(progress: dict[str, Any]) -> None:
                    nonlocal events
                    events += 1
                    if events == 2 * jobs:
                        done.set()

                conn.on("progressUpdated", on_progress)
                await conn.wait_open(timeout=20)
                queue: asyncio.Queue[int] = asyncio.Queue()
                for job in range(jobs):
                    queue.put_nowait(job)

                path = "/gateway/progressActor/queue/jobs?rvt-method=getOrCreate&rvt-key=bench"
                body = b'{"name":"jobs","body":{"value":1},"wait":false}'
                full_answers: list[int] = []

                async def sender() -> None:
                    # A raw keep-alive connection per sender: the benchmark measures the
                    # server, not the HTTP client library.
                    async with RawConnection(server.url) as connection:
                        request = connection.request(path, body)
                        while not queue.empty():
                            queue.get_nowait()
                            while True:
                                status, answer = await connection.exchange(request)
                                if status == 200:
                                    break
                                if b'"code":"full"' not in answer:
                                    raise RuntimeError(answer.decode(errors="replace"))
                                full_answers.append(1)  # back-pressure: wait and resend
                                await asyncio.sleep(0.05)

                started = time.perf_counter()
                await asyncio.gather(*(sender() for _ in range(senders)))
                sent = time.perf_counter() - started
                await asyncio.wait_for(done.wait(), timeout=120)
                elapsed = time.perf_counter() - started
                state = await handle.getState()
                await conn.dispose()
        finally:
            server.terminate()
    assert state["progress"]["completed"] == jobs
    return {
        "jobs": jobs,
        "seconds": round(elapsed, 3),
        "jobs_per_s": round(jobs / elapsed),
        "send_phase_s": round(sent, 3),
        "events": events,
        "queue_full_retries": len(full_answers),
    }


async def bench_step_cost(steps: int = 1000) -> dict[str, Any]:
    finished: dict[str, float] = {}

    async def run(ctx: WorkflowContext) -> None:
        started = time.perf_counter()
        for index in range(steps):
            await ctx.step(f"step-{index}", lambda step: None)
        finished["seconds"] = time.perf_counter() - started

    registry = setup(use={"steps": workflow(run=run)})
    with tempfile.TemporaryDirectory() as tmp:
        async with ActorRuntime(registry, SQLiteStore(Path(tmp) / "b.db")) as runtime:
            await runtime.client().steps.get_or_create("one").resolve()
            async with asyncio.timeout(120):
                while "seconds" not in finished:
                    await asyncio.sleep(0.01)
    return {"steps": steps, "us_per_step": round(finished["seconds"] / steps * 1e6, 1)}


async def run_many_actors(
    runtime: ActorRuntime, actors: int, jobs_per_actor: int
) -> dict[str, Any]:
    """Feed ``jobs_per_actor`` jobs to each of ``actors`` progress actors at once and time
    until every one has completed them (also used by ``store_bench.py``)."""
    client = runtime.client()
    handles = [client.progressActor.get_or_create([f"a{i}"]) for i in range(actors)]
    ids = [await h.resolve() for h in handles]
    started = time.perf_counter()

    async def feed(actor_id: str) -> None:
        for _ in range(jobs_per_actor):
            await runtime.dispatch.ref(actor_id).send("jobs", {"value": 1})

    await asyncio.gather(*(feed(actor_id) for actor_id in ids))
    async with asyncio.timeout(600):
        for handle in handles:
            while (await handle.getState())["progress"]["completed"] < jobs_per_actor:
                await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - started
    steps = actors * jobs_per_actor * 2
    return {
        "actors": actors,
        "steps": steps,
        "seconds": round(elapsed, 3),
        "steps_per_s": round(steps / elapsed),
    }


async def bench_many_actors(
    actors: int = 100, jobs_per_actor: int = 50, store: str = "sqlite"
) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, store_url(store) as url:
        backend: Store = SQLiteStore(Path(tmp) / "c.db") if url is None else open_store(url)
        async with ActorRuntime(progress_registry, backend) as runtime:
            return await run_many_actors(runtime, actors, jobs_per_actor)


BENCHES = {"a": bench_progress_over_http, "b": bench_step_cost, "c": bench_many_actors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("benches", nargs="*", choices=[*BENCHES, []], default=list(BENCHES))
    parser.add_argument("--runs", type=int, default=1, help="repeat each benchmark N times")
    parser.add_argument(
        "--no-gc-tuning",
        dest="gc_tuning",
        action="store_false",
        help="keep Python's collector defaults (perdure serve tunes them; see perdure.tuning)",
    )
    parser.add_argument(
        "--store",
        choices=["sqlite", "postgres"],
        default="sqlite",
        help="the store of (a) and (c); (b) is always SQLite",
    )
    args = parser.parse_args()
    if args.gc_tuning:
        tune_garbage_collector()  # (b) and (c) run in this process, as perdure serve would
    for name in args.benches:
        for _ in range(args.runs):
            options = {} if name == "b" else {"store": args.store}
            result = asyncio.run(BENCHES[name](**options))
            print(f"({name})", result, flush=True)


if __name__ == "__main__":
    main()
