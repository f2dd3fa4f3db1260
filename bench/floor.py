"""The machine's floor beside perdure, in one run, so every report carries its own ratios.

Run by hand (not a test)::

    python bench/floor.py               # everything, 3 rounds, ~4 min on 2 cores
    python bench/floor.py --quick       # smaller counts, 1 round: a smoke run
    python bench/floor.py --rounds 5

The floor (what the machine does with nothing of perdure in the way):

- a one-row SQLite commit (WAL, ``synchronous=NORMAL``, perdure's default durability);
- an empty HTTP keep-alive round trip and an empty WebSocket echo against a minimal
  Starlette app (``bench/floor_app.py``) on the uvicorn setup ``perdure serve`` uses,
  measured with the same clients as perdure's round trips below;
- empty HTTP POSTs per second with 32 keep-alive connections.

perdure, measured in the same run (figures from ``workflow_bench.py`` and ``latency.py``,
plus a 3-step workflow with a new actor per run):

- a durable step (in process, SQLite), beside its own SQL run straight on SQLite
  (``floor_bounds.py``: what the database charges for the row a step must write);
- the seed's progress workload over HTTP with a subscriber (a ``perdure serve``);
- 3-step workflows: 32 callers, each run a new actor that takes a completable message,
  runs three steps and completes it with the result the caller waits for (7 commits);
- action round trips (HTTP keep-alive and WebSocket) and 32 HTTP callers.

``--postgres`` adds PostgreSQL: a one-row commit and one step's commit of the progress
workload run straight on the database (``floor_bounds.py``), and the progress workload
over HTTP on a ``perdure serve`` backed by it; the ratios then include the ceiling the
database's own commits put on PostgreSQL ÷ SQLite.

Each figure is the median of its rounds (rounds alternate floor and perdure); the
ratios at the end divide perdure by the floor it stands on (1.0 would be no cost at all).
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import floor_bounds
import httpx
import latency
import workflow_bench
from rawhttp import RawConnection
from websockets.sync.client import connect as ws_connect_sync

from perdure import ActorRuntime, WorkflowContext, queue, setup, workflow
from perdure.store import SQLiteStore
from perdure.tuning import tune_garbage_collector

ROOT = Path(__file__).resolve().parents[1]
BODY = b'{"args":[]}'


# -- The floor ------------------------------------------------------------------------


def sqlite_commit_us(commits: int) -> float:
    """Median µs of a one-row commit (five batches), WAL with ``synchronous=NORMAL``."""
    with tempfile.TemporaryDirectory() as tmp:
        db = sqlite3.connect(Path(tmp) / "floor.db", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.execute("CREATE TABLE t (k INTEGER PRIMARY KEY, v BLOB NOT NULL)")
        row = b"x" * 64
        batches = []
        for _ in range(5):
            started = time.perf_counter()
            for index in range(commits // 5):
                db.execute("BEGIN")
                db.execute("INSERT OR REPLACE INTO t VALUES (?, ?)", (index % 100, row))
                db.execute("COMMIT")
            batches.append((time.perf_counter() - started) / (commits // 5) * 1e6)
        db.close()
    return statistics.median(batches)


@contextmanager
def floor_server() -> Iterator[str]:
    """``bench/floor_app.py`` on uvicorn, set up as ``perdure serve`` sets it up."""
    port = latency._free_port()
    command = [sys.executable, "-m", "uvicorn", "floor_app:app", "--app-dir", "bench"]
    command += ["--port", str(port), "--loop", "uvloop", "--http", "httptools"]
    command += ["--ws", "websockets-sansio", "--log-level", "warning", "--no-access-log"]
    process = subprocess.Popen(command, cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.post(f"{url}/empty", timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise SystemExit("the floor app did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)


def floor_http_p50(url: str, calls: int) -> float:
    with httpx.Client(timeout=10) as client:
        headers = {"content-type": "application/json"}
        return latency._timed(
            lambda: client.post(f"{url}/empty", content=BODY, headers=headers), calls
        )[0]


def floor_ws_p50(url: str, calls: int) -> float:
    target = url.replace("http://", "ws://") + "/echo"
    protocols: Any = ["rivet", "rivet_encoding.json"]
    with ws_connect_sync(target, subprotocols=protocols, compression=None) as ws:
        counter = iter(range(10**9))

        def one() -> None:
            ws.send(latency._action_frame(next(counter), "get"))
            ws.recv(timeout=10)

        return latency._timed(one, calls)[0]


async def floor_posts_per_s(url: str, callers: int, calls: int) -> float:
    async def caller(count: int) -> None:
        async with RawConnection(url) as connection:
            request = connection.request("/empty", BODY)
            for _ in range(count):
                await connection.send(request)

    await asyncio.gather(*(caller(20) for _ in range(callers)))  # warm up
    started = time.perf_counter()
    await asyncio.gather(*(caller(calls // callers) for _ in range(callers)))
    return (calls // callers) * callers / (time.perf_counter() - started)


# -- perdure --------------------------------------------------------------------------


async def _three_steps(ctx: WorkflowContext) -> None:
    message = await ctx.queue.next("order", names="run", completable=True)
    first = await ctx.step("one", lambda step: message.body["x"] + 1)
    second = await ctx.step("two", lambda step: first * 2)
    third = await ctx.step("three", lambda step: second - 1)
    await message.complete({"result": third})


async def three_step_runs_per_s(runs: int, callers: int = 32) -> float:
    """Runs per second, each a new actor: create, a completable message in, three
    steps, the result back to the waiting caller."""
    registry = setup(use={"threeSteps": workflow(run=_three_steps, queues={"run": queue()})})
    with tempfile.TemporaryDirectory() as tmp:
        async with ActorRuntime(registry, SQLiteStore(Path(tmp) / "w.db")) as runtime:
            client = runtime.client()

            async def caller(count: int) -> None:
                for _ in range(count):
                    handle = client.threeSteps.get_or_create([uuid.uuid4().hex])
                    result = await handle.send("run", {"x": 20}, wait=True, timeout=30)
                    assert result.response == {"result": 41}, result

            await asyncio.gather(*(caller(5) for _ in range(callers)))  # warm up
            started = time.perf_counter()
            await asyncio.gather(*(caller(runs // callers) for _ in range(callers)))
            return (runs // callers) * callers / (time.perf_counter() - started)


def perdure_round_trips(calls: int, callers: int) -> dict[str, float]:
    with latency.server(None) as url:
        return {
            "http_get_p50_ms": latency.http_latency(url, "get", calls)[0],
            "http_increment_p50_ms": latency.http_latency(url, "increment", calls)[0],
            "ws_get_p50_ms": latency.ws_latency(url, "get", calls)[0],
            "ws_increment_p50_ms": latency.ws_latency(url, "increment", calls)[0],
            "http_32_increment_per_s": asyncio.run(
                latency.http_throughput(url, "increment", callers, calls * 4)
            ),
        }


# -- One run --------------------------------------------------------------------------


def one_round(quick: bool, postgres: bool) -> dict[str, float]:
    calls = 500 if quick else 2000
    commits = 2000 if quick else 10000
    figures: dict[str, float] = {"commit_us": sqlite_commit_us(commits)}
    figures["step_sql_us"] = floor_bounds.step_sql_us(commits)
    with floor_server() as url:
        figures["empty_http_p50_ms"] = floor_http_p50(url, calls)
        figures["empty_ws_p50_ms"] = floor_ws_p50(url, calls)
        figures["empty_posts_per_s"] = asyncio.run(floor_posts_per_s(url, 32, calls * 8))
    step = asyncio.run(workflow_bench.bench_step_cost(2000 if quick else 5000))
    figures["step_us"] = step["us_per_step"]
    progress = asyncio.run(workflow_bench.bench_progress_over_http(500 if quick else 2000))
    figures["progress_msg_per_s"] = progress["jobs_per_s"]
    figures["three_step_runs_per_s"] = asyncio.run(three_step_runs_per_s(320 if quick else 3200))
    figures.update(perdure_round_trips(calls, 32))
    if postgres:
        figures.update(postgres_figures(quick))
    return figures


def postgres_figures(quick: bool) -> dict[str, float]:
    """The PostgreSQL floor (``floor_bounds``) and perdure's progress workload on it,
    each in a fresh schema of the tests' database."""
    with workflow_bench.store_url("postgres") as url:
        assert url is not None
        figures = asyncio.run(floor_bounds.postgres_bounds(url, 500 if quick else 2000))
    progress = asyncio.run(
        workflow_bench.bench_progress_over_http(500 if quick else 2000, store="postgres")
    )
    figures["pg_progress_msg_per_s"] = progress["jobs_per_s"]
    return figures


