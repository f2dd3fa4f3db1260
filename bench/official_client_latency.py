"""Round-trip latency through the official RivetKit client (``rivetkit`` on npm).

Run by hand (not a test); needs Node.js and ``npm ci`` in ``tests/scenarios/compat``::

    python bench/official_client_latency.py                      # bare and json, SQLite
    python bench/official_client_latency.py --encodings bare,json,cbor --calls 1000
    python bench/official_client_latency.py --store memory://    # without storage costs

It starts ``perdure serve examples.app:registry`` on a free loopback port and runs
``bench/official_client_latency.ts``, which times ``handle.getState()`` of the seed's
``progressActor`` (a read: nothing to commit) over HTTP (query gateway and direct
gateway) and over a connection, ``--calls`` sequential calls after a warm-up, and prints
p50/p90/p99 per encoding. Client and server share the machine.
"""

from __future__ import annotations

import argparse
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
COMPAT = ROOT / "tests" / "scenarios" / "compat"
PROGRAM = "../../../bench/official_client_latency.ts"  # relative to tests/scenarios/compat


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def server(store: str | None) -> Iterator[str]:
    """A ``perdure serve examples.app:registry`` subprocess; yields its base URL."""
    port = _free_port()
    with tempfile.TemporaryDirectory() as data:
        command = [sys.executable, "-m", "perdure", "serve", "examples.app:registry"]
        command += ["--port", str(port), "--log-level", "warning"]
        command += ["--store", store] if store else ["--data", data]
        process = subprocess.Popen(command, cwd=ROOT)
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 20
            while True:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit("the server did not start")
                try:
                    if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(0.05)
            yield url
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=20)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--store", help="store URL (default: SQLite in a temp dir)")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=1000)
    parser.add_argument("--encodings", default="bare,json")
    args = parser.parse_args()
    node = shutil.which("node")
    if node is None or not (COMPAT / "node_modules" / "rivetkit").is_dir():
        raise SystemExit("needs Node.js and `npm ci` in tests/scenarios/compat")
    rows = []
    with server(args.store) as url:
        command = [node, "--import", "tsx", PROGRAM, url]
        command += ["--calls", str(args.calls), "--warmup", str(args.warmup)]
        command += ["--encodings", args.encodings]
        output = subprocess.run(
            command, cwd=COMPAT, check=True, capture_output=True, text=True, timeout=600
        ).stdout
        for line in output.splitlines():
            if line.startswith("{"):
                rows.append(json.loads(line))
    store = args.store or "SQLite (temp dir)"
    print("\nofficial client (rivetkit/client) -> perdure, handle.getState() of progressActor")
    print(f"{args.calls} sequential calls after {args.warmup} warm-up calls; store: {store}\n")
    print(f"  {'encoding':<8}  {'route':<20}  {'p50':>9}  {'p90':>9}  {'p99':>9}  {'calls/s':>8}")
    for row in rows:
        print(
            f"  {row['encoding']:<8}  {row['route']:<20}  {row['p50_us'] / 1000:>6.3f} ms"
            f"  {row['p90_us'] / 1000:>6.3f} ms  {row['p99_us'] / 1000:>6.3f} ms"
            f"  {row['per_second']:>8,}"
        )


if __name__ == "__main__":
    main()
