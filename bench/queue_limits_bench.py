"""What queue limits cost a queue without limits (issue 32, item 4; run by hand).

``python bench/queue_limits_bench.py [--messages 4000] [--rounds 3]``

In process, on an ``ActorRuntime`` over SQLite (a temporary file), an actor whose queue
has no limits, as every queue declared before limits existed. Each round, on a fresh
actor:

- ``send``: ``--messages`` sends through the in-process client, 32 senders at once (each
  send durable when it returns, group commit);
- ``plain``: an action receives them all, 100 at a time (``c.queue.try_next_batch``);
- ``leased``: the same number sent again, then received completable and completed, 16
  receivers at once (``c.queue.next(completable=True)`` then ``complete()``: a lease
  written, then a removal, each durable);
- ``loop``: the queue's own functions without commits, on the live actor's queue:
  ``enqueue``, ``available`` and ``take`` of ``--messages`` messages, 100 at a time.

``--limited`` declares ``concurrency=4, key="tenant"`` on the queue (8 tenants): what a
limit costs where it is used (``send`` and ``leased``; a plain receive of it is
refused). This needs the code with limits.

Prints µs of this process's CPU time per message (the figure a busy shared machine
moves least) and µs of wall time, per round and as medians. It runs against any
version of perdure on the path (it uses nothing the limits added), so the code before
and after can alternate: ``PYTHONPATH=old/src`` then ``PYTHONPATH=src``.
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

from perdure import ActionContext, ActorRuntime, actor, queue, setup
from perdure.store import SQLiteStore


async def drain_plain(c: ActionContext) -> int:
    taken = 0
    while batch := c.queue.try_next_batch(names="jobs", count=100):
        taken += len(batch)
    return taken


async def take_one(c: ActionContext) -> bool:
    message = await c.queue.next(names="jobs", completable=True, timeout=0)
    if message is None:
        return False
    await message.complete()
    return True


def box(**limits: Any) -> Any:
    return actor(
        state={},
        queues={"jobs": queue(**limits)},
        actions={"drain_plain": drain_plain, "take_one": take_one},
        options={"max_queue_size": 100_000},
    )


# ``--limited``: the cost of a concurrency limit where it is declared (the receivers
# never hit it: 16 receivers, 8 tenants of 4 slots each). A rate is left out: a round
# at a rate it never reaches would keep a window of thousands of starts per tenant,
# and each start writes its tenant's window (at most the rate's N starts) again.
LIMITED = {"concurrency": 4, "key": "tenant"}
registry = setup(use={"box": box()})


async def timed(work: Callable[[], Awaitable[Any]], count: int) -> tuple[float, float]:
    """(µs of CPU, µs of wall time) per message of ``work``."""
    cpu, wall = time.process_time(), time.perf_counter()
    await work()
    return (
        (time.process_time() - cpu) / count * 1e6,
        (time.perf_counter() - wall) / count * 1e6,
    )


async def send_all(handle: Any, count: int, senders: int = 32) -> None:
    async def sender(offset: int) -> None:
        for index in range(offset, count, senders):
            await handle.send("jobs", {"n": index, "tenant": f"t{index % 8}"})

    await asyncio.gather(*(sender(offset) for offset in range(senders)))


async def take_all(handle: Any, receivers: int = 16) -> None:
    async def receiver() -> None:
        while await handle.take_one():
            pass

    await asyncio.gather(*(receiver() for _ in range(receivers)))


def loop(queue_: Any, count: int) -> None:
    """The queue's functions a send and a receive go through, without commits."""
    for start in range(0, count, 100):
        for index in range(start, min(start + 100, count)):
            queue_.enqueue("jobs", {"n": index, "tenant": f"t{index % 8}"})
        while records := queue_.available(None, 100):
            queue_.take(records, completable=False)


Figures = dict[str, tuple[float, float]]  # (CPU µs, wall µs) per message, by name


async def one_round(
    runtime: ActorRuntime, round_: int, count: int, *, limited: bool = False
) -> Figures:
    handle = runtime.client().box.get_or_create([f"r{round_}"])
    await handle.resolve()
    figures = {"send": await timed(lambda: send_all(handle, count), count)}
    if not limited:  # a plain receive of a concurrency-limited queue is refused
        figures["plain"] = await timed(handle.drain_plain, count)
    else:
        await take_all(handle)
    await send_all(handle, count)
    figures["leased"] = await timed(lambda: take_all(handle), count)
    instance = runtime.live_instance(await handle.resolve())
    assert instance is not None
    assert instance.queue is not None
    live_queue = instance.queue

    async def direct() -> None:
        loop(live_queue, count)

    if not limited:
        figures["loop"] = await timed(direct, count)
    await instance.request_flush()
    return figures


async def main(args: argparse.Namespace) -> None:
    rounds: list[Figures] = []
    with tempfile.TemporaryDirectory() as tmp:
        chosen = setup(use={"box": box(**LIMITED)}) if args.limited else registry
        runtime = ActorRuntime(chosen, SQLiteStore(Path(tmp) / "queues.db"))
        async with runtime:
            await one_round(runtime, -1, min(args.messages, 500), limited=args.limited)
            for round_ in range(args.rounds):
                rounds.append(await one_round(runtime, round_, args.messages, limited=args.limited))
                print(
                    f"round {round_ + 1}: "
                    + ", ".join(
                        f"{k} {v[0]:.1f} CPU / {v[1]:.1f} wall" for k, v in rounds[-1].items()
                    )
                )
    names = list(rounds[0])
    medians = {k: [statistics.median(r[k][i] for r in rounds) for i in (0, 1)] for k in names}
    print(
        "medians (µs per message, CPU / wall): "
        + ", ".join(f"{k} {v[0]:.2f} / {v[1]:.2f}" for k, v in medians.items())
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--limited", action="store_true", help="the queue declares limits")
    asyncio.run(main(parser.parse_args()))
