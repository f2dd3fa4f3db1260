"""Server latency: action round trips over HTTP keep-alive and over a WebSocket.

Run by hand (not a test)::

    python bench/latency.py                      # SQLite store in a temp dir
    python bench/latency.py --store memory://    # without storage costs
    python bench/latency.py --calls 1000         # a quicker run

It starts ``perdure serve bench/latency_app.py:registry`` on a free loopback port, then
measures, for a read action (``get``: state unchanged, nothing to commit) and a write
action (``increment``: one durable commit per call):

- round trip p50/p99 over ``--calls`` sequential calls on one keep-alive HTTP connection
  (httpx) and on one WebSocket (websockets, JSON encoding);
- actions/s with ``--concurrency`` concurrent callers (one connection each).

Client and server share the machine, so the figures include the client's own cost.
Targets (2 cores): WebSocket p50 <= 0.5 ms, HTTP keep-alive p50 <= 1.5 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
from rawhttp import RawConnection
from websockets.asyncio.client import connect as ws_connect
from websockets.sync.client import connect as ws_connect_sync

ROOT = Path(__file__).resolve().parents[1]
APP = "bench/latency_app.py:registry"
WARMUP = 300


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def server(store: str | None, extra: Sequence[str] = ()) -> Iterator[str]:
    """A ``perdure serve`` subprocess (``extra``: more arguments); yields its base URL and
    always stops it."""
    port = _free_port()
    with tempfile.TemporaryDirectory() as data:
        command = [sys.executable, "-m", "perdure", "serve", APP, "--port", str(port)]
        command += ["--store", store] if store else ["--data", data]
        command += ["--log-level", "warning", *extra]
        process = subprocess.Popen(command, cwd=ROOT)
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_healthy(url, process)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)


def _wait_healthy(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit("the server exited during startup")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)
    raise SystemExit("the server did not become healthy within 20 s")


def _query(key: str) -> str:
    return f"?rvt-method=getOrCreate&rvt-key={key}"


def _percentiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return statistics.median(ordered) * 1000, p99 * 1000


def http_latency(url: str, action: str, calls: int) -> tuple[float, float]:
    """p50 and p99 (ms) of sequential calls on one keep-alive connection."""
    target = f"{url}/gateway/counter/action/{action}{_query('http-latency')}"
    body = b'{"args":[]}'
    headers = {"content-type": "application/json"}
    with httpx.Client(timeout=10) as client:
        return _timed(lambda: client.post(target, content=body, headers=headers), calls)


def ws_latency(url: str, action: str, calls: int) -> tuple[float, float]:
    """p50 and p99 (ms) of sequential calls on one WebSocket."""
    target = url.replace("http://", "ws://") + f"/gateway/counter/connect{_query('ws-latency')}"
    protocols = ["rivet", "rivet_encoding.json"]
    with ws_connect_sync(target, subprotocols=protocols, compression=None) as ws:  # type: ignore[arg-type]
        ws.recv(timeout=10)  # Init
        counter = iter(range(10**9))

        def one() -> None:
            ws.send(_action_frame(next(counter), action))
            ws.recv(timeout=10)

        return _timed(one, calls)


def _action_frame(action_id: int, action: str) -> str:
    return json.dumps(
        {
            "body": {
                "tag": "ActionRequest",
                "val": {"id": ["$BigInt", str(action_id)], "name": action, "args": []},
            }
        }
    )


def _timed(call: Callable[[], object], calls: int) -> tuple[float, float]:
    for _ in range(WARMUP):
        call()
    samples = []
    clock = time.perf_counter
    for _ in range(calls):
        start = clock()
        call()
        samples.append(clock() - start)
    return _percentiles(samples)


async def http_throughput(url: str, action: str, callers: int, calls: int) -> float:
    """Actions/s with ``callers`` concurrent keep-alive connections.

    A minimal HTTP/1.1 client on asyncio streams drives the load: httpx's async client
    spends about a millisecond of CPU per request, so with it this would measure httpx.
    """

    async def caller(index: int, count: int) -> None:
        path = f"/gateway/counter/action/{action}{_query(f'http-tp-{index % 4}')}"
        async with RawConnection(url) as connection:
            request = connection.request(path, b'{"args":[]}')
            for _ in range(count):
                await connection.send(request)

    await asyncio.gather(*(caller(i, 20) for i in range(callers)))  # warm up
    start = time.perf_counter()
    await asyncio.gather(*(caller(i, calls // callers) for i in range(callers)))
    return (calls // callers) * callers / (time.perf_counter() - start)


async def ws_throughput(url: str, action: str, callers: int, calls: int) -> float:
    """Actions/s with ``callers`` concurrent WebSockets, one call in flight on each."""
    base = url.replace("http://", "ws://") + "/gateway/counter/connect"
    protocols = ["rivet", "rivet_encoding.json"]

    async def caller(index: int, count: int, ready: asyncio.Barrier) -> float:
        target = base + _query(f"ws-tp-{index % 4}")
        async with ws_connect(target, subprotocols=protocols, compression=None) as ws:  # type: ignore[arg-type]
            await ws.recv()
            await ready.wait()
            start = time.perf_counter()
            for n in range(count):
                await ws.send(_action_frame(n, action))
                await ws.recv()
            return time.perf_counter() - start

    per_caller = calls // callers
    barrier = asyncio.Barrier(callers)
    start = time.perf_counter()
    await asyncio.gather(*(caller(i, per_caller, barrier) for i in range(callers)))
    elapsed = time.perf_counter() - start
    return per_caller * callers / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--store", help="store URL (default: SQLite in a temp dir)")
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    rows: list[tuple[str, str, str]] = []
    with server(args.store) as url:
        for action in ("get", "increment"):
            p50, p99 = http_latency(url, action, args.calls)
            rows.append((f"HTTP keep-alive, {action}", f"p50 {p50:.3f} ms", f"p99 {p99:.3f} ms"))
            p50, p99 = ws_latency(url, action, args.calls)
            rows.append((f"WebSocket, {action}", f"p50 {p50:.3f} ms", f"p99 {p99:.3f} ms"))
        for action in ("get", "increment"):
            calls = max(args.calls * 2, args.concurrency * 50)
            rate = asyncio.run(http_throughput(url, action, args.concurrency, calls))
            rows.append((f"HTTP x{args.concurrency}, {action}", f"{rate:,.0f} actions/s", ""))
            rate = asyncio.run(ws_throughput(url, action, args.concurrency, calls))
            rows.append((f"WebSocket x{args.concurrency}, {action}", f"{rate:,.0f} actions/s", ""))
    store = args.store or "SQLite (temp dir)"
    print(f"\nperdure server latency ({args.calls} calls, store: {store})\n")
    width = max(len(r[0]) for r in rows)
    for name, first, second in rows:
        print(f"  {name:<{width}}  {first:>20}  {second:>16}")


if __name__ == "__main__":
    main()
