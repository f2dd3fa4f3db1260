"""Store benchmark: SQLite beside PostgreSQL, in one run (by hand, not a test).

    python bench/store_bench.py                    # every scenario on every backend
    python bench/store_bench.py --quick            # small counts, a smoke run
    python bench/store_bench.py --only latency concurrent --backends sqlite postgres
    python bench/store_bench.py --http             # add the progress workload over HTTP

Scenarios:

- ``latency``: one actor commits one at a time (state + one history entry): the cost of
  one durable write when nobody shares the transaction. p50/p99 and mean, in µs.
- ``concurrent``: 32 actors commit at once, each one commit after the other (as the
  runtime does: at most one commit in flight per actor): commits/s through group commit.
- ``steps``: a workflow of 1,000 trivial durable steps through the real runtime: µs per
  step (each step is one commit of its history entry, awaited before the next step).
- ``progress``: the seed's progress workflow on 100 actors at once, 50 jobs each (two
  durable steps per job), in-process: steps/s.
- ``http`` (with ``--http``): the progress workload over HTTP against a ``perdure serve``
  subprocess, 2,000 jobs from 32 senders, until all are completed: jobs/s.

Backends: ``sqlite`` (durability ``process``, the default: survives ``kill -9``),
``sqlite-power`` (fsync per group commit: survives power loss), ``postgres`` (server
defaults, ``synchronous_commit=on``: every commit is flushed to the WAL on disk, so it
survives power loss too). PostgreSQL is ``$PERDURE_BENCH_POSTGRES_URL`` (default: the
local server, database ``test``); each run uses a fresh schema, dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import psycopg
from psycopg import sql

from perdure import ActorRuntime, WorkflowContext, setup, workflow
from perdure.store import ActorCommit, ActorRecord, SQLiteStore, Store
from perdure.store.postgres.store import PostgresStore
from perdure.tuning import tune_garbage_collector

POSTGRES_URL = os.environ.get(
    "PERDURE_BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
BACKENDS = ("sqlite", "sqlite-power", "postgres")


# --- backends -------------------------------------------------------------------------


class Backend:
    """Where one scenario's data lives: a temporary SQLite file or PostgreSQL schema."""

    def __init__(self, kind: str, directory: Path) -> None:
        self.kind = kind
        self.path = directory / "bench.db"
        self.schema = f"perdure_bench_{secrets.token_hex(4)}"

    def store(self) -> Store:
        if self.kind == "postgres":
            return PostgresStore(POSTGRES_URL, schema=self.schema)
        durability = "power" if self.kind == "sqlite-power" else "process"
        return SQLiteStore(self.path, durability=durability)

    def store_url(self) -> str:
        if self.kind == "postgres":
            separator = "&" if "?" in POSTGRES_URL else "?"
            return f"{POSTGRES_URL}{separator}schema={self.schema}"
        suffix = "?durability=power" if self.kind == "sqlite-power" else ""
        return f"sqlite:///{self.path}{suffix}"

    def drop(self) -> None:
        if self.kind == "postgres":
            with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
                name = sql.Identifier(self.schema)
                conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(name))


@asynccontextmanager
async def backend(kind: str) -> AsyncIterator[Backend]:
    with tempfile.TemporaryDirectory() as tmp:
        where = Backend(kind, Path(tmp))
        try:
            yield where
        finally:
            where.drop()


@asynccontextmanager
async def opened(where: Backend) -> AsyncIterator[Store]:
    store = where.store()
    await store.open()
    try:
        yield store
    finally:
        await store.close()


def record(actor_id: str) -> ActorRecord:
    return ActorRecord(actor_id, "bench", (actor_id,), 0)


def commit(actor_id: str, step: int) -> ActorCommit:
    # Like a workflow step: the state and one history entry, a few dozen bytes each.
    return ActorCommit(
        actor_id,
        state=b"\xa1dstep" + step.to_bytes(4, "big") + b"x" * 40,
        history_put={f"loop/~{step}/step": b"\xa2fstatusbokfoutput\xf6"},
    )


# --- scenarios ------------------------------------------------------------------------


