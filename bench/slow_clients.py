"""A bystander's latency while slow clients hold connections (issue 29, item 5).

Run by hand (not a test)::

    python bench/slow_clients.py                  # 3 rounds, 800 slow connections
    python bench/slow_clients.py --rounds 5 --calls 1000 --connections 800

It starts ``perdure serve bench/latency_app.py:registry`` (SQLite in a temp dir) with a
header timeout long enough for the slow connections to outlive a round, and measures the
p50 of ``--calls`` sequential ``get`` actions on one keep-alive HTTP connection (httpx,
as ``latency.py``) in three conditions, their order rotated each round:

- ``quiet``: nothing else is connected;
- ``stalled``: ``--connections`` sockets each sent part of a request's headers and stopped;
- ``trickling``: the same sockets each send one more header byte every second (a byte
  does not restart the header clock, which runs from the first).

It prints the medians over the rounds and each condition's ratio to ``quiet`` (the
issue's target: within 2x). Client and server share the machine.
"""

from __future__ import annotations

import argparse
import resource
import socket
import statistics
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from urllib.parse import urlsplit

from latency import http_latency, server

CONDITIONS = ("quiet", "stalled", "trickling")
HEADER_TIMEOUT = 600
"""Seconds the server waits for headers in this benchmark: longer than a round."""


def _enough_file_descriptors(count: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < count:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(count, hard), hard))


@contextmanager
def slow_connections(url: str, count: int, *, trickle: bool) -> Iterator[list[socket.socket]]:
    """``count`` connections that sent part of a request's headers; with ``trickle``, each
    sends one more header byte a second until the block ends. Closed at the end."""
    parts = urlsplit(url)
    address = (parts.hostname or "127.0.0.1", parts.port or 80)
    socks: list[socket.socket] = []
    stop = threading.Event()
    try:
        for _ in range(count):
            sock = socket.create_connection(address, timeout=10)
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            socks.append(sock)
        feeder = threading.Thread(target=_trickle, args=(socks, stop), daemon=True)
        if trickle:
            feeder.start()
        yield socks
    finally:
        stop.set()
        for sock in socks:
            sock.close()


def _trickle(socks: list[socket.socket], stop: threading.Event) -> None:
    while not stop.wait(1.0):
        for sock in socks:
            with suppress(OSError):  # closed by the server or by the block's end
                sock.send(b"a")


def _measure(url: str, condition: str, connections: int, calls: int) -> float:
    """The bystander's p50 (ms) under ``condition``."""
    if condition == "quiet":
        return http_latency(url, "get", calls)[0]
    with slow_connections(url, connections, trickle=condition == "trickling"):
        return http_latency(url, "get", calls)[0]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--connections", type=int, default=800)
    args = parser.parse_args()
    _enough_file_descriptors(args.connections + 256)
    samples: dict[str, list[float]] = {condition: [] for condition in CONDITIONS}
    with server(None, ["--header-timeout", str(HEADER_TIMEOUT)]) as url:
        for round_index in range(args.rounds):
            shift = round_index % len(CONDITIONS)
            for condition in CONDITIONS[shift:] + CONDITIONS[:shift]:
                p50 = _measure(url, condition, args.connections, args.calls)
                samples[condition].append(p50)
                print(f"round {round_index + 1}: {condition:<10} p50 {p50:.3f} ms", flush=True)
    quiet = statistics.median(samples["quiet"])
    print(f"\nbystander HTTP keep-alive `get`, p50 ({args.calls} calls, {args.rounds} rounds)\n")
    for condition in CONDITIONS:
        median = statistics.median(samples[condition])
        rounds = " / ".join(f"{p50:.3f}" for p50 in samples[condition])
        print(f"  {condition:<10} {median:.3f} ms  x{median / quiet:.2f}  ({rounds})")


if __name__ == "__main__":
    main()