RATIOS: list[tuple[str, Callable[[dict[str, float]], float]]] = [
    ("durable step ÷ one-row commit", lambda f: f["step_us"] / f["commit_us"]),
    (
        "a step's own SQL (floor_bounds) ÷ one-row commit",
        lambda f: f["step_sql_us"] / f["commit_us"],
    ),
    (
        "progress µs/msg ÷ (empty POST at 32 conns + 2 commits)",
        lambda f: (
            (1e6 / f["progress_msg_per_s"]) / (1e6 / f["empty_posts_per_s"] + 2 * f["commit_us"])
        ),
    ),
    (
        "3-step run µs ÷ its 7 commits",
        lambda f: (1e6 / f["three_step_runs_per_s"]) / (7 * f["commit_us"]),
    ),
    ("HTTP get p50 ÷ empty HTTP p50", lambda f: f["http_get_p50_ms"] / f["empty_http_p50_ms"]),
    (
        "HTTP increment p50 ÷ (empty HTTP p50 + commit)",
        lambda f: f["http_increment_p50_ms"] / (f["empty_http_p50_ms"] + f["commit_us"] / 1000),
    ),
    ("WS get p50 ÷ WS echo p50", lambda f: f["ws_get_p50_ms"] / f["empty_ws_p50_ms"]),
    (
        "32 HTTP increments/s ÷ empty POSTs/s (inverse: higher is closer)",
        lambda f: f["http_32_increment_per_s"] / f["empty_posts_per_s"],
    ),
]

