"""The seed's progress client: subscribe to progress, send two jobs, print the state.

Run a server first (``perdure serve examples.app:registry``), then
``python -m examples.progress_client [--endpoint URL] [--key KEY]``.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from perdure.client import create_client


async def main(endpoint: str, key: str) -> dict[str, Any]:
    async with create_client(endpoint) as client:
        handle = client.progressActor.get_or_create([key])
        conn = handle.connect()
        finished = asyncio.Event()
        before = (await handle.getState())["progress"]["completed"]

        def on_progress(progress: dict[str, Any]) -> None:
            print("progress", progress, flush=True)
            if progress["completed"] >= before + 2:
                finished.set()

        conn.on("progressUpdated", on_progress)
        await conn.wait_open(timeout=10)
        await handle.send("jobs", {"value": 5})
        await handle.send("jobs", {"value": 7})
        # The workflow processes the jobs in the background; wait for its events.
        await asyncio.wait_for(finished.wait(), timeout=10)
        state: dict[str, Any] = await handle.getState()
        print(state, flush=True)
        await conn.dispose()
        return state


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--endpoint", default="http://localhost:6420")
    parser.add_argument("--key", default="main")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.endpoint, arguments.key))
