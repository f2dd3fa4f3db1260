"""What an actor's KV space costs as it grows (issue 31, item 1; run by hand).

``python bench/kv_bench.py [--records 100000] [--updates 400] [--rounds 5] [--store URL]``

In process, on an ``ActorRuntime`` over SQLite (one file, the default store), or the
store ``--store`` names (a PostgreSQL URL: use a fresh schema). Three actors:

- ``empty``: no KV records;
- ``full``: ``--records`` KV records of about 100 bytes each (100,000: ~10 MB), written
  in batches before the rounds;
- ``state``: the same records in its state, as one dict (the alternative c.kv saves
  users from: every commit encodes the whole state).

Each round updates one record, ``--updates`` times in a row (each an action awaited:
its commit is durable when it answers), on ``empty`` and ``full`` alternating, and a
tenth as many times on ``state``; then reads one record by key and lists 100 keys by
prefix on ``full``. Prints µs per operation per round and the medians;
``full ÷ empty`` is what 100,000 records cost an update (issue 31 asks at most 3×).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from perdure import ActionContext, ActorRuntime, actor, setup
from perdure.store import SQLiteStore, open_store

PAD = "x" * 80  # a value of about 100 bytes encoded, with its key


async def fill(c: ActionContext, start: int, count: int) -> None:
    c.kv.put_batch({f"rec:{i:08}": {"n": i, "pad": PAD} for i in range(start, start + count)})


async def update(c: ActionContext, i: int) -> None:
    c.kv.put(f"rec:{i:08}", {"n": -i, "pad": PAD})


async def read(c: ActionContext, i: int) -> Any:
    return await c.kv.get(f"rec:{i:08}")


async def scan(c: ActionContext, i: int) -> int:
    return len(await c.kv.list(f"rec:{i // 100:06}", limit=100))


def state_fill(c: ActionContext, start: int, count: int) -> None:
    records = c.state.setdefault("records", {})
    for i in range(start, start + count):
        records[f"rec:{i:08}"] = {"n": i, "pad": PAD}


def state_update(c: ActionContext, i: int) -> None:
    c.state["records"][f"rec:{i:08}"] = {"n": -i, "pad": PAD}


registry = setup(
    use={
        "kv": actor(state={}, actions={"fill": fill, "update": update, "read": read, "scan": scan}),
        "st": actor(state={}, actions={"fill": state_fill, "update": state_update}),
    }
)


async def per_op(count: int, records: int, one: Callable[[int], Awaitable[Any]]) -> float:
    """µs per call of ``one``, ``count`` calls one after another."""
    started = time.perf_counter()
    for index in range(count):
        await one((index * 7919) % max(records, 1))
    return (time.perf_counter() - started) / count * 1e6


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(args.store) if args.store else SQLiteStore(Path(tmp) / "kv.db")
        runtime = ActorRuntime(registry, store)
        async with runtime:
            client = runtime.client()
            empty = client.kv.get_or_create(["empty"])
            full = client.kv.get_or_create(["full"])
            in_state = client.st.get_or_create(["state"])
            started = time.perf_counter()
            for start in range(0, args.records, 5_000):
                count = min(5_000, args.records - start)
                await full.fill(start, count)
                await in_state.fill(start, count)
            print(f"filled {args.records} records twice in {time.perf_counter() - started:.1f} s")
            await empty.update(0)
            figures: dict[str, list[float]] = {
                k: [] for k in ("empty", "full", "state", "read", "scan")
            }
            for round_ in range(args.rounds):
                figures["empty"].append(await per_op(args.updates, 1, empty.update))
                figures["full"].append(await per_op(args.updates, args.records, full.update))
                figures["state"].append(
                    await per_op(max(args.updates // 10, 1), args.records, in_state.update)
                )
                figures["read"].append(await per_op(args.updates, args.records, full.read))
                figures["scan"].append(await per_op(args.updates, args.records, full.scan))
                print(
                    f"round {round_ + 1}: "
                    + ", ".join(f"{k} {v[-1]:.0f} µs" for k, v in figures.items())
                )
    medians = {k: statistics.median(v) for k, v in figures.items()}
    print("medians (µs per op): " + ", ".join(f"{k} {v:.0f}" for k, v in medians.items()))
    print(f"update, full ÷ empty: {medians['full'] / medians['empty']:.2f}×")
    print(f"update, records in state ÷ in KV: {medians['state'] / medians['full']:.0f}×")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--store", help="a store URL (default: SQLite in a temporary file)")
    asyncio.run(main(parser.parse_args()))