async def bench_latency(kind: str, quick: bool) -> dict[str, Any]:
    count = 300 if quick else 2000
    async with backend(kind) as where, opened(where) as store:
        await store.create_actor(record("a"))
        for step in range(50):  # warm-up: connections, prepared statements
            await store.commit(commit("a", step))
        times: list[float] = []
        for step in range(50, 50 + count):
            started = time.perf_counter()
            await store.commit(commit("a", step))
            times.append(time.perf_counter() - started)
    times.sort()
    return {
        "commits": count,
        "p50_us": round(times[len(times) // 2] * 1e6),
        "p99_us": round(times[int(len(times) * 0.99)] * 1e6),
        "mean_us": round(statistics.fmean(times) * 1e6),
    }


async def bench_concurrent(kind: str, quick: bool) -> dict[str, Any]:
    actors, per_actor = 32, (100 if quick else 600)
    async with backend(kind) as where, opened(where) as store:
        ids = [f"a{index}" for index in range(actors)]
        for actor_id in ids:
            await store.create_actor(record(actor_id))

        async def run(actor_id: str, first: int, last: int) -> None:
            for step in range(first, last):
                await store.commit(commit(actor_id, step))

        await asyncio.gather(*(run(actor_id, 0, 20) for actor_id in ids))  # warm-up
        started = time.perf_counter()
        await asyncio.gather(*(run(actor_id, 20, 20 + per_actor) for actor_id in ids))
        elapsed = time.perf_counter() - started
    total = actors * per_actor
    return {"commits": total, "seconds": round(elapsed, 2), "commits_per_s": round(total / elapsed)}


async def bench_steps(kind: str, quick: bool) -> dict[str, Any]:
    steps = 200 if quick else 1000
    finished: dict[str, float] = {}

    async def run(ctx: WorkflowContext) -> None:
        started = time.perf_counter()
        for index in range(steps):
            await ctx.step(f"step-{index}", lambda step: None)
        finished["seconds"] = time.perf_counter() - started

    registry = setup(use={"steps": workflow(run=run)})
    async with backend(kind) as where, ActorRuntime(registry, where.store()) as runtime:
        await runtime.client().steps.get_or_create("one").resolve()
        async with asyncio.timeout(300):
            while "seconds" not in finished:
                await asyncio.sleep(0.01)
    return {"steps": steps, "us_per_step": round(finished["seconds"] / steps * 1e6)}


async def bench_progress(kind: str, quick: bool) -> dict[str, Any]:
    from examples.progress import registry as progress_registry
    from workflow_bench import run_many_actors  # bench/workflow_bench.py

    actors, jobs = (20, 10) if quick else (100, 50)
    async with backend(kind) as where, ActorRuntime(progress_registry, where.store()) as rt:
        result = await run_many_actors(rt, actors, jobs)
    return {key: result[key] for key in ("steps", "seconds", "steps_per_s")}


async def bench_http(kind: str, quick: bool) -> dict[str, Any]:
    from rawhttp import RawConnection  # bench/rawhttp.py
    from tests.support.server import ServerProcess

    from perdure.client import create_client

    jobs, senders = (300 if quick else 2000), 32
    async with backend(kind) as where:
        server = ServerProcess(
            "examples.app:registry",
            where.path.parent / "server",
            extra_args=["--store", where.store_url()],
        )
        await asyncio.to_thread(server.start)
        try:
            async with create_client(server.url) as client:
                handle = client.progressActor.get_or_create(["bench"])
                path = "/gateway/progressActor/queue/jobs?rvt-method=getOrCreate&rvt-key=bench"
                body = b'{"name":"jobs","body":{"value":1},"wait":false}'
                queue: asyncio.Queue[int] = asyncio.Queue()
                for job in range(jobs):
                    queue.put_nowait(job)

                async def sender() -> None:
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
                                await asyncio.sleep(0.05)  # back-pressure

                started = time.perf_counter()
                await asyncio.gather(*(sender() for _ in range(senders)))
                async with asyncio.timeout(600):
                    while (await handle.getState())["progress"]["completed"] < jobs:
                        await asyncio.sleep(0.02)
                elapsed = time.perf_counter() - started
        finally:
            server.terminate()
    return {"jobs": jobs, "seconds": round(elapsed, 2), "jobs_per_s": round(jobs / elapsed)}


SCENARIOS: dict[str, tuple[Callable[[str, bool], Awaitable[dict[str, Any]]], str, bool]] = {
    # name: (function, headline figure, higher is better)
    "latency": (bench_latency, "p50_us", False),
    "concurrent": (bench_concurrent, "commits_per_s", True),
    "steps": (bench_steps, "us_per_step", False),
    "progress": (bench_progress, "steps_per_s", True),
    "http": (bench_http, "jobs_per_s", True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=sorted(SCENARIOS))
    parser.add_argument("--backends", nargs="+", choices=BACKENDS, default=list(BACKENDS))
    parser.add_argument("--quick", action="store_true", help="small counts (a smoke run)")
    parser.add_argument("--http", action="store_true", help="include the HTTP scenario")
    args = parser.parse_args()
    tune_garbage_collector()  # the in-process scenarios run as perdure serve would
    chosen = args.only or [name for name in SCENARIOS if name != "http" or args.http]

    table: list[tuple[str, dict[str, Any]]] = []
    for name in chosen:
        function, headline, _ = SCENARIOS[name]
        row: dict[str, Any] = {}
        for kind in args.backends:
            result = asyncio.run(function(kind, args.quick))
            print(f"{name:<11} {kind:<13} {result}", flush=True)
            row[kind] = result[headline]
        table.append((name, row))

    print()
    print(f"{'scenario':<11} {'figure':<14}", *(f"{kind:>13}" for kind in args.backends), end="")
    print(f" {'PG/SQLite':>10}" if {"postgres", "sqlite"} <= set(args.backends) else "")
    for name, row in table:
        headline = SCENARIOS[name][1]
        print(f"{name:<11} {headline:<14}", *(f"{row[kind]:>13}" for kind in args.backends), end="")
        if "postgres" in row and "sqlite" in row and row["sqlite"]:
            print(f" {row['postgres'] / row['sqlite']:>10.2f}")
        else:
            print()


if __name__ == "__main__":
    main()
