"""What an idempotency key costs a send (issue 30, item 5; run by hand).

``python bench/keys_bench.py [--rounds 5] [--sends 2000] [--senders 32]``

Sends to one actor's queue (a fresh actor each round, nothing receiving), plain and
keyed (a fresh ``Idempotency-Key`` per send), rounds alternating in one sitting:

- in process: ``handle.send`` on an ``ActorRuntime`` over SQLite, ``--senders`` at once;
- over HTTP: a real ``perdure serve`` (SQLite), one raw keep-alive connection per
  sender (the server's cost, not the HTTP client's), and the Python client
  (``AsyncClient``: ``retries=0``, no key, against the default, which makes a key per
  send so that it can retry).

Prints sends/s per round and the medians; ``plain ÷ keyed`` is the cost of a key. Also
the CPU time per send of the process that runs the engine (this one in process; the
server over HTTP, read from ``/proc``): on a machine shared with other work, throughput
varies with what else runs, while CPU time per send barely does.
"""

from __future__ import annotations

import argparse
import asyncio
import os
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
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
MAILBOX = actor(state={}, queues={"jobs": queue()}, options={"max_queue_size": 1_000_000})


def _cpu_seconds(pid: int | None) -> float | None:
    """CPU seconds used so far by this process (``None``) or process ``pid`` (Linux's
    /proc, in clock ticks: 10 ms; ``None`` where there is none)."""
    if pid is None:
        return time.process_time()
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime + stime


async def _spread(
    sends: int, senders: int, one: Callable[[int], Awaitable[None]], pid: int | None = None
) -> tuple[float, float | None]:
    """Seconds for ``sends`` calls of ``one`` by ``senders`` concurrent loops, and the CPU
    seconds the engine's process (this one, or ``pid``) used meanwhile."""
    todo = iter(range(sends))

    async def sender() -> None:
        for index in todo:
            await one(index)

    cpu = _cpu_seconds(pid)
    started = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(senders)))
    seconds = time.perf_counter() - started
    after = _cpu_seconds(pid)
    return seconds, None if cpu is None or after is None else after - cpu


async def in_process(args: argparse.Namespace, rounds: list[tuple[str, bool]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        runtime = ActorRuntime(setup(use={"mailbox": MAILBOX}), SQLiteStore(Path(tmp) / "keys.db"))
        async with runtime:
            client = runtime.client()
            for name, keyed in rounds:
                handle = client.mailbox.get_or_create([name])
                # Created before the clock starts: the round times sends only (and code
                # before the dispatch kept a first send's key dropped the keys of the
                # sends that raced to create the actor).
                await handle.resolve()

                async def one(index: int, handle: object = handle, keyed: bool = keyed) -> None:
                    key = f"k{index}" if keyed else None
                    await handle.send("jobs", index, idempotency_key=key)  # type: ignore[attr-defined]

                seconds, cpu = await _spread(args.sends, args.senders, one)
                report("in process", keyed, args.sends, seconds, cpu)


async def over_http(args: argparse.Namespace, rounds: list[tuple[str, bool]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        server = ServerProcess(
            "bench.keys_bench:registry", Path(tmp), extra_args=["--log-level", "warning"]
        )
        await asyncio.to_thread(server.start)
        assert server.process is not None
        pid = server.process.pid
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

                seconds, cpu = await _spread(args.sends, args.senders, one, pid)
                report("HTTP (raw)", keyed, args.sends, seconds, cpu)
                for connection in connections:
                    await connection.__aexit__(None, None, None)
            for name, keyed in rounds:
                retries = 3 if keyed else 0
                async with create_client(server.url, retries=retries) as client:
                    handle = client.mailbox.get_or_create([f"client-{name}"])

                    async def send(index: int, handle: object = handle) -> None:
                        await handle.send("jobs", index)  # type: ignore[attr-defined]

                    seconds, cpu = await _spread(args.sends, args.senders, send, pid)
                report("HTTP (AsyncClient)", keyed, args.sends, seconds, cpu)
        finally:
            server.terminate()


RESULTS: dict[tuple[str, bool], list[float]] = {}
CPU: dict[tuple[str, bool], list[float]] = {}  # µs of the engine's process per send


def report(where: str, keyed: bool, sends: int, seconds: float, cpu: float | None) -> None:
    rate = sends / seconds
    RESULTS.setdefault((where, keyed), []).append(rate)
    line = f"{where:20} {'keyed' if keyed else 'plain':6} {rate:8.0f} sends/s"
    if cpu is not None:
        CPU.setdefault((where, keyed), []).append(cpu / sends * 1e6)
        line += f"  {cpu / sends * 1e6:7.1f} µs CPU/send"
    print(line, flush=True)


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
    print("\nmedians (µs CPU per send, of the engine's process): plain, keyed, keyed ÷ plain")
    for where in ("in process", "HTTP (raw)", "HTTP (AsyncClient)"):
        if (where, False) in CPU and (where, True) in CPU:
            plain = statistics.median(CPU[(where, False)])
            keyed = statistics.median(CPU[(where, True)])
            print(f"{where:20} {plain:8.1f} {keyed:8.1f} {keyed / plain:6.2f}x")


if __name__ == "__main__":
    main()
