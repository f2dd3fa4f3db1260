"""What an actor's SQL database (``c.db``) costs as it grows (issue 31, item 2; run by
hand).

``python bench/db_bench.py [--rows 100000] [--updates 400] [--rounds 5] [--store URL]``

In process, on an ``ActorRuntime`` over SQLite (one file, the default store), or the
store ``--store`` names (a PostgreSQL URL: use a fresh schema). Two actors with the
same table ``items (id INTEGER PRIMARY KEY, n INT, pad TEXT)``:

- ``empty``: one row;
- ``full``: ``--rows`` rows of about 100 bytes each (100,000: ~10 MB of pages), inserted
  in batches before the rounds.

Each round updates one row by primary key (``UPDATE items SET n = n + 1 WHERE id = ?``),
``--updates`` times in a row (each an action awaited: its commit is durable when it
answers): on ``empty``; on ``full``, rows whose pages SQLite's cache holds (``warm``:
the same ids twice, the first pass untimed); on ``full`` at random (``steady``: new
ids, after ``rows / 20`` random updates have filled SQLite's cache, which holds about
80 % of the pages); on ``full`` just woken (``cold``: the actor slept before, so its
cache starts empty and nearly every update reads its leaf page from the store). Then
reads one row by key and a range of 100 on ``full``, and times the first update after
a wake (``woken``, the wake included). Prints µs per operation per round and the
medians; ``full ÷ empty`` is what 100,000 rows cost an update (issue 31 asks at most
3×).
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

from perdure import ActionContext, ActorRuntime, actor, db, setup
from perdure.store import SQLiteStore, open_store

PAD = "x" * 90  # a row of about 100 bytes


async def migrate(database: Any) -> None:
    await database.execute(
        "CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, n INT, pad TEXT)"
    )


async def fill(c: ActionContext, start: int, count: int) -> None:
    await c.db.execute(
        "WITH RECURSIVE seq(v) AS (SELECT ? UNION ALL SELECT v + 1 FROM seq WHERE v < ?) "
        "INSERT INTO items (id, n, pad) SELECT v, v, ? FROM seq",
        start,
        start + count - 1,
        PAD,
    )


async def update(c: ActionContext, i: int) -> None:
    # n + 1: every update changes the row (an UPDATE that writes the same value leaves
    # the page as it was, and the action then commits nothing).
    await c.db.execute("UPDATE items SET n = n + 1 WHERE id = ?", i)


async def read(c: ActionContext, i: int) -> Any:
    return await c.db.execute("SELECT n, pad FROM items WHERE id = ?", i)


async def scan(c: ActionContext, i: int) -> int:
    rows = await c.db.execute("SELECT id, n FROM items WHERE id >= ? ORDER BY id LIMIT 100", i)
    return len(rows)


def nap(c: ActionContext) -> None:
    c.sleep()


registry = setup(
    use={
        "sql": actor(
            state={},
            db=db(on_migrate=migrate),
            actions={"fill": fill, "update": update, "read": read, "scan": scan, "nap": nap},
        ),
    }
)


async def per_op(
    count: int, rows: int, one: Callable[[int], Awaitable[Any]], offset: int = 0
) -> float:
    """µs per call of ``one``, ``count`` calls one after another (ids 1..rows, spread;
    ``offset``: other ids each round, so that a round finds few pages in SQLite's cache)."""
    started = time.perf_counter()
    for index in range(count):
        await one(1 + (index * 7919 + offset * 104_729) % max(rows, 1))
    return (time.perf_counter() - started) / count * 1e6


async def after_sleep(handle: Any, rows: int) -> float:
    """µs of the first update after the actor slept (the wake included)."""
    await handle.nap()
    await asyncio.sleep(0.2)  # the stop runs in the background
    started = time.perf_counter()
    await handle.update(rows // 2)
    return (time.perf_counter() - started) * 1e6


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(args.store) if args.store else SQLiteStore(Path(tmp) / "db.db")
        runtime = ActorRuntime(registry, store)
        async with runtime:
            client = runtime.client()
            empty = client.sql.get_or_create(["empty"])
            full = client.sql.get_or_create(["full"])
            started = time.perf_counter()
            await empty.fill(1, 1)
            for start in range(1, args.rows + 1, 5_000):
                await full.fill(start, min(5_000, args.rows + 1 - start))
            print(f"filled {args.rows} rows in {time.perf_counter() - started:.1f} s")
            figures: dict[str, list[float]] = {
                k: [] for k in ("empty", "warm", "steady", "cold", "read", "scan", "woken")
            }
            for round_ in range(args.rounds):
                figures["empty"].append(await per_op(args.updates, 1, empty.update))
                await per_op(args.updates, args.rows, full.update)  # its pages, read
                figures["warm"].append(await per_op(args.updates, args.rows, full.update))
                await per_op(args.rows // 20, args.rows, full.update, round_ + 300)  # fill
                figures["steady"].append(
                    await per_op(args.updates, args.rows, full.update, round_ + 400)
                )
                await full.nap()
                await asyncio.sleep(0.2)  # the stop runs in the background
                await full.read(1)  # the wake, not timed
                figures["cold"].append(
                    await per_op(args.updates, args.rows, full.update, round_ + 1)
                )
                figures["read"].append(
                    await per_op(args.updates, args.rows, full.read, round_ + 100)
                )
                figures["scan"].append(
                    await per_op(args.updates, args.rows, full.scan, round_ + 200)
                )
                figures["woken"].append(await after_sleep(full, args.rows))
                print(
                    f"round {round_ + 1}: "
                    + ", ".join(f"{k} {v[-1]:.0f} µs" for k, v in figures.items())
                )
    medians = {k: statistics.median(v) for k, v in figures.items()}
    print("medians (µs per op): " + ", ".join(f"{k} {v:.0f}" for k, v in medians.items()))
    for kind in ("warm", "steady", "cold"):
        print(f"update, full ({kind}) ÷ empty: {medians[kind] / medians['empty']:.2f}×")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--store", help="a store URL (default: SQLite in a temporary file)")
    asyncio.run(main(parser.parse_args()))
