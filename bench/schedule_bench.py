"""Schedule benchmark (run by hand, not a test)::

    python bench/schedule_bench.py                    # 100,000 actors, 1,000 due at once
    python bench/schedule_bench.py --actors 10000     # a quicker run
    python bench/schedule_bench.py --spread-ms 0      # the 1,000 due at the same ms

In-process runtime on a SQLite file (what ``perdure serve`` hosts, without the HTTP
layer). ``--actors`` actors are created, each scheduling one action from ``on_create``
(``c.schedule.at``); all but ``--due`` of them are due a day later, and the ``--due``
others fall due within one second (``--spread-ms``, evenly). Every actor goes to sleep
(``sleep_timeout`` 0.5 s) before that second comes. Reported:

- the RSS of the process with every actor asleep, and the store's size;
- for each due fire, the delay from its due time to its action starting (the action reads
  the wall clock first thing): p50, p99, max, and when the last one started.

The target (issue 5) is p99 <= 200 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from perdure import ActorRuntime, ScheduledFireInfo, actor, setup
from perdure.runtime import ActionContext, ActorContext
from perdure.store import SQLiteStore

MIB = 1024 * 1024
DAY_MS = 86_400_000

delays_ms: list[float] = []


def rss_mib() -> float:
    """Current resident set size (VmRSS), in MiB."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def store_mib(path: Path) -> float:
    sizes = [Path(f"{path}{suffix}") for suffix in ("", "-wal", "-shm")]
    return sum(p.stat().st_size for p in sizes if p.exists()) / MIB


async def on_create(c: ActorContext, due_at: int) -> None:
    await c.schedule.at(due_at, "fired")


def fired(c: ActionContext, fire: ScheduledFireInfo) -> None:
    delays_ms.append(time.time_ns() / 1e6 - fire.scheduled_at)


def make_registry() -> Any:
    sched = actor(
        state={},
        on_create=on_create,
        actions={"fired": fired},
        options={"sleep_timeout": 0.5},
    )
    return setup(use={"sched": sched})


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


async def create_all(runtime: ActorRuntime, first: int, due: list[int], creators: int) -> None:
    """Create actors ``a{first}`` … with these due times (their ``on_create`` schedules)."""
    accessor = runtime.client().actor("sched")
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(len(due)):
        queue.put_nowait(index)

    async def creator() -> None:
        while not queue.empty():
            index = queue.get_nowait()
            await accessor.get_or_create(f"a{first + index}", input=due[index]).resolve()

    await asyncio.gather(*(creator() for _ in range(creators)))


async def run(args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "perdure.db"
        runtime = ActorRuntime(make_registry(), SQLiteStore(path))
        await runtime.start()
        try:
            started = time.monotonic()
            later = [time.time_ns() // 1_000_000 + DAY_MS] * (args.actors - args.due)
            await create_all(runtime, 0, later, args.creators)
            created_s = time.monotonic() - started
            # The due ones last, due once they (and all the others) had time to fall asleep.
            due_start = time.time_ns() // 1_000_000 + 8_000
            step = args.spread_ms / args.due
            due = [due_start + int(i * step) for i in range(args.due)]
            await create_all(runtime, len(later), due, args.creators)
            while runtime.live_count and time.time_ns() // 1_000_000 < due_start - 1000:
                await asyncio.sleep(0.1)
            awake_at_due = runtime.live_count
            gc.collect()
            rss_asleep = rss_mib()
            size = store_mib(path)
            # How many were already awake (woken early by the alarm scheduler) at the due time.
            await asyncio.sleep(max(0.0, due_start / 1000 - time.time()))
            awake_at_first_due = runtime.live_count
            wait_s = (due_start + args.spread_ms) / 1000 - time.time() + 5
            deadline = time.monotonic() + wait_s
            while len(delays_ms) < args.due and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            return {
                "actors": args.actors,
                "due": args.due,
                "spread_ms": args.spread_ms,
                "created_per_s": round((args.actors - args.due) / created_s),
                "awake_before_due": awake_at_due,
                "awake_at_first_due_time": awake_at_first_due,
                "rss_asleep_mib": round(rss_asleep, 1),
                "store_mib": round(size, 1),
                "fired": len(delays_ms),
                "delay_p50_ms": round(percentile(delays_ms, 0.50), 1),
                "delay_p99_ms": round(percentile(delays_ms, 0.99), 1),
                "delay_max_ms": round(max(delays_ms), 1),
                "rss_after_mib": round(rss_mib(), 1),
            }
        finally:
            await runtime.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--actors", type=int, default=100_000)
    parser.add_argument("--due", type=int, default=1_000)
    parser.add_argument("--spread-ms", type=int, default=1_000)
    parser.add_argument("--creators", type=int, default=64)
    args = parser.parse_args()
    if not 0 < args.due <= args.actors:
        sys.exit("--due must be between 1 and --actors")
    result = asyncio.run(run(args))
    print(json.dumps(result, indent=2))
    if result["fired"]:
        target = "met" if result["delay_p99_ms"] <= 200 else "MISSED"
        print(f"p99 {result['delay_p99_ms']} ms (target <= 200 ms: {target})")
        print(f"median of all {statistics.median(delays_ms):.1f} ms")


if __name__ == "__main__":
    main()