# With --postgres: how far the database itself lets the PostgreSQL figures go.
POSTGRES_RATIOS: list[tuple[str, Callable[[dict[str, float]], float]]] = [
    (
        "PostgreSQL progress step commit ÷ one-row commit",
        lambda f: f["pg_progress_commit_us"] / f["pg_commit_us"],
    ),
    (
        "progress over HTTP, PostgreSQL ÷ SQLite (higher is better)",
        lambda f: f["pg_progress_msg_per_s"] / f["progress_msg_per_s"],
    ),
    (
        "ceiling of that ratio: 2 step commits per job and nothing else ÷ SQLite",
        lambda f: (1e6 / (2 * f["pg_progress_commit_us"])) / f["progress_msg_per_s"],
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="small counts, one round")
    parser.add_argument(
        "--postgres",
        action="store_true",
        help="also the PostgreSQL floor and the progress workload on PostgreSQL "
        "(the tests' server: PERDURE_TEST_POSTGRES_URL or 127.0.0.1)",
    )
    parser.add_argument(
        "--no-gc-tuning",
        dest="gc_tuning",
        action="store_false",
        help="keep Python's collector defaults (perdure serve tunes them)",
    )
    args = parser.parse_args()
    if args.gc_tuning:
        tune_garbage_collector()  # the in-process figures run here, as perdure serve would
    rounds = [one_round(args.quick, args.postgres) for _ in range(1 if args.quick else args.rounds)]
    for index, figures in enumerate(rounds, start=1):
        print(f"round {index}:", {name: round(value, 3) for name, value in figures.items()})
    medians = {name: statistics.median(r[name] for r in rounds) for name in rounds[0]}
    print("\n| figure | median of rounds |\n|---|---|")
    for name, value in medians.items():
        print(f"| {name} | {value:,.3f} |")
    print("\n| ratio | value |\n|---|---|")
    for label, ratio in RATIOS + (POSTGRES_RATIOS if args.postgres else []):
        print(f"| {label} | {ratio(medians):.2f} |")


if __name__ == "__main__":
    main()
