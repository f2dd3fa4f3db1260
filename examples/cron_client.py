"""The cron example's client: watch ``runs`` and ``last_run_at`` advance, once per interval.

Run a server with a short interval first::

    PERDURE_CRON_INTERVAL=5 perdure serve examples.app:registry

then ``python -m examples.cron_client [--endpoint URL] [--key KEY] [--runs N]``. It creates
the actor (its ``on_create`` sets up the recurring job) and prints each new run until it
has seen ``N`` of them. The actor sleeps between runs; its alarm wakes it for the next.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
from typing import Any

from perdure.client import create_client


def describe(state: dict[str, Any]) -> str:
    last = state["lastRunAt"]
    when = "never" if last is None else dt.datetime.fromtimestamp(last / 1000, dt.UTC).isoformat()
    return f"runs {state['runs']}, last_run_at {when}"


async def main(endpoint: str, key: str, runs: int, timeout: float = 600.0) -> dict[str, Any]:
    async with create_client(endpoint) as client:
        handle = client.cronActor.get_or_create([key])
        state: dict[str, Any] = await handle.getState()
        print("cron:", describe(state), flush=True)
        target = state["runs"] + runs
        async with asyncio.timeout(timeout):
            while state["runs"] < target:
                await asyncio.sleep(1.0)
                latest: dict[str, Any] = await handle.getState()
                if latest != state:
                    print("cron:", describe(latest), flush=True)
                state = latest
        return state


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--endpoint", default="http://localhost:6420")
    parser.add_argument("--key", default="main")
    parser.add_argument("--runs", type=int, default=3, help="how many new runs to wait for")
    parser.add_argument("--timeout", type=float, default=600.0, help="give up after (seconds)")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.endpoint, arguments.key, arguments.runs, arguments.timeout))
