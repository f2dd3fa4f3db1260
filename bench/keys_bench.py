"""What an idempotency key costs a send (issue 30, item 5; run by hand).

``python bench/keys_bench.py [--rounds 5] [--sends 2000] [--senders 32]``

Sends to one actor's queue (a fresh actor each round, nothing receiving), plain and
keyed (a fresh ``Idempotency-Key`` per send), rounds alternating in one sitting:

- in process: ``handle.send`` on an ``ActorRuntime`` over SQLite, ``--senders`` at once;
- over HTTP: a real ``perdure serve`` (SQLite), one raw keep-alive connection per
  sender (the server's cost, not the HTTP client's), and the Python client
  (``AsyncClient``: ``retries=0``, no key, against the default, which makes a key per
  send so that it can retry).

Prints sends/s per round and the medians; ``keyed ÷ plain`` is the cost of a key.
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

# The repository (for tests.support) and bench/ (for rawhttp) on the path, in this
# process and in the server it starts, which imports this module for its registry.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from rawhttp import RawConnection
from tests.support.server import ServerProcess

from perdure import ActorRuntime, actor, queue, setup
from perdure.client import create_client
from perdure.store import SQLiteStore

Round = Callable[[str, bool], Awaitable[float]]
MAILBOX = actor(state={}, queues={"jobs": queue()}, options={"max_queue_size": 1_000_000})


async def _spread(sends: int, senders: int, one: Callable[[int], Awaitable[None]]) -> float:
    """Seconds for ``sends`` calls of ``one`` by ``senders`` concurrent loops."""
    todo = iter(range(sends))

    async def sender() -> None:
        for index in todo:
            await one(index)

    started = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(senders)))
    return time.perf_counter() - started


async def in_process(args: argparse.Namespace, rounds: list[tuple[str, bool]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runtime = ActorRuntime(setup(use={"mailbox": MAILBOX}), SQLiteStore(Path(tmp) / "keys.db"))
        async with runtime:
            client = runtime.client()
            for name, keyed in rounds:
                handle = client.mailbox.get_or_create([name])

                async def one(index: int, handle: object = handle, keyed: bool = keyed) -> None:
                    key = f"k{index}" if keyed else None
                    await handle.send("jobs", index, idempotency_key=key)  # type: ignore[attr-defined]

                seconds = await _spread(args.sends, args.senders, one)
                report("in process", keyed, args.sends / seconds)


async def over_http(args: argparse.Namespace, rounds: list[tuple[str, bool]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(
            "bench.keys_bench:registry", Path(tmp), extra_args=["--log-level", "warning"]
        )
        await asyncio.to_thread(server.start)
        try:
            for name, keyed in rounds:
                path = f"/gateway/mailbox/queue/jobs?rvt-method=getOrCreate&rvt-key={name}"
                body = b'{"name":"jobs","body":1,"wait":false}'
                connections = [RawConnection(server.url) for _ in range(args.senders)]
                for connection in connections:
                    await connection.__aenter__()
                free = list(connections)

                async def one(
                    index: int,
                    keyed: bool = keyed,
                    path: str = path,
                    body: bytes = body,
                    free: list[RawConnection] = free,
                ) -> None:
                    connection = free.pop()
                    try:
                        request = connection.request(path, body)
                        if keyed:
                            head, rest = request.split(b"\r\n", 1)
                            request = (
                                head + f"\r\nidempotency-key: k{index}".encode() + b"\r\n" + rest
                            )
                        await connection.send(request)
                    finally:
                        free.append(connection)

                seconds = await _spread(args.sends, args.senders, one)
                report("HTTP (raw)", keyed, args.sends / seconds)
                for connection in connections:
                    await connection.__aexit__(None, None, None)
            for name, keyed in rounds:
                retries = 3 if keyed else 0
                async with create_client(server.url, retries=retries) as client:
                    handle = client.mailbox.get_or_create([f"client-{name}"])

                    async def send(index: int, handle: object = handle) -> None:
                        await handle.send("jobs", index)  # type: ignore[attr-defined]

                    seconds = await _spread(args.sends, args.senders, send)
                report("HTTP (AsyncClient)", keyed, args.sends / seconds)
        finally:
            server.terminate()


RESULTS: dict[tuple[str, bool], list[float]] = {}


def report(where: str, keyed: bool, rate: float) -> None:
    RESULTS.setdefault((where, keyed), []).append(rate)
    print(f"{where:20} {'keyed' if keyed else 'plain':6} {rate:8.0f} sends/s", flush=True)


registry = setup(use={"mailbox": MAILBOX})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--sends", type=int, default=2000)
    parser.add_argument("--senders", type=int, default=32)
    args = parser.parse_args()
    rounds = [
        (f"r{i}-{keyed}", keyed) for i in range(args.rounds) for keyed in (i % 2 == 1, i % 2 == 0)
    ]
    asyncio.run(in_process(args, rounds))
    asyncio.run(over_http(args, rounds))
    print("\nmedians (sends/s): plain, keyed, plain ÷ keyed (the time a keyed send costs)")
    for where in ("in process", "HTTP (raw)", "HTTP (AsyncClient)"):
        plain = statistics.median(RESULTS[(where, False)])
        keyed = statistics.median(RESULTS[(where, True)])
        print(f"{where:20} {plain:8.0f} {keyed:8.0f} {plain / keyed:6.2f}x")


if __name__ == "__main__":
    main()
