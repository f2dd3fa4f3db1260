"""What the read-only view of an actor's SQL database costs as the database grows
(issue 31, item 4; run by hand).

``python bench/db_view_bench.py [--reads 20] [--rounds 3]``

In process, on an ``ActorRuntime`` over SQLite. Three actors with the table of
``bench/db_bench.py`` (``items (id INTEGER PRIMARY KEY, n INT, pad TEXT)``, rows of about
100 bytes): 1 row, 10,000 rows (~1 MB of pages) and 100,000 rows (~10 MB). Each round
times, per actor, ``--reads`` calls of what the inspector's card makes: a page of rows
(``db_rows``: offset 0, 50 rows, with the count) and a query of one row by key
(``db_query``). Each reads the committed pages from the store in one ``kv_list`` and
opens them in memory (runtime/kernel/db_view.py), so the cost should grow with the
database's size: this measures how much. Prints ms per read per round and the medians.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from db_bench import fill, migrate

from perdure import actor, db, setup
from perdure.runtime import ActorRuntime
from perdure.runtime.kernel.db_view import db_query, db_rows
from perdure.store import SQLiteStore

SIZES = (1, 10_000, 100_000)
_BATCH = 10_000


async def _timed(reads: int, call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    for _ in range(reads):
        await call()
    return (time.perf_counter() - started) / reads * 1000


async def main(reads: int, rounds: int) -> None:
    registry = setup(
        use={"items": actor(state={}, db=db(on_migrate=migrate), actions={"fill": fill})}
    )
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "bench.db")
        runtime = ActorRuntime(registry, store)
        async with runtime:
            ids = {}
            for size in SIZES:
                handle = runtime.client().items.get_or_create(str(size))
                for start in range(1, size + 1, _BATCH):
                    await handle.fill(start, min(_BATCH, size - start + 1))
                ids[size] = await handle.resolve()
            results: dict[str, list[float]] = {}
            for number in range(rounds):
                for size in SIZES:
                    actor_id = ids[size]
                    page = await _timed(reads, lambda a=actor_id: db_rows(store, a, "items", 0, 50))
                    one = await _timed(
                        reads,
                        lambda a=actor_id: db_query(
                            store, a, "SELECT * FROM items WHERE id = ?", (1,)
                        ),
                    )
                    results.setdefault(f"rows page, {size} rows", []).append(page)
                    results.setdefault(f"query by key, {size} rows", []).append(one)
                    print(
                        f"round {number + 1}: {size} rows: page {page:.2f} ms, query {one:.2f} ms"
                    )
            print()
            for name, values in results.items():
                shown = " / ".join(f"{v:.2f}" for v in values)
                print(f"{name}: {shown} ms, median {statistics.median(values):.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reads", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    asyncio.run(main(options.reads, options.rounds))
