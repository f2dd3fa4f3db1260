"""What a one-field change costs as the state grows, and what would make it cost only the
change (issue 31, item 3; run by hand).

``python bench/state_size_bench.py [--rounds 3]``

In process, on an ``ActorRuntime`` over SQLite. For states of 0, 1,000, 10,000 and
100,000 records of about 100 bytes (0 to ~10 MB), each round times one action that changes
one field (``c.state["n"] += 1``), awaited until durable, and the state's encoding alone
(what every commit does to find what changed). Then the price of the alternative, knowing
what changed without encoding: a nested read through a wrapper that could record writes,
against a plain dict read. Prints medians and the ratios to the empty state.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from perdure import ActionContext, ActorRuntime, actor, setup
from perdure.store import SQLiteStore
from perdure.store.encoding import encode_value

PAD = "x" * 80
SIZES = (0, 1_000, 10_000, 100_000)


def fill(c: ActionContext, count: int) -> None:
    c.state["records"] = {f"rec:{i:08}": {"n": i, "pad": PAD} for i in range(count)}


def touch(c: ActionContext) -> None:
    c.state["n"] += 1


registry = setup(
    use={
        "st": actor(
            state={"n": 0, "records": {}},
            actions={"fill": fill, "touch": touch},
            options={"state_size_warning": 1 << 30},  # the bench measures, it needs no advice
        )
    }
)


class Tracked:
    """A wrapper that could record writes below it: the cheapest shape of change tracking."""

    __slots__ = ("_value",)

    def __init__(self, value: dict[str, Any]) -> None:
        self._value = value

    def __getitem__(self, key: str) -> Any:
        found = self._value[key]
        return Tracked(found) if isinstance(found, dict) else found


def read_ns(records: Any, reads: int = 200_000) -> float:
    started = time.perf_counter()
    for _ in range(reads):
        records["rec:00000500"]["n"]
    return (time.perf_counter() - started) / reads * 1e9


async def change_us(handle: Any, count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        await handle.touch()
    return (time.perf_counter() - started) / count * 1e6


async def main(rounds: int) -> None:
    change: dict[int, list[float]] = {size: [] for size in SIZES}
    encode: dict[int, list[float]] = {size: [] for size in SIZES}
    with tempfile.TemporaryDirectory() as tmp:
        async with ActorRuntime(registry, SQLiteStore(Path(tmp) / "st.db")) as runtime:
            handles = {}
            for size in SIZES:
                handles[size] = runtime.client().st.get_or_create([str(size)])
                await handles[size].fill(size)
            for _ in range(rounds):
                for size in SIZES:
                    count = 200 if size <= 1_000 else (40 if size <= 10_000 else 8)
                    change[size].append(await change_us(handles[size], count))
                    state = {
                        "n": 0,
                        "records": {f"rec:{i:08}": {"n": i, "pad": PAD} for i in range(size)},
                    }
                    started = time.perf_counter()
                    data = encode_value(state)
                    encode[size].append((time.perf_counter() - started) * 1e6)
                    print(
                        f"{len(data) / 1e6:6.2f} MB: change {change[size][-1]:9.0f} µs, "
                        f"encode {encode[size][-1]:9.0f} µs"
                    )
    empty = statistics.median(change[0])
    print("medians: state size, one-field change, ÷ empty, encoding alone")
    for size in SIZES:
        c, e = statistics.median(change[size]), statistics.median(encode[size])
        print(f"  {size:>7} records: {c:9.0f} µs  {c / empty:6.1f}×  encode {e:9.0f} µs")
    records = {f"rec:{i:08}": {"n": i, "pad": PAD} for i in range(1_000)}
    plain = statistics.median(read_ns(records) for _ in range(5))
    tracked = statistics.median(read_ns(Tracked(records)) for _ in range(5))
    print(
        f"nested read: plain {plain:.0f} ns, through a tracking wrapper {tracked:.0f} ns "
        f"({tracked / plain:.1f}×)"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    asyncio.run(main(parser.parse_args().rounds))
